#!/usr/bin/env bash
# Training throughput of cltrain on the selected devices: images/s of the
# reference CNN, median over several runs, each after a warm-up epoch.
#
#   tests/bench/bench_train.sh [--runs N] [--images N] [--devices SEL] [--cltrain PATH]
#
# Each run trains 3 epochs of --images examples (batch 64) and keeps the median of
# epochs 2 and 3 (epoch 1 includes kernel builds and first-touch page faults).
# Prints one line per run and a summary line:
#   cltrain fmnist-cnn devices=0: median 371.2 images/s over 3 runs (min 365.0, max 377.9)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cltrain=$here/../../build/cltrain
runs=3
images=6400
devices=0
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --cltrain) cltrain=$2; shift 2 ;;
    *) echo "bench_train.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$cltrain" ] || { echo "bench_train.sh: $cltrain not built (run .ci/setup)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/common.sh"

"$cltrain" devices | sed -n "$((${devices%%,*} + 1))p" | sed 's/^/device: /' || true
for ((r = 1; r <= runs; r++)); do
  "$cltrain" train --devices "$devices" --epochs 3 --train-limit "$images" --test-limit 64 \
    --log "$tmp/run$r.jsonl" >/dev/null
  rate=$(sed -n '2,3p' "$tmp/run$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median)
  echo "run $r: $rate images/s"
  echo "$rate" >>"$tmp/rates"
done
med=$(median <"$tmp/rates")
lo=$(sort -g "$tmp/rates" | head -1)
hi=$(sort -g "$tmp/rates" | tail -1)
echo "cltrain fmnist-cnn devices=$devices: median $med images/s over $runs runs (min $lo, max $hi)"
