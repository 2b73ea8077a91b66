#!/usr/bin/env bash
# The cross-process sum overlapping the backward pass (mpirun on this host): the
# gradient's buckets, summed across processes by a thread of each process as
# they are ready, give the bits of the whole gradient summed after the backward
# pass (CLTRAIN_ALLREDUCE_BUCKETS=0), with 2 and 3 processes, several devices in
# a process, a bucket per layer, and when processes are given different values
# (process 0's holds), and with a process none of whose replicas is in the step;
# it is on by default with 2 processes (CPU devices: with --wire fp16), off with
# 3; Ctrl-C on one process
# still stops every process at the same step, and a hung device still ends the run. --wire fp16: every process holds
# the same bits, close to (and not) the float32 run's, overlapped or not; a
# process given another --wire, or a bad value, is refused.
#   test_mpi_overlap.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
. "$(dirname "$0")/lib.sh"

mpi_check "$CLT" || skip_exit
export POCL_DEVICES="pthread pthread pthread"

# train NAME BUCKETS NP DEVICES BATCH [flags]: one epoch of 6 steps (the last of
# 2 examples) into $tmp/NAME, CLTRAIN_ALLREDUCE_BUCKETS=BUCKETS ("": unset).
train() {
  local name=$1 buckets=$2 np=$3 devices=$4 batch=$5
  shift 5
  CLTRAIN_ALLREDUCE_BUCKETS=$buckets "${MPI[@]}" -np "$np" -x CLTRAIN_ALLREDUCE_BUCKETS "$CLT" train --epochs 1 \
    --devices "$devices" --split equal --batch-per-replica "$batch" --train-limit 242 --test-limit 100 --seed 9 \
    --checkpoint-dir "$tmp/$name" --checkpoint-every 1 --check-replicas --profile "$@" >"$tmp/$name.txt" 2>&1 ||
    bad "run $name ($(tail -3 "$tmp/$name.txt"))"
}
# same NAME A B: runs A and B saved the same checkpoint, byte for byte.
same() {
  if [ -s "$tmp/$2/ckpt-1.npz" ] && cmp -s "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz"; then ok "$1"; else
    bad "$1 ($("$TOOL" diff "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz" 2>&1))"
  fi
}
# buckets NAME N: the run's profile names N buckets a step.
buckets() {
  grep -q "^  all-reduce: .* collectives ($2 buckets a step" "$tmp/$1.txt" ||
    bad "$1 overlapped $2 buckets a step ($(grep 'all-reduce' "$tmp/$1.txt" | head -2))"
}

