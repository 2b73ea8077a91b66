#!/usr/bin/env bash
# Ctrl-C keeps progress: the first SIGINT/SIGTERM finishes the current step,
# saves a checkpoint (mid-epoch: with the data position and the epoch's running
# sums) and exits 130/143; --resume then ends bit for bit where a straight run
# ends, with the same epoch figures. A second signal ends the process at once.
# CLTRAIN_TEST_SIGNAL=N raises the signal during optimizer step N (a real
# signal through the real handler, at a chosen instant).
#   test_interrupt.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE_PHOTOS=$2
. "$(dirname "$0")/lib.sh"
run=(--train-limit 1280 --test-limit 256 --epochs 2 --checkpoint-every 2 --seed 3)

# epoch_lines FILE: the epoch lines' figures (not the times).
epoch_lines() { grep -E '^Epoch [0-9]+, Loss' "$1"; }

"$CLT" train "${run[@]}" --checkpoint-dir "$tmp/straight" --log "$tmp/straight.jsonl" \
  >"$tmp/straight.txt" 2>&1 || bad "straight run ($(tail -2 "$tmp/straight.txt"))"

# --- SIGINT mid-epoch (step 27 = epoch 2, step 7 of 20), then --resume ----------------
CLTRAIN_TEST_SIGNAL=27 "$CLT" train "${run[@]}" --checkpoint-dir "$tmp/int" --log "$tmp/int.jsonl" \
  >"$tmp/int.txt" 2>"$tmp/int.err"
rc=$?
if [ $rc -eq 130 ] && grep -q 'stopped by SIGINT at epoch 2, step 7 of 20; saved .*ckpt-1.npz' "$tmp/int.err" &&
  [ "$(grep -c 'cltrain: error' "$tmp/int.err")" -eq 0 ]; then
  ok "SIGINT mid-epoch: exit 130, says where it saved"
else
  bad "SIGINT mid-epoch (rc=$rc: $(cat "$tmp/int.err"))"
fi
if [ -f "$tmp/int/ckpt-1.npz" ] && [ "$(ls "$tmp/int" | grep -c tmp)" -eq 0 ]; then
  ok "the mid-epoch checkpoint is in place, no temp files"
else
  bad "the mid-epoch checkpoint ($(ls -a "$tmp/int"))"
