#!/usr/bin/env bash
# Checkpoints through the command line: saving and the index, eval reproducing
# the training-time test figures, an independent NumPy reading of the Keras-layout
# weights, exact resume, resume on another device set, the NaN guard, every kind
# of bad checkpoint refused with one error line (non-finite values, unexpected
# members, an index naming a file elsewhere, ...), numpy.savez_compressed files
# read, and one trainer per checkpoint folder.
#   test_checkpoint.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
DATA=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/lib.sh"
small=(--train-limit 640 --test-limit 300 --seed 5)

# --- saving, eval, NumPy ------------------------------------------------------------
"$CLT" train --epochs 3 "${small[@]}" --checkpoint-dir "$tmp/run" --checkpoint-every 1 --keep 2 \
  --log "$tmp/run.jsonl" >"$tmp/train.txt" 2>&1 || bad "training with checkpoints ($(tail -3 "$tmp/train.txt"))"
if [ -f "$tmp/run/ckpt-2.npz" ] && [ -f "$tmp/run/ckpt-3.npz" ] && [ ! -e "$tmp/run/ckpt-1.npz" ] &&
  [ "$(head -1 "$tmp/run/checkpoint")" = 'model_checkpoint_path: "ckpt-3"' ]; then
  ok "ckpt-K files, --keep 2 and the index"
else
  bad "ckpt-K files, --keep 2 and the index ($(ls "$tmp/run"))"
fi
for epoch in 2 3; do
  want=$(printf '%.2f' "$(field "$tmp/run.jsonl" $epoch test_accuracy)")
  got=$("$CLT" eval --checkpoint "$tmp/run/ckpt-$epoch.npz" --test-limit 300 2>&1 | sed -n 's/^Accuracy: //p')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "eval of ckpt-$epoch reproduces the training figure $want"; else
    bad "eval of ckpt-$epoch reproduces the training figure ($got vs $want)"
  fi
done
"$CLT" eval --checkpoint "$tmp/run" --test-limit 300 >"$tmp/eval.txt" 2>&1
if grep -Eq '^Accuracy: [0-9]+\.[0-9]{2}$' "$tmp/eval.txt" && grep -Eq '^Loss: [0-9]+\.[0-9]{4}$' "$tmp/eval.txt"; then
  ok "eval of a folder prints Accuracy and Loss"
else
  bad "eval of a folder prints Accuracy and Loss ($(cat "$tmp/eval.txt"))"
fi
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  np_acc=$(/usr/bin/python3 "$(dirname "$0")/npz_numpy_eval.py" "$tmp/run/ckpt-3.npz" "$DATA" 300 | sed -n 's/^Accuracy: //p')
  cl_acc=$(sed -n 's/^Accuracy: //p' "$tmp/eval.txt")
  if awk -v a="$np_acc" -v b="$cl_acc" 'BEGIN { d = a - b; exit !(a != "" && d <= 0.2 && d >= -0.2) }'; then
    ok "independent NumPy network on the Keras-layout weights agrees ($np_acc vs $cl_acc)"
  else
    bad "independent NumPy network on the Keras-layout weights agrees ($np_acc vs $cl_acc)"
  fi
else
  echo "note: numpy not installed; NumPy cross-check skipped"
fi

# --- resume -------------------------------------------------------------------------
"$CLT" train --epochs 2 "${small[@]}" --checkpoint-dir "$tmp/straight" --checkpoint-every 1 >/dev/null 2>&1
"$CLT" train --epochs 1 "${small[@]}" --checkpoint-dir "$tmp/resumed" --checkpoint-every 1 >/dev/null 2>&1
"$CLT" train --epochs 2 --resume --train-limit 640 --test-limit 300 --checkpoint-dir "$tmp/resumed" \
  --checkpoint-every 1 >"$tmp/resume.txt" 2>&1
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/resumed/ckpt-2.npz"; then ok "1 epoch + resume = 2 epochs, bit for bit"; else
  bad "1 epoch + resume = 2 epochs, bit for bit ($(tail -2 "$tmp/resume.txt"))"
fi
if grep -q "Resuming from $tmp/resumed/ckpt-1.npz: 1 epoch and 10 steps done" "$tmp/resume.txt"; then
  ok "resume says where it starts"
