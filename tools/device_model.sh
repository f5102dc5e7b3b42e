#!/bin/bash
# A decoder GGUF (Gemma-3-270M 241 MB, Qwen2.5-Coder-1.5B 1.12 GB) on the GPU box, where one `run` call carries at
# most 64 MiB with the working tree: cut it into pieces here, carry one piece per call, join them there.
#
#   tools/device_model.sh split [MODEL]   here: MODEL (default data/models/gemma-3-270m-q4_k_m.gguf; its sha256 must
#                                         match data/models/<name>.sha256) -> pieces .device/gguf/p1/<name>.part01ofNN,
#                                         .device/gguf/p2/... (one folder per call to carry). Piece size: PIECE_BYTES,
#                                         default what fits beside this checkout's travelling tree (64 MiB less the
#                                         tracked and untracked-not-ignored files less 1.5 MB), at most 55 MB
#   tools/device_model.sh plan [MODEL]    here: the tree's size, the piece size and count split would use
#   tools/device_model.sh tree            here: bytes of the tree that travels with every call
#   tools/device_model.sh shrink          here, before a window: the tracked files over SHRINK_KB (default 300) out of
#                                         git's index, so they stay on disk but no longer travel (listed in
#                                         .git/info/device-shrunk and .git/info/exclude); a device step that reads one
#                                         from the checkout (an adapter's safetensors) must carry a copy instead
#   tools/device_model.sh unshrink        here, after it: exactly those files back in the index, the lists cleared.
#                                         Commit only after unshrink (a commit while shrunk would delete them)
#   (GGUF_DIR, or OUTDIR: where split writes and stash/join read the pN folders, default .device/gguf;
#    MODEL_NAME: the GGUF of data/models that split takes by default, e.g. qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)
#   tools/device_model.sh stash           there, in each call that carries a piece: copies the pieces present under
#                                         .device/gguf/p*/ to /tmp/gguf/ (kept while the machine stays warm)
#   tools/device_model.sh join DEST       there: concatenates /tmp/gguf/<name>.partNNofMM (and any piece carried in this
#                                         call; <name> = DEST's file name) into DEST, checks the sha256 against
#                                         data/models/<name>.sha256; exit 1 when a piece is missing or the hash differs
#                                         (the message names what to carry again)
#   tools/device_model.sh status          there: which pieces /tmp/gguf holds
set -euo pipefail
cd "$(dirname "$0")/.."
DEFAULT_MODEL=data/models/${MODEL_NAME:-gemma-3-270m-q4_k_m.gguf}
GDIR=${GGUF_DIR:-${OUTDIR:-.device/gguf}}
STASH=${STASH:-/tmp/gguf}
LIMIT_BYTES=67108864

tree_bytes() {   # what travels with every call: tracked + untracked files git does not ignore
  { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1
}
piece_bytes() {
  if [ -n "${PIECE_BYTES:-}" ]; then echo "$PIECE_BYTES"; return; fi
  local p=$((LIMIT_BYTES - $(tree_bytes) - 1500000))
  [ $p -gt 55000000 ] && p=55000000
  [ $p -gt 1000000 ] || { echo "device_model: the tree leaves no room for a piece" >&2; exit 1; }
  echo $p
}
set_name() { NAME=$(basename "$1"); SUM=data/models/$NAME.sha256; }
want_sum() { awk '{print $1}' "$SUM"; }

SHRUNK=$(git rev-parse --git-path info/device-shrunk)
EXCLUDE=$(git rev-parse --git-path info/exclude)

case "${1:-}" in
tree)
  tree_bytes
  ;;
