#!/usr/bin/env bash
# The data a run trained on travels in its checkpoint: the README's bare
# `cltrain train --resume --epochs N` continues a --train-limit run bit for bit,
# a data flag given with another value is used with one note naming both values,
# a checkpoint without records (an older cltrain) resumes with a note, and a bare
# `cltrain eval` (the default --checkpoint) prints the test figures training
# printed for that epoch, on Fashion-MNIST and on a photo folder's validation split.
#   test_resume_data.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
MAKE_PHOTOS=$3
DATA=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/lib.sh"
run=(--train-limit 640 --test-limit 256 --seed 5 --batch-per-replica 32 --checkpoint-every 1)

# figures FILE N: epoch N's test loss and accuracy as its epoch line printed them
# ("Test" or "Validation"), as "LOSS ACCURACY".
figures() {
  sed -nE "s/^Epoch $2, .*(Test|Validation) Loss: ([0-9.]+), (Test|Validation) Accuracy: ([0-9.]+)$/\2 \4/p" "$1"
}
# eval_figures FILE: eval's "LOSS ACCURACY".
eval_figures() { echo "$(sed -n 's/^Loss: //p' "$1") $(sed -n 's/^Accuracy: //p' "$1")"; }
# notes FILE: the note lines of a stderr file.
notes() { grep -c '^cltrain: note: ' "$1"; }

# --- the README's resume example after a --train-limit run ---------------------------
"$CLT" train --epochs 2 "${run[@]}" --checkpoint-dir "$tmp/straight" >"$tmp/straight.txt" 2>&1 ||
  bad "straight run ($(tail -2 "$tmp/straight.txt"))"
"$CLT" train --epochs 1 "${run[@]}" --checkpoint-dir "$tmp/r" >/dev/null 2>&1 || bad "first epoch"
"$CLT" train --resume --epochs 2 --checkpoint-dir "$tmp/r" >"$tmp/resume.txt" 2>"$tmp/resume.err"
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/r/ckpt-2.npz" &&
  grep -q '640 training and 256 test images' "$tmp/resume.txt" && [ "$(notes "$tmp/resume.err")" -eq 0 ]; then
  ok "a bare --resume continues a --train-limit run bit for bit, without a note"
else
  bad "a bare --resume continues a --train-limit run ($(grep -E 'images|steps' "$tmp/resume.txt" | tr '\n' ' ')$(cat "$tmp/resume.err"))"
fi
if [ -n "$(figures "$tmp/straight.txt" 2)" ] && [ "$(figures "$tmp/straight.txt" 2)" = "$(figures "$tmp/resume.txt" 2)" ]; then
  ok "the resumed epoch prints the straight run's figures"
else
  bad "the resumed epoch prints the straight run's figures ($(figures "$tmp/resume.txt" 2) vs $(figures "$tmp/straight.txt" 2))"
fi
rec=$(realpath "$DATA")
if "$TOOL" list "$tmp/r/ckpt-2.npz" >/dev/null && /usr/bin/python3 - "$tmp/r/ckpt-2.npz" "$rec" <<'PY'; then
import sys, json, numpy as np
m = json.loads(str(np.load(sys.argv[1])["metadata"]))
want = {"path": sys.argv[2], "train_limit": 640, "test_limit": 256, "validation_split": 0,
        "global_batch": 32}
sys.exit(m.get("data") != want)
PY
  ok "the checkpoint records the data: resolved path, limits, split, global batch"
else
  bad "the checkpoint records the data"
fi

# --- flags given: the same value quietly, another with one note ------------------------
cp -r "$tmp/r" "$tmp/same"
ln -s "$DATA" "$tmp/fm-link"
"$CLT" train --resume --epochs 3 --data "$tmp/fm-link" --train-limit 640 --seed 5 --checkpoint-dir "$tmp/same" \
  >/dev/null 2>"$tmp/same.err" || bad "resume with the same flags ($(cat "$tmp/same.err"))"
if [ "$(notes "$tmp/same.err")" -eq 0 ]; then ok "the same values (--data by another path to it) give no note"; else
  bad "the same values give no note ($(cat "$tmp/same.err"))"
