#!/usr/bin/env bash
# --early-stopping end to end on Fashion-MNIST with --validation-split: the run
# stops where Keras' rule says for the validation losses it printed, saves the
# best epoch's checkpoint whatever --checkpoint-every says and keeps it past
# --keep, records it beside the index; eval (bare: the restored best, --best, a
# file), export --best, predict --best and --resume after the stop; a resumed
# run continues the callback's state bit for bit; the errors, each one line
# before any work.
#   test_early_stopping.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE_PHOTOS=$2
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
run=(--train-limit 640 --test-limit 128 --validation-split 0.1 --batch-per-replica 32 --seed 5 --lr 0.01)

# --- a run that stops ---------------------------------------------------------------------
A=$tmp/a
"$CLT" train "${run[@]}" --epochs 15 --checkpoint-every 5 --keep 1 --log "$tmp/a.jsonl" --checkpoint-dir "$A" \
  --early-stopping monitor=val_loss,patience=2,restore_best_weights=true >"$tmp/a.txt" 2>"$tmp/a.err"
rc=$?
stop_line=$(grep '^Early stopping at epoch' "$tmp/a.txt")
re='^Early stopping at epoch ([0-9]+): val_loss did not improve \(min_delta 0\) for 2 epochs; best ([0-9.]+) at epoch ([0-9]+); restored its weights: .*/ckpt-([0-9]+)\.npz$'
if [ $rc -eq 0 ] && [[ $stop_line =~ $re ]] && [ ! -s "$tmp/a.err" ]; then
  stopped=${BASH_REMATCH[1]} best=${BASH_REMATCH[3]} k=${BASH_REMATCH[4]}
  ok "stops early, exit 0, one line: $stop_line"
else
  stopped=0 best=0 k=0
  bad "stops early (rc=$rc: $(tail -3 "$tmp/a.txt") $(cat "$tmp/a.err"))"
fi
# Keras' rule (float32 comparisons) on the validation losses the log records.
keras=$("$PY" - "$tmp/a.jsonl" <<'PY'
import json, sys
import numpy as np
losses = [json.loads(l)["test_loss"] for l in open(sys.argv[1])]
best, best_epoch, wait = None, 0, 0
for epoch, v in enumerate(losses):
    wait += 1
    if best is None or np.float32(v) < np.float32(best):
        best, best_epoch, wait = v, epoch, 0
    elif wait >= 2 and epoch > 0:
        print(epoch + 1, best_epoch + 1, len(losses))
        break
PY
)
if [ "$keras" = "$stopped $best $stopped" ]; then ok "... at Keras' epoch $stopped, best epoch $best, as the log's losses say"; else
  bad "... at Keras' epoch and best (Keras' rule on the log: stop, best, epochs run: '$keras'; cltrain: $stopped $best)"
fi
if grep -q '640 training and 128 validation images' "$tmp/a.txt" && grep -q '^Epoch 1, .*, Validation Loss: .*, Validation Accuracy: ' "$tmp/a.txt"; then
  ok "IDX --validation-split: validation images, Validation figures in the epoch lines"
else
  bad "IDX --validation-split naming ($(grep -E '^(Model|Epoch 1)' "$tmp/a.txt"))"
fi
files=$(cd "$A" && ls ckpt-*.npz | tr '\n' ' ')
newest=$(sed -n 's/^model_checkpoint_path: "\(ckpt-[0-9]*\)"$/\1/p' "$A/checkpoint")
if [ "$files" = "ckpt-$k.npz $newest.npz " ] && [ "ckpt-$k" != "$newest" ] &&
  grep -q "all_model_checkpoint_paths: \"ckpt-$k\"" "$A/checkpoint"; then
  ok "--keep 1 keeps the newest and the best, which the index lists ($files)"
else
  bad "--keep 1 keeps the newest and the best ($files; index: $(tr '\n' ' ' <"$A/checkpoint"))"
fi
if grep -q "^  saved $A/ckpt-$k.npz" "$tmp/a.txt" &&
  [ "$(sed -n "/^Epoch $best, /,/^Epoch/p" "$tmp/a.txt" | grep -c "saved $A/ckpt-$k.npz")" = 1 ]; then
  ok "the best epoch ($best) saved when found, though --checkpoint-every 5"
else
  bad "the best epoch saved when found ($(grep -E '^(Epoch|  saved)' "$tmp/a.txt" | tr '\n' ' '))"
