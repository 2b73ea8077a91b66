#!/usr/bin/env bash
# --augment and a model file's augmentation layers end to end: each bad value one
# error line naming the flag or layer before any work; the training changes with
# it; one replica and two train on the same images; a bare --resume continues
# with the recorded augmentation bit for bit; eval, predict and the export crop
# as training's validation did. The arithmetic itself is test_augment's.
#   test_augment.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS MODELS_DIR
set -u
CLT=$1
TOOL=$2
MAKE=$3
MODELS=$4
DATA=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/lib.sh"

"$MAKE" "$tmp/ph" 3 12 5 >/dev/null || bad "make_photos"

# Bad values: one line naming --augment and the item, no checkpoint folder made.
for case in "blur|--augment: blur: unknown augmentation \(known: flip, rotate" \
  "rotate=2|--augment: rotate=2: factor \(fractions of a full turn\) 2 outside \[-1, 1\]" \
  "zoom=0.1/1.5|--augment: zoom=0.1/1.5: width_factor 1.5 outside \(-1, 1\]" \
  "contrast=-0.1:0.2|--augment: contrast=-0.1:0.2: factor -0.1 outside \[0, 1\]" \
  "flip,,rotate=0.1|--augment: an empty item" \
  "crop=32|--augment: crop=32: expected crop=HxW" \
  "rotate=0.1,fill=constant|--augment: fill=constant: an option applies to the augmentations after it"; do
  expect_fail "--augment ${case%%|*} refused" "^cltrain: error: ${case#*|}" \
    "$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 \
    --augment "${case%%|*}" --checkpoint-dir "$tmp/nock"
done
if [ ! -e "$tmp/nock" ]; then ok "no checkpoint folder from a refused --augment"; else bad "no checkpoint folder from a refused --augment"; fi
expect_fail "--augment on IDX data refused" "holds IDX files: --augment applies to photo folders only" \
  "$CLT" train --data "$DATA" --epochs 1 --augment flip --train-limit 64 --test-limit 64
expect_fail "a model file's augmentation layers and --augment: one or the other" \
  "--augment: model file .*model_k3.json has augmentation layers of its own" \
  "$CLT" train --data "$tmp/ph" --model "$MODELS/model_k3.json" --epochs 1 --augment flip
expect_fail "an augmentation layer after a convolution refused, named" \
  "bad_after_conv.json: layer random_flip[_0-9]* \(RandomFlip\): cltrain runs augmentation layers only in a chain right after the input" \
  "$CLT" train --data "$tmp/ph" --model "$MODELS/bad_after_conv.json" --epochs 1
expect_fail "a model file's augmentation layers on IDX data refused" \
  "model_k3.json: the model takes 40x40x3 images|augmentation layers .* need a photo folder" \
  "$CLT" train --data "$DATA" --model "$MODELS/model_k3.json" --epochs 1 --train-limit 64 --test-limit 64

# train NAME FLAGS...: 2 epochs of resnet-small on 40x40 photos cropped to 32x32.
AUG="flip=horizontal,rotate=0.1,zoom=0.15,translate=0.1,contrast=0.2,brightness=0.1,crop=32x32"
train() {
  local name=$1
  shift
  "$CLT" train --data "$tmp/ph" --model resnet-small --image-size 40 --batch-per-replica 8 \
    --validation-split 0.25 --seed 4 --checkpoint-dir "$tmp/$name" --log "$tmp/$name.jsonl" "$@" \
    >"$tmp/$name.txt" 2>&1 || bad "train $name ($(tail -2 "$tmp/$name.txt"))"
}
train straight --epochs 2 --checkpoint-every 2 --augment "$AUG"
if grep -qx "Augmentation of the training images (each drawn from --seed, the epoch and the image): $AUG" "$tmp/straight.txt" &&
  grep -q "27 training and 9 validation images of 32x32x3" "$tmp/straight.txt"; then
  ok "the run names its augmentation; the model takes the 32x32 crops"
else
  bad "the run names its augmentation; the model takes the 32x32 crops ($(head -4 "$tmp/straight.txt"))"
fi
w=$(field "$tmp/straight.jsonl" 2 data_wait_seconds)
if [ -n "$w" ]; then ok "the wait for images is still reported ($w s)"; else bad "the wait for images is still reported"; fi
# The same run without --augment (crop=32x32 only, so the shapes agree) trains otherwise.
train plain --epochs 2 --checkpoint-every 2 --augment crop=32x32
a=$(field "$tmp/straight.jsonl" 1 train_loss)
p=$(field "$tmp/plain.jsonl" 1 train_loss)
if [ -n "$a" ] && [ -n "$p" ] && [ "$a" != "$p" ]; then ok "augmentation changes the training ($a vs $p)"; else
  bad "augmentation changes the training ($a vs $p)"
