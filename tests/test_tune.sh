#!/usr/bin/env bash
# The tuner through the command line: cltrain tune times the reference CNN's
# convolution passes into a pinned file and prints each choice, a second run
# takes them and the products' tilings from it without timing or building a
# net; cltrain train --tune-file runs the file's
# algorithms (--verbose names them; the log and the checkpoint record them),
# and a resumed run keeps the recorded ones even with --tune off, bit for bit;
# two replicas made to run different algorithms (a checkpoint's record) stay
# identical (--check-replicas); an empty file is filled between epochs; with
# --tune off or a budget of 0 nothing is tuned; bad values are one error line;
# a Keras model file tunes at its own input and classes. In the step: cltrain
# tune ends with the whole step's verdict and the file records it per shape
# ("confirmed" or "kept default"); results timed alone (no verdict: an older
# cltrain) are tuned again; training tunes between epochs without changing
# what the run computes (its first checkpoint's arrays are --tune off's) and
# a resumed run continues it bit for bit; a budget too short for an epoch
# goes on after the next where it stopped.
#   test_tune.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"
unset CLTRAIN_TUNE CLTRAIN_WINOGRAD
PY=/usr/bin/python3
small=(--train-limit 192 --test-limit 64 --seed 3 --checkpoint-every 1 --batch-per-replica 32)
pin="$tmp/pin.json"

# --- cltrain tune ---------------------------------------------------------------------
"$CLT" tune --model fmnist-cnn --batch 32 --tune-file "$pin" >"$tmp/tune1.txt" 2>&1 ||
  bad "cltrain tune ($(tail -2 "$tmp/tune1.txt"))"
if [ "$(grep -cE '^  conv2d_1 +(fwd|dw|dx) .*tuned, 4 candidates' "$tmp/tune1.txt")" = 3 ] &&
  grep -q "3 passes: 3 tuned, 0 cached" "$tmp/tune1.txt"; then
  ok "cltrain tune times the three passes of the 3x3 layer (4 candidates each)"
else
  bad "cltrain tune times the three passes ($(cat "$tmp/tune1.txt"))"
fi
"$CLT" tune --model fmnist-cnn --batch 32 --tune-file "$pin" >"$tmp/tune2.txt" 2>&1
if grep -q "3 passes: 0 tuned, 3 cached" "$tmp/tune2.txt" &&
  grep -qE "GEMM shapes: 0 tuned, [0-9]+ cached, [0-9]+ at the default \(no net built\)" "$tmp/tune2.txt"; then
  ok "a second cltrain tune takes every pass and product from the file, building no net"
else
  bad "a second cltrain tune takes every pass and product from the file ($(cat "$tmp/tune2.txt"))"
fi
if grep -qE '^  step: [0-9.]+ ms default, [0-9.]+ ms tuned, [0-9.]+x: (confirmed|kept default) ' "$tmp/tune1.txt" ||
  grep -q '^  step: kept default (the current algorithms were the fastest in the step)' "$tmp/tune1.txt"; then
  ok "cltrain tune ends with the whole step's verdict"
else
  bad "cltrain tune ends with the whole step's verdict ($(tail -1 "$tmp/tune1.txt"))"
fi
verdicts=$($PY - "$pin" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(sorted({r.get("decision", "") + "/" + r.get("method", "")
              for k, r in d["results"].items() if k.startswith("conv ")}))
EOF
)
case "$verdicts" in
"['confirmed/in step']" | "['kept default/in step']") ok "the file records the verdict per shape ($verdicts)" ;;
*) bad "the file records the verdict per shape ($verdicts)" ;;
esac
# An older file: results timed alone, no verdict: tuned again in the step.
$PY - "$pin" "$tmp/old.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"].values():
    for k in ("method", "decision", "why", "step_ms", "default_step_ms"):
        r.pop(k, None)
json.dump(d, open(sys.argv[2], "w"))
EOF
"$CLT" tune --model fmnist-cnn --batch 32 --tune-file "$tmp/old.json" >"$tmp/tune_old.txt" 2>&1
decided=$($PY - "$tmp/old.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(1 for k, r in d["results"].items() if k.startswith("conv ") and "decision" in r))
EOF
)
if grep -q "3 passes: 3 tuned, 0 cached" "$tmp/tune_old.txt" && [ "$decided" = 3 ]; then
  ok "results timed alone (an older file) are read, and tuned again in the step"