fi
note_case() { # NAME REGEX ARGS...: a resume from a copy of $tmp/r gives exactly one note matching REGEX
  local name=$1 re=$2
  shift 2
  rm -rf "$tmp/n"
  cp -r "$tmp/r" "$tmp/n"
  "$CLT" train --resume --epochs 3 --checkpoint-dir "$tmp/n" "$@" >"$tmp/n.txt" 2>"$tmp/n.err"
  local rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/n.err")" -eq 1 ] && grep -Eq -- "$re" "$tmp/n.err" &&
    grep -q '^Epoch 3, ' "$tmp/n.txt"; then
    ok "$name"
  else
    bad "$name (rc=$rc: $(cat "$tmp/n.err"))"
  fi
}
note_case "--train-limit of another value: one note, and the run continues" \
  "^cltrain: note: --train-limit 1280 differs from the checkpoint's 640; the run continues but is no longer exact$" \
  --train-limit 1280
if grep -q '1280 training and 256 test images' "$tmp/n.txt"; then ok "... on the flag's value"; else
  bad "... on the flag's value ($(grep images "$tmp/n.txt"))"
fi
note_case "--test-limit 0: all, noted" "^cltrain: note: --test-limit 0 \(all\) differs from the checkpoint's 256;" \
  --test-limit 0
note_case "--seed of another value: noted" "^cltrain: note: --seed 6 differs from the checkpoint's 5;" --seed 6
note_case "--batch-per-replica of another global batch: noted" \
  "^cltrain: note: --batch-per-replica 64 on 1 replica makes a global batch of 64, not the checkpoint's 32;" \
  --batch-per-replica 64
# On two replicas a bare --resume keeps the global batch: 16 each, no note (from
# the first epoch's checkpoint alone).
rm -rf "$tmp/n"
mkdir -p "$tmp/n"
cp "$tmp/r/ckpt-1.npz" "$tmp/n/"
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/n/checkpoint"
POCL_DEVICES="pthread pthread" "$CLT" train --resume --epochs 2 --devices 0,1 --checkpoint-dir "$tmp/n" \
  >"$tmp/n.txt" 2>"$tmp/n.err"
if grep -q '^Global batch 32 (16 per replica), 20 steps per epoch' "$tmp/n.txt" && [ "$(notes "$tmp/n.err")" -eq 0 ]; then
  ok "two replicas: the recorded global batch of 32 as 16 per replica, without a note"
else
  bad "two replicas keep the global batch ($(grep -E '^Global' "$tmp/n.txt")$(cat "$tmp/n.err"))"
fi
expect_close "... and end where the straight run does, up to rounding" "$tmp/straight/ckpt-2.npz" "$tmp/n/ckpt-2.npz" 1e-3
# On three it is still 32: slices of 11, 11 and 10.
rm -rf "$tmp/n3" && mkdir -p "$tmp/n3" && cp "$tmp/n/ckpt-1.npz" "$tmp/n/checkpoint" "$tmp/n3/"
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/n3/checkpoint"
POCL_DEVICES="pthread pthread pthread" "$CLT" train --resume --epochs 2 --devices 0,1,2 --split equal \
  --checkpoint-dir "$tmp/n3" >"$tmp/n3.txt" 2>"$tmp/n3.err"
if grep -q '^Global batch 32 (11 or 10 per replica), 20 steps per epoch' "$tmp/n3.txt" &&
  [ "$(notes "$tmp/n3.err")" -eq 0 ]; then
  ok "three replicas: the recorded global batch of 32 as 11, 11 and 10, without a note"
else
  bad "three replicas keep the global batch ($(grep -E '^Global' "$tmp/n3.txt")$(cat "$tmp/n3.err"))"
fi
expect_close "... and end where the straight run does, up to rounding" "$tmp/straight/ckpt-2.npz" "$tmp/n3/ckpt-2.npz" 1e-3
note_case "--global-batch of another value: noted" \
  "^cltrain: note: --global-batch 64 differs from the checkpoint's 32; the run continues but is no longer exact$" \
  --global-batch 64