# --- the same bits, overlapped or not -------------------------------------------------
train whole2 0 2 0 24
train b16k2 16384 2 0 24
train layers2 1 2 0 24
buckets b16k2 3
buckets layers2 4
same "2 processes: buckets summed across processes during the backward pass = the whole gradient after it" whole2 b16k2
same "2 processes: a bucket per layer = the whole gradient" whole2 layers2
train whole3 0 3 0 16
train layers3 1 3 0 16
buckets layers3 4
same "3 processes: a bucket per layer = the whole gradient" whole3 layers3
train mixwhole 0 2 "0,1;2" 16
train mixlayers 1 2 "0,1;2" 16
buckets mixlayers 4
same "2 processes of 2 + 1 devices: buckets = the whole gradient" mixwhole mixlayers
if grep -q "different parameters" "$tmp"/*.txt; then bad "every replica of every process stays identical"; fi

# Process 0's choice holds: rank 1 asks for the whole gradient, rank 0 for buckets.
"${MPI[@]}" -np 1 -x CLTRAIN_ALLREDUCE_BUCKETS=1 "$CLT" train --epochs 1 --devices 0 --split equal --batch-per-replica 24 \
  --train-limit 242 --test-limit 100 --seed 9 --checkpoint-dir "$tmp/mixedenv" --check-replicas : \
  -np 1 -x CLTRAIN_ALLREDUCE_BUCKETS=0 "$CLT" train --epochs 1 --devices 0 --split equal --batch-per-replica 24 \
  --train-limit 242 --test-limit 100 --seed 9 --checkpoint-dir "$tmp/mixedenv" --check-replicas \
  >"$tmp/mixedenv.txt" 2>&1 || bad "run mixedenv ($(tail -3 "$tmp/mixedenv.txt"))"
same "processes given different CLTRAIN_ALLREDUCE_BUCKETS follow process 0's" whole2 mixedenv

# On by default with two processes (CPU devices: with --wire fp16), where the
# gradient makes two buckets of 4 MiB
# (a model of two 1024-unit layers); off for the reference CNN's one.
cat >"$tmp/mlp.json" <<'EOF'
{"class_name": "Sequential", "config": {"name": "mlp", "layers": [
 {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "name": "in"}},
 {"class_name": "Rescaling", "config": {"name": "scale", "scale": 0.00392156862745098, "offset": 0.0}},
 {"class_name": "Flatten", "config": {"name": "flat"}},
 {"class_name": "Dense", "config": {"name": "d1", "units": 1024, "activation": "relu"}},
 {"class_name": "Dense", "config": {"name": "d2", "units": 1024, "activation": "relu"}},
 {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
EOF
train mlpdefault "" 2 0 24 --model "$tmp/mlp.json" --wire fp16
train mlpwhole 0 2 0 24 --model "$tmp/mlp.json" --wire fp16
buckets mlpdefault 2
same "on by default with 2 processes (with CPU devices, with --wire fp16): the same bits as off" mlpwhole mlpdefault
if grep -q "^  across processes: .* (2 buckets a step, each summed as it was ready)" "$tmp/mlpdefault.txt"; then
  ok "--profile names the buckets summed across processes as they were ready"
else
  bad "--profile's line across processes ($(grep 'across processes:' "$tmp/mlpdefault.txt" | head -1))"
fi
train mlpdefault32 "" 2 0 24 --model "$tmp/mlp.json"
if grep -q "^  all-reduce: .* (the whole gradient after the backward pass)" "$tmp/mlpdefault32.txt"; then
  ok "off by default on CPU devices with --wire fp32 (it competes with the backward pass for the cores)"
else
  bad "off by default on CPU devices with --wire fp32 ($(grep 'all-reduce:' "$tmp/mlpdefault32.txt" | head -1))"
fi
train mlpdefault3 "" 3 0 16 --model "$tmp/mlp.json" --wire fp16
if grep -q "^  all-reduce: .* (the whole gradient after the backward pass)" "$tmp/mlpdefault3.txt"; then
  ok "off by default with 3 processes (a bucket would go one way round at a time)"
else
  bad "off by default with 3 processes ($(grep 'all-reduce:' "$tmp/mlpdefault3.txt" | head -1))"
fi
train cnndefault "" 2 0 24 --wire fp16
if grep -q "^  all-reduce: .* (the whole gradient after the backward pass)" "$tmp/cnndefault.txt"; then
  ok "the default on a gradient of one bucket: the whole gradient after the backward pass"
else
  bad "the default on a gradient of one bucket ($(grep 'all-reduce:' "$tmp/cnndefault.txt" | head -1))"
fi

# --- a process with no replica in the step --------------------------------------------
# Process 0's device takes 200 ms more a pass (CLTRAIN_TEST_SLOW) and stays out of
# every step (--split auto): process 0 sums the same buckets as process 1, adding
# -0, so the run is one device's on the whole batch, byte for byte.
L=(train --devices 0 --split auto --train-limit 640 --test-limit 100 --seed 9 --epochs 2 --checkpoint-dir)
POCL_MAX_PTHREAD_COUNT=1 CLTRAIN_TEST_SLOW="replica=0,from=0,to=1000000,ms=200" timeout 120 "${MPI[@]}" -np 2 \
  -x POCL_MAX_PTHREAD_COUNT -x CLTRAIN_TEST_SLOW -x CLTRAIN_ALLREDUCE_BUCKETS=1 "$CLT" "${L[@]}" "$tmp/hollow" \
  --batch-per-replica 16 --check-replicas --profile >"$tmp/hollow.txt" 2>&1 || bad "run hollow ($(tail -3 "$tmp/hollow.txt"))"
POCL_MAX_PTHREAD_COUNT=1 "$CLT" "${L[@]}" "$tmp/hollow_one" --batch-per-replica 32 >"$tmp/hollow_one.txt" 2>&1 ||
  bad "run hollow_one ($(tail -3 "$tmp/hollow_one.txt"))"
# The arrays: the metadata records each run's own layout.
if same_arrays "$tmp/hollow/ckpt-1.npz" "$tmp/hollow_one/ckpt-1.npz" >/dev/null && grep -q "across processes: .* buckets a step" "$tmp/hollow.txt" &&
  grep -Eq '^  rank 0 device 0 \(.*\): share 0\.0%, 0 examples' "$tmp/hollow.txt"; then
  ok "overlapped, a process with no replica in the step adds nothing: one device's bits"
else
  bad "overlapped, a process with no replica in the step ($("$TOOL" diff "$tmp/hollow_one/ckpt-1.npz" "$tmp/hollow/ckpt-1.npz"); $(grep -E 'across|rank 0 device' "$tmp/hollow.txt" | head -3))"
fi

# --- Ctrl-C on one process, overlapped: every process stops at the same step ---------
# Step 9 is epoch 2's third; rank 1 alone gets the signal (CLTRAIN_TEST_SIGNAL).
R=(train --epochs 2 --devices 0 --split equal --batch-per-replica 24 --train-limit 242 --test-limit 100 --seed 9
  --checkpoint-every 1 --checkpoint-dir)
timeout 120 "${MPI[@]}" -np 1 -x CLTRAIN_ALLREDUCE_BUCKETS=1 "$CLT" "${R[@]}" "$tmp/int" : -np 1 \
  -x CLTRAIN_ALLREDUCE_BUCKETS=1 -x CLTRAIN_TEST_SIGNAL=9 "$CLT" "${R[@]}" "$tmp/int" >"$tmp/int.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "stopped by SIGINT at epoch 2, step 3 of 6; saved" "$tmp/int.txt"; then
  ok "SIGINT on rank 1 mid-epoch, overlapped: every process stops after that step, saved"
else
  bad "SIGINT on rank 1 mid-epoch, overlapped (rc=$rc: $(tail -5 "$tmp/int.txt"))"
fi
"${MPI[@]}" -np 2 -x CLTRAIN_ALLREDUCE_BUCKETS=1 "$CLT" "${R[@]}" "$tmp/int" --resume >"$tmp/resumed.txt" 2>&1 ||
  bad "resume ($(tail -3 "$tmp/resumed.txt"))"
"${MPI[@]}" -np 2 -x CLTRAIN_ALLREDUCE_BUCKETS=0 "$CLT" "${R[@]}" "$tmp/straight" >"$tmp/straight.txt" 2>&1 ||
  bad "straight run ($(tail -3 "$tmp/straight.txt"))"
# (The interrupted run's save is ckpt-2, so the resumed run's epoch end is ckpt-3.)
d=$("$TOOL" diff "$tmp/int/ckpt-3.npz" "$tmp/straight/ckpt-2.npz" | awk '{ print $2 }')
if [ "$d" = "0.000e+00" ]; then ok "interrupted + resumed (overlapped) = straight (not), bit for bit"; else
  bad "interrupted + resumed = straight (max relative difference $d)"
fi

# --- a hung device in the overlapped step: the run still ends --------------------------
# Rank 1's replica stalls entering its step-3 buckets; its watchdog (or rank 0's, which
# waits for the sum across processes) ends the run within the timeout.
start=$SECONDS
timeout 120 "${MPI[@]}" -np 1 -x CLTRAIN_ALLREDUCE_BUCKETS=1 "$CLT" "${R[@]}" "$tmp/stall" --allreduce-timeout 4 : \
  -np 1 -x CLTRAIN_ALLREDUCE_BUCKETS=1 -x CLTRAIN_FAULT=replica=1,step=3,call=stall "$CLT" "${R[@]}" "$tmp/stall" \
  --allreduce-timeout 4 >"$tmp/stall.txt" 2>&1
rc=$?
took=$((SECONDS - start))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 60 ] &&
  grep -Eq "rank [01] of 2 .*(replica 1 .*made no progress in it for 4 s|the other processes did not answer within 4 s)" "$tmp/stall.txt"; then
  ok "a replica hung in an overlapped step: the run ends in ${took}s, saying so"
else
  bad "a replica hung in an overlapped step (rc=$rc, ${took}s: $(tail -5 "$tmp/stall.txt"))"
fi

# --- --wire fp16 ----------------------------------------------------------------------
train fp16layers 1 2 0 24 --wire fp16
train fp16whole 0 2 0 24 --wire fp16
train fp16three 1 3 0 16 --wire fp16
same "--wire fp16: overlapped = the whole gradient after the backward pass, bit for bit" fp16whole fp16layers
if grep -q "different parameters" "$tmp"/fp16*.txt; then bad "--wire fp16: every process stays identical"; else
  ok "--wire fp16: every process stays identical (--check-replicas, 2 and 3 processes)"
fi
expect_close "--wire fp16 after 6 steps: close to float32" "$tmp/whole2/ckpt-1.npz" "$tmp/fp16whole/ckpt-1.npz" 2e-2
if cmp -s "$tmp/whole2/ckpt-1.npz" "$tmp/fp16whole/ckpt-1.npz"; then bad "--wire fp16 rounds (it gave float32's bits)"; else
  ok "--wire fp16 rounds: not float32's bits"
fi
T=(train --epochs 1 --train-limit 96 --test-limit 10 --devices 0 --checkpoint-every 0)
timeout 60 "${MPI[@]}" -np 1 "$CLT" "${T[@]}" : -np 1 "$CLT" "${T[@]}" --wire fp16 >"$tmp/refused.txt" 2>&1
if [ $? -ne 0 ] && grep -q "rank 1 differs from rank 0 in --wire (fp16 vs fp32)" "$tmp/refused.txt"; then
  ok "another --wire on rank 1 is refused"
else
  bad "another --wire on rank 1 is refused ($(tail -3 "$tmp/refused.txt"))"
fi
expect_fail "--wire fp8: one line naming the flag" "^cltrain: error: --wire fp8: expected fp32 or fp16$" \
  "$CLT" "${T[@]}" --wire fp8

finish
