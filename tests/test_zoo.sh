#!/usr/bin/env bash
# The `zoo` label (tests/models/zoo/README.md): the smallest full-size model of a
# keras.applications family, written by Keras (tests/models/zoo/make_zoo_models.py,
# gzipped), trains one epoch at 96x96 on a small photo folder: the loss is finite
# and the checkpoint is written. Its ONNX export then scores in ONNX Runtime as
# `cltrain eval --logits` does on the same photos (tests/onnx/check_photos.py, as
# tests/test_onnx.sh uses it): resized as docs/onnx.md shows, the same top-1 class,
# logits within 1e-4 of the largest, and logits that depend on the image.
# The folder is check_photos.py's (18 PNGs of 6 sizes, none 96x96, 3 classes), which
# it decodes without an imaging library, and the epoch is one step of all 18: the
# model files' BatchNormalization momentum is 0, so the moving statistics evaluation
# uses are those of the photos evaluated. Statistics of other photos give the deep
# untrained networks logits so large that rounding differences decide them.
# Without onnxruntime and onnx for $PYTHON (default /usr/bin/python3) that part
# fails under CI=true (.ci/setup installs them) and is skipped (exit 77) otherwise.
#   test_zoo.sh CLTRAIN MODEL.json.gz
set -u
CLT=$1
GZ=$2
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
name=$(basename "$GZ" .json.gz)
model="$tmp/$name.json"
start=$SECONDS

if gzip -dc "$GZ" >"$model"; then ok "$name: model file unpacked"; else
  bad "$name: unpacking $GZ"
  finish
  exit 1
fi
"$PY" "$here/onnx/check_photos.py" write "$tmp/photos" 3 || bad "check_photos.py write"
"$CLT" train --model "$model" --data "$tmp/photos" --image-size 96 --epochs 1 \
  --batch-per-replica 18 --seed 3 --checkpoint-dir "$tmp/ck" >"$tmp/train.txt" 2>&1
rc=$?
cat "$tmp/train.txt"
loss=$(sed -n 's/^Epoch 1, Loss: \([^,]*\),.*/\1/p' "$tmp/train.txt")
if [ $rc -eq 0 ] && awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l + 0 > 0) }'; then
  ok "$name: one epoch trained, loss $loss"
else
  bad "$name: one epoch trained (rc=$rc, loss '$loss': $(tail -1 "$tmp/train.txt"))"
fi
if [ -s "$tmp/ck/ckpt-1.npz" ]; then ok "$name: checkpoint written"; else
  bad "$name: checkpoint written (no $tmp/ck/ckpt-1.npz)"
  finish
  exit 1
fi
expect_ok "$name: export to ONNX" "^Exported $name.json" \
  "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/model.onnx"
"$CLT" eval --checkpoint "$tmp/ck" --data "$tmp/photos" --logits "$tmp/logits.npy" \
  >"$tmp/eval.txt" 2>&1
rc=$?
cat "$tmp/eval.txt"
eloss=$(sed -n 's/^Loss: //p' "$tmp/eval.txt")
if [ $rc -eq 0 ] && awk -v l="$eloss" 'BEGIN { exit !(l ~ /^[0-9.]+$/) }'; then
  ok "$name: eval --logits, loss $eloss"
else
  bad "$name: eval --logits (rc=$rc: $(tail -1 "$tmp/eval.txt"))"
fi

if ! "$PY" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
  if [ "${CI:-}" = true ]; then
    bad "onnxruntime and onnx importable by $PY (.ci/setup installs them)"
    finish
    exit 1
  fi
  echo "SKIP: onnxruntime or onnx not importable by $PY; the ONNX Runtime comparison did not run"
  finish || exit 1
  exit 77
fi
# check_photos.py also fails where a corner-aligned resize gives logits as close,
# as it does when every image gets the same logits.
if "$PY" "$here/onnx/check_photos.py" check "$tmp/model.onnx" "$tmp/logits.npy" \
  "$here/../docs/onnx.md" --data "$tmp/photos" --sorted >"$tmp/check.txt" 2>&1; then
  ok "$name: ONNX Runtime agrees with cltrain eval: $(grep -o 'top-1 agreement.*' "$tmp/check.txt")"
else
  bad "$name: ONNX Runtime agrees with cltrain eval: $(grep FAIL "$tmp/check.txt" | head -3 | tr '\n' ' ')$(tail -1 "$tmp/check.txt")"
fi
cat "$tmp/check.txt"
echo "$name: $((SECONDS - start)) s"
finish
