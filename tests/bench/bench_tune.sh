#!/usr/bin/env bash
# What the tuner gains: per workload, `cltrain tune` into an empty tuning file
# (its seconds, then again cached), then rounds of `cltrain train` with the
# backends' defaults (--tune off) and with the tuned file (--tune-file), in
# alternating order, on one PoCL device. Workloads:
#   cnn       the reference CNN (fmnist-cnn), batch 64, --images Fashion-MNIST
#             training images (6400) a epoch
#   resnet50  ResNet50 at --size (96), batch 16, 48 synthetic photos a epoch
#             (build/tests/make_photos)
# Each run trains --epochs epochs (3) and keeps the median images/s of epochs 2 on
# (from its JSONL log); the figure is the median over --runs rounds [min-max].
# The tuned file's choices are printed per layer and pass, with the speed-up
# `cltrain tune` measured for each, and its whole-step verdict (a cltrain
# that tunes in the step).
#
#   tests/bench/bench_tune.sh [--runs N] [--workloads "cnn resnet50"] [--size N]
#       [--images N] [--epochs N] [--data DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
runs=3
workloads="cnn resnet50"
size=96
images=6400
epochs=3
data=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_tune.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 2 ] || { echo "bench_tune.sh: --epochs must be at least 2 (the first is not measured)" >&2; exit 2; }
. "$here/common.sh"
for f in "$build/cltrain" "$build/tests/make_photos"; do
  [ -x "$f" ] || { echo "bench_tune.sh: $f not built (run .ci/setup)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset CLTRAIN_TUNE CLTRAIN_WINOGRAD
cpu_kind

range() { printf '%.1f [%.1f-%.1f]' "$(median <"$1")" "$(sort -g "$1" | head -n1)" "$(sort -g "$1" | tail -n1)"; }

for w in $workloads; do
  case $w in
    cnn)
      model=(--model fmnist-cnn)
      tune_args=(--batch 64)
      train_args=(--data "$data" --batch-per-replica 64 --train-limit "$images" --test-limit 1000) ;;
    resnet50)
      "$build/tests/make_photos" "$tmp/photos" 3 16 1 >/dev/null
      model=(--model resnet50 --image-size "$size")
      tune_args=(--batch 16 --classes 3)
      train_args=(--data "$tmp/photos" --batch-per-replica 16 --train-limit 48) ;;
    *) echo "bench_tune.sh: unknown workload $w (cnn, resnet50)" >&2; exit 2 ;;
  esac
  file=$tmp/$w.json
  start=$(date +%s.%N)
  "$build/cltrain" tune "${model[@]}" "${tune_args[@]}" --devices 0 --tune-budget 0 --tune-file "$file" >"$tmp/$w-tune.txt"
  empty=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  start=$(date +%s.%N)
  "$build/cltrain" tune "${model[@]}" "${tune_args[@]}" --devices 0 --tune-budget 0 --tune-file "$file" >"$tmp/$w-tune2.txt"
  cached=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  : >"$tmp/$w-off.rate"
  : >"$tmp/$w-tuned.rate"
  for r in $(seq 1 "$runs"); do
    order="off tuned"
    [ $((r % 2)) -eq 0 ] && order="tuned off"
    for how in $order; do
      flags=(--tune off)
      [ "$how" = tuned ] && flags=(--tune-file "$file")
      "$build/cltrain" train "${model[@]}" "${train_args[@]}" --devices 0 --epochs "$epochs" \
        --checkpoint-every 0 "${flags[@]}" --log "$tmp/$w-$how-$r.jsonl" >"$tmp/$w-$how-$r.txt"
      sed -n '2,$p' "$tmp/$w-$how-$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 |
        median >>"$tmp/$w-$how.rate"
    done
  done
  off=$(median <"$tmp/$w-off.rate")
  tuned=$(median <"$tmp/$w-tuned.rate")
  echo "$w (${model[*]}), one PoCL device, epochs 2-$epochs, median of $runs rounds [min-max]:"
  printf '  cltrain tune, empty file: %.1f s; cached: %.2f s\n' "$empty" "$cached"
  echo "  --tune off (the defaults)   $(range "$tmp/$w-off.rate") images/s"
  echo "  tuned (--tune-file)         $(range "$tmp/$w-tuned.rate") images/s"
  echo "  tuned / defaults: $(awk -v a="$tuned" -v b="$off" 'BEGIN { printf "%.3f", a / b }')"
  grep -E '^  step' "$tmp/$w-tune.txt" | sed 's/^  /  cltrain tune: /' || true
  echo "  choices (cltrain tune's speed-up of each pass):"
  awk '$2 ~ /^(fwd|dw|dx)$/ && $3 != $5 { printf "    %-24s %-4s %-10s %s (default %s)\n", $1, $2, $3, $7, $5 }' \
    "$tmp/$w-tune.txt"
  echo "  passes left at the default: $(awk '$2 ~ /^(fwd|dw|dx)$/ && $3 == $5' "$tmp/$w-tune.txt" | wc -l)" \
    "of $(awk '$2 ~ /^(fwd|dw|dx)$/' "$tmp/$w-tune.txt" | wc -l)"
done
