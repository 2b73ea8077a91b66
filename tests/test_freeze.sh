#!/usr/bin/env bash
# --freeze-until through the command line: frozen weights do not change and the
# checkpoint records the freezing (no optimizer slots for frozen layers); a plain
# --resume keeps it, bit for bit; --resume with another --freeze-until unfreezes
# or freezes with a note, the newly trainable weights' slots starting at zero;
# 2 and 3 replicas (the all-reduce in buckets too) compute what one device does;
# a frozen BatchNormalization keeps its moving statistics; bad values are refused
# before anything is written; eval and export take a checkpoint with frozen layers.
#   test_freeze.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
MAKE_PHOTOS=$3
. "$(dirname "$0")/lib.sh"
export POCL_DEVICES="pthread pthread pthread"
run=(--train-limit 256 --test-limit 64 --batch-per-replica 64 --seed 5 --devices 0 --checkpoint-every 1)

# npz_check SCRIPT FILE...: runs python with numpy on the checkpoints; prints its verdict.
npz_check() {
  local script=$1
  shift
  /usr/bin/python3 -c "
import json, sys
import numpy as np
z = [np.load(f) for f in sys.argv[1:]]
meta = [json.loads(str(c['metadata'])) for c in z]
def same(m, a=0, b=1): return z[a][m].tobytes() == z[b][m].tobytes()
$script" "$@" 2>&1
}

# --- bad values: one line naming the flag, nothing written ------------------------
expect_fail "a name that is no layer: refused with close names" \
  '^cltrain: error: --freeze-until dens: model fmnist-cnn has no layer of that name \(close: dense, dense_1\)$' \
  "$CLT" train "${run[@]}" --epochs 1 --freeze-until dens --checkpoint-dir "$tmp/none1"
expect_fail "every layer frozen: nothing to train" \
  '^cltrain: error: --freeze-until dense_1 freezes every layer of model fmnist-cnn that has weights: nothing to train$' \
  "$CLT" train "${run[@]}" --epochs 1 --freeze-until dense_1 --checkpoint-dir "$tmp/none2"
if [ ! -e "$tmp/none1" ] && [ ! -e "$tmp/none2" ]; then ok "refused runs leave no checkpoint folder"; else
  bad "refused runs leave no checkpoint folder"
fi

# --- the first convolutions frozen: unchanged weights, recorded, no slots ---------
"$CLT" train "${run[@]}" --epochs 1 --checkpoint-dir "$tmp/base" >"$tmp/base.txt" 2>&1 ||
  bad "base run ($(tail -2 "$tmp/base.txt"))"
"$CLT" train "${run[@]}" --epochs 2 --weights "$tmp/base/ckpt-1.npz" --freeze-until max_pooling2d_1 \
  --checkpoint-dir "$tmp/frozen" --log "$tmp/frozen.jsonl" >"$tmp/frozen.txt" 2>&1 ||
  bad "frozen run ($(tail -2 "$tmp/frozen.txt"))"