fi
# The saved state: 27 optimizer steps, 1 epoch done, 7 steps of epoch 2 with their sums.
got=$(/usr/bin/python3 -c "
import numpy as np; c = np.load('$tmp/int/ckpt-1.npz')
print(int(c['optimizer/iterations']), int(c['epoch']), int(c['data/epoch_step']), c['data/epoch_sums'].shape)" 2>&1)
if [ "$got" = "27 1 7 (7, 2)" ]; then ok "saved mid-epoch: steps 27, epoch 1, epoch_step 7"; else
  bad "saved mid-epoch state ($got)"
fi
"$CLT" eval --checkpoint "$tmp/int" --test-limit 256 >"$tmp/eval.txt" 2>&1 &&
  ok "the mid-epoch checkpoint evaluates" || bad "eval of the mid-epoch checkpoint ($(tail -1 "$tmp/eval.txt"))"
"$CLT" train "${run[@]}" --checkpoint-dir "$tmp/int" --log "$tmp/int.jsonl" --resume \
  >"$tmp/resumed.txt" 2>&1 || bad "resume after SIGINT ($(tail -2 "$tmp/resumed.txt"))"
if out=$(same_state "$tmp/straight/ckpt-1.npz" "$tmp/int/ckpt-2.npz"); then
  ok "interrupted + resumed = straight, bit for bit (parameters, moments, counters)"
else
  bad "interrupted + resumed differs from straight: $out"
fi
if [ "$(epoch_lines "$tmp/straight.txt" | tail -1)" = "$(epoch_lines "$tmp/resumed.txt")" ] &&
  [ "$(wc -l <"$tmp/int.jsonl")" -eq 2 ] &&
  [ "$(field "$tmp/int.jsonl" 2 train_loss)" = "$(field "$tmp/straight.jsonl" 2 train_loss)" ]; then
  ok "the resumed epoch reports the whole epoch's figures, the log has each epoch once"
else
  bad "resumed epoch figures ($(epoch_lines "$tmp/resumed.txt") vs $(epoch_lines "$tmp/straight.txt" | tail -1))"
fi

# --- SIGTERM in the last step of epoch 1: saved at the epoch's end, exit 143 -----------
CLTRAIN_TEST_SIGNAL=20:TERM "$CLT" train "${run[@]}" --checkpoint-dir "$tmp/term" \
  >"$tmp/term.txt" 2>"$tmp/term.err"
rc=$?
if [ $rc -eq 143 ] && grep -q 'stopped by SIGTERM at the end of epoch 1; saved' "$tmp/term.err" &&
  grep -q '^Epoch 1, Loss' "$tmp/term.txt"; then
  ok "SIGTERM in an epoch's last step: the epoch is evaluated and saved, exit 143"
else
  bad "SIGTERM at an epoch's end (rc=$rc: $(cat "$tmp/term.err"))"
fi
"$CLT" train "${run[@]}" --checkpoint-dir "$tmp/term" --resume >"$tmp/term2.txt" 2>&1
if out=$(same_state "$tmp/straight/ckpt-1.npz" "$tmp/term/ckpt-2.npz"); then
  ok "stopped at an epoch's end + resumed = straight, bit for bit"
else
  bad "stopped at an epoch's end + resumed: $out"
fi

# --- two replicas, photos (decoders begun mid-epoch) -----------------------------
"$MAKE_PHOTOS" "$tmp/photos" 3 12 >/dev/null || bad "make_photos"
photo=(--data "$tmp/photos" --image-size 32 --model resnet-small --epochs 2 --batch-per-replica 4
  --split equal --checkpoint-every 2 --validation-split 0.25)
export POCL_DEVICES="pthread pthread"
"$CLT" train "${photo[@]}" --checkpoint-dir "$tmp/p-straight" >"$tmp/p1.txt" 2>&1 ||
  bad "photos, straight ($(tail -2 "$tmp/p1.txt"))"
CLTRAIN_TEST_SIGNAL=6 "$CLT" train "${photo[@]}" --checkpoint-dir "$tmp/p-int" >"$tmp/p2.txt" 2>&1
rc=$?
"$CLT" train "${photo[@]}" --checkpoint-dir "$tmp/p-int" --resume >"$tmp/p3.txt" 2>&1 ||
  bad "photos, resume ($(tail -2 "$tmp/p3.txt"))"
if [ $rc -eq 130 ] && out=$(same_state "$tmp/p-straight/ckpt-1.npz" "$tmp/p-int/ckpt-2.npz"); then
  ok "two replicas on photos: stopped mid-epoch + resumed = straight, bit for bit"
else
  bad "two replicas on photos (rc=$rc: ${out:-}; $(tail -2 "$tmp/p2.txt"))"
fi
unset POCL_DEVICES

# --- a signal during set-up, and a second signal ----------------------------------------
# Before the first step nothing has changed: exit 130 without saving. A second
# signal ends the process at once (by the signal: no "stopped by" line).
big=(--epochs 50 --checkpoint-dir "$tmp/setup")
"$CLT" train "${big[@]}" >"$tmp/s.txt" 2>"$tmp/s.err" &
pid=$!
sleep 0.3
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && grep -Eq 'stopped by SIGINT (before the first step|at epoch 1, step)' "$tmp/s.err"; then
  ok "SIGINT while starting: exit 130 with a clear line"
else
  bad "SIGINT while starting (rc=$rc: $(cat "$tmp/s.err"))"
fi
# With an empty PoCL cache set-up compiles for seconds, so both signals land in
# it: with a warm one it had become short enough (0.3-0.4 s) for the first
# signal's clean exit to beat the second.
POCL_CACHE_DIR="$tmp/pocl-empty" "$CLT" train "${big[@]}" --checkpoint-dir "$tmp/twice" \
  >"$tmp/t.txt" 2>"$tmp/t.err" &
pid=$!
sleep 0.3
kill -INT $pid
sleep 0.01
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
if [ $rc -eq 130 ] && ! grep -q 'stopped by' "$tmp/t.err" && [ ! -e "$tmp/twice/ckpt-1.npz" ]; then
  ok "a second SIGINT aborts at once"
else
  bad "a second SIGINT (rc=$rc: $(cat "$tmp/t.err"))"
fi
finish
