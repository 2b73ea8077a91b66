#!/usr/bin/env bash
# --lr-schedule and --reduce-lr-on-plateau through the command line (their
# arithmetic against Keras': test_schedules.c): the rate each epoch's last step
# used in the epoch lines and the log, counted in optimizer steps; a run stopped
# mid-epoch by a signal and resumed ends bit for bit where a straight run ends,
# the schedule and the plateau's state (wait, best) coming from the checkpoint;
# val_loss monitored on a photo folder's validation split; bad input refused in
# one line before any work.
#   test_lr_schedules.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE_PHOTOS=$2
. "$(dirname "$0")/lib.sh"
# 10 steps an epoch.
run=(--train-limit 640 --test-limit 128 --seed 3 --checkpoint-every 1)
cosine=(--lr-schedule cosine:decay_steps=20,warmup_target=0.003,warmup_steps=5)
plateau=(--reduce-lr-on-plateau monitor=loss,patience=2,min_delta=10,factor=0.5)

# near A B: A and B within 1e-6 relative.
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-6 * (b < 0 ? -b : b) + 1e-12) }'; }

# figures LOG: each epoch's losses, accuracies and learning rate.
figures() { grep -Eo '"(train_loss|train_accuracy|test_loss|test_accuracy|learning_rate)": [-0-9.e]+' "$1"; }

# newest DIR: the newest checkpoint of DIR.
newest() { ls "$1"/ckpt-*.npz | sort -t- -k2 -n | tail -1; }

# --- a schedule: the rates, and a run stopped mid-epoch then resumed ----------------
"$CLT" train "${run[@]}" --epochs 3 "${cosine[@]}" --checkpoint-dir "$tmp/cos" \
  --log "$tmp/cos.jsonl" >"$tmp/cos.txt" 2>&1 || bad "cosine run ($(tail -2 "$tmp/cos.txt"))"
# Epoch 1's last step is step 10, at 9 iterations: 4 steps into the decay after 5 of warm-up.
want=$(awk 'BEGIN { printf "%.9g", 0.003 * 0.5 * (1 + cos(3.14159265358979 * 4 / 20)) }')
got=$(field "$tmp/cos.jsonl" 1 learning_rate)
if near "$got" "$want" && [ "$(field "$tmp/cos.jsonl" 3 learning_rate)" = 0 ] &&
  grep -q "^Learning-rate schedule cosine:decay_steps=20,alpha=0,warmup_target=0.003,warmup_steps=5 (Keras' CosineDecay) from 0.001$" "$tmp/cos.txt" &&
  [ "$(grep -c ', learning rate ' "$tmp/cos.txt")" -eq 3 ]; then
  ok "cosine with warm-up: the plan line, epoch 1's rate $got (iterations 9), 0 at the end"
else
  bad "cosine rates (epoch 1 $got, not $want; $(grep -E 'Learning-rate|learning rate' "$tmp/cos.txt"))"
fi
CLTRAIN_TEST_SIGNAL=15 "$CLT" train "${run[@]}" --epochs 3 "${cosine[@]}" --checkpoint-dir "$tmp/cos-int" \
  --log "$tmp/cos-int.jsonl" >"$tmp/cos-int.txt" 2>&1
rc=$?
"$CLT" train "${run[@]}" --epochs 3 --resume --checkpoint-dir "$tmp/cos-int" --log "$tmp/cos-int.jsonl" \
  >"$tmp/cos-res.txt" 2>&1 || bad "cosine resume ($(tail -2 "$tmp/cos-res.txt"))"
out=
if [ $rc -eq 130 ] && out=$(same_state "$tmp/cos/ckpt-3.npz" "$(newest "$tmp/cos-int")") &&
  [ "$(figures "$tmp/cos.jsonl")" = "$(figures "$tmp/cos-int.jsonl")" ]; then
  ok "cosine: stopped at step 15 + a bare --resume = straight, bit for bit, the same logged rates"
else
  bad "cosine: stopped + resumed differs from straight (rc=$rc: ${out:-}; $(tail -1 "$tmp/cos-res.txt"))"
fi

# --- piecewise: --lr is values[0]; the boundary is inclusive, in iterations --------
"$CLT" train "${run[@]}" --epochs 2 --optimizer sgd --checkpoint-every 0 \
  --lr-schedule piecewise:boundaries=9/10,values=0.05/0.02/0.01 --log "$tmp/pw.jsonl" \
  >"$tmp/pw.txt" 2>&1 || bad "piecewise run ($(tail -2 "$tmp/pw.txt"))"
if grep -q "^Optimizer sgd: learning rate 0.05, momentum 0$" "$tmp/pw.txt" &&
  near "$(field "$tmp/pw.jsonl" 1 learning_rate)" 0.05 && near "$(field "$tmp/pw.jsonl" 2 learning_rate)" 0.01; then
  ok "piecewise: learning rate values[0], 0.05 at iterations 9, 0.01 after 10"
else
  bad "piecewise ($(grep -E '^Optimizer|learning rate' "$tmp/pw.txt"))"
fi

# --- ReduceLROnPlateau: min_delta 10 is never met, so with patience 2 the rate halves
# after epoch 3; a run stopped in epoch 3 must keep epoch 2's wait and best. --------
"$CLT" train "${run[@]}" --epochs 4 "${plateau[@]}" --checkpoint-dir "$tmp/pl" --log "$tmp/pl.jsonl" \
  >"$tmp/pl.txt" 2>&1 || bad "plateau run ($(tail -2 "$tmp/pl.txt"))"