else
  bad "resume says where it starts ($(head -5 "$tmp/resume.txt"))"
fi
expect_fail "resume without a checkpoint" "--resume: $tmp/empty: no such checkpoint" \
  "$CLT" train --resume --checkpoint-dir "$tmp/empty"
# Another device set (2 replicas of 32 = the same global batch of 64): equal up to rounding.
POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 "${small[@]}" --devices 0 --batch-per-replica 64 \
  --checkpoint-dir "$tmp/moved" --checkpoint-every 1 >/dev/null 2>&1
POCL_DEVICES="pthread pthread" "$CLT" train --epochs 2 --resume --devices 0,1 --split equal --batch-per-replica 32 \
  --train-limit 640 --test-limit 300 --checkpoint-dir "$tmp/moved" --checkpoint-every 1 >/dev/null 2>&1
expect_close "resume on two devices matches" "$tmp/straight/ckpt-2.npz" "$tmp/moved/ckpt-2.npz" 1e-3

# --- other optimizers ---------------------------------------------------------------
# Their state is saved under its own names and the hyper-parameters in the metadata,
# so a bare --resume continues them exactly.
for spec in "sgd --momentum 0.9 --nesterov" "rmsprop --momentum 0.5 --weight-decay 0.01"; do
  name=${spec%% *}
  read -ra opt <<<"--optimizer $spec"
  "$CLT" train --epochs 2 "${small[@]}" "${opt[@]}" --checkpoint-dir "$tmp/$name-straight" \
    --checkpoint-every 1 >/dev/null 2>&1
  "$CLT" train --epochs 1 "${small[@]}" "${opt[@]}" --checkpoint-dir "$tmp/$name" --checkpoint-every 1 \
    >/dev/null 2>&1
  "$CLT" train --epochs 2 --resume --train-limit 640 --test-limit 300 --checkpoint-dir "$tmp/$name" \
    --checkpoint-every 1 >"$tmp/$name.txt" 2>&1
  if [ -f "$tmp/$name-straight/ckpt-2.npz" ] && cmp -s "$tmp/$name-straight/ckpt-2.npz" "$tmp/$name/ckpt-2.npz"; then
    ok "--optimizer $spec: 1 epoch + resume = 2 epochs, bit for bit"
  else
    bad "--optimizer $spec: 1 epoch + resume = 2 epochs, bit for bit ($(tail -2 "$tmp/$name.txt"))"
  fi
done
if grep -q '^Optimizer rmsprop: learning rate 0.001, rho 0.9, momentum 0.5, epsilon 1e-07, weight decay 0.01$' \
  "$tmp/rmsprop.txt"; then
  ok "the resumed run names the checkpoint's optimizer"
else
  bad "the resumed run names the checkpoint's optimizer ($(grep '^Optimizer' "$tmp/rmsprop.txt"))"
fi
rms=$tmp/rmsprop/ckpt-1.npz
expect_fail "resume with another --optimizer" "rmsprop/ckpt-2.npz was trained with --optimizer rmsprop, not sgd" \
  "$CLT" train --epochs 2 --resume --optimizer sgd --train-limit 640 --checkpoint-dir "$tmp/rmsprop"
expect_fail "resume with another --momentum" "trained with --momentum 0.5, not 0.9" \
  "$CLT" train --epochs 2 --resume --momentum 0.9 --train-limit 640 --checkpoint-dir "$tmp/rmsprop"
expect_fail "resume with another --weight-decay" "trained with --weight-decay 0.01, not 0" \
  "$CLT" train --epochs 2 --resume --weight-decay 0 --train-limit 640 --checkpoint-dir "$tmp/rmsprop"
expect_fail "resume of Adam with --nesterov" "--nesterov applies to --optimizer sgd, not adam" \
  "$CLT" train --epochs 2 --resume --nesterov --train-limit 640 --checkpoint-dir "$tmp/resumed"
"$TOOL" drop "$rms" "$tmp/novelocity.npz" optimizer/dense/bias/velocity
mkdir -p "$tmp/novelocity"
mv "$tmp/novelocity.npz" "$tmp/novelocity/ckpt-1.npz"
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/novelocity/checkpoint"
expect_fail "resume without an RMSprop slot variable" "ckpt-1.npz: missing member optimizer/dense/bias/velocity" \
  "$CLT" train --epochs 2 --resume --train-limit 640 --checkpoint-dir "$tmp/novelocity"
