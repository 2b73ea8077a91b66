#!/usr/bin/env bash
# Resuming across processes under mpirun (OpenMPI, processes on this host): each
# process with a --checkpoint-dir of its own, process 0 alone holding the
# checkpoint (it sends it, checked by a hash); the global batch kept when the
# number of processes changes (--global-batch); SIGTERM to every rank saving one
# mid-epoch checkpoint that resumes bit for bit (SIGTERM to mpirun:
# test_cluster_hosts.sh).
#   test_mpi_resume.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
. "$(dirname "$0")/lib.sh"

mpi_check "$CLT" || skip_exit
export POCL_DEVICES="pthread pthread pthread"
# One epoch is 6 steps of 48 (the last of 2 examples).
A=(train --split equal --train-limit 242 --test-limit 100 --seed 5 --checkpoint-every 1)

# run NAME NP DEVICES EPOCHS [flags]: NP processes (0: without mpirun), each
# with --checkpoint-dir $tmp/NAME (rank 0) or $tmp/NAME.rR (rank R > 0) of its own.
run() {
  local name=$1 np=$2 devices=$3 epochs=$4 r
  shift 4
  local cmd=("$CLT" "${A[@]}" --devices "$devices" --epochs "$epochs" "$@")
  if [ "$np" -eq 0 ]; then
    "${cmd[@]}" --checkpoint-dir "$tmp/$name" >"$tmp/$name.txt" 2>&1
  else
    local all=("${MPI[@]}" -np 1 "${cmd[@]}" --checkpoint-dir "$tmp/$name")
    for r in $(seq 1 $((np - 1))); do all+=(: -np 1 "${cmd[@]}" --checkpoint-dir "$tmp/$name.r$r"); done
    "${all[@]}" >"$tmp/$name.txt" 2>&1
  fi || bad "run $name ($(grep -m2 error "$tmp/$name.txt"))"
}
same_bits() {
  local d
  d=$("$TOOL" diff "$2" "$3" | awk '{ print $2 }')
  if [ "$d" = "0.000e+00" ]; then ok "$1"; else bad "$1 (max relative difference $d)"; fi
}

# --- --resume with a local folder per process ---------------------------------------
run straight 0 0,1 2 --global-batch 48
run local 2 0 1 --global-batch 48
[ -e "$tmp/local.r1" ] && bad "only process 0 writes checkpoints ($(ls -R "$tmp/local.r1"))" ||
  ok "only process 0 writes checkpoints: rank 1's --checkpoint-dir is never made"
run local 2 0 2 --resume
same_bits "2 processes, rank 1's --checkpoint-dir empty: resumed = straight, bit for bit" \
  "$tmp/straight/ckpt-2.npz" "$tmp/local/ckpt-2.npz"
if grep -q "^Resuming from $tmp/local/ckpt-1.npz: 1 epoch and 6 steps done" "$tmp/local.txt" &&
  [ ! -e "$tmp/local.r1" ]; then
  ok "... from process 0's checkpoint, nothing written on rank 1"
else
  bad "... from process 0's checkpoint ($(grep Resuming "$tmp/local.txt"); $(ls -A "$tmp/local.r1" 2>&1))"
fi

# A transfer that arrives damaged (a test hook flips a byte of rank 1's copy):
# every process stops at set-up, rank 1 naming the hash, and nothing is written.
cp -r "$tmp/local" "$tmp/damaged"
timeout 60 "${MPI[@]}" -np 1 "$CLT" "${A[@]}" --devices 0 --epochs 3 --resume --checkpoint-dir "$tmp/damaged" \
  : -np 1 env CLTRAIN_TEST_RESUME_DAMAGE=5000 "$CLT" "${A[@]}" --devices 0 --epochs 3 --resume \
  --checkpoint-dir "$tmp/damaged.r1" >"$tmp/damaged.txt" 2>&1
rc=$?
msg="--resume: the checkpoint rank 0 sent \($tmp/damaged/ckpt-2.npz, [0-9]+ bytes\) arrived damaged: hash [0-9a-f]{16}, rank 0's [0-9a-f]{16}$"
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -Eq "^cltrain: error: rank 1 of 2 \(.*\): $msg" "$tmp/damaged.txt" &&
  grep -Eq "^cltrain: error: rank 0 of 2 \(.*\): stopping because rank 1 failed: $msg" "$tmp/damaged.txt" &&
  [ ! -e "$tmp/damaged/ckpt-3.npz" ] && ! grep -q "^Epoch" "$tmp/damaged.txt"; then
  ok "a damaged transfer: one line naming rank 1 and the hashes, every rank stops, nothing saved"
else
  bad "a damaged transfer (rc=$rc: $(grep -v '^ \|^-' "$tmp/damaged.txt" | head -c 800))"