shrink)
  [ -s "$SHRUNK" ] && { echo "device_model: already shrunk ($(wc -l < "$SHRUNK") files in $SHRUNK): unshrink first" >&2; exit 1; }
  git diff --cached --quiet || { echo "device_model: the index has staged changes: commit or unstage them first" >&2; exit 1; }
  before=$(tree_bytes)
  { git ls-files -z | xargs -0 -r stat -c '%s %n' 2> /dev/null || true; } | awk -v m=$(( ${SHRINK_KB:-300} * 1024 )) '$1 > m { sub(/^[0-9]+ /, ""); print }' > "$SHRUNK"
  [ -s "$SHRUNK" ] || { rm -f "$SHRUNK"; echo "device_model: no tracked file over ${SHRINK_KB:-300} kB"; exit 0; }
  tr '\n' '\0' < "$SHRUNK" | xargs -0 git rm -q --cached --
  mkdir -p "$(dirname "$EXCLUDE")" && sed 's|^|/|' "$SHRUNK" >> "$EXCLUDE" # anchored: this path only
  echo "device_model: $(wc -l < "$SHRUNK") files out of the index; the tree $before -> $(tree_bytes) bytes (unshrink after the window)"
  ;;
unshrink)
  [ -s "$SHRUNK" ] || { echo "device_model: nothing shrunk" >&2; exit 1; }
  tr '\n' '\0' < "$SHRUNK" | xargs -0 git reset -q --
  sed 's|^|/|' "$SHRUNK" > "$SHRUNK.lines"
  grep -vxF -f "$SHRUNK.lines" "$EXCLUDE" > "$EXCLUDE.tmp" || true
  rm -f "$SHRUNK.lines"
  mv "$EXCLUDE.tmp" "$EXCLUDE" && rm -f "$SHRUNK"
  git diff --cached --quiet || echo "device_model: note: the index still has staged changes (not made by shrink)" >&2
  echo "device_model: back in the index; the tree is $(tree_bytes) bytes"
  ;;
plan)
  src=${2:-$DEFAULT_MODEL}
  set_name "$src"
  pb=$(piece_bytes)
  size=$(stat -c %s "$src")
  echo "device_model: tree $(( $(tree_bytes) / 1000 )) kB travels with every call; $NAME $size bytes in pieces of $pb:" \
       "$(( (size + pb - 1) / pb )) pieces (one stash call each; the last one can ride with the training call)"
  ;;
split)
  src=${2:-$DEFAULT_MODEL}
  [ -f "$src" ] || { echo "device_model: no $src" >&2; exit 1; }
  set_name "$src"
  [ -f "$SUM" ] || { echo "device_model: no $SUM" >&2; exit 1; }
  PIECE=$(piece_bytes)
  got=$(sha256sum "$src" | awk '{print $1}')
  [ "$got" = "$(want_sum)" ] || { echo "device_model: $src sha256 $got, $SUM says $(want_sum)" >&2; exit 1; }
  O=$GDIR
  rm -rf "$O"
  mkdir -p "$O/tmp"
  split -b "$PIECE" -d -a 2 --numeric-suffixes=1 "$src" "$O/tmp/$NAME.part"
  total=$(ls "$O/tmp" | wc -l)
  n=0
  for f in "$O"/tmp/$NAME.part*; do
    n=$((n + 1))
    mkdir -p "$O/p$n"
    mv "$f" "$(printf "%s/p%d/%s.part%02dof%02d" "$O" $n "$NAME" $n "$total")"
  done
  rmdir "$O/tmp"
  ls -l "$O"/p*/
  echo "device_model: $n pieces of $PIECE bytes; carry $O/p1 … $O/p$n, one per call, each with:" \
       "tools/device_model.sh stash"
  ;;
stash)
  mkdir -p "$STASH"
  found=0
  for f in $GDIR/p*/*.part*of*; do
    [ -f "$f" ] || continue
    cp "$f" "$STASH/"
    found=$((found + 1))
  done
  echo "device_model: stashed $found piece(s); $STASH holds $(ls "$STASH" | wc -l): $(cd "$STASH" && ls | tr '\n' ' ')"
  [ $found -gt 0 ]
  ;;
join)
  dest=${2:?usage: tools/device_model.sh join DEST}
  set_name "$dest"
  [ -f "$SUM" ] || { echo "device_model: no $SUM" >&2; exit 1; }
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
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