# --global-batch N is --batch-per-replica N/replicas, to the byte; both given must agree.
POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 --train-limit 640 --test-limit 256 --seed 5 \
  --checkpoint-every 1 --devices 0,1 --split equal --global-batch 64 --checkpoint-dir "$tmp/g64" >"$tmp/g64.txt" 2>&1
POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 "${run[@]}" --devices 0,1 --split equal \
  --checkpoint-dir "$tmp/b32" >"$tmp/b32.txt" 2>&1
if grep -q '^Global batch 64 (32 per replica)' "$tmp/g64.txt" && cmp -s "$tmp/g64/ckpt-1.npz" "$tmp/b32/ckpt-1.npz"; then
  ok "--global-batch 64 on 2 replicas = --batch-per-replica 32, to the byte"
else
  bad "--global-batch 64 on 2 replicas ($(grep -E '^Global|error' "$tmp/g64.txt" "$tmp/b32.txt"))"
fi
expect_fail "--global-batch and --batch-per-replica that disagree: refused" \
  "^cltrain: error: --global-batch 48 and --batch-per-replica 32 disagree: 32 x 1 replica = 32 \(give one of the two\)$" \
  "$CLT" train --epochs 1 "${run[@]}" --devices 0 --global-batch 48 --checkpoint-dir "$tmp/both"
expect_fail "a global batch smaller than the replicas: refused" \
  "^cltrain: error: --global-batch 1: a global batch smaller than the run's 2 replicas" \
  env POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 --train-limit 64 --devices 0,1 --global-batch 1 \
  --checkpoint-dir "$tmp/one"
