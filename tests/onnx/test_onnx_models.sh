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
# Activations no Keras fixture has (gelu_tanh: Keras' gelu with approximate=True),
# with the others of activation.c after a Conv2D that spreads the inputs over them.
acts="r=Rescaling(0.00784313725490196,-1) c=Conv2D(8,3x3,s1,same) a1=Activation(gelu_tanh)"
acts="$acts c2=Conv2D(8,1x1,s1,valid) a2=Activation(hard_sigmoid_k2) c3=Conv2D(8,1x1,s1,valid)"
acts="$acts a3=Activation(elu,0.5) c4=Conv2D(8,1x1,s1,valid) a4=Activation(leaky_relu,0.3)"
acts="$acts g=GlobalAveragePooling2D d=Dense(4)"
mkdir -p "$tmp/acts"
if "$TOOL" builtin "$acts" 6 6 3 4 "$tmp/acts" 8 >"$tmp/export.txt" 2>&1; then
  check "activations (a description) vs the reference" "$tmp/acts/model.onnx" \
    "$tmp/acts/logits.npy" "$tmp/acts/images.npy"
else
  bad "activations (a description) export ($(cat "$tmp/export.txt"))"
fi
# A ZeroPadding2D before a MaxPooling2D (folded) and before an AveragePooling2D (a Pad
# node of its own), after Conv2Ds without activation: windows at the border whose
# values are all negative take the padding's zero, which ONNX Runtime keeps only as
# long as it does not fold the Pad into the pool's own pads (docs/onnx.md).
pools="r=Rescaling(0.00784313725490196,-1) c=Conv2D(8,3x3,s1,same) p=ZeroPadding2D(1)"
pools="$pools m=MaxPooling2D(3,s2) c2=Conv2D(8,1x1,s1,valid) q=ZeroPadding2D(1)<c2"
pools="$pools a=AveragePooling2D(3x3,s2,valid) g=GlobalAveragePooling2D d=Dense(4)"
mkdir -p "$tmp/pools"
if "$TOOL" builtin "$pools" 8 8 3 4 "$tmp/pools" 8 >"$tmp/export.txt" 2>&1; then
  check "zero padding before pooling (a description) vs the reference" "$tmp/pools/model.onnx" \
    "$tmp/pools/logits.npy" "$tmp/pools/images.npy"
else
  bad "zero padding before pooling (a description) export ($(cat "$tmp/export.txt"))"
fi
# LayerNormalization on the pooled (N, C) tensor, as ConvNeXt's head has it.
head="r=Rescaling(0.00784313725490196,-1) c=Conv2D(8,3x3,s1,same) g=GlobalAveragePooling2D"
head="$head ln=LayerNormalization(eps1e-06) d=Dense(4)"
mkdir -p "$tmp/head"
if "$TOOL" builtin "$head" 6 6 3 4 "$tmp/head" 8 >"$tmp/export.txt" 2>&1; then
  check "LayerNormalization after pooling (a description) vs the reference" "$tmp/head/model.onnx" \
    "$tmp/head/logits.npy" "$tmp/head/images.npy"
else
  bad "LayerNormalization after pooling (a description) export ($(cat "$tmp/export.txt"))"
fi
finish
