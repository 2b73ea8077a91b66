#!/usr/bin/env bash
# Any number of layers: a DenseNet-like Keras model file of more than 2048 layers
# named in up to 40 characters (written by tests/deep_model.py; its description
# runs past 200 KB) imports, trains a step on two replicas to the same weights as
# on one, saves, resumes and exports ONNX, which ONNX Runtime runs to cltrain's
# predictions (where onnxruntime is importable).
set -u
CLT=$1
MAKE=$2
MODELS=$3
TOOL=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
PY=/usr/bin/python3

"$MAKE" "$tmp/ph" 3 8 6 >/dev/null || bad "make_photos"
"$PY" "$here/deep_model.py" "$MODELS/functional_add_concat_k2/model.json" 980 \
  "$tmp/deep.json" || bad "deep_model.py"

# One step of a global batch of 24, on one replica and on two.
train() {
  POCL_DEVICES=$1 "$CLT" train --model "$tmp/deep.json" --data "$tmp/ph" --epochs 1 \
    --train-limit 24 --batch-per-replica "$2" --split equal --seed 3 --checkpoint-dir "$3"
}
expect_ok "a model of 2085 layers imports and trains a step" \
  "^Model deep.json: [0-9]+ parameters, 2085 layers" train pthread 24 "$tmp/one"
expect_ok "the same on two replicas" "^Epoch 1, " train "pthread pthread" 12 "$tmp/two"
expect_close "two replicas train the weights of one" "$tmp/one/ckpt-1.npz" "$tmp/two/ckpt-1.npz" 1e-5
expect_ok "--resume from the checkpoint" "^Epoch 2, " \
  "$CLT" train --data "$tmp/ph" --resume --epochs 2 --train-limit 24 --batch-per-replica 24 \
  --checkpoint-dir "$tmp/one"
expect_ok "export to ONNX" "^Exported deep.json" \
  "$CLT" export --checkpoint "$tmp/one" --onnx "$tmp/deep.onnx"
# ONNX Runtime on the export: the probabilities `cltrain predict` prints.
if "$PY" -c 'import numpy, onnxruntime' 2>/dev/null; then
  "$PY" "$here/onnx/check_photos.py" write "$tmp/sizes" 3 || bad "check_photos.py write"
  "$CLT" predict --checkpoint "$tmp/one" "$tmp/sizes/" --top-k 3 --format jsonl \
    >"$tmp/p.jsonl" 2>/dev/null || bad "predict"
  if "$PY" "$here/predict/check_predict.py" onnx "$tmp/p.jsonl" "$tmp/deep.onnx" \
    "$here/../docs/onnx.md" >"$tmp/check.txt" 2>&1; then
    ok "ONNX Runtime on the export predicts what cltrain does"
  else
    bad "ONNX Runtime on the export: $(tail -3 "$tmp/check.txt" | tr '\n' ' ')"
  fi
elif [ "${CI:-}" = true ]; then
  bad "onnxruntime importable by $PY"
fi
finish