expect_ok "eval needs no optimizer state" '^Accuracy: ' "$CLT" eval --checkpoint "$tmp/novelocity" --test-limit 300
"$TOOL" set-string "$rms" "$tmp/badopt.npz" metadata '"name": "rmsprop"' '"name": "adagrad"'
mkdir -p "$tmp/badopt"
mv "$tmp/badopt.npz" "$tmp/badopt/ckpt-1.npz"
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/badopt/checkpoint"
expect_fail "an unknown optimizer in the metadata" \
  'ckpt-1.npz: metadata names no optimizer cltrain knows: "adagrad" \(it knows adam, sgd or rmsprop\)' \
  "$CLT" train --epochs 2 --resume --train-limit 640 --checkpoint-dir "$tmp/badopt"
# A checkpoint of a cltrain before optimizers were recorded holds Adam's state under
# the same names: it resumes as Adam, exactly.
mkdir -p "$tmp/old"
"$TOOL" set-string "$tmp/straight/ckpt-1.npz" "$tmp/old/ckpt-1.npz" metadata \
  '"optimizer": {"name": "adam", "learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07, "weight_decay": 0}, ' ''
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/old/checkpoint"
"$CLT" train --epochs 2 --resume --train-limit 640 --test-limit 300 --checkpoint-dir "$tmp/old" \
  --checkpoint-every 1 >"$tmp/old.txt" 2>&1
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/old/ckpt-2.npz"; then ok "a checkpoint without an optimizer resumes as Adam, bit for bit"; else
  bad "a checkpoint without an optimizer resumes as Adam, bit for bit ($(tail -2 "$tmp/old.txt"))"
fi

# --- an earlier cltrain's checkpoints (tests/checkpoints/README.md) --------------------
# Each evaluates to the figures of the run that saved it and resumes with the
# optimizer it names; the checkpoint the resumed run saves has the same metadata,
# and records the data flags of the resumed run, which the old one did not.
fixtures=$(dirname "$0")/checkpoints/v0.1.0-cefb85f
while read -r name loss line; do
  d=$tmp/v010-$name
  mkdir -p "$d"
  cp "$fixtures/$name.npz" "$d/ckpt-1.npz"
  printf 'model_checkpoint_path: "ckpt-1"\n' >"$d/checkpoint"
  "$CLT" eval --checkpoint "$d" --test-limit 64 >"$d.eval" 2>&1 </dev/null
  got=$(sed -n 's/^Loss: //p' "$d.eval")
  if grep -qx 'Accuracy: 12.50' "$d.eval" &&
    awk -v a="$got" -v b="$loss" 'BEGIN { exit !(a != "" && a - b <= 2e-4 && b - a <= 2e-4) }'; then
    ok "eval of cltrain 0.1.0's $name checkpoint gives its figures"
  else
    bad "eval of cltrain 0.1.0's $name checkpoint gives its figures ($(tail -2 "$d.eval" | tr '\n' ' '))"
  fi
  "$CLT" train --epochs 2 --resume --train-limit 64 --test-limit 64 --checkpoint-dir "$d" \
    --checkpoint-every 1 >"$d.txt" 2>&1 </dev/null
  if grep -qx "Optimizer $name: $line" "$d.txt" && [ -f "$d/ckpt-2.npz" ] &&
    grep -q "^Resuming from $d/ckpt-1.npz: 1 epoch and 2 steps done" "$d.txt"; then
    ok "--resume from it continues its $name"
  else
    bad "--resume from it continues its $name ($(grep -E '^(Optimizer|Resuming)' "$d.txt" | tr '\n' ' ')$(tail -1 "$d.txt"))"
  fi
  if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    if /usr/bin/python3 - "$d/ckpt-1.npz" "$d/ckpt-2.npz" <<'PY'; then
