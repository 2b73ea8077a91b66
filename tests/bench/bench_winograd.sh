#!/usr/bin/env bash
# Winograd F(2x2,3x3) and F(4x4,3x3) against the direct kernels (CLTRAIN_WINOGRAD
# off, 2, 4) on one PoCL device:
# 1. per 3x3 stride-1 layer shape of ResNet50 at 96 px (batch 16) and of the
#    reference CNN (its second convolution, batch 64), each pass's median time
#    over --runs runs, the three algorithms interleaved in each run
#    (build/tests/bench_winograd); with --profile, each pass's device time per
#    kernel as well (transforms, products), the least over --runs runs;
# 2. whole-model training images/s, median over --rounds rounds, each round
#    running off, 2 and 4 back to back: `cltrain train --model resnet50
#    --image-size 96` on a synthetic photo folder (--images images, batch 16)
#    and the reference CNN on Fashion-MNIST (6,400 images, batch 64); each run's
#    figure is the median of its epochs 2 and 3 (epoch 1 builds the kernels).
#
#   tests/bench/bench_winograd.sh [--runs N] [--rounds N] [--images N] [--skip-layers] [--profile]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
runs=7
rounds=3
images=48
layers=1
profile=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --skip-layers) layers=0; shift ;;
    --profile) profile=(--profile); shift ;;
    *) echo "bench_winograd.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for bin in cltrain tests/bench_winograd tests/make_photos; do
  [ -x "$build/$bin" ] || { echo "bench_winograd.sh: $build/$bin not built" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
cpu_kind
echo "AVX-512 flags: $(grep -c avx512f /proc/cpuinfo) of $(grep -c ^processor /proc/cpuinfo) logical CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$layers" = 1 ]; then
  echo "== per layer and pass, median of $runs runs (ms; speed-up over direct in brackets)"
  "$build/tests/bench_winograd" --runs "$runs" "${profile[@]}" | grep -v '^device'
fi

echo "== whole model, training images/s, median of $rounds rounds"
"$build/tests/make_photos" "$tmp/photos" 3 $(((images + 2) / 3)) 1
for ((r = 1; r <= rounds; r++)); do
  for w in off 2 4; do
    CLTRAIN_WINOGRAD=$w "$build/cltrain" train --devices 0 --model resnet50 --data "$tmp/photos" \
      --image-size 96 --epochs 3 --train-limit "$images" --batch-per-replica 16 \
      --checkpoint-every 0 --log "$tmp/r.jsonl" >/dev/null
    sed -n '2,3p' "$tmp/r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/resnet-$w"
    CLTRAIN_WINOGRAD=$w "$build/cltrain" train --devices 0 --epochs 3 --train-limit 6400 \
      --test-limit 64 --checkpoint-every 0 --log "$tmp/c.jsonl" >/dev/null
    sed -n '2,3p' "$tmp/c.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/cnn-$w"
  done
done
for model in resnet cnn; do
  [ $model = resnet ] && name="resnet50 96x96 batch 16" || name="fmnist-cnn batch 64"
  base=$(median <"$tmp/$model-off")
  for w in off 2 4; do
    med=$(median <"$tmp/$model-$w")
    echo "$name CLTRAIN_WINOGRAD=$w: median $med images/s (min $(sort -g "$tmp/$model-$w" | head -1)," \
      "max $(sort -g "$tmp/$model-$w" | tail -1)), $(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2f", a / b }')x off"
  done
done