fi
if "$PY" - "$A" "$k" "$best" "$stopped" "$newest" <<'PY'; then
import sys, json, numpy as np
d, k, best, stopped, newest = sys.argv[1:]
rec = dict(l.split(": ", 1) for l in open(d + "/best_checkpoint").read().splitlines())
es = json.loads(str(np.load(f"{d}/ckpt-{k}.npz")["metadata"]))["early_stopping"]
last = json.loads(str(np.load(f"{d}/{newest}.npz")["metadata"]))["early_stopping"]
assert rec["best_checkpoint_path"] == f'"ckpt-{k}"' and rec["monitor"] == '"val_loss"', rec
assert rec["epoch"] == best and float(rec["value"]) == es["best"] == last["best"], (rec, es)
assert rec["restored_in"] == f'"{newest}"', rec
assert es["best_epoch"] == int(best) and es["wait"] == 0 and es["stopped_epoch"] == 0, es
assert last["stopped_epoch"] == int(stopped) and last["wait"] == 2, last
assert last["restore_best_weights"] is True and last["patience"] == 2, last
PY
  ok "best_checkpoint names the best (value, epoch, restored_in the last); the metadata holds the state"
else
  bad "best_checkpoint and the metadata's state ($(cat "$A/best_checkpoint" | tr '\n' ' '))"
fi

# --- eval, export and --resume after it -----------------------------------------------------
# figures FILE N: epoch N's validation loss and accuracy as training printed them.
figures() { sed -nE "s/^Epoch $2, .*Validation Loss: ([0-9.]+), Validation Accuracy: ([0-9.]+)$/\1 \2/p" "$1"; }
eval_figures() { echo "$(sed -n 's/^Loss: //p' "$1") $(sed -n 's/^Accuracy: //p' "$1")"; }
"$CLT" eval --checkpoint "$A" >"$tmp/e.txt" 2>"$tmp/e.err"
if [ "$(eval_figures "$tmp/e.txt")" = "$(figures "$tmp/a.txt" "$best")" ] && grep -q "^Checkpoint $A/ckpt-$k.npz:" "$tmp/e.txt" &&
  [ "$(wc -l <"$tmp/e.err")" = 1 ] && grep -q "^cltrain: note: $A: its run ended restoring its best epoch's weights" "$tmp/e.err"; then
  ok "a bare eval scores the restored best, with a note: epoch $best's validation figures ($(eval_figures "$tmp/e.txt"))"
else
  bad "a bare eval scores the restored best ($(cat "$tmp/e.txt" "$tmp/e.err" | tr '\n' ' '); epoch $best: $(figures "$tmp/a.txt" "$best"))"
fi
expect_ok "eval --best: the best checkpoint, no note" "^Checkpoint $A/ckpt-$k.npz:" "$CLT" eval --checkpoint "$A" --best
[ -s "$tmp/err" ] && bad "... no note ($(cat "$tmp/err"))"
"$CLT" eval --checkpoint "$A/$newest.npz" >"$tmp/e.txt" 2>&1
if [ "$(eval_figures "$tmp/e.txt")" = "$(figures "$tmp/a.txt" "$stopped")" ]; then
  ok "eval of the newest's file: epoch $stopped's figures, as training printed them"
else
  bad "eval of the newest's file ($(eval_figures "$tmp/e.txt") vs $(figures "$tmp/a.txt" "$stopped"))"
fi
expect_ok "eval --validation-split 0: the test set (t10k) instead" '; 128 test images on' \
  "$CLT" eval --checkpoint "$A" --best --validation-split 0
expect_ok "export --best: the best checkpoint" "from $A/ckpt-$k.npz to" \
  "$CLT" export --checkpoint "$A" --best --onnx "$tmp/a.onnx"
"$MAKE_PHOTOS" --blank "$tmp/blank.png" 28 28
"$CLT" predict --checkpoint "$A" --best --format csv "$tmp/blank.png" >"$tmp/p-best.csv" 2>/dev/null
"$CLT" predict --checkpoint "$A/ckpt-$k.npz" --format csv "$tmp/blank.png" >"$tmp/p-file.csv" 2>/dev/null
if [ -s "$tmp/p-best.csv" ] && cmp -s "$tmp/p-best.csv" "$tmp/p-file.csv"; then
  ok "predict --best: the best checkpoint's probabilities"
else
  bad "predict --best ($(cat "$tmp/p-best.csv") vs $(cat "$tmp/p-file.csv"))"
fi
expect_ok "--resume after the stop: nothing to do, exit 0" \
  "^$A/$newest.npz: training stopped early at epoch $stopped \(--early-stopping\); nothing to do" \
  "$CLT" train --resume --epochs 20 --checkpoint-dir "$A"
expect_fail "eval --best in a folder without a best: one line naming it" \
  "^cltrain: error: --best: $tmp/plain records no best checkpoint" \
  bash -c "'$CLT' train ${run[*]} --epochs 1 --checkpoint-dir '$tmp/plain' >/dev/null 2>&1; '$CLT' eval --checkpoint '$tmp/plain' --best"
expect_fail "predict --best there too" "^cltrain: error: --best: $tmp/plain records no best checkpoint" \
  "$CLT" predict --checkpoint "$tmp/plain" --best "$tmp/blank.png"