if grep -q "^ReduceLROnPlateau monitor=loss,factor=0.5,patience=2,mode=auto,min_delta=10,cooldown=0,min_lr=0$" "$tmp/pl.txt" &&
  [ "$(grep -c 'ReduceLROnPlateau: loss has not improved in 2 epochs: learning rate 0.001 -> 0.0005$' "$tmp/pl.txt")" -eq 1 ] &&
  near "$(field "$tmp/pl.jsonl" 3 learning_rate)" 0.001 && near "$(field "$tmp/pl.jsonl" 4 learning_rate)" 0.0005; then
  ok "plateau: the plan line, one reduction after epoch 3, epoch 4 at 0.0005"
else
  bad "plateau ($(grep -E 'ReduceLROnPlateau|learning rate' "$tmp/pl.txt"))"
fi
CLTRAIN_TEST_SIGNAL=25 "$CLT" train "${run[@]}" --epochs 4 "${plateau[@]}" --checkpoint-dir "$tmp/pl-int" \
  >"$tmp/pl-int.txt" 2>&1
rc=$?
"$CLT" train "${run[@]}" --epochs 4 --resume "${plateau[@]}" --checkpoint-dir "$tmp/pl-int" \
  >"$tmp/pl-res.txt" 2>&1 || bad "plateau resume ($(tail -2 "$tmp/pl-res.txt"))"
out=
if [ $rc -eq 130 ] && grep -q "^ReduceLROnPlateau .*; best loss [0-9.]*, wait 1, cooldown 0$" "$tmp/pl-res.txt" &&
  out=$(same_state "$tmp/pl/ckpt-4.npz" "$(newest "$tmp/pl-int")"); then
  ok "plateau: stopped at step 25 + --resume (the same arguments) = straight, bit for bit"
else
  bad "plateau: stopped + resumed differs from straight (rc=$rc: ${out:-}; $(grep ReduceLROnPlateau "$tmp/pl-res.txt"))"
fi

# --- val_loss on a photo folder's validation split ----------------------------------
"$MAKE_PHOTOS" "$tmp/ph" 3 12 5 >/dev/null || bad "make_photos"
photos=(--data "$tmp/ph" --model resnet-small --image-size 32 --batch-per-replica 8 --checkpoint-every 0)
"$CLT" train "${photos[@]}" --validation-split 0.25 --epochs 2 \
  --reduce-lr-on-plateau monitor=val_loss,patience=1,min_delta=10 >"$tmp/ph.txt" 2>&1
if grep -q "ReduceLROnPlateau: val_loss has not improved in 1 epoch: learning rate 0.001 -> 0.0001$" "$tmp/ph.txt"; then
  ok "val_loss of a photo folder's validation split"
else
  bad "val_loss on photos ($(tail -3 "$tmp/ph.txt"))"
fi

# --- bad input: one line, before any work (no checkpoint folder made) ---------------
bad_flags() { # NAME REGEX FLAGS...
  local name=$1 re=$2
  shift 2
  expect_fail "$name" "$re" "$CLT" train --epochs 1 --train-limit 64 --checkpoint-dir "$tmp/none" "$@"
  if [ -e "$tmp/none" ]; then bad "$name: made the checkpoint folder"; fi
}
bad_flags "an unknown schedule" "^cltrain: error: --lr-schedule: unknown schedule 'step'" --lr-schedule step:x=1
bad_flags "an unknown schedule argument" "--lr-schedule exponential: unknown argument 'alpha' \(it takes decay_steps, decay_rate, staircase\)" \
  --lr-schedule exponential:decay_steps=10,decay_rate=0.9,alpha=0
bad_flags "a missing schedule argument" "--lr-schedule inverse_time: decay_rate is required" \
  --lr-schedule InverseTimeDecay:decay_steps=10
bad_flags "decay_steps 0" "--lr-schedule polynomial: decay_steps=0: expected an integer in \(0, 1e\+15\]" \
  --lr-schedule polynomial:decay_steps=0
bad_flags "piecewise with another --lr" "--lr-schedule piecewise takes its rates from values: --lr 0.2 is not values\[0\] 0.1" \
  --lr-schedule piecewise:boundaries=5,values=0.1/0.01 --lr 0.2
bad_flags "a factor of 1" "--reduce-lr-on-plateau: factor=1: expected a number in \(0, 1\)" \
  --reduce-lr-on-plateau factor=1
bad_flags "an unknown monitor" "--reduce-lr-on-plateau: monitor=val_acc: expected loss, accuracy, val_loss or val_accuracy" \
  --reduce-lr-on-plateau monitor=val_acc
bad_flags "a plateau with a schedule" "--reduce-lr-on-plateau: the learning rate follows --lr-schedule and cannot be set" \
  --lr-schedule cosine:decay_steps=10 --reduce-lr-on-plateau monitor=loss
bad_flags "val_loss on IDX files" "--reduce-lr-on-plateau: monitor=val_loss needs validation data: give --validation-split F" \
  --reduce-lr-on-plateau patience=3
expect_fail "val_accuracy without --validation-split" "monitor=val_accuracy needs validation data" \
  "$CLT" train "${photos[@]}" --epochs 1 --checkpoint-dir "$tmp/none" --reduce-lr-on-plateau monitor=val_accuracy
expect_fail "a schedule on resuming a plateau's checkpoint" "--lr-schedule: .*ckpt-4.npz records --reduce-lr-on-plateau, which cannot set a scheduled" \
  "$CLT" train "${run[@]}" --epochs 5 --resume --checkpoint-dir "$tmp/pl" --lr-schedule cosine:decay_steps=10
expect_fail "a plateau on resuming a schedule's checkpoint" \
  "--reduce-lr-on-plateau: .*ckpt-3.npz's learning rate follows --lr-schedule cosine and cannot be set" \
  "$CLT" train "${run[@]}" --epochs 4 --resume --checkpoint-dir "$tmp/cos" --reduce-lr-on-plateau monitor=loss

finish
