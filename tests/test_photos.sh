#!/usr/bin/env bash
# Photo folders end to end: a synthetic folder (3 classes, JPEG and PNG of odd
# sizes) trains resnet-small with the loss falling, a validation split that eval
# reproduces, two replicas that stay bit-identical, ResNet50's checkpoint in
# Keras' names, shapes and count, each bad folder or file as one error line, and
# the pixel limit (a decompression bomb, --max-image-pixels).
set -u
CLT=$1
TOOL=$2
MAKE=$3
. "$(dirname "$0")/lib.sh"

"$MAKE" "$tmp/ph" 3 24 5 || bad "make_photos"

"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 4 --batch-per-replica 16 \
  --validation-split 0.25 --seed 3 --log "$tmp/log.jsonl" --checkpoint-dir "$tmp/ck" \
  --checkpoint-every 4 >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
cat "$tmp/out.txt" "$tmp/err.txt"
if [ $rc -eq 0 ]; then ok "resnet-small trains on photos"; else bad "resnet-small trains on photos (rc=$rc)"; fi
if grep -q '^Photos from .*: 3 classes (class_0, class_1, class_2)$' "$tmp/out.txt"; then ok "classes are the sorted subfolders"; else
  bad "classes are the sorted subfolders"
fi
if grep -q '54 training and 18 validation images of 32x32x3' "$tmp/out.txt"; then ok "validation split of 0.25"; else
  bad "validation split of 0.25"
fi
n=$(grep -Ec '^Epoch [1-4], Loss: [0-9.]+, Accuracy: [0-9.]+, Validation Loss: [0-9.]+, Validation Accuracy: [0-9.]+$' "$tmp/out.txt")
if [ "$n" -eq 4 ]; then ok "four epoch lines with validation"; else bad "four epoch lines with validation (got $n)"; fi
l1=$(field "$tmp/log.jsonl" 1 train_loss)
l4=$(field "$tmp/log.jsonl" 4 train_loss)
w=$(field "$tmp/log.jsonl" 4 data_wait_seconds)
if awk -v a="$l1" -v b="$l4" 'BEGIN { exit !(b < a * 0.8) }'; then ok "loss falls ($l1 -> $l4)"; else bad "loss falls ($l1 -> $l4)"; fi
if [ -n "$w" ]; then ok "the log records the wait for images ($w s)"; else bad "the log records the wait for images"; fi
va=$(field "$tmp/log.jsonl" 4 test_accuracy)
vl=$(field "$tmp/log.jsonl" 4 test_loss)
expect_ok "eval of the validation split reproduces training's figures" \
  "Accuracy: $(printf %.2f "$va").*Loss: $(printf %.4f "$vl")" \
  bash -c "'$CLT' eval --checkpoint '$tmp/ck' --data '$tmp/ph' --validation-split 0.25 --seed 3 | tr '\n' ' '"
# The checkpoint keeps the class names: another folder with as many classes
# under other names is refused rather than scored wrongly.
mkdir -p "$tmp/renamed"
for c in 0 1 2; do cp -r "$tmp/ph/class_$c" "$tmp/renamed/kind_$c"; done
expect_fail "eval on other classes is refused" "trained on classes \(class_0,class_1,class_2\), but .*renamed has \(kind_0,kind_1,kind_2\)" \
  "$CLT" eval --checkpoint "$tmp/ck" --data "$tmp/renamed"
"$TOOL" list "$tmp/ck/ckpt-1.npz" >"$tmp/list.txt"
if grep -qx 'conv1_bn/moving_variance (16)' "$tmp/list.txt" && grep -qx 'conv2_block1_0_conv/kernel (1,1,16,32)' "$tmp/list.txt"; then
  ok "checkpoint members in Keras layout"
else
  bad "checkpoint members in Keras layout"
fi

# Resume: the image size, split and data order come from the checkpoint, so 1
# epoch plus a resume to 2 writes what 2 epochs straight write.
"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 16 \
  --validation-split 0.25 --seed 3 --checkpoint-dir "$tmp/r1" --checkpoint-every 1 >/dev/null 2>&1