fi

# A bare --resume continues with the augmentation the checkpoint records.
train half --epochs 1 --checkpoint-every 1 --augment "$AUG"
"$CLT" train --checkpoint-dir "$tmp/half" --epochs 2 --resume >"$tmp/resumed.txt" 2>&1 || bad "resume ($(tail -2 "$tmp/resumed.txt"))"
if grep -q "): $AUG\$" "$tmp/resumed.txt"; then ok "a bare --resume takes the recorded augmentation"; else
  bad "a bare --resume takes the recorded augmentation ($(grep Augmentation "$tmp/resumed.txt"))"
fi
d=$(max_rel_diff "$tmp/half/ckpt-2.npz" "$tmp/straight/ckpt-1.npz")
if [ "$d" = "0.000e+00" ]; then ok "1 epoch + --resume = 2 epochs, bit for bit, augmented"; else
  bad "1 epoch + --resume = 2 epochs, bit for bit, augmented ($d)"
fi
cp -r "$tmp/straight" "$tmp/other"
"$CLT" train --checkpoint-dir "$tmp/other" --epochs 3 --resume --augment flip,crop=32x32 >/dev/null 2>"$tmp/note.txt"
if grep -q "note: --augment flip=horizontal_and_vertical,crop=32x32 differs from the checkpoint's $AUG; the run continues" "$tmp/note.txt"; then
  ok "--resume with another --augment: a note"
else
  bad "--resume with another --augment: a note ($(cat "$tmp/note.txt"))"
fi

# Eval resizes to the crop as training's validation did: the same figures.
va=$(field "$tmp/straight.jsonl" 2 test_accuracy)
vl=$(field "$tmp/straight.jsonl" 2 test_loss)
expect_ok "eval reproduces the validation figures (photos resized 40 -> 32)" \
  "Accuracy: $(printf %.2f "$va").*Loss: $(printf %.4f "$vl")" \
  bash -c "'$CLT' eval --checkpoint '$tmp/straight' | tr '\n' ' '"
# predict resizes the same way: the softmax of eval --logits on the whole folder.
"$CLT" eval --checkpoint "$tmp/straight" --validation-split 0 --logits "$tmp/all.npy" >/dev/null 2>&1 ||
  bad "eval --logits"
"$CLT" predict --checkpoint "$tmp/straight" --format jsonl --top-k 3 "$tmp/ph" >"$tmp/all.jsonl" 2>/dev/null ||
  bad "predict"
if "${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/predict/check_predict.py" eval "$tmp/all.jsonl" \
  "$tmp/all.npy" "$tmp/ph" >"$tmp/check.txt" 2>&1; then
  ok "predict crops as eval does: its probabilities are the softmax of eval's logits"
else
  bad "predict crops as eval does ($(tail -2 "$tmp/check.txt" | tr '\n' ' '))"
fi
"$CLT" export --checkpoint "$tmp/straight" --onnx "$tmp/m.onnx" >/dev/null 2>&1 || bad "export"
if grep -aq "RandomCrop(32, 32) outside training" "$tmp/m.onnx" && grep -aq "$AUG: in training only" "$tmp/m.onnx"; then
  ok "the export's metadata: the augmentation, and the crop's resize in the input's"
else
  bad "the export's metadata: the augmentation, and the crop's resize in the input's"
fi

# One replica and two: the same augmented images, so after one step of a model
# without batch statistics the same loss, and parameters equal to rounding.
one_step() {
  local name=$1 devices=$2 batch=$3
  POCL_DEVICES="pthread pthread" "$CLT" train --data "$tmp/ph" --model "$MODELS/model_k3.json" \
    --devices "$devices" --split equal --batch-per-replica "$batch" --train-limit 16 --epochs 1 \
    --seed 2 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 --log "$tmp/$name.jsonl" \
    >"$tmp/$name.txt" 2>&1 || bad "train $name ($(tail -2 "$tmp/$name.txt"))"
}
one_step r1 0 16
one_step r2 0,1 8
l1=$(field "$tmp/r1.jsonl" 1 train_loss)
l2=$(field "$tmp/r2.jsonl" 1 train_loss)
if grep -q "): flip=horizontal,fill=constant" "$tmp/r1.txt" && [ -n "$l1" ] && [ "$l1" = "$l2" ]; then
  ok "a model file's layers: 1 replica x 16 and 2 x 8 see the same images (loss $l1 and $l2)"
else
  bad "a model file's layers: 1 replica x 16 and 2 x 8 see the same images (loss $l1 and $l2)"
fi
expect_close "... and step to the same parameters" "$tmp/r1/ckpt-1.npz" "$tmp/r2/ckpt-1.npz" 1e-5

finish
