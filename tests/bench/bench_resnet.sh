#!/usr/bin/env bash
# ResNet50 training throughput on photo folders (the second reference workload):
# images/s at each --sizes image size, on one PoCL device and on two
# (POCL_DEVICES="pthread pthread"), median over --runs runs.
#
#   tests/bench/bench_resnet.sh [--data DIR] [--sizes "224 96"] [--images N]
#                               [--batch N] [--runs N] [--cltrain PATH]
#
# --data: a photo folder (one subfolder per class); by default a synthetic one of
# 3 classes is written with tests' make_photos. Each run trains 3 epochs of
# --images images with --batch per replica and keeps the median of epochs 2 and
# 3 (epoch 1 includes PoCL's kernel builds, first-touch page faults and decoding
# into the cache); the log's wait for decoded images is printed beside it.
# Output, one line per configuration:
#   resnet50 224x224 1 device(s), batch 8/replica: median 7.1 images/s over 1 runs (min 7.1, max 7.1), waited 0.00 s
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
cltrain=$build/cltrain
data=""
sizes="224 96"
images=32
batch=8
runs=1
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cltrain) cltrain=$2; shift 2 ;;
    *) echo "bench_resnet.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$cltrain" ] || { echo "bench_resnet.sh: $cltrain not built (run .ci/setup)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
if [ -z "$data" ]; then
  data=$tmp/photos
  "$build/tests/make_photos" "$data" 3 $(((images + 2) / 3)) 1
fi

for size in $sizes; do
  for n in 1 2; do
    pocl="pthread"
    [ "$n" -eq 2 ] && pocl="pthread pthread"
    rm -f "$tmp/rates" "$tmp/waits"
    for ((r = 1; r <= runs; r++)); do
      POCL_DEVICES=$pocl "$cltrain" train --model resnet50 --data "$data" --image-size "$size" \
        --epochs 3 --train-limit "$images" --batch-per-replica "$batch" --split equal \
        --checkpoint-every 0 --log "$tmp/run.jsonl" >"$tmp/out.txt"
      sed -n '2,3p' "$tmp/run.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/rates"
      sed -n '2,3p' "$tmp/run.jsonl" | grep -Eo '"data_wait_seconds": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/waits"
    done
    mem=$(grep -Eo 'device memory per replica: [0-9]+ MiB' "$tmp/out.txt" | grep -Eo '[0-9]+ MiB')
    echo "resnet50 ${size}x${size} $n device(s), batch $batch/replica: median $(median <"$tmp/rates") images/s" \
      "over $runs runs (min $(sort -g "$tmp/rates" | head -1), max $(sort -g "$tmp/rates" | tail -1))," \
      "waited $(median <"$tmp/waits") s per epoch for images, $mem per replica"
  done
done