else
  bad "an older file tuned again ($(cat "$tmp/tune_old.txt"))"
fi

# The file's choices made the ones no default takes: F(2x2) forward, F(4x4)
# weight gradient, im2col input gradient.
$PY - "$pin" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
want = {"fwd": "winograd2", "dw": "winograd4", "dx": "im2col"}
for key, r in d["results"].items():
    if key.startswith("conv "):  # the products' tilings ("gemm ...") stay as tuned
        r["variant"] = want[key.split()[1]]
json.dump(d, open(sys.argv[1], "w"))
EOF

# --- train with the pinned file ------------------------------------------------------------
"$CLT" train --epochs 2 "${small[@]}" --tune-file "$pin" --verbose --checkpoint-dir "$tmp/straight" \
  --log "$tmp/straight.jsonl" >"$tmp/straight.txt" 2>&1 || bad "training with --tune-file ($(tail -2 "$tmp/straight.txt"))"
chosen="conv2d_1: forward winograd2, weight gradient winograd4, input gradient im2col"
if grep -q "Replica 0: $chosen" "$tmp/straight.txt"; then
  ok "--tune-file: the file's algorithms run (--verbose names them)"
else
  bad "--tune-file: the file's algorithms run ($(grep conv2d_1 "$tmp/straight.txt"))"
fi
if [ "$(grep -c '"conv_algorithms": \["0 conv2d_1 winograd2 winograd4 im2col"\]' "$tmp/straight.jsonl")" = 2 ]; then
  ok "the log records each epoch's algorithms"
else
  bad "the log records each epoch's algorithms ($(grep -o '"conv_algorithms[^]]*]' "$tmp/straight.jsonl"))"
fi
record() {
  $PY -c 'import json, sys, numpy as np
print(json.loads(str(np.load(sys.argv[1])["metadata"])).get("conv_algorithms"))' "$1"
}
if [ "$(record "$tmp/straight/ckpt-1.npz")" = "['0 conv2d_1 winograd2 winograd4 im2col']" ]; then
  ok "the checkpoint records them"
else
  bad "the checkpoint records them ($(record "$tmp/straight/ckpt-1.npz"))"
fi

# --- resume: the record, not the cache or the defaults -------------------------------------
"$CLT" train --epochs 1 "${small[@]}" --tune-file "$pin" --checkpoint-dir "$tmp/resumed" >/dev/null 2>&1
"$CLT" train --epochs 2 --resume "${small[@]}" --tune off --verbose --checkpoint-dir "$tmp/resumed" \
  >"$tmp/resumed.txt" 2>&1
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/resumed/ckpt-2.npz" && grep -q "Replica 0: $chosen" "$tmp/resumed.txt"; then
  ok "1 epoch + resume (--tune off) = 2 epochs, bit for bit, on the recorded algorithms"
else
  bad "1 epoch + resume = 2 epochs, bit for bit ($(grep conv2d_1 "$tmp/resumed.txt"; tail -2 "$tmp/resumed.txt"))"
fi

# --- two replicas, different algorithms --------------------------------------------------
POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 --devices 0,1 --split equal "${small[@]}" \
  --tune off --checkpoint-dir "$tmp/two" >/dev/null 2>&1 || bad "training on two replicas"
$PY - "$tmp/two/ckpt-1.npz" <<'EOF'
import json, sys
import numpy as np
z = np.load(sys.argv[1])
members = {k: z[k] for k in z.files}
meta = json.loads(str(members["metadata"]))
meta["conv_algorithms"] = ["0 conv2d_1 winograd4 winograd4 winograd4",
                           "1 conv2d_1 im2col im2col in_place"]