import sys, json, numpy as np
a, b = (np.load(p) for p in sys.argv[1:])
ma, mb = json.loads(str(a["metadata"])), json.loads(str(b["metadata"]))
data = mb.pop("data", {})
# The version of the cltrain that wrote each (the resumed one is this build's),
# and the convolutions' algorithms, GEMM tilings and replicas, which this build records.
ma.pop("cltrain_version"), mb.pop("cltrain_version"), mb.pop("conv_algorithms", None)
mb.pop("gemm_tilings", None), mb.pop("replicas", None)
sys.exit(ma != mb or sorted(a) != sorted(b) or "data" in ma or data.get("train_limit") != 64)
PY
      ok "the $name checkpoint it saves has the same metadata (and its data) and members"
    else
      bad "the $name checkpoint it saves has the same metadata and members"
    fi
  fi
done <<'EOF'
adam 2.2945 learning rate 0.003, beta_1 0.9, beta_2 0.999, epsilon 1e-07, weight decay 0.004
sgd 2.2959 learning rate 0.01, momentum 0.9, Nesterov
rmsprop 2.2945 learning rate 0.001, rho 0.9, momentum 0.5, epsilon 1e-07, weight decay 0.01
EOF

# --- NaN guard ----------------------------------------------------------------------
# Finite weights so large (3e38 everywhere in the first kernel) that the forward
# pass overflows: the checkpoint loads, the first step's loss is not finite.
mkdir -p "$tmp/nan"
"$TOOL" fill "$tmp/straight/ckpt-1.npz" "$tmp/nan/ckpt-1.npz" conv2d/kernel 3e38
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/nan/checkpoint"
expect_fail "a non-finite loss stops training naming epoch and step" \
  "epoch 2, step 1: non-finite loss or gradient" \
  "$CLT" train --epochs 2 --resume --train-limit 640 --test-limit 300 --checkpoint-dir "$tmp/nan" --checkpoint-every 1
if [ "$(head -1 "$tmp/nan/checkpoint")" = 'model_checkpoint_path: "ckpt-1"' ] && [ ! -e "$tmp/nan/ckpt-2.npz" ]; then
  ok "after the NaN stop the last good checkpoint stays the newest"
else
  bad "after the NaN stop the last good checkpoint stays the newest"
fi

# --- bad checkpoints ----------------------------------------------------------------
good=$tmp/straight/ckpt-2.npz
size=$(stat -c %s "$good")
head -c $((size / 2)) "$good" >"$tmp/truncated.npz"
expect_fail "truncated checkpoint" "truncated.npz: .*(truncated|central directory|end of central)" \
  "$CLT" eval --checkpoint "$tmp/truncated.npz"
cp "$good" "$tmp/flipped.npz"
printf '\xff' | dd of="$tmp/flipped.npz" bs=1 seek=$((size / 3)) conv=notrunc status=none
expect_fail "flipped byte" "flipped.npz: .*CRC" "$CLT" eval --checkpoint "$tmp/flipped.npz"
"$TOOL" drop "$good" "$tmp/missing.npz" conv2d_1/bias
expect_fail "missing member" "missing.npz: missing member conv2d_1/bias" "$CLT" eval --checkpoint "$tmp/missing.npz"
"$TOOL" reshape "$good" "$tmp/shape.npz" dense/kernel
expect_fail "shape that does not fit" "shape.npz: member dense/kernel has shape \(1999,64\), the model needs \(2000,64\)" \
  "$CLT" eval --checkpoint "$tmp/shape.npz"
"$TOOL" set-string "$good" "$tmp/arch.npz" metadata "Dense(64,relu)" "Dense(65,relu)"
expect_fail "another architecture" "arch.npz: architecture differs" "$CLT" eval --checkpoint "$tmp/arch.npz"
"$TOOL" set-string "$good" "$tmp/model.npz" metadata '"model": "fmnist-cnn"' '"model": "lenet-9"'
expect_fail "unknown model" "model.npz: .*unknown model 'lenet-9'" "$CLT" eval --checkpoint "$tmp/model.npz"
# A model known by no name (with its preprocessing) is rebuilt from the description
# its checkpoint stores, for eval and for --resume.
"$TOOL" set-string "$good" "$tmp/described.npz" metadata '"model": "fmnist-cnn"' \
  '"model": "my-cnn", "preprocess": "unit"'
