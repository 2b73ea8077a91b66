#!/usr/bin/env bash
# What the observability outputs cost: the reference CNN on two PoCL devices
# (global batch 128), plain against --tensorboard (batch loss every 10 steps) and
# against --trace (its default 20 steps), in alternating rounds (the machines
# drift by several percent). Prints the median training images/s of epochs 1-3
# and of the whole run's wall time per variant, and the ratios to plain.
#
#   tests/bench/bench_observe.sh [--rounds N] [--images N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
rounds_images 5 "$@"
export POCL_DEVICES="pthread pthread"

# run NAME ROUND: images/s over the 3 epochs' training passes, and the wall time.
run() {
  local name=$1 round=$2 extra=()
  case $name in
    tensorboard) extra=(--tensorboard "$tmp/tb-$round" --tensorboard-every 10) ;;
    trace) extra=(--trace "$tmp/trace-$round.json") ;;
  esac
  local t0 t1
  t0=$(date +%s.%N)
  "$build/cltrain" train --epochs 3 --train-limit "$images" --test-limit 64 --checkpoint-every 0 \
    --log "$tmp/$name-$round.jsonl" "${extra[@]}" >/dev/null
  t1=$(date +%s.%N)
  # Images over the summed training seconds of the three epochs.
  awk -v n="$images" '{ match($0, /"train_seconds": [0-9.]+/); s += substr($0, RSTART + 17, RLENGTH - 17) }
    END { printf "%.1f\n", 3 * n / s }' "$tmp/$name-$round.jsonl" >>"$tmp/$name.rate"
  echo "$t1 - $t0" | bc >>"$tmp/$name.wall"
}
for ((r = 1; r <= rounds; r++)); do
  for name in plain tensorboard trace; do run "$name" "$r"; done
done
plain=$(median <"$tmp/plain.rate")
wall=$(median <"$tmp/plain.wall")
for name in plain tensorboard trace; do
  m=$(median <"$tmp/$name.rate")
  w=$(median <"$tmp/$name.wall")
  printf '%-12s %7.0f images/s (runs: %s), ratio %.3f; wall %.2f s, ratio %.3f\n' "$name" "$m" \
    "$(tr '\n' ' ' <"$tmp/$name.rate")" "$(echo "$m / $plain" | bc -l)" "$w" "$(echo "$w / $wall" | bc -l)"
done
