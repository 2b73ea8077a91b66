#!/usr/bin/env bash
# Models exported without a device and run in ONNX Runtime against numbers cltrain
# did not make: each Keras fixture of tests/models against Keras' own logits on its
# batch, and each built-in model (random weights, random images) against the
# double-precision reference interpreter. Needs onnxruntime and onnx for $PYTHON
# (default /usr/bin/python3): fails without them under CI=true, skipped (77) otherwise.
#   test_onnx_models.sh ONNX_MODELS MODELS_DIR
set -u
TOOL=$1
MODELS=$2
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

if ! "$PY" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
  if [ "${CI:-}" = true ]; then
    bad "onnxruntime and onnx importable by $PY (.ci/setup installs them)"
    finish
    exit 1
  fi
  echo "SKIP: onnxruntime or onnx not importable by $PY (python3 -m pip install onnxruntime onnx)"
  exit 77
fi

# check NAME MODEL LOGITS INPUTS: check_onnx.py passes; its figures in the line.
check() {
  if "$PY" "$here/check_onnx.py" "$2" "$3" --inputs "$4" >"$tmp/check.txt" 2>&1; then
    ok "$1: $(grep -o 'top-1 agreement.*' "$tmp/check.txt")"
  else
    bad "$1: $(tail -4 "$tmp/check.txt" | tr '\n' ' ')"
  fi
}

n=0
for dir in "$MODELS"/*/; do
  dir=${dir%/}
  [ -f "$dir/model.json" ] && [ -f "$dir/batch.npz" ] || continue
  name=$(basename "$dir")
  n=$((n + 1))
  if "$TOOL" keras "$dir" "$tmp/$name.onnx" >"$tmp/export.txt" 2>&1; then
    check "Keras fixture $name vs Keras" "$tmp/$name.onnx" "$dir/batch.npz:logits_inference" \
      "$dir/batch.npz:x"
  else
    bad "Keras fixture $name exports ($(cat "$tmp/export.txt"))"
  fi
done
[ "$n" -gt 0 ] || bad "Keras fixtures found in $MODELS"

# builtin NAME H W C CLASSES COUNT
builtin() {
  local out="$tmp/$1-$2"
  mkdir -p "$out"
  if "$TOOL" builtin "$1" "$2" "$3" "$4" "$5" "$out" "$6" >"$tmp/export.txt" 2>&1; then
    check "built-in $1 ${2}x${3}x${4} vs the reference" "$out/model.onnx" "$out/logits.npy" \
      "$out/images.npy"
  else
    bad "built-in $1 exports ($(cat "$tmp/export.txt"))"
  fi
}
builtin fmnist-cnn 28 28 1 10 64
builtin resnet-small 32 32 3 5 16
builtin resnet50 64 64 3 7 2
finish
