#!/usr/bin/env bash
# Photo decoding per process with one host and with two: each process decodes only
# its own replicas' slices of every global batch, so with 2 processes each should
# spend half the decoding time of one process alone (which, as every process did
# before, decodes the whole batch). Runs on the test cluster (tests/netns.sh: each
# process a network namespace of its own, pinned to its own core; needs root), or
# with --loopback over loopback mpirun, each rank pinned to its own core by taskset.
# One round: one process on one core (global batch 2B, one device), then two
# processes of one core each (B each), alternating; one epoch each of a synthetic
# photo folder (make_photos, photos of up to --side pixels), decoded from files (the
# first epoch: nothing is cached yet), after an untimed run of each, a small model (the reference CNN's layers on
# RGB) so that decoding is most of the work. Prints the medians over the rounds of
# each process's decoding CPU time (the log's decoding.cpu_seconds) and images
# decoded, the epoch's training time, images/s and the devices' wait for images
# (data_wait_seconds), and the ratios.
#
#   tests/bench/bench_decode_hosts.sh [--rounds N] [--images N] [--side N] [--loopback]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
. "$here/../netns.sh"
rounds=5
images=1200
side=500
batch=16
loopback=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --side) side=$2; shift 2 ;;
    --loopback) loopback=1; shift ;;
    *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
  esac
done
cpu_kind
[ "$(nproc)" -ge 2 ] || { echo "$(basename "$0"): needs 2 cores (one per process)" >&2; exit 2; }

export POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1
env=(-x POCL_DEVICES -x POCL_MAX_PTHREAD_COUNT)
if [ "$loopback" = 0 ] && cluster_check >/dev/null && cluster_up 2; then
  where="the test cluster: 2 network namespaces (tests/netns.sh), one rank each, pinned to cores 0 and 1"
  one=(cluster_exec 1 taskset -c 0)
  two=("${CL_MPI[@]}" "${env[@]}" -np 2 "$CL_PIN")
else
  where="loopback mpirun, each rank pinned to its own core by taskset"
  printf '#!/bin/sh\nexec taskset -c ${OMPI_COMM_WORLD_RANK:-0} "$@"\n' >"$tmp/pin"
  chmod +x "$tmp/pin"
  one=(taskset -c 0)
  two=(mpirun --bind-to none "${env[@]}" -np 2 "$tmp/pin")
  [ "$(id -u)" -eq 0 ] && two=(mpirun --allow-run-as-root --bind-to none "${env[@]}" -np 2 "$tmp/pin")
fi
echo "On $where; POCL_MAX_PTHREAD_COUNT=1."

"$build/tests/make_photos" "$tmp/photos" 3 $(((images + 2) / 3)) 1 "$side" || exit 1
/usr/bin/python3 - "$here/../models/examples/fmnist_cnn.json" "$tmp/rgb.json" <<'PY' || exit 1
import json, sys
m = json.load(open(sys.argv[1]))
layers = m["config"]["layers"]
layers[0]["config"]["batch_shape"] = [None, 32, 32, 3]
[d for d in layers if d["class_name"] == "Dense"][-1]["config"]["units"] = 3
json.dump(m, open(sys.argv[2], "w"))
PY
echo "$(find "$tmp/photos" -type f | wc -l) photos of up to ${side}x$side pixels (half JPEG, half PNG), decoded at 32x32"

# run NAME ROUND: one epoch; appends "cpu_seconds images" of each process to
# $tmp/NAME.work and "train_seconds images_per_second" to $tmp/NAME.epoch.
run() {
  local name=$1 round=$2 log=$tmp/$1-$2.jsonl
  local cmd=("$build/cltrain" train --data "$tmp/photos" --model "$tmp/rgb.json" --image-size 32
    --validation-split 0 --epochs 1 --split equal --seed "$round" --checkpoint-every 0 --devices 0 --log "$log")
  case $name in
    one) "${one[@]}" "${cmd[@]}" --batch-per-replica $((2 * batch)) ;;
    two) "${two[@]}" "${cmd[@]}" --batch-per-replica "$batch" ;;
  esac >"$tmp/$name-$round.txt" 2>&1 || { echo "run $name failed: $(tail -3 "$tmp/$name-$round.txt")" >&2; exit 1; }
  /usr/bin/python3 - "$log" "$tmp/$name" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
with open(sys.argv[2] + ".work", "a") as f:
    for w in r["decoding"]:
        f.write("%.4f %d\n" % (w["cpu_seconds"], w["decoded"]))
with open(sys.argv[2] + ".epoch", "a") as f:
    f.write("%.3f %.1f %.3f\n" % (r["train_seconds"], r["images_per_second"], r["data_wait_seconds"]))
PY
}
run one 0 # warm-up: PoCL compiles the kernels into its cache
run two 0
rm -f "$tmp"/*.work "$tmp"/*.epoch
for ((r = 1; r <= rounds; r++)); do
  run one "$r"
  run two "$r"
done
col() { cut -d' ' -f"$1" <"$2" | median; }
printf '%-38s %14s %8s %9s %9s %11s\n' "" "decoding CPU s" "images" "train s" "images/s" "waited s"
for name in one two; do
  label="one process (global batch $((2 * batch)))"
  [ $name = two ] && label="two processes ($batch each), per process"
  printf '%-38s %14.3f %8.0f %9.2f %9.0f %11.2f\n' "$label" "$(col 1 "$tmp/$name.work")" "$(col 2 "$tmp/$name.work")" \
    "$(col 1 "$tmp/$name.epoch")" "$(col 2 "$tmp/$name.epoch")" "$(col 3 "$tmp/$name.epoch")"
done
printf 'two processes / one: decoding CPU time per process %.2f, images per process %.2f, epoch time %.2f (medians of %d rounds)\n' \
  "$(echo "$(col 1 "$tmp/two.work") / $(col 1 "$tmp/one.work")" | bc -l)" \
  "$(echo "$(col 2 "$tmp/two.work") / $(col 2 "$tmp/one.work")" | bc -l)" \
  "$(echo "$(col 1 "$tmp/two.epoch") / $(col 1 "$tmp/one.epoch")" | bc -l)" "$rounds"
