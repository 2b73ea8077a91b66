#!/usr/bin/env bash
# Keras' initializers from a model file, without --weights: seq_cnn with each of
# them (tests/keras_initializers.py writes the files) trains a step at a negligible
# learning rate, and its checkpoint's weights follow Keras' formula; the same seed
# starts from the same weights on two replicas as on one; an initializer cltrain
# does not draw is refused in one line naming the layer and the option.
set -u
CLT=$1
MODELS=$2
TOOL=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
PY=/usr/bin/python3

cases=$("$PY" "$here/keras_initializers.py" write "$MODELS/seq_cnn/model.json" "$tmp") ||
  bad "keras_initializers.py write"
# start NAME DIR [DEVICES]: one step of 32 examples from NAME's initial weights.
start() {
  POCL_DEVICES=${3:-pthread} "$CLT" train --model "$tmp/$1.json" --data "$FMNIST" --epochs 1 \
    --train-limit 32 --test-limit 32 --batch-per-replica $((32 / ${4:-1})) --split equal \
    --optimizer sgd --lr 1e-12 --seed 9 --checkpoint-dir "$2" >"$tmp/out" 2>&1
}
for name in $cases; do
  if start "$name" "$tmp/ck_$name"; then
    if "$PY" "$here/keras_initializers.py" check "$name" "$tmp/ck_$name/ckpt-1.npz" >"$tmp/check"; then
      ok "$(cat "$tmp/check")"
    else
      bad "$(cat "$tmp/check")"
    fi
  else
    bad "$name: training failed ($(tail -1 "$tmp/out"))"
  fi
done
start he_normal "$tmp/ck_two" "pthread pthread" 2 || bad "he_normal on two replicas ($(tail -1 "$tmp/out"))"
expect_close "he_normal: two replicas start from the weights of one" "$tmp/ck_he_normal/ckpt-1.npz" \
  "$tmp/ck_two/ckpt-1.npz" 1e-5

# Refused in one line, nothing written.
bad_init() {
  "$PY" -c "import json; d = json.load(open('$MODELS/seq_cnn/model.json')); \
    c = [l for l in d['config']['layers'] if l['class_name'] == 'Dense'][0]['config']; \
    c['kernel_initializer'] = $2; json.dump(d, open('$tmp/$1.json', 'w'))"
  expect_fail "$1: refused" "$1.json: layer dense \(Dense\): kernel_initializer $3" \
    "$CLT" train --model "$tmp/$1.json" --data "$FMNIST" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
}
bad_init identity "{'class_name': 'Identity', 'config': {'gain': 1.0}}" "Identity is not supported"
bad_init mode "{'class_name': 'VarianceScaling', 'config': {'scale': 1.0, 'mode': 'fan_sum', \
'distribution': 'uniform'}}" "VarianceScaling mode fan_sum is not fan_in"
bad_init dist "{'class_name': 'VarianceScaling', 'config': {'distribution': 'cauchy'}}" \
  "VarianceScaling distribution cauchy"
bad_init axes "{'class_name': 'HeNormal', 'config': {'input_axes': [0]}}" \
  "HeNormal option input_axes=\[0\] is not supported"
bad_init scale "{'class_name': 'VarianceScaling', 'config': {'scale': -1.0}}" \
  "VarianceScaling: bad arguments"
if [ -z "$(ls -A "$tmp/ck_bad" 2>/dev/null)" ]; then ok "no checkpoint after a refusal"; else
  bad "a refusal left $(ls "$tmp/ck_bad")"
fi
finish
