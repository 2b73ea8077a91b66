#!/usr/bin/env bash
# cltrain on one PoCL device against PyTorch (2 threads) training the same CNN on
# the same images with the same batch, back to back in one run: images/s of each
# (median over runs of the median of epochs 2-3) and the ratio.
#
#   tests/bench/bench_vs_pytorch.sh [--runs N] [--images N]
#
# PyTorch runs with glibc's trimming off: on these machines the first touch of
# fresh memory is slow, and with default trimming PyTorch re-faults its
# temporaries every step (~270 images/s instead of its real ~1,700+).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
data=/usr/share/datasets/fashion-mnist
runs=3
images=6400
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    *) echo "bench_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench_vs_pytorch.sh: PyTorch is not installed (apt-get install python3-torch)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"

for ((r = 1; r <= runs; r++)); do
  "$build/cltrain" train --devices 0 --epochs 3 --train-limit "$images" --test-limit 64 --checkpoint-every 0 \
    --log "$tmp/c$r.jsonl" >/dev/null
  c=$(sed -n '2,3p' "$tmp/c$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median)
  p=$(MALLOC_MMAP_THRESHOLD_=17179869184 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824 \
    /usr/bin/python3 "$here/pytorch_fmnist.py" "$data" "$images" 3 2 | sed -n '2,3p' | awk '{ print $4 }' | median)
  echo "run $r: cltrain $c images/s, PyTorch $p images/s"
  echo "$c" >>"$tmp/c"
  echo "$p" >>"$tmp/p"
done
c=$(median <"$tmp/c")
p=$(median <"$tmp/p")
printf 'median over %d runs: cltrain %s images/s, PyTorch %s images/s, ratio %.2f\n' "$runs" "$c" "$p" \
  "$(echo "$c / $p" | bc -l)"