got=$(npz_check "
print(all(same(m) for m in ('conv2d/kernel', 'conv2d/bias', 'conv2d_1/kernel', 'conv2d_1/bias')),
      not same('dense/kernel') and not same('dense_1/bias'))" "$tmp/base/ckpt-1.npz" "$tmp/frozen/ckpt-2.npz")
if [ "$got" = "True True" ]; then ok "8 steps: frozen weights hold their bits, the others train"; else
  bad "frozen weights unchanged, the others trained ($got)"
fi
got=$(npz_check "
print(meta[0]['frozen'], sorted(f.split('/')[1] for f in z[0].files if f.startswith('optimizer/') and f.count('/') == 3))" \
  "$tmp/frozen/ckpt-2.npz")
if [ "$got" = "['conv2d', 'max_pooling2d', 'conv2d_1', 'max_pooling2d_1'] ['dense', 'dense', 'dense', 'dense', 'dense_1', 'dense_1', 'dense_1', 'dense_1']" ]; then
  ok "the metadata records the frozen layers; their weights have no optimizer slots"
else
  bad "metadata and slots of a frozen run ($got)"
fi
if grep -q '^Model fmnist-cnn: 175514 parameters, 7 layers' "$tmp/frozen.txt" &&
  grep -qx 'Frozen: 4 of 7 layers, 46800 of 175514 parameters not trained' "$tmp/frozen.txt" &&
  ! grep -q '^Frozen' "$tmp/base.txt"; then
  ok "the run's report says what is frozen"
else
  bad "the run's report ($(head -2 "$tmp/frozen.txt"))"
fi

# --- a plain --resume keeps the freezing, bit for bit -----------------------------
"$CLT" train "${run[@]}" --epochs 1 --weights "$tmp/base/ckpt-1.npz" --freeze-until max_pooling2d_1 \
  --checkpoint-dir "$tmp/half" >/dev/null 2>&1 || bad "first half"
for d in split thaw refreeze all; do cp -r "$tmp/half" "$tmp/$d"; done
"$CLT" train --resume --epochs 2 --devices 0 --checkpoint-dir "$tmp/split" >"$tmp/resumed.txt" 2>&1 ||
  bad "plain resume ($(tail -2 "$tmp/resumed.txt"))"
got=$(npz_check "
diff = [m for m in sorted(set(z[0].files) | set(z[1].files)) if m != 'save_counter' and
        (m not in z[0].files or m not in z[1].files or not same(m))]
print(' '.join(diff) if diff else 'same')" "$tmp/frozen/ckpt-2.npz" "$tmp/split/ckpt-2.npz")
if [ "$got" = "same" ] && ! grep -q 'note' "$tmp/resumed.txt"; then
  ok "a plain --resume keeps the freezing: the same bits as a straight run, no note"
else
  bad "plain resume = straight ($got; $(grep note "$tmp/resumed.txt"))"
fi

# --- --resume with another --freeze-until: notes, slots, training goes on ---------
"$CLT" train --resume --epochs 2 --devices 0 --checkpoint-dir "$tmp/thaw" --freeze-until max_pooling2d \
  >"$tmp/thaw.txt" 2>&1 || bad "resume unfreezing ($(tail -2 "$tmp/thaw.txt"))"
if grep -qx 'cltrain: note: 1 layer (46,160 weights) becomes trainable; its optimizer slots start at zero' "$tmp/thaw.txt" &&
  grep -q '^Epoch 2, Loss' "$tmp/thaw.txt"; then
  ok "--resume --freeze-until an earlier layer: one note, the epoch runs"
else
  bad "resume unfreezing ($(cat "$tmp/thaw.txt"))"
fi
got=$(npz_check "
print(same('conv2d/kernel'), not same('conv2d_1/kernel'), meta[1]['frozen'],
      'optimizer/conv2d_1/kernel/m' in z[1].files, 'optimizer/conv2d/kernel/m' in z[1].files)" \
  "$tmp/half/ckpt-1.npz" "$tmp/thaw/ckpt-2.npz")
if [ "$got" = "True True ['conv2d', 'max_pooling2d'] True False" ]; then
  ok "the unfrozen layer trains and gets slots; the layers still frozen do not"
else
  bad "after unfreezing ($got)"
fi
"$CLT" train --resume --epochs 2 --devices 0 --checkpoint-dir "$tmp/refreeze" --freeze-until dense \
  >"$tmp/refreeze.txt" 2>&1 || bad "resume refreezing ($(tail -2 "$tmp/refreeze.txt"))"
if grep -qx 'cltrain: note: 1 layer (128,064 weights) becomes frozen; its optimizer slots are dropped' "$tmp/refreeze.txt"; then
  ok "--resume --freeze-until a later layer: a note on the slots dropped"
else
  bad "resume refreezing ($(cat "$tmp/refreeze.txt"))"
fi
"$CLT" train --resume --epochs 2 --devices 0 --checkpoint-dir "$tmp/all" --freeze-until none >"$tmp/all.txt" 2>&1 ||
  bad "resume with none frozen ($(tail -2 "$tmp/all.txt"))"
got=$(npz_check "print('frozen' in meta[0], 'optimizer/conv2d/kernel/m' in z[0].files)" "$tmp/all/ckpt-2.npz")
if grep -qx 'cltrain: note: 2 layers (46,800 weights) become trainable; their optimizer slots start at zero' "$tmp/all.txt" &&
  [ "$got" = "False True" ]; then
  ok "--freeze-until none: every layer trains again, the metadata as an older cltrain's"
else
  bad "resume with none frozen ($got; $(grep note "$tmp/all.txt"))"
fi
expect_fail "--resume with a name that is no layer: refused" \
  '^cltrain: error: --freeze-until conv: model fmnist-cnn has no layer of that name \(close: conv2d, conv2d_1\)$' \
  "$CLT" train --resume --epochs 3 --devices 0 --checkpoint-dir "$tmp/all" --freeze-until conv

# --- replicas: 2 x 32 and 3 x 16 (the all-reduce in buckets) = 1 x 64 / 48 --------
rep=(--train-limit 192 --test-limit 64 --seed 5 --epochs 1 --split equal --freeze-until max_pooling2d
  --checkpoint-every 1)
"$CLT" train "${rep[@]}" --devices 0 --batch-per-replica 64 --checkpoint-dir "$tmp/r1" >/dev/null 2>&1 || bad "1 replica"
"$CLT" train "${rep[@]}" --devices 0,1 --batch-per-replica 32 --check-replicas --checkpoint-dir "$tmp/r2" \
  >"$tmp/r2.txt" 2>&1 || bad "2 replicas ($(tail -2 "$tmp/r2.txt"))"
expect_close "frozen prefix: 2 replicas x 32 = 1 device x 64 after 3 steps" "$tmp/r1/ckpt-1.npz" "$tmp/r2/ckpt-1.npz" 1e-4
"$CLT" train "${rep[@]}" --devices 0 --batch-per-replica 48 --checkpoint-dir "$tmp/r1b" >/dev/null 2>&1 || bad "1 replica, 48"
CLTRAIN_ALLREDUCE_BUCKETS=4096 "$CLT" train "${rep[@]}" --devices 0,1,2 --batch-per-replica 16 --check-replicas \
  --checkpoint-dir "$tmp/r3" --profile >"$tmp/r3.txt" 2>&1 || bad "3 replicas ($(tail -2 "$tmp/r3.txt"))"
expect_close "frozen prefix: 3 replicas x 16, all-reduce in buckets = 1 device x 48 after 4 steps" \
  "$tmp/r1b/ckpt-1.npz" "$tmp/r3/ckpt-1.npz" 1e-4
got=$(npz_check "print(all(same('conv2d/kernel', 0, k) for k in (1, 2, 3)), not same('dense/kernel', 0, 1))" \
  "$tmp/r1/ckpt-1.npz" "$tmp/r1b/ckpt-1.npz" "$tmp/r2/ckpt-1.npz" "$tmp/r3/ckpt-1.npz")
if [ "$got" = "True True" ] && grep -q '([0-9]* buckets a step' "$tmp/r3.txt" && ! grep -q 'different parameters' "$tmp/r2.txt" "$tmp/r3.txt"; then
  ok "replicas stay identical, the frozen kernel untouched, the all-reduce in buckets"
else
  bad "replicas with a frozen prefix ($got; $(grep -i bucket "$tmp/r3.txt"))"
fi

# --- photos, resnet-small: frozen BatchNormalization keeps its moving statistics --
"$MAKE_PHOTOS" "$tmp/photos" 3 8 >/dev/null || bad "make_photos"
ph=(--data "$tmp/photos" --image-size 32 --model resnet-small --batch-per-replica 8 --seed 2 --devices 0
  --validation-split 0.25 --checkpoint-every 1)
"$CLT" train "${ph[@]}" --epochs 1 --checkpoint-dir "$tmp/pbase" >/dev/null 2>&1 || bad "photos base"
"$CLT" train "${ph[@]}" --epochs 2 --weights "$tmp/pbase/ckpt-1.npz" --freeze-until conv4_block1_add \
  --checkpoint-dir "$tmp/pfrozen" >"$tmp/pfrozen.txt" 2>&1 || bad "photos frozen ($(tail -2 "$tmp/pfrozen.txt"))"
got=$(npz_check "
bn = ('conv1_bn', 'conv3_block1_2_bn', 'conv4_block1_0_bn')
print(all(same(l + '/' + p) for l in bn for p in ('gamma', 'moving_mean', 'moving_variance')),
      not same('conv5_block1_1_bn/moving_mean') and not same('conv5_block1_1_bn/gamma'))" \
  "$tmp/pbase/ckpt-1.npz" "$tmp/pfrozen/ckpt-2.npz")
if [ "$got" = "True True" ]; then
  ok "frozen BatchNormalization: moving statistics and gamma unchanged; trained ones move"
else
  bad "frozen BatchNormalization's statistics ($got)"
fi
expect_ok "eval takes a checkpoint with frozen layers" "^Accuracy: [0-9.]+" \
  "$CLT" eval --checkpoint "$tmp/pfrozen" --devices 0
expect_ok "export takes a checkpoint with frozen layers" "^Exported resnet-small" \
  "$CLT" export --checkpoint "$tmp/pfrozen" --onnx "$tmp/pfrozen.onnx"

finish