fi
timeout 60 "${MPI[@]}" -np 2 "$CLT" "${A[@]}" --devices 0 --epochs 3 --resume --checkpoint-dir "$tmp/none" \
  >"$tmp/none.txt" 2>&1
if grep -q "^cltrain: error: rank 0 of 2 .*: --resume: $tmp/none: no such checkpoint file or folder$" "$tmp/none.txt" &&
  grep -q "^cltrain: error: rank 1 of 2 .*: stopping because rank 0 failed: --resume: $tmp/none: no such" "$tmp/none.txt"; then
  ok "no checkpoint in process 0's folder: every rank stops, naming it"
else
  bad "no checkpoint in process 0's folder ($(grep error "$tmp/none.txt"))"
fi

# --- the global batch across layouts ---------------------------------------------------
# 2 processes -> 1 (one device: the whole batch), and 1 -> 2: the recorded global
# batch, the same data order, results within rounding of the straight run.
run one 0 0 2 --global-batch 48
cp -r "$tmp/local" "$tmp/to1" && rm "$tmp/to1/ckpt-2.npz" && printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/to1/checkpoint"
run to1 0 0 2 --resume
if grep -q '^Global batch 48 (48 per replica), 6 steps per epoch' "$tmp/to1.txt" && ! grep -q note "$tmp/to1.txt"; then
  ok "2 processes -> 1 process of one device: global batch 48 kept, without a note"
else
  bad "2 processes -> 1 ($(grep -E '^Global|note' "$tmp/to1.txt"))"
fi
expect_close "... and it ends where the straight run does, up to rounding" "$tmp/one/ckpt-2.npz" "$tmp/to1/ckpt-2.npz" 1e-3
cp -r "$tmp/one" "$tmp/to2" && rm "$tmp/to2/ckpt-2.npz" && printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/to2/checkpoint"
run to2 2 0 2 --resume
if grep -q '^Global batch 48 (24 per replica), 6 steps per epoch' "$tmp/to2.txt"; then ok "1 process -> 2: global batch 48 kept"; else
  bad "1 process -> 2 ($(grep -E '^Global' "$tmp/to2.txt"))"; fi
expect_close "... and it ends where the straight run does, up to rounding" "$tmp/one/ckpt-2.npz" "$tmp/to2/ckpt-2.npz" 1e-3
# 2 processes -> 3 with a global batch 3 does not divide: slices of 17, 17 and 16.
run odd1 0 0 2 --global-batch 50
run odd 2 0 1 --global-batch 50
run odd 3 0 2 --resume
if grep -q '^Global batch 50 (17 or 16 per replica), 5 steps per epoch' "$tmp/odd.txt" && ! grep -q note "$tmp/odd.txt"; then
  ok "2 processes -> 3: global batch 50 kept as slices of 17, 17 and 16"
else
  bad "2 processes -> 3 ($(grep -E '^Global|note' "$tmp/odd.txt"))"
fi
expect_close "... and it ends where the straight run does, up to rounding" "$tmp/odd1/ckpt-2.npz" "$tmp/odd/ckpt-2.npz" 1e-3

# --- SIGTERM across processes ------------------------------------------------------------
# Every rank gets SIGTERM during step 9 (epoch 2, step 3; a test hook raises it):
# one checkpoint, saved mid-epoch by process 0; resumed by 2 processes or by one
# of 2 devices it ends where the straight run does, bit for bit.
"${MPI[@]}" -x CLTRAIN_TEST_SIGNAL=9:TERM -np 1 "$CLT" "${A[@]}" --devices 0 --epochs 2 --global-batch 48 \
  --checkpoint-dir "$tmp/term" : -np 1 "$CLT" "${A[@]}" --devices 0 --epochs 2 --global-batch 48 \
  --checkpoint-dir "$tmp/term.r1" >"$tmp/term.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c "stopped by SIGTERM" "$tmp/term.txt")" -eq 1 ] &&
  grep -q "^cltrain: stopped by SIGTERM at epoch 2, step 3 of 6; saved $tmp/term/ckpt-2.npz" "$tmp/term.txt" &&
  [ ! -e "$tmp/term.r1" ]; then
  ok "SIGTERM to every rank: process 0 saves once, mid-epoch (epoch 2, step 3)"
else
  bad "SIGTERM to every rank (rc=$rc: $(grep -E 'stopped|error' "$tmp/term.txt"))"
fi
cp -r "$tmp/term" "$tmp/term1"
run term 2 0 2 --resume
same_bits "... resumed by 2 processes = straight, bit for bit" "$tmp/straight/ckpt-2.npz" "$tmp/term/ckpt-3.npz"
run term1 0 0,1 2 --resume
same_bits "... resumed by one process of 2 devices = straight, bit for bit" "$tmp/straight/ckpt-2.npz" "$tmp/term1/ckpt-3.npz"

finish
