#!/usr/bin/env bash
# The custom loop of the C library (examples/custom_loop.c: cltrain_trainer_step
# each step, or with --parts forward_backward, allreduce and apply one by one)
# against `cltrain train` on
# the same data, devices and split: images/s of the training pass, alternating
# the two in each round, median over the rounds of epochs 2 and 3 (epoch 1
# includes kernel builds and first-touch page faults).
#
#   tests/bench/bench_api_loop.sh [--rounds N] [--images N]
#
# $LOOP_FLAGS go to the custom loop ("--parts 1" for the three calls).
#
# Devices: $DEVICES (default all) as PoCL offers them ($POCL_DEVICES). Prints
# one line per run and the ratio of the medians (custom loop / cltrain train).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
cltrain=$build/cltrain
loop=$build/tests/example_custom_loop
devices=${DEVICES:-all}
. "$here/common.sh"
rounds_images 3 "$@"
for b in "$cltrain" "$loop"; do
  [ -x "$b" ] || { echo "bench_api_loop.sh: $b not built (cmake --build build)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--devices "$devices" --split equal --epochs 3 --train-limit "$images" --test-limit 64)
for ((r = 1; r <= rounds; r++)); do
  (cd "$tmp" && rm -rf ck && "$cltrain" train "${common[@]}" --checkpoint-dir ck \
    --log "train$r.jsonl" >/dev/null)
  rate=$(sed -n '2,3p' "$tmp/train$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' |
    cut -d' ' -f2 | median)
  echo "round $r: cltrain train $rate images/s"
  echo "$rate" >>"$tmp/train"
  (cd "$tmp" && rm -rf ck && "$loop" "${common[@]}" ${LOOP_FLAGS:-} --checkpoint-dir ck >"loop$r.txt")
  rate=$(sed -n 's/^Epoch \([23]\),.*(\([0-9.]*\) images\/s)$/\2/p' "$tmp/loop$r.txt" | median)
  echo "round $r: custom loop   $rate images/s"
  echo "$rate" >>"$tmp/loop"
done
t=$(median <"$tmp/train")
l=$(median <"$tmp/loop")
echo "fmnist-cnn devices=$devices ${LOOP_FLAGS:-}, $images images: cltrain train median $t, custom loop median $l images/s: ratio $(awk -v a="$l" -v b="$t" 'BEGIN { printf "%.3f", a / b }')"