members["metadata"] = np.array(json.dumps(meta))
np.savez(sys.argv[1], **members)
EOF
if POCL_DEVICES="pthread pthread" "$CLT" train --epochs 2 --resume --devices 0,1 --split equal \
  "${small[@]}" --tune off --check-replicas --verbose --checkpoint-dir "$tmp/two" >"$tmp/two.txt" 2>&1 &&
  grep -q "Replica 0: conv2d_1: forward winograd4, weight gradient winograd4, input gradient winograd4" "$tmp/two.txt" &&
  grep -q "Replica 1: conv2d_1: forward im2col, weight gradient im2col, input gradient in_place" "$tmp/two.txt"; then
  ok "two replicas on different algorithms stay identical (--check-replicas)"
else
  bad "two replicas on different algorithms stay identical ($(grep -E 'conv2d_1|error' "$tmp/two.txt"))"
fi

# --- tuned between epochs ------------------------------------------------------------------
# An empty file: the first epoch runs the defaults, the winners are timed after
# it and written, and the checkpoint records what the second epoch runs.
"$CLT" train --epochs 2 "${small[@]}" --tune-file "$tmp/fresh.json" --checkpoint-dir "$tmp/fresh" \
  --log "$tmp/fresh.jsonl" --verbose >"$tmp/fresh.txt" 2>&1 || bad "training with an empty tuning file"
first=$(sed -n 1p "$tmp/fresh.jsonl" | grep -o '"conv_algorithms": \[[^]]*\]')
second=$(sed -n 2p "$tmp/fresh.jsonl" | grep -o '"conv_algorithms": \[[^]]*\]' | grep -o '0 conv2d_1[a-z0-9_ ]*')
if [ "$first" = '"conv_algorithms": ["0 conv2d_1 in_place in_place in_place"]' ] &&
  [ "$(grep -c '"conv ' "$tmp/fresh.json" 2>/dev/null)" = 3 ] &&
  [ "$(record "$tmp/fresh/ckpt-1.npz")" = "['$second']" ]; then
  ok "tuned between epochs: defaults first, the file written, the record what runs next ($second)"
else
  bad "tuned between epochs ($first; $second; $(record "$tmp/fresh/ckpt-1.npz"))"
fi
# The probes change nothing the run computes: epoch 1's checkpoint holds --tune
# off's arrays; and a resumed run continues the tuned one bit for bit.
"$CLT" train --epochs 1 "${small[@]}" --tune off --checkpoint-dir "$tmp/untuned" >/dev/null 2>&1
if same_arrays "$tmp/fresh/ckpt-1.npz" "$tmp/untuned/ckpt-1.npz" >/dev/null; then
  ok "tuning in the step leaves the weights and the optimizer state as --tune off's"
else
  bad "tuning in the step leaves the weights and the optimizer state as --tune off's"
fi
mkdir -p "$tmp/fresh_resumed"
cp "$tmp/fresh/ckpt-1.npz" "$tmp/fresh_resumed/"
printf 'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n' \
  >"$tmp/fresh_resumed/checkpoint"
"$CLT" train --epochs 2 --resume "${small[@]}" --tune off --checkpoint-dir "$tmp/fresh_resumed" \
  >/dev/null 2>&1
if cmp -s "$tmp/fresh/ckpt-2.npz" "$tmp/fresh_resumed/ckpt-2.npz"; then
  ok "a run tuned in the step: 1 epoch + resume = 2 epochs, bit for bit"
else
  bad "a run tuned in the step: 1 epoch + resume = 2 epochs, bit for bit"
fi
if grep -qE "^Replica 0: tuning in the step: " "$tmp/fresh.txt"; then
  ok "--verbose says the step's verdict"
else
  bad "--verbose says the step's verdict ($(grep -i tuning "$tmp/fresh.txt"))"
fi

# --- nothing tuned -----------------------------------------------------------------------
for how in "--tune off" "--tune-budget 0"; do
  name=$(tr -d ' -' <<<"$how")
  # shellcheck disable=SC2086
  "$CLT" train --epochs 2 "${small[@]}" $how --tune-file "$tmp/$name.json" --checkpoint-dir "$tmp/$name" \
    --log "$tmp/$name.jsonl" >/dev/null 2>&1 || bad "training with $how"
  if [ ! -e "$tmp/$name.json" ] &&
    [ "$(grep -c '"conv_algorithms": \["0 conv2d_1 in_place in_place in_place"\]' "$tmp/$name.jsonl")" = 2 ]; then
    ok "$how: the defaults throughout, nothing written"
  else
    bad "$how: the defaults throughout ($(grep -o '"conv_algorithms[^]]*]' "$tmp/$name.jsonl"))"
  fi