mkdir -p "$tmp/fm-copy"
ln -s "$DATA"/* "$tmp/fm-copy/"
note_case "--data of another folder: noted" "^cltrain: note: --data $tmp/fm-copy differs from the checkpoint's $rec;" \
  --data "$tmp/fm-copy"
if grep -q '^Global batch 32 (32 per replica), 20 steps per epoch' "$tmp/n.txt"; then ok "... the other flags still the checkpoint's"; else
  bad "... the other flags still the checkpoint's ($(grep '^Global' "$tmp/n.txt"))"
fi

# --- a checkpoint without data records (an older cltrain) -----------------------------
mkdir -p "$tmp/old"
"$TOOL" set-string "$tmp/r/ckpt-1.npz" "$tmp/old/ckpt-1.npz" metadata \
  "\"data\": {\"path\": \"$rec\", \"train_limit\": 640, \"test_limit\": 256, \"validation_split\": 0, \"global_batch\": 32}, " ''
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/old/checkpoint"
"$CLT" train --resume --epochs 2 --train-limit 640 --test-limit 256 --batch-per-replica 32 --checkpoint-every 1 \
  --checkpoint-dir "$tmp/old" \
  >"$tmp/old.txt" 2>"$tmp/old.err"
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/old/ckpt-2.npz" && [ "$(wc -l <"$tmp/old.err")" -eq 1 ] &&
  grep -q "^cltrain: note: $tmp/old/ckpt-1.npz does not record its data flags (an older cltrain)" "$tmp/old.err"; then
  ok "without records: one note, the flags as given, bit for bit (and its seed kept)"
else
  bad "without records ($(cat "$tmp/old.err"))"
fi

# --- eval by default: the newest checkpoint of ./training_checkpoints, the run's data -----
mkdir -p "$tmp/cwd" "$tmp/empty"
(cd "$tmp/cwd" && "$CLT" train --epochs 2 --train-limit 640 --test-limit 300 --checkpoint-every 1) \
  >"$tmp/cwd.txt" 2>&1 || bad "training into ./training_checkpoints ($(tail -2 "$tmp/cwd.txt"))"
(cd "$tmp/cwd" && "$CLT" eval) >"$tmp/eval.txt" 2>"$tmp/eval.err"
want=$(figures "$tmp/cwd.txt" 2)
if [ -n "$want" ] && [ "$(eval_figures "$tmp/eval.txt")" = "$want" ] && grep -q '; 300 test images' "$tmp/eval.txt" &&
  [ ! -s "$tmp/eval.err" ]; then
  ok "a bare cltrain eval prints the epoch's test figures ($want)"
else
  bad "a bare cltrain eval prints the epoch's test figures ($(eval_figures "$tmp/eval.txt") vs $want; $(cat "$tmp/eval.err"))"
fi
expect_ok "eval --test-limit 0 scores the whole test set" '; 10000 test images' \
  "$CLT" eval --checkpoint "$tmp/cwd/training_checkpoints" --test-limit 0
expect_ok "an explicit --test-limit overrides the checkpoint's" '; 100 test images' \
  "$CLT" eval --checkpoint "$tmp/cwd/training_checkpoints" --test-limit 100
expect_fail "eval without ./training_checkpoints names it" \
  '^cltrain: error: \./training_checkpoints: no such checkpoint folder \(the default --checkpoint' \
  bash -c "cd '$tmp/empty' && '$CLT' eval"
"$CLT" eval --checkpoint "$tmp/old/ckpt-1.npz" --test-limit 256 >"$tmp/oldeval.txt" 2>"$tmp/oldeval.err"
if grep -q '; 256 test images' "$tmp/oldeval.txt" && [ "$(wc -l <"$tmp/oldeval.err")" -eq 1 ] &&
  grep -q "^cltrain: note: $tmp/old/ckpt-1.npz does not record its run's data flags" "$tmp/oldeval.err"; then
  ok "eval of a checkpoint without records: the flags as given, one note"
else
  bad "eval of a checkpoint without records ($(cat "$tmp/oldeval.txt" "$tmp/oldeval.err"))"
fi

# --- a photo folder's validation split, trained with a relative --data ------------------
"$MAKE_PHOTOS" "$tmp/ph" 3 8 >/dev/null || bad "make_photos"
# A class name beyond Latin-1: the checkpoint's class names come back as written.
mv "$tmp/ph/class_1" "$tmp/ph/café ✓" || bad "rename a class"
photo=(--model resnet-small --image-size 32 --batch-per-replica 4 --validation-split 0.25 --seed 3
  --checkpoint-every 1)
(cd "$tmp" && "$CLT" train --data ph "${photo[@]}" --epochs 2 --checkpoint-dir p-straight) \
  >"$tmp/p1.txt" 2>&1 || bad "photos, straight ($(tail -2 "$tmp/p1.txt"))"
(cd "$tmp" && "$CLT" train --data ph "${photo[@]}" --epochs 1 --checkpoint-dir p) >/dev/null 2>&1 ||
  bad "photos, first epoch"
"$CLT" train --resume --epochs 2 --checkpoint-dir "$tmp/p" >"$tmp/p2.txt" 2>"$tmp/p2.err"
if cmp -s "$tmp/p-straight/ckpt-2.npz" "$tmp/p/ckpt-2.npz" && [ "$(notes "$tmp/p2.err")" -eq 0 ]; then
  ok "photos: a bare --resume from another folder continues bit for bit (path, split, seed, size)"
else
  bad "photos: a bare --resume ($(tail -2 "$tmp/p2.txt")$(cat "$tmp/p2.err"))"
fi
"$CLT" eval --checkpoint "$tmp/p" >"$tmp/pe.txt" 2>&1
want=$(figures "$tmp/p1.txt" 2)
if [ -n "$want" ] && [ "$(eval_figures "$tmp/pe.txt")" = "$want" ] && grep -q '; 6 test images' "$tmp/pe.txt"; then
  ok "photos: eval scores the run's validation split, to the digit ($want)"
else
  bad "photos: eval scores the run's validation split ($(eval_figures "$tmp/pe.txt") vs $want; $(tail -3 "$tmp/pe.txt"))"
fi
expect_ok "photos: eval --validation-split 0 scores the whole folder" '; 24 test images' \
  "$CLT" eval --checkpoint "$tmp/p" --validation-split 0

finish