expect_ok "... whose bare eval still works" "^Checkpoint $tmp/plain/ckpt-1.npz:" "$CLT" eval --checkpoint "$tmp/plain"
expect_fail "export --best of a file" "^cltrain: error: --best: $A/ckpt-$k.npz is a file; --best takes a checkpoint folder$" \
  "$CLT" export --checkpoint "$A/ckpt-$k.npz" --best --onnx "$tmp/x.onnx"
cp -r "$A" "$tmp/damaged"
echo 'best_checkpoint_path: ckpt-1' >"$tmp/damaged/best_checkpoint"
expect_fail "a damaged best_checkpoint: one line naming it" \
  "^cltrain: error: $tmp/damaged/best_checkpoint: not a best-checkpoint record \(line 1;" \
  "$CLT" eval --checkpoint "$tmp/damaged" --best
cp -r "$A" "$tmp/fresh"
"$CLT" train "${run[@]}" --epochs 1 --checkpoint-dir "$tmp/fresh" >/dev/null 2>&1
if [ ! -e "$tmp/fresh/best_checkpoint" ]; then ok "a fresh run into the folder drops the earlier run's best"; else
  bad "a fresh run drops the earlier run's best"
fi

# --- --resume continues the callback's state bit for bit ---------------------------------------
es=monitor=val_accuracy,patience=20,min_delta=0.001
"$CLT" train "${run[@]}" --epochs 4 --checkpoint-every 1 --checkpoint-dir "$tmp/s" --early-stopping "$es" \
  >/dev/null 2>&1 || bad "straight run"
"$CLT" train "${run[@]}" --epochs 2 --checkpoint-every 1 --checkpoint-dir "$tmp/r" --early-stopping "$es" \
  >/dev/null 2>&1 || bad "first two epochs"
"$CLT" train --resume --epochs 4 --checkpoint-dir "$tmp/r" >"$tmp/r.txt" 2>&1
if cmp -s "$tmp/s/ckpt-4.npz" "$tmp/r/ckpt-4.npz" && cmp -s "$tmp/s/best_checkpoint" "$tmp/r/best_checkpoint" &&
  grep -q '^Early stopping: monitor=val_accuracy,min_delta=0.001,patience=20,.*; best so far 0\.[0-9]* at epoch [12], \(0 epochs\|1 epoch\) since$' "$tmp/r.txt"; then
  ok "a bare --resume continues early stopping: the same checkpoint and best record, bit for bit"
else
  bad "--resume continues early stopping ($(grep '^Early' "$tmp/r.txt"); $(diff "$tmp/s/best_checkpoint" "$tmp/r/best_checkpoint"))"
fi
expect_fail "--resume with other --early-stopping arguments" \
  "^cltrain: error: --resume: $tmp/r/ckpt-4.npz was trained with --early-stopping monitor=val_accuracy,min_delta=0.001,patience=20,mode=auto,baseline=none,restore_best_weights=false,start_from_epoch=0, not patience=3$" \
  "$CLT" train --resume --epochs 5 --checkpoint-dir "$tmp/r" --early-stopping patience=3

# --- --checkpoint-every 0 saves the best epochs alone -------------------------------------------
"$CLT" train "${run[@]}" --epochs 2 --checkpoint-every 0 --checkpoint-dir "$tmp/z" --early-stopping monitor=loss \
  >"$tmp/z.txt" 2>&1
n=$(grep -c '^  saved ' "$tmp/z.txt")
if [ -e "$tmp/z/best_checkpoint" ] && [ "$n" -ge 1 ] && [ "$(ls "$tmp/z" | grep -c '^ckpt-')" = "$n" ] &&
  grep -q '^Best epoch [12]: loss [0-9.]*: .*/ckpt-[12]\.npz (--best)$' "$tmp/z.txt"; then
  ok "--checkpoint-every 0: the best epochs saved all the same ($n), the last line names the best"
else
  bad "--checkpoint-every 0 saves the best ($(ls "$tmp/z" | tr '\n' ' '); $(tail -2 "$tmp/z.txt"))"
fi

# --- errors: one line, before any work -------------------------------------------------------
expect_fail "monitor=val_loss without validation data" \
  "^cltrain: error: --early-stopping monitor=val_loss needs validation data: give --validation-split F \(the test set is never monitored\)$" \
  "$CLT" train --train-limit 64 --epochs 1 --checkpoint-dir "$tmp/none" --early-stopping patience=1
[ -e "$tmp/none" ] && bad "... and no checkpoint folder made"
expect_fail "an unknown key" "^cltrain: error: --early-stopping: unknown key 'verbose'" \
  "$CLT" train --epochs 1 --checkpoint-dir "$tmp/none" --early-stopping verbose=1
expect_fail "a bad value" "^cltrain: error: --early-stopping: mode=up: expected auto, min or max$" \
  "$CLT" train --epochs 1 --checkpoint-dir "$tmp/none" --early-stopping mode=up
[ -e "$tmp/none" ] && bad "... and none of them made a checkpoint folder"
finish