want=$("$CLT" eval --checkpoint "$good" --test-limit 300 2>&1 | sed -n 's/^Accuracy: //p')
"$CLT" eval --checkpoint "$tmp/described.npz" --test-limit 300 >"$tmp/described.txt" 2>&1
if grep -q 'model my-cnn,' "$tmp/described.txt" && grep -qx "Accuracy: $want" "$tmp/described.txt"; then
  ok "eval rebuilds a model known by no name from its description (accuracy $want)"
else
  bad "eval rebuilds a model known by no name from its description ($(cat "$tmp/described.txt"))"
fi
mkdir -p "$tmp/described"
cp "$tmp/described.npz" "$tmp/described/ckpt-2.npz"
printf 'model_checkpoint_path: "ckpt-2"\n' >"$tmp/described/checkpoint"
"$CLT" train --epochs 3 --resume "${small[@]}" --checkpoint-dir "$tmp/described" >"$tmp/described.txt" 2>&1
if grep -q '^Model my-cnn: ' "$tmp/described.txt" && grep -q '^Epoch 3, Loss' "$tmp/described.txt" &&
  [ -f "$tmp/described/ckpt-3.npz" ]; then
  ok "--resume rebuilds it too, trains on and saves"
else
  bad "--resume rebuilds it too, trains on and saves ($(tail -3 "$tmp/described.txt"))"
fi
"$TOOL" set-string "$tmp/described.npz" "$tmp/badkind.npz" metadata "Dense(64,relu)" "Dense(64,gelu)"
expect_fail "a bad description" "badkind.npz: model my-cnn for 28x28x1 images: dense: Dense\(64,gelu\): expected" \
  "$CLT" eval --checkpoint "$tmp/badkind.npz"
"$TOOL" set-string "$good" "$tmp/badpre.npz" metadata '"model": "fmnist-cnn"' \
  '"model": "my-cnn", "preprocess": "sepia"'
expect_fail "unknown preprocessing" "badpre.npz: unknown preprocessing 'sepia' of model my-cnn" \
  "$CLT" eval --checkpoint "$tmp/badpre.npz"
"$TOOL" set-string "$good" "$tmp/version.npz" metadata '"format": 1' '"format": 7'
expect_fail "unknown format version" "version.npz: unknown checkpoint format version 7" \
  "$CLT" eval --checkpoint "$tmp/version.npz"
mkdir -p "$tmp/noindex" "$tmp/dangling" "$tmp/garbage"
cp "$good" "$tmp/noindex/ckpt-1.npz"
expect_fail "missing index" "noindex/checkpoint: no checkpoint index" "$CLT" eval --checkpoint "$tmp/noindex"
printf 'model_checkpoint_path: "ckpt-9"\n' >"$tmp/dangling/checkpoint"
expect_fail "dangling index" "dangling/checkpoint: the index names .*ckpt-9.npz, which does not exist" \
  "$CLT" eval --checkpoint "$tmp/dangling"
echo "hello" >"$tmp/garbage/checkpoint"
expect_fail "garbage index" "garbage/checkpoint: not a checkpoint index" "$CLT" eval --checkpoint "$tmp/garbage"

