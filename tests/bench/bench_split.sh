#!/usr/bin/env bash
# Heterogeneous split benchmark, in one run on PoCL's slow "basic" and fast
# "pthread" CPU devices: training images/s of the fast device alone, of both with
# MirroredStrategy's equal split and with cltrain's auto split (median over runs
# of epochs 2-3, after the balancer has settled); then the projection of the
# same cost model for a host with a GPU 10x and 30x faster than its CPU.
#
#   tests/bench/bench_split.sh [--runs N] [--images N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
runs=3
images=6400
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    *) echo "bench_split.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export POCL_DEVICES="basic pthread"
. "$here/common.sh"

# label devices split
measure() {
  for ((r = 1; r <= runs; r++)); do
    "$build/cltrain" train --devices "$2" --split "$3" --epochs 3 --train-limit "$images" --test-limit 64 \
      --checkpoint-every 0 --log "$tmp/$1-$r.jsonl" >/dev/null
    sed -n '2,3p' "$tmp/$1-$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median
  done | median
}
alone=$(measure alone 1 equal)
equal=$(measure equal 0,1 equal)
auto=$(measure auto 0,1 auto)
share=$(sed -n 3p "$tmp/auto-1.jsonl" | grep -Eo '"share": [0-9.]+' | sed -n 2p | cut -d' ' -f2)
fast=$(sed -n 3p "$tmp/alone-1.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2)
printf 'basic + pthread (global batch 128 for two, 64 alone): pthread alone %s images/s, equal split %s, auto split %s (pthread share %s)\n' \
  "$alone" "$equal" "$auto" "$share"
printf 'ratios: auto/equal %.2f, auto/pthread alone %.2f\n' "$(echo "$auto / $equal" | bc -l)" "$(echo "$auto / $alone" | bc -l)"
# Projection: the CPU at this machine's measured single-device rate; the
# all-reduce as measured here between two PoCL devices, and as 1 ms (a PCIe
# round trip of this model's 0.7 MB of gradients plus launch latency).
ar=$(POCL_DEVICES="pthread pthread" "$build/tests/bench_allreduce" --floats 175514 --repeats 11 |
  grep -Eo 'all-reduce [0-9.]+ ms' | cut -d' ' -f2)
for allreduce in "$ar" 1; do
  for factor in 10 30; do
    "$build/tests/split_projection" --cpu-rate "$fast" --factor "$factor" --global 128 --allreduce-ms "$allreduce"
  done
done
