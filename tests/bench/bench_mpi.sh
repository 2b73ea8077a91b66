#!/usr/bin/env bash
# Training across processes on this host, against one process: the reference CNN,
# global batch 64, on PoCL devices sharing the same cores, in alternating rounds
# (the machines drift by several percent): one process with one device (batch 64),
# one process with two devices (32 each), and `mpirun -np 2` with one device each
# (32 each). Prints the median images/s of epochs 2-3 per layout and the ratios
# to the first; then `cltrain bench allreduce` under mpirun -np 2 and -np 3.
#
#   tests/bench/bench_mpi.sh [--rounds N] [--images N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
rounds_images 4 "$@"
mpi=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)

# run NAME ROUND: one run's epochs 2-3 images/s (median of the two) into $tmp/NAME.
run() {
  local name=$1 round=$2
  local common=(train --epochs 3 --train-limit "$images" --test-limit 64 --checkpoint-every 0
    --split equal --log "$tmp/$name-$round.jsonl")
  case $name in
    one) POCL_DEVICES=pthread "$build/cltrain" "${common[@]}" --batch-per-replica 64 ;;
    two_devices) POCL_DEVICES="pthread pthread" "$build/cltrain" "${common[@]}" --batch-per-replica 32 ;;
    two_processes) POCL_DEVICES=pthread "${mpi[@]}" -np 2 "$build/cltrain" "${common[@]}" --batch-per-replica 32 ;;
  esac >/dev/null
  sed -n '2,3p' "$tmp/$name-$round.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 |
    median >>"$tmp/$name"
}
for ((r = 1; r <= rounds; r++)); do
  for name in one two_devices two_processes; do run "$name" "$r"; done
done
one=$(median <"$tmp/one")
for name in one two_devices two_processes; do
  m=$(median <"$tmp/$name")
  printf '%-14s median %7.0f images/s (runs: %s), ratio to one device %.2f\n' "$name" "$m" \
    "$(tr '\n' ' ' <"$tmp/$name")" "$(echo "$m / $one" | bc -l)"
done
for np in 2 3; do
  echo
  echo "mpirun -np $np cltrain bench allreduce (one PoCL device per process):"
  POCL_DEVICES=pthread "${mpi[@]}" -np "$np" "$build/cltrain" bench allreduce --devices 0 --repeat 11
done