# --- non-finite values, unexpected members, names -------------------------------------
# A NaN or infinity (valid CRC-32s) is refused naming the member and the index, by
# eval, --resume and --weights alike.
for spec in "dense/bias nan 7 NaN" "conv2d/kernel inf 0 \+Inf" "dense_1/kernel -inf 639 -Inf"; do
  read -r member value index shown <<<"$spec"
  d=$tmp/poisoned-${member%%/*}
  mkdir -p "$d"
  "$TOOL" poison "$good" "$d/ckpt-2.npz" "$member" "$value" "$index"
  printf 'model_checkpoint_path: "ckpt-2"\n' >"$d/checkpoint"
  want="ckpt-2.npz: member $member holds a non-finite value \($shown at index $index\)"
  expect_fail "eval of $member[$index] = $value" "$want" "$CLT" eval --checkpoint "$d" --test-limit 300
  expect_fail "--resume from $member[$index] = $value" "$want" \
    "$CLT" train --epochs 3 --resume --train-limit 640 --test-limit 300 --checkpoint-dir "$d"
  expect_fail "--weights with $member[$index] = $value" "$want" \
    "$CLT" train --epochs 1 "${small[@]}" --weights "$d/ckpt-2.npz" --checkpoint-dir "$tmp/w-$value"
done
"$TOOL" poison "$good" "$tmp/slot.npz" optimizer/conv2d_1/kernel/v inf 17
expect_fail "eval of an infinite optimizer slot" \
  "slot.npz: member optimizer/conv2d_1/kernel/v holds a non-finite value \(\+Inf at index 17\)" \
  "$CLT" eval --checkpoint "$tmp/slot.npz"
"$TOOL" set-string "$good" "$tmp/format.npz" metadata '"format": 1' '"format": 99999999999999999999'
expect_fail "a format number that overflows, shown as read" \
  'format.npz: checkpoint format 1e\+20 is not a number this cltrain reads \(it reads 1\)' \
  "$CLT" eval --checkpoint "$tmp/format.npz"
"$TOOL" set-string "$good" "$tmp/badjson.npz" metadata '"classes": 10' '"classes": 10,'
expect_fail "metadata that is not JSON" 'badjson.npz: metadata is not valid JSON \(at character [0-9]+: "architecture": "' \
  "$CLT" eval --checkpoint "$tmp/badjson.npz"
"$TOOL" set-string "$good" "$tmp/badtype.npz" metadata '"classes": 10' '"classes": "10"'
expect_fail "a key of the wrong type" 'badtype.npz: metadata key classes is a string, not a number$' \
  "$CLT" eval --checkpoint "$tmp/badtype.npz"
"$TOOL" set-string "$good" "$tmp/noclasses.npz" metadata '"classes": 10' '"classes": 0'
expect_fail "metadata of 0 classes" 'noclasses.npz: metadata key classes is 0, not a class count$' \
  "$CLT" eval --checkpoint "$tmp/noclasses.npz"
# The index may name only a file of its own folder, however the path is spelled.
mkdir -p "$tmp/escape/sub" "$tmp/other"
cp "$good" "$tmp/other/ckpt-1.npz"
for name in "../other/ckpt-1" "sub/../../other/ckpt-1" "$tmp/other/ckpt-1"; do
  printf 'model_checkpoint_path: "%s"\n' "$name" >"$tmp/escape/checkpoint"
  want="escape/checkpoint: the index names \"$name\", which is not a file of this folder"
  expect_fail "eval of an index naming $name" "$want" "$CLT" eval --checkpoint "$tmp/escape"
  expect_fail "--resume from an index naming $name" "$want" \
    "$CLT" train --epochs 3 --resume --train-limit 640 --checkpoint-dir "$tmp/escape"
done
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  # Exactly the members the model expects: an extra one is refused by eval, --resume
  # and --weights (a checkpoint's own other members are fine for --weights).
  mkdir -p "$tmp/extra"
  /usr/bin/python3 - "$good" "$tmp" <<'PY'
import sys, numpy as np
good, tmp = sys.argv[1], sys.argv[2]
z = dict(np.load(good))
np.savez(tmp + "/extra/ckpt-2.npz", **z, **{"extra/unused": np.zeros(3, np.float32)})
np.savez(tmp + "/evil.npz", **z, **{"../evil": np.zeros(3, np.float32)})
np.savez_compressed(tmp + "/compressed.npz", **z)
weights = [z[k] for k in ["conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias",
                          "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]]
np.savez(tmp + "/positional.npz", *weights)
np.savez(tmp + "/positional_extra.npz", *weights, junk=np.zeros(1, np.float32))
weights[3] = weights[3].copy()
weights[3][5] = np.inf
np.savez_compressed(tmp + "/positional_inf.npz", *weights)
PY
  printf 'model_checkpoint_path: "ckpt-2"\n' >"$tmp/extra/checkpoint"
  want='ckpt-2.npz: unexpected member extra/unused \(not part of a checkpoint of model fmnist-cnn'
  expect_fail "eval of a checkpoint with an extra member" "$want" "$CLT" eval --checkpoint "$tmp/extra"
  expect_fail "--resume from a checkpoint with an extra member" "$want" \
    "$CLT" train --epochs 3 --resume --train-limit 640 --checkpoint-dir "$tmp/extra"
  expect_fail "--weights with an extra member" "ckpt-2.npz: unexpected member extra/unused: not a weight of model fmnist-cnn" \
    "$CLT" train --epochs 1 "${small[@]}" --weights "$tmp/extra/ckpt-2.npz" --checkpoint-dir "$tmp/w-extra"
  expect_fail "--weights (get_weights order) with an extra member" \
    "positional_extra.npz: unexpected member junk: not a weight of model fmnist-cnn" \
    "$CLT" train --epochs 1 "${small[@]}" --weights "$tmp/positional_extra.npz" --checkpoint-dir "$tmp/w-extra"
  expect_fail "--weights (get_weights order, compressed) with +Inf" \
    "positional_inf.npz: member arr_3 holds a non-finite value \(\+Inf at index 5\)" \
    "$CLT" train --epochs 1 "${small[@]}" --weights "$tmp/positional_inf.npz" --checkpoint-dir "$tmp/w-extra"
  expect_fail "a member named ../evil" "evil.npz: member ../evil.npy: unsafe name \(contains '..'\)" \
    "$CLT" eval --checkpoint "$tmp/evil.npz"
  # numpy.savez_compressed (deflated members) reads as the stored original.
  want=$("$CLT" eval --checkpoint "$good" --test-limit 300 2>&1 | grep -E '^(Accuracy|Loss)')
  got=$("$CLT" eval --checkpoint "$tmp/compressed.npz" --test-limit 300 2>&1 | grep -E '^(Accuracy|Loss)')
  if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "a numpy.savez_compressed checkpoint evaluates as the original"; else
    bad "a numpy.savez_compressed checkpoint evaluates as the original ($got vs $want)"
  fi
  for w in "$good" "$tmp/compressed.npz" "$tmp/positional.npz"; do
    expect_ok "--weights $(basename "$w") (a checkpoint's other members ignored)" '^Epoch 1, ' \
      "$CLT" train --epochs 1 --train-limit 64 --test-limit 64 --weights "$w" --checkpoint-dir "$tmp/w-ok"
  done
else
  echo "note: numpy not installed; extra, unsafe and compressed members skipped"
fi

# --- one trainer per checkpoint folder ------------------------------------------------
# A second trainer on a folder in use is refused at once, naming the first one's PID;
# kill -9 of the first frees the folder (the kernel drops the lock).
mkdir -p "$tmp/busy"
"$CLT" train --train-limit 640 --test-limit 64 --epochs 500 --checkpoint-dir "$tmp/busy" >"$tmp/busy.txt" 2>&1 &
first=$!
for _ in $(seq 600); do # until it holds the lock (its PID in the lock file) and trains
  if [ "$(cut -d' ' -f1 "$tmp/busy/.cltrain.lock" 2>/dev/null)" = "$first" ] && grep -q '^Epoch 1,' "$tmp/busy.txt"; then break; fi
  kill -0 $first 2>/dev/null || break
  sleep 0.1
done
start=$(date +%s)
expect_fail "a second trainer on a folder in use is refused" \
  "busy: in use by another cltrain \(pid $first\); wait for it or choose another --checkpoint-dir" \
  "$CLT" train --train-limit 640 --test-limit 64 --epochs 50 --checkpoint-dir "$tmp/busy"
if [ $(($(date +%s) - start)) -le 20 ] && kill -0 $first 2>/dev/null; then ok "refused quickly, the first still training"; else
  bad "refused quickly, the first still training ($(($(date +%s) - start)) s; $(tail -2 "$tmp/busy.txt"))"
fi
kill -9 $first 2>/dev/null
wait $first 2>/dev/null
"$CLT" train --epochs 1 --train-limit 640 --test-limit 64 --checkpoint-dir "$tmp/busy" >"$tmp/busy2.txt" 2>&1
if grep -q "saved $tmp/busy/ckpt-" "$tmp/busy2.txt" && [ -z "$(ls -A "$tmp/busy" | grep '\.tmp-')" ]; then
  ok "after kill -9 of the first a new run takes the folder"
else
  bad "after kill -9 of the first a new run takes the folder ($(tail -2 "$tmp/busy2.txt"))"
fi

expect_fail "no such checkpoint" "$tmp/nothing: no such checkpoint" "$CLT" eval --checkpoint "$tmp/nothing"

finish
