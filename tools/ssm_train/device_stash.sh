#!/bin/bash
# Issue 14's data reaches the H200 in parts (a call carries at most 64 MiB with the working tree; device_bundles.sh
# cuts each bundle into pieces NAME.tar.xz.<i>-of-<n>). Every call of the device plan first runs this: it copies the
# pieces it carries (.device/s14/*/) to /tmp/stash14 on the machine, where they stay while the machine is held (it
# stays warm 30 s after a call: run the plan's calls back to back), and unpacks every bundle whose pieces are all
# there, once, into /tmp/ssm14.
#   tools/ssm_train/device_stash.sh [NEEDED ...]   exits 1, naming what is missing, when a needed path (relative to
#                                                  /tmp/ssm14) is in no bundle carried now or stashed before
set -u
cd "$(dirname "$0")/../.."
S=/tmp/stash14; W=/tmp/ssm14
mkdir -p $S $W
for f in .device/s14/*/*.tar.xz.*-of-*; do
  [ -f "$f" ] || continue
  cp "$f" $S/ && echo "stashed $(basename $f) ($(du -h $f | cut -f1))"
done
for first in $S/*.tar.xz.1-of-*; do
  [ -f "$first" ] || continue
  base=${first%.1-of-*}; n=${first##*-of-}
  name=$(basename $base)
  [ -f $W/.unpacked.$name ] && continue
  pieces=""; ok=1
  for i in $(seq 1 $n); do
    [ -f $base.$i-of-$n ] && pieces="$pieces $base.$i-of-$n" || { ok=0; echo "$name: piece $i of $n not here yet"; }
  done
  [ $ok = 1 ] || continue
  cat $pieces | xz -T0 -dc | tar -C $W -xf - && touch $W/.unpacked.$name && echo "unpacked $name ($n pieces)"
done
missing=0
for need in "$@"; do
  [ -e "$W/$need" ] || { echo "missing: $need (the device plan's calls must run back to back: a piece was carried by an earlier call whose machine is gone; run them again from the first)"; missing=1; }
done
exit $missing