done

# A budget too short for the tuning (per epoch): it goes on after each epoch
# where it stopped, the defaults running until its verdict.
"$CLT" train --epochs 5 "${small[@]}" --tune-budget 0.05 --tune-file "$tmp/short.json" --verbose \
  --checkpoint-dir "$tmp/short" --log "$tmp/short.jsonl" >"$tmp/short.txt" 2>&1 ||
  bad "training with a short budget"
steps=$(grep -o 'after the next epoch ([0-9]* probe steps so far' "$tmp/short.txt" | grep -o '[0-9]*')
pending=$(wc -w <<<"$steps")
sorted=$(sort -n -u <<<"$steps" | tr '\n' ' ')
if [ "$pending" -ge 2 ] && [ "$sorted" = "$(tr '\n' ' ' <<<"$steps")" ]; then
  ok "a budget too short: the tuning goes on after each epoch where it stopped ($pending epochs, steps $sorted)"
else
  bad "a budget too short: goes on after each epoch ($(grep -i 'tuning in the step' "$tmp/short.txt"))"
fi
# The epochs after a tuning not done (pending, or ended in the checks) ran the defaults.
stay=$(grep -c '^Replica 0: tuning in the step: .*; the algorithms stay' "$tmp/short.txt")
if [ "$(head -n "$stay" "$tmp/short.jsonl" | grep -c '"conv_algorithms": \["0 conv2d_1 in_place in_place in_place"\]')" = "$stay" ]; then
  ok "until its verdict the defaults run"
else
  bad "until its verdict the defaults run ($(grep -o '"conv_algorithms[^]]*]' "$tmp/short.jsonl"))"
fi

expect_fail "--tune on refused" "--tune on: expected auto or off" \
  "$CLT" train --epochs 1 --train-limit 64 --test-limit 64 --checkpoint-every 0 --tune on
CLTRAIN_TUNE=yes expect_fail "CLTRAIN_TUNE=yes refused" "CLTRAIN_TUNE=yes: expected auto or off" \
  "$CLT" train --epochs 1 --train-limit 64 --test-limit 64 --checkpoint-every 0
expect_fail "cltrain tune of an unknown model refused" "--model nonet: expected a built-in model" \
  "$CLT" tune --model nonet
expect_fail "cltrain tune of a missing model file refused" "x.json: cannot open" \
  "$CLT" tune --model x.json

# --- a Keras model file: its own input and classes ------------------------------------------
keras="$(dirname "$0")/models/zoo_resnet/model.json"
"$CLT" tune --model "$keras" --batch 4 --tune-file "$tmp/keras.json" >"$tmp/keras.txt" 2>&1 ||
  bad "cltrain tune of a Keras file ($(tail -2 "$tmp/keras.txt"))"
if grep -q "^Tuning .*zoo_resnet/model.json at 32x32x3" "$tmp/keras.txt" &&
  grep -qE '^  conv1_conv +fwd ' "$tmp/keras.txt" &&
  [ "$(grep -E '^  conv3_block[12]_2_conv +fwd ' "$tmp/keras.txt" | awk '{print $3}' | sort -u | wc -l)" = 1 ] &&
  grep -q '^  step: ' "$tmp/keras.txt"; then
  ok "cltrain tune of a Keras file: its own input, each conv's passes, repeated shapes alike"
else
  bad "cltrain tune of a Keras file ($(head -5 "$tmp/keras.txt"))"
fi
expect_fail "cltrain tune of a Keras file at another size than its own refused" \
  "the model takes 32x32x3 images" "$CLT" tune --model "$keras" --image-size 48 --tune-file "$tmp/k48.json"
expect_fail "cltrain tune of a Keras file with other classes refused" "not the 7 class logits" \
  "$CLT" tune --model "$keras" --classes 7 --tune-file "$tmp/keras7.json"
finish
