#!/bin/bash
# Builds the two folders that device_eval.sh carries to the H200 (each call carries at most 64 MiB together with
# the ~19 MB working tree), here, on the CPU:
#   .device/evb/bin.tar.xz     the CUDA build's clauseqa, test_decoder_cuda and bench_decoder (stripped) with their
#                              non-system shared libraries (BLAS and LAPACK both served by libopenblas.so.0)
#   .device/evs/suites.tar.xz  vs/: the validation parts (tools/dev_split.py) of cjrc-dev, cmrc-dev, policy-zh-dev,
#                              cuad-dev, contracts-en-dev and laws-zh, their documents copied; tq/: the calibration
#                              parts device_calibrate.sh's train-* runs score (refusal_split.py: questions only, in
#                              the order whose every EVERY-th keeps the class mix; EVERY as device_calibrate's, 3);
#                              tqh/ and vsh/: the calibration and validation parts with a share (HELDOUT_SHARE,
#                              0.2) of their documents held out of the KB and those documents' questions
#                              unanswerable (heldout_unans.py: questions.jsonl and heldout.txt only; the device
#                              links each docs/ from vs/<suite>/docs less heldout.txt: device_calibrate.sh
#                              *-heldout runs)
#   .device/evh/pN/heldout.tar.xz  (target heldout) what device_calibrate.sh's plain and *-heldout runs of the five
#                              dev suites need (vs/ of those five with their documents, tq/, tqh/, vsh/; no laws-zh),
#                              in parts that each ride beside the working tree in one call (64 MiB with the tree:
#                              at main ab6b473 the tree is 60.7 MB, so suites.tar.xz, 19.7 MB, no longer fits one
#                              call): one call per pN, each `device_calibrate.sh unpack`. PART_BYTES: the part
#                              size, default what tools/device_model.sh leaves beside this checkout's tree
#   tools/decoder_train/bundle_eval.sh [bin] [suites] [heldout]  (B=build folder of the CUDA build, default build-gpu)
set -eu
cd "$(dirname "$0")/../.."
B=${B:-build-gpu}
SUITES="cjrc-dev cmrc-dev policy-zh-dev cuad-dev contracts-en-dev laws-zh"
[ $# -gt 0 ] || set -- bin suites
for what in "$@"; do
  case $what in
  bin)
    T=$(mktemp -d); mkdir -p $T/bin $T/lib
    for x in clauseqa tests/test_decoder_cuda tests/bench_decoder; do strip -o $T/bin/$(basename $x) "$B/$x"; done
    for l in $(ldd "$B/clauseqa" "$B/tests/test_decoder_cuda" | awk '/=>/ {print $3}' | sort -u | grep -v -E \
        "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|/libcuda|/libcudart|libcublas|/libz\.so|/libblas\.|/liblapack\."); do
      cp -L "$l" $T/lib/
    done
    ln -s libopenblas.so.0 $T/lib/libblas.so.3
    ln -s libopenblas.so.0 $T/lib/liblapack.so.3
    mkdir -p .device/evb
    tar -C $T -cf - bin lib | xz -T2 -9 > .device/evb/bin.tar.xz
    rm -rf $T ;;
  suites)
    T=$(mktemp -d)
    python3 tools/dev_split.py --eval ../shared/eval --out $T/links $SUITES > /dev/null
    for s in $SUITES; do
      mkdir -p $T/vs/$s && cp -rL $T/links/$s/docs $T/links/$s/questions.jsonl $T/vs/$s/
    done
    python3 tools/decoder_train/refusal_split.py --eval ../shared/eval --out $T/tq --every ${EVERY:-3} \
      cjrc-dev cmrc-dev policy-zh-dev cuad-dev contracts-en-dev
    for p in calibration:tqh validation:vsh; do
      python3 tools/decoder_train/heldout_unans.py --eval ../shared/eval --out $T/h --part ${p%%:*} \
        --share ${HELDOUT_SHARE:-0.2} --every ${EVERY:-3} $SUITES
      for s in $SUITES; do
        mkdir -p $T/${p#*:}/$s && cp $T/h/$s/questions.jsonl $T/h/$s/heldout.txt $T/${p#*:}/$s/
      done
      rm -rf $T/h
    done
    mkdir -p .device/evs
    tar -C $T -cf - vs tq tqh vsh | xz -T2 -6 > .device/evs/suites.tar.xz
    rm -rf $T ;;
  heldout)
    H="cjrc-dev cmrc-dev policy-zh-dev cuad-dev contracts-en-dev"
    T=$(mktemp -d)
    python3 tools/dev_split.py --eval ../shared/eval --out $T/links $H > /dev/null
    for s in $H; do
      mkdir -p $T/b/vs/$s && cp -rL $T/links/$s/docs $T/links/$s/questions.jsonl $T/b/vs/$s/
    done
    python3 tools/decoder_train/refusal_split.py --eval ../shared/eval --out $T/b/tq --every ${EVERY:-3} $H
    for p in calibration:tqh validation:vsh; do
      python3 tools/decoder_train/heldout_unans.py --eval ../shared/eval --out $T/h --part ${p%%:*} \
        --share ${HELDOUT_SHARE:-0.2} --every ${EVERY:-3} $H
      for s in $H; do
        mkdir -p $T/b/${p#*:}/$s && cp $T/h/$s/questions.jsonl $T/h/$s/heldout.txt $T/b/${p#*:}/$s/
      done
      rm -rf $T/h
    done
    part=${PART_BYTES:-$(( 67108864 - $(tools/device_model.sh tree) - 1500000 ))}
    mkdir -p .device/evh
    python3 tools/decoder_train/pack_parts.py $T/b .device/evh $part heldout
    rm -rf $T ;;
  *) echo "bundle_eval.sh: no target $what (bin, suites, heldout)" >&2; exit 2 ;;
  esac
done
ls -la .device/evb .device/evs .device/evh/p* 2>/dev/null