"$CLT" train --data "$tmp/ph" --epochs 2 --batch-per-replica 16 --validation-split 0.25 \
  --checkpoint-dir "$tmp/r1" --resume --log "$tmp/r1.jsonl" >/dev/null 2>&1
# The log names the model trained (the checkpoint's), not the --model default.
if grep -q '"model": "resnet-small"' "$tmp/r1.jsonl"; then ok "a resumed run's log names the checkpoint's model"; else
  bad "a resumed run's log names the checkpoint's model ($(grep -o '"model": "[^"]*"' "$tmp/r1.jsonl"))"
fi
"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 2 --batch-per-replica 16 \
  --validation-split 0.25 --seed 3 --checkpoint-dir "$tmp/r2" --checkpoint-every 2 >/dev/null 2>&1
d=$(max_rel_diff "$tmp/r1/ckpt-2.npz" "$tmp/r2/ckpt-1.npz")
if [ "$d" = "0.000e+00" ]; then ok "resume writes what a straight run writes"; else bad "resume writes what a straight run writes ($d)"; fi

# Evaluation normalises with the moving statistics: once enough steps have
# moved them (momentum 0.99: 135 steps here), the held-out images are
# recognised too. Measured 100% from epoch 5 on; a broken inference path or
# moving average stays near chance (33%).
"$MAKE" "$tmp/ph60" 3 60 11 || bad "make_photos"
"$CLT" train --data "$tmp/ph60" --model resnet-small --image-size 48 --validation-split 0.25 --epochs 15 \
  --batch-per-replica 16 --seed 5 --checkpoint-every 0 --log "$tmp/v.jsonl" >/dev/null 2>&1
va=$(field "$tmp/v.jsonl" 15 test_accuracy)
if awk -v a="$va" 'BEGIN { exit !(a != "" && a >= 90) }'; then ok "validation accuracy after 15 epochs $va >= 90"; else
  bad "validation accuracy after 15 epochs >= 90 (got $va)"
fi

# Two replicas: equal slices, every replica's parameters and moving statistics
# bit-identical after every step.
POCL_DEVICES="pthread pthread" expect_ok "two replicas stay identical (--check-replicas)" "^Epoch 2" \
  "$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 2 --batch-per-replica 8 \
  --split equal --check-replicas --checkpoint-every 0

# The acceptance run: ResNet50 at 64x64 trains, and its checkpoint carries Keras'
# names, shapes and parameter count (23,593,859 for 3 classes).
expect_ok "resnet50 trains at 64x64" "^Epoch 1, Loss" \
  "$CLT" train --model resnet50 --data "$tmp/ph" --image-size 64 --epochs 1 --batch-per-replica 8 \
  --train-limit 16 --checkpoint-dir "$tmp/ck50"
"$TOOL" list "$tmp/ck50/ckpt-1.npz" >"$tmp/list50.txt"
for m in 'conv1_conv/kernel (7,7,3,64)' 'conv2_block1_0_conv/kernel (1,1,64,256)' \
  'conv4_block6_2_conv/kernel (3,3,256,256)' 'conv5_block3_3_bn/moving_variance (2048)' \
  'predictions/kernel (2048,3)' 'total 23593859'; do
  if grep -qxF "$m" "$tmp/list50.txt"; then ok "resnet50 checkpoint: $m"; else bad "resnet50 checkpoint: $m"; fi
done

# Bad folders and files.
mkdir -p "$tmp/empty" "$tmp/noimg/a" "$tmp/noimg/b" "$tmp/garbage/a" "$tmp/garbage/b" "$tmp/trunc/a" "$tmp/trunc/b"
cp "$tmp/ph/class_0/img_000.jpg" "$tmp/noimg/a/"
touch "$tmp/afile"
expect_fail "missing folder" "nonexistent.*No such file" "$CLT" train --data "$tmp/nonexistent" --epochs 1
expect_fail "a file, not a folder" "afile.*not a directory" "$CLT" train --data "$tmp/afile" --epochs 1
expect_fail "empty folder" "empty has no class subfolders of photos, nor IDX files" \
  "$CLT" train --data "$tmp/empty" --epochs 1
expect_fail "class without images" "class directory b holds no" "$CLT" train --data "$tmp/noimg" --epochs 1
for c in a b; do cp "$tmp/ph/class_0/img_00"[0-3]* "$tmp/garbage/$c/"; cp "$tmp/ph/class_1/img_00"[0-3]* "$tmp/trunc/$c/"; done
head -c 2000 /dev/urandom >"$tmp/garbage/b/zz.jpg"
expect_fail "garbage .jpg: refused before training, named" "garbage/b/zz.jpg.*neither JPEG nor PNG" \
  "$CLT" train --data "$tmp/garbage" --model resnet-small --image-size 32 --epochs 1
f="$tmp/trunc/b/img_000.jpg"
head -c $(($(stat -c %s "$f") / 2)) "$f" >"$tmp/half.jpg" && mv "$tmp/half.jpg" "$f"
expect_fail "truncated JPEG: training stops naming it" "trunc/b/img_000.jpg: cannot decode" \
  "$CLT" train --data "$tmp/trunc" --model resnet-small --image-size 32 --epochs 1 --checkpoint-dir "$tmp/cktr"
if [ ! -e "$tmp/cktr/checkpoint" ]; then ok "no checkpoint from the failed run"; else bad "no checkpoint from the failed run"; fi

# Decompression bombs: a 20000x10000 PNG of zeros (a few KiB) is refused from its
# header and stops the run like a corrupt file; --max-image-pixels moves the limit,
# for train and eval alike.
"$MAKE" "$tmp/bomb" 2 4 7 || bad "make_photos"
"$MAKE" --blank "$tmp/bomb/class_1/zz_bomb.png" 20000 10000 || bad "make_photos --blank"
expect_fail "a decompression bomb stops training, named with its size and the flag" \
  "bomb/class_1/zz_bomb.png: 20000x10000 = 200000000 pixels exceeds the limit of 178956970 \(a decompression bomb\?\); raise it with --max-image-pixels$" \
  "$CLT" train --data "$tmp/bomb" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 4 \
  --checkpoint-dir "$tmp/ckbomb"
if [ ! -e "$tmp/ckbomb/checkpoint" ]; then ok "no checkpoint from the bomb's run"; else bad "no checkpoint from the bomb's run"; fi
"$MAKE" "$tmp/big" 2 4 7 || bad "make_photos"
"$MAKE" --blank "$tmp/big/class_0/zz_big.png" 3000 2000 || bad "make_photos --blank"
expect_fail "--max-image-pixels below an image refuses it" \
  "zz_big.png: 3000x2000 = 6000000 pixels exceeds the limit of 5999999 " \
  "$CLT" train --data "$tmp/big" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 4 \
  --checkpoint-every 0 --max-image-pixels 5999999
expect_ok "--max-image-pixels up to an image accepts it" "^Epoch 1, Loss" \
  "$CLT" train --data "$tmp/big" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 4 \
  --checkpoint-dir "$tmp/ckbig" --checkpoint-every 1 --max-image-pixels 6000000
expect_fail "eval takes --max-image-pixels too" "zz_big.png: 3000x2000 = 6000000 pixels exceeds the limit of 1000000 " \
  "$CLT" eval --checkpoint "$tmp/ckbig" --data "$tmp/big" --max-image-pixels 1000000
expect_ok "eval under the default limit" "^Accuracy: " "$CLT" eval --checkpoint "$tmp/ckbig" --data "$tmp/big"
expect_fail "too small for ResNet" "too small for model resnet50" \
  "$CLT" train --data "$tmp/ph" --model resnet50 --image-size 16 --epochs 1
expect_fail "a slice the device cannot hold" "needs [0-9]+ MiB.*try a smaller --batch-per-replica|try a smaller --batch-per-replica.*needs [0-9]+ MiB" \
  "$CLT" train --data "$tmp/ph" --model resnet50 --batch-per-replica 4096 --epochs 1
expect_fail "--image-size with IDX files" "holds IDX files: --image-size applies to photo folders only" \
  "$CLT" train --image-size 64 --epochs 1
expect_fail "grey IDX images for ResNet" "RGB" \
  "$CLT" train --model resnet-small --epochs 1 --train-limit 64 --test-limit 64
finish
