#!/bin/bash
# Builds the two folders that device_train.sh and device_eval.sh carry to the H200 (each call carries at most 64 MiB
# with the working tree, about 18 MB of it tracked files), here, on the CPU:
#   .device/c1/bundle.tar.xz  .device/ssm_data (prepare.py) + .device/teacher (tools/teacher/export.py), ~44 MB
#   .device/c2/cq.tar.xz      a stripped CUDA build of clauseqa, its non-system shared libraries (BLAS and LAPACK
#                             both served by libopenblas.so.0, which FAISS needs anyway), and the validation suites
#                             with their documents copied (val_suites.py), ~48 MB
#   tools/ssm_train/device_bundles.sh [c1] [c2]      (CQ=path/to/cuda/clauseqa, default build-gpu/clauseqa)
set -eu
cd "$(dirname "$0")/../.."
CQ=${CQ:-build-gpu/clauseqa}
[ $# -gt 0 ] || set -- c1 c2
for what in "$@"; do
  case $what in
  c1)
    mkdir -p .device/c1
    tar -C .device -cf - ssm_data teacher | xz -T2 -6 > .device/c1/bundle.tar.xz ;;
  c2)
    T=$(mktemp -d); mkdir -p $T/bin $T/lib $T/eval
    strip -o $T/bin/clauseqa "$CQ"
    for l in $(ldd "$CQ" | awk '{print $3}' | grep -v -E \
        "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|cuda|libcublas|/libz\.so|/libblas\.|/liblapack\."); do
      cp -L "$l" $T/lib/
    done
    ln -s libopenblas.so.0 $T/lib/libblas.so.3
    ln -s libopenblas.so.0 $T/lib/liblapack.so.3
    python3 tools/ssm_train/val_suites.py --eval ../shared/eval --out $T/vs > /dev/null
    for s in laws-zh policy-zh-dev cuad-dev contracts-en-dev; do
      mkdir -p $T/eval/$s-val && cp -rL $T/vs/$s-val/docs $T/vs/$s-val/questions.jsonl $T/eval/$s-val/
    done
    mkdir -p .device/c2
    tar -C $T -cf - bin lib eval | xz -T2 -9 > .device/c2/cq.tar.xz
    rm -rf $T ;;
  esac
done
ls -la .device/c1 .device/c2 2>/dev/null
