#!/usr/bin/env bash
# Keras model files from the command line: Keras' own models (tests/models) train on
# photos and on Fashion-MNIST, checkpoint with their JSON, evaluate and resume from
# the checkpoint alone; --weights starts from Keras' weights; each bad model file
# is refused in one line naming the file and the cause, leaving no checkpoint.
set -u
CLT=$1
MAKE=$2
MODELS=$3
. "$(dirname "$0")/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
PY=/usr/bin/python3

"$MAKE" "$tmp/ph" 5 12 7 >/dev/null || bad "make_photos"

# numpy_check CODE: runs a numpy snippet (exit status is the check).
numpy_check() { "$PY" -c "import numpy as np, sys; $1"; }

# ---- bad model files: one line each, nothing written --------------------------------
refuse() {
  local file=$1 re=$2
  rm -rf "$tmp/ck_bad"
  expect_fail "$(basename "$file") refused" "$(basename "$file").*$re" \
    "$CLT" train --model "$file" --data "$tmp/ph" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
  if [ -z "$(ls -A "$tmp/ck_bad" 2>/dev/null)" ]; then ok "$(basename "$file"): no checkpoint"; else
    bad "$(basename "$file"): left $(ls "$tmp/ck_bad")"
  fi
}
for k in "" _k2; do
  refuse "$MODELS/bad/truncated$k.json" "not valid JSON"
  refuse "$MODELS/bad/unsupported_lstm$k.json" "class LSTM is not supported \(supported: InputLayer, "
  refuse "$MODELS/bad/unsupported_conv2d_transpose$k.json" "class Conv2DTranspose is not supported"
  refuse "$MODELS/bad/conv2d_dilation2$k.json" "dilation"
  refuse "$MODELS/bad/channels_first$k.json" "channels_first"
  refuse "$MODELS/bad/two_outputs$k.json" "2 outputs"
  refuse "$MODELS/bad/unknown_inbound$k.json" "is not a layer of the model"
  refuse "$MODELS/bad/cycle$k.json" "cycle"
  refuse "$MODELS/bad/add_shape_mismatch$k.json" "add"
  refuse "$MODELS/bad/nested_shared$k.json" "layer base is a nested model called 2 times"
  refuse "$MODELS/bad/nested_two_outputs$k.json" "layer base \(a nested model\) has 2 outputs"
  refuse "$MODELS/bad/nested_two_inputs$k.json" "layer base \(a nested model\) has 2 inputs"
  refuse "$MODELS/bad/nested_no_layers$k.json" "layer base \(a nested model\) has no layers"
  refuse "$MODELS/bad/nested_outer_inbound$k.json" \
    "layer conv2d of nested model base takes input rescaling, which is not a layer of nested"
done
refuse "$MODELS/bad/not_a_model.json" "not a Keras model"
refuse "$MODELS/bad/op_maximum.json" "layer maximum: operation Maximum \(keras.src.ops.numpy\) of 1 tensor and 1 number is not supported"
refuse "$MODELS/bad/reshape_rank2.json" "layer reshape \(Reshape\): target_shape must be \(C\) or \(H, W, C\)"
refuse "$tmp/missing.json" "cannot open"
printf '{"class_name": "Sequential", "config": {"layers": []}}' >"$tmp/empty.json"
refuse "$tmp/empty.json" "no layers"
# A model for other images or another number of classes than the data's.
refuse "$MODELS/seq_cnn/model.json" "takes 28x28x1 images"
"$PY" -c "import json; d = json.load(open('$MODELS/mobilenet_small/model.json')); \
  d['config']['layers'][-1]['config']['units'] = 10; json.dump(d, open('$tmp/ten.json', 'w'))"
expect_fail "a 10-class model on 5-class photos" "ten.json.*(10|5) class" \
  "$CLT" train --model "$tmp/ten.json" --data "$tmp/ph" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
# Options nobody implements are refused by name, never ignored.
# variant NAME PYTHON: seq_cnn's model file with the first Conv2D's config `c` changed.
variant() {
  "$PY" -c "import json; d = json.load(open('$MODELS/seq_cnn/model.json')); \
    c = [l for l in d['config']['layers'] if l['class_name'] == 'Conv2D'][0]['config']; $2; \
    json.dump(d, open('$tmp/$1.json', 'w'))"
}
variant unknown_option "c['foo'] = 1"
variant orthogonal "c['kernel_initializer'] = {'class_name': 'Orthogonal', 'config': {'gain': 1.0, 'seed': None}}"
variant trainable "c['trainable'] = 'no'"
variant half "c['dtype'] = 'mixed_float16'"
variant l2 "c['kernel_regularizer'] = {'class_name': 'L2', 'config': {'l2': 0.01}}"
variant groups "c['groups'] = 0"
for v in "unknown_option:option foo=1 is not supported" \
  "orthogonal:kernel_initializer Orthogonal is not supported.*--weights" \
  "trainable:trainable is not true or false" "half:dtype mixed_float16" "l2:kernel_regularizer L2" \
  "groups:groups 0 is not supported"; do
  expect_fail "${v%%:*}: refused" "${v%%:*}.json: layer conv2d \(Conv2D\): ${v#*:}" \
    "$CLT" train --model "$tmp/${v%%:*}.json" --data "$FMNIST" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
done
# norm_variant NAME CLASS PYTHON: norm_convnext's file with the first CLASS's config `c` changed.
norm_variant() {
  "$PY" -c "import json; d = json.load(open('$MODELS/norm_convnext/model.json')); \
    c = [l for l in d['config']['layers'] if l['class_name'] == '$2'][0]['config']; $3; \
    json.dump(d, open('$tmp/$1.json', 'w'))"
}
norm_variant ln_axis LayerNormalization "c['axis'] = 1"
norm_variant ln_rms LayerNormalization "c['rms_scaling'] = True"
norm_variant norm_invert Normalization "c['invert'] = True"
norm_variant norm_axis Normalization "c['axis'] = [1]"
norm_variant norm_mean Normalization "c['mean'] = [0, 0, 0]"
norm_variant norm_len Normalization "c['mean'] = [0, 0]; c['variance'] = [1, 1]"
norm_variant norm_negvar Normalization "c['mean'] = 0; c['variance'] = [1, -2, 1]"
norm_variant norm_text Normalization "c['mean'] = 'zero'; c['variance'] = 1"
norm_variant crop_all Cropping2D "c['cropping'] = [[6, 6], [0, 0]]"
refuse "$tmp/ln_axis.json" "layer layer_normalization \(LayerNormalization\): axis 1 is not supported"
refuse "$tmp/ln_rms.json" "layer_normalization \(LayerNormalization\): rms_scaling true is not supported"
refuse "$tmp/norm_invert.json" "layer normalization \(Normalization\): invert true is not supported"
refuse "$tmp/norm_axis.json" "layer normalization \(Normalization\): axis 1 is not supported"
refuse "$tmp/norm_mean.json" "normalization \(Normalization\): mean without variance in the config"
refuse "$tmp/norm_len.json" "normalization \(Normalization\): mean has 2 values, the input has 3 channels"
refuse "$tmp/norm_negvar.json" "normalization \(Normalization\): variance -2 of channel 1 is negative"
refuse "$tmp/norm_text.json" "normalization \(Normalization\): mean: expected a number or a list"
refuse "$tmp/crop_all.json" "cropping2d: cropping \(6,6\) rows and \(0,0\) columns leaves nothing"
# tf_op_variant NAME PYTHON: zoo_mobilenet_v3_k2's file with its first TFOpLambda `l` changed.
tf_op_variant() {
  "$PY" -c "import json; d = json.load(open('$MODELS/zoo_mobilenet_v3_k2/model.json')); \
    l = [l for l in d['config']['layers'] if l['class_name'] == 'TFOpLambda'][0]; $2; \
    json.dump(d, open('$tmp/$1.json', 'w'))"
}
tf_op_variant tf_op_maximum "l['config']['function'] = 'math.maximum'"
tf_op_variant tf_op_kwarg "l['inbound_nodes'][0][3]['foo'] = 1"
refuse "$tmp/tf_op_maximum.json" \
  "layer tf.__operators__.add \(TFOpLambda\): function math.maximum is not supported"
refuse "$tmp/tf_op_kwarg.json" "layer tf.__operators__.add \(TFOpLambda\): call argument foo is not"
variant groups2 "c['groups'] = 2"
expect_fail "groups that do not divide the channels: refused" \
  "groups2.json.*conv2d: groups 2 must divide the 1 input channels and 8 filters" \
  "$CLT" train --model "$tmp/groups2.json" --data "$FMNIST" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
expect_ok "another initializer is fine when --weights gives the weights" "^Epoch 1, " \
  "$CLT" train --model "$tmp/orthogonal.json" --weights "$MODELS/seq_cnn/weights.npz" --epochs 1 \
  --train-limit 64 --test-limit 64 --checkpoint-every 0
expect_fail "--preprocess takes raw, unit or caffe" "--preprocess bgr" \
  "$CLT" train --model "$MODELS/seq_cnn/model.json" --preprocess bgr --epochs 1
expect_fail "--preprocess is for model files" "built-in model fmnist-cnn" \
  "$CLT" train --preprocess unit --epochs 1

# ---- a MobileNet-like model on photos: train, checkpoint, eval, resume ----------------
mob=$MODELS/mobilenet_small/model.json
"$CLT" train --model "$mob" --data "$tmp/ph" --epochs 2 --batch-per-replica 8 \
  --validation-split 0.2 --seed 3 --checkpoint-dir "$tmp/ck" --checkpoint-every 1 \
  --log "$tmp/log.jsonl" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
cat "$tmp/out.txt" "$tmp/err.txt"
if [ $rc -eq 0 ]; then ok "mobilenet_small trains on photos"; else bad "mobilenet_small trains (rc=$rc)"; fi
n=$(grep -Ec '^Epoch [12], Loss: [0-9.]+, Accuracy: [0-9.]+, Validation Loss' "$tmp/out.txt")
if [ "$n" -eq 2 ]; then ok "two epoch lines"; else bad "two epoch lines (got $n)"; fi
if grep -q '32x32x3' "$tmp/out.txt"; then ok "photos resized to the model's 32x32"; else
  bad "photos resized to the model's 32x32"
fi
if numpy_check "z = np.load('$tmp/ck/ckpt-2.npz'); import json; \
  j = json.loads(str(z['model/keras_json'])); m = json.loads(str(z['metadata'])); \
  sys.exit(not (j['config']['name'] == 'mobilenet_small' and m['output'] == 'softmax' \
  and m['preprocess'] == 'raw'))"; then
  ok "the checkpoint keeps the model file and its softmax output"
else
  bad "the checkpoint keeps the model file and its softmax output"
fi
va=$(field "$tmp/log.jsonl" 2 test_accuracy)
expect_ok "eval needs only the checkpoint" "Accuracy: $(printf %.2f "$va")" \
  bash -c "'$CLT' eval --checkpoint '$tmp/ck' --data '$tmp/ph' --validation-split 0.2 --seed 3 | tr '\n' ' '"
expect_ok "--resume from the checkpoint alone" "^Epoch 3, " \
  "$CLT" train --data "$tmp/ph" --resume --epochs 3 --batch-per-replica 8 --validation-split 0.2 \
  --checkpoint-dir "$tmp/ck"
expect_ok "--resume with the same model file" "^Epoch 4, " \
  "$CLT" train --model "$mob" --data "$tmp/ph" --resume --epochs 4 --batch-per-replica 8 \
  --validation-split 0.2 --checkpoint-dir "$tmp/ck"
expect_fail "--resume with another model file" "holds model model.json.*functional_add_concat" \
  "$CLT" train --model "$MODELS/functional_add_concat/model.json" --data "$tmp/ph" --resume \
  --epochs 5 --validation-split 0.2 --checkpoint-dir "$tmp/ck"
expect_fail "--weights with --resume" "--weights" \
  "$CLT" train --model "$mob" --weights "$MODELS/mobilenet_small/weights.npz" --data "$tmp/ph" \
  --resume --epochs 5 --validation-split 0.2 --checkpoint-dir "$tmp/ck"

# ---- the functional model with Add and Concatenate, on two replicas ----------------
POCL_DEVICES="pthread pthread" expect_ok "functional_add_concat trains on two replicas" \
  "^Epoch 1, " "$CLT" train --model "$MODELS/functional_add_concat_k2/model.json" \
  --data "$tmp/ph" --epochs 1 --batch-per-replica 8 --check-replicas --checkpoint-every 0

# ---- Dropout: two replica layouts draw the same masks ---------------------------------
# The tutorial-like CNN with a Dropout after Flatten (no BatchNormalization, whose
# per-replica batch statistics would differ between layouts as in TensorFlow).
for rate in 0.5 0.0; do
  "$PY" -c "import json; d = json.load(open('$MODELS/seq_cnn/model.json')); L = d['config']['layers']; \
    i = [k for k, l in enumerate(L) if l['class_name'] == 'Flatten'][0]; \
    L.insert(i + 1, {'class_name': 'Dropout', 'config': {'name': 'dropout', 'trainable': True, \
    'dtype': 'float32', 'rate': $rate, 'seed': None, 'noise_shape': None}}); \
    json.dump(d, open('$tmp/drop_$rate.json', 'w'))"
done
# Drop-connect (noise_shape (None, 1, 1, 1): one draw per example) after the second
# Conv2D; a noise_shape entry other than None, 1 or the axis's size is refused.
for ns in "dc:[None, 1, 1, 1]" "bad_ns:[None, 2, 1, 1]"; do
  "$PY" -c "import json; d = json.load(open('$MODELS/seq_cnn/model.json')); L = d['config']['layers']; \
    i = [k for k, l in enumerate(L) if l['class_name'] == 'Conv2D'][1]; \
    L.insert(i + 1, {'class_name': 'Dropout', 'config': {'name': 'drop_connect', 'trainable': True, \
    'dtype': 'float32', 'rate': 0.5, 'seed': None, 'noise_shape': ${ns#*:}}}); \
    json.dump(d, open('$tmp/drop_${ns%%:*}.json', 'w'))"
done
expect_fail "noise_shape (None, 2, 1, 1) refused" \
  "drop_connect: noise_shape entry 1 is 2: only None, 1 or the input's 13" \
  "$CLT" train --model "$tmp/drop_bad_ns.json" --data "$FMNIST" --epochs 1 --checkpoint-dir "$tmp/ck_bad"
for run in "0.5 pthread 24" "0.5 pthread_pthread 12" "0.0 pthread 24" "dc pthread 24" \
  "dc pthread_pthread 12"; do
  set -- $run
  POCL_DEVICES=${2//_/ } "$CLT" train --model "$tmp/drop_$1.json" --data "$FMNIST" --epochs 1 \
    --split equal --train-limit 96 --test-limit 32 --batch-per-replica "$3" \
    --checkpoint-dir "$tmp/ck_drop_$1_$2" >/dev/null 2>&1 || bad "dropout model on $2"
done

# relmax A B: the largest difference of the kernels relative to the largest weight.
relmax() {
  "$PY" -c "import numpy as np; a = np.load('$1'); b = np.load('$2'); \
  print(max(float(np.abs(a[n] - b[n]).max() / np.abs(a[n]).max()) for n in a.files \
  if n.endswith('kernel') and not n.startswith('optimizer')))"
}
same=$(relmax "$tmp/ck_drop_0.5_pthread/ckpt-1.npz" "$tmp/ck_drop_0.5_pthread_pthread/ckpt-1.npz")
off=$(relmax "$tmp/ck_drop_0.5_pthread/ckpt-1.npz" "$tmp/ck_drop_0.0_pthread/ckpt-1.npz")
if awk -v s="$same" -v o="$off" 'BEGIN { exit !(s != "" && s < 1e-5 && o > 1e-3) }'; then
  ok "Dropout: one replica and two draw the same masks ($same; without dropout $off)"
else
  bad "Dropout: one replica and two draw the same masks ($same; without dropout $off)"
fi
same=$(relmax "$tmp/ck_drop_dc_pthread/ckpt-1.npz" "$tmp/ck_drop_dc_pthread_pthread/ckpt-1.npz")
off=$(relmax "$tmp/ck_drop_dc_pthread/ckpt-1.npz" "$tmp/ck_drop_0.0_pthread/ckpt-1.npz")
if awk -v s="$same" -v o="$off" 'BEGIN { exit !(s != "" && s < 1e-5 && o > 1e-3) }'; then
  ok "drop-connect: one replica and two draw the same masks ($same; without dropout $off)"
else
  bad "drop-connect: one replica and two draw the same masks ($same; without dropout $off)"
fi

# ---- the reference CNN written by Keras trains bit for bit as the built-in one ---------
"$CLT" train --epochs 1 --train-limit 512 --test-limit 128 --seed 5 --checkpoint-dir "$tmp/ck_ref" \
  >/dev/null 2>&1 || bad "fmnist-cnn"
"$CLT" train --model "$MODELS/examples/fmnist_cnn.json" --preprocess unit --epochs 1 \
  --train-limit 512 --test-limit 128 --seed 5 --checkpoint-dir "$tmp/ck_refjson" >/dev/null 2>&1 ||
  bad "examples/fmnist_cnn.json"
if numpy_check "a = np.load('$tmp/ck_ref/ckpt-1.npz'); b = np.load('$tmp/ck_refjson/ckpt-1.npz'); \
  sys.exit(not all(np.array_equal(a[n], b[n]) for n in a.files if a[n].dtype == np.float32))"; then
  ok "examples/fmnist_cnn.json (Keras' tutorial CNN) trains bit for bit as fmnist-cnn"
else
  bad "examples/fmnist_cnn.json (Keras' tutorial CNN) trains bit for bit as fmnist-cnn"
fi

# ---- Fashion-MNIST with the tutorial-like Sequential CNN and Keras' weights ------------
seq=$MODELS/seq_cnn/model.json
expect_ok "seq_cnn learns Fashion-MNIST" "^Epoch 2, .*Test Accuracy: ([6-9][0-9])" \
  "$CLT" train --model "$seq" --data "$FMNIST" --train-limit 4000 --test-limit 1000 --epochs 2 \
  --checkpoint-every 0
"$CLT" train --model "$seq" --weights "$MODELS/seq_cnn/weights.npz" --lr 1e-12 --epochs 1 \
  --train-limit 64 --test-limit 64 --checkpoint-dir "$tmp/ck_w" >/dev/null 2>&1 || bad "--weights"
if numpy_check "a = np.load('$tmp/ck_w/ckpt-1.npz'); w = np.load('$MODELS/seq_cnn/weights.npz'); \
  d = max(float(np.abs(a[n] - w['arr_%d' % i]).max()) for i, n in enumerate(['conv2d/kernel', \
  'conv2d/bias', 'conv2d_1/kernel', 'conv2d_1/bias', 'dense/kernel', 'dense/bias', \
  'dense_1/kernel', 'dense_1/bias'])); print(d); sys.exit(not (d < 1e-6))"; then
  ok "--weights FILE.npz (get_weights order) is where training starts"
else
  bad "--weights FILE.npz (get_weights order) is where training starts"
fi
# A Sequential without InputLayer takes its input shape from the first layer
# (tf.keras 2.x's batch_input_shape), the model's build_config (Keras 3), or the data.
"$PY" -c "import json
d = json.load(open('$MODELS/seq_cnn_k2/model.json')); L = d['config']['layers']; i = L.pop(0)
L[0]['config']['batch_input_shape'] = i['config']['batch_input_shape']
json.dump(d, open('$tmp/k2_noinput.json', 'w'))
d = json.load(open('$MODELS/seq_cnn/model.json')); d['config']['layers'].pop(0)
d['build_config'] = {'input_shape': [None, 28, 28, 1]}; json.dump(d, open('$tmp/k3_noinput.json', 'w'))
d['build_config'] = {'input_shape': None}; json.dump(d, open('$tmp/k3_open.json', 'w'))"
want=$("$CLT" train --model "$seq" --epochs 1 --train-limit 256 --test-limit 64 --checkpoint-every 0 |
  grep '^Epoch 1')
for f in k2_noinput k3_noinput k3_open; do
  expect_ok "a Sequential without InputLayer ($f) trains as with it" "^${want//./\\.}\$" \
    "$CLT" train --model "$tmp/$f.json" --epochs 1 --train-limit 256 --test-limit 64 \
    --checkpoint-every 0
done
expect_fail "--weights of another model" "weights.npz.*(shape|arrays)" \
  "$CLT" train --model "$seq" --weights "$MODELS/dw_bn_dropout/weights.npz" --epochs 1 \
  --train-limit 64 --test-limit 64 --checkpoint-dir "$tmp/ck_w2"
expect_fail "--weights missing" "nothere.npz" \
  "$CLT" train --model "$seq" --weights "$tmp/nothere.npz" --epochs 1 --checkpoint-dir "$tmp/ck_w3"

# ---- nested models: flattened, Keras' weights in get_weights order and by name --------
# Every named weight (nested models' layers under their own names, a clashing one as
# <model>/<layer>) is where training starts, from either file.
"$MAKE" "$tmp/ph10" 10 2 5 >/dev/null || bad "make_photos (10 classes)"
for k in "" _k2; do
  nest=$MODELS/nested_seq$k
  for w in weights weights_named; do
    rm -rf "$tmp/ck_nest"
    "$CLT" train --model "$nest/model.json" --data "$tmp/ph10" --weights "$nest/$w.npz" \
      --lr 1e-12 --epochs 1 --checkpoint-dir "$tmp/ck_nest" >/dev/null 2>&1 ||
      bad "nested_seq$k trains from $w.npz"
    if numpy_check "a = np.load('$tmp/ck_nest/ckpt-1.npz'); w = np.load('$nest/weights_named.npz'); \
      d = max(float(np.abs(a[n] - w[n]).max()) for n in w.files); print(d); sys.exit(not d < 1e-6)"
    then
      ok "nested_seq$k: $w.npz starts every flattened layer"
    else
      bad "nested_seq$k: $w.npz starts every flattened layer"
    fi
  done
done
# Hand edits: a tf.keras 2.x call with training=True; a clash whose <model>/<layer>
# name is too long.
"$PY" -c "import json
d = json.load(open('$MODELS/transfer_bn_k2/model.json'))
base = [l for l in d['config']['layers'] if l['name'] == 'base'][0]
base['inbound_nodes'][0][0][3]['training'] = True
json.dump(d, open('$tmp/training_true.json', 'w'))
d = json.load(open('$MODELS/nested_seq/model.json'))
f = [l for l in d['config']['layers'] if l['config']['name'] == 'features'][0]
b = [l for l in f['config']['layers'] if l['config']['name'] == 'block'][0]
b['config']['name'] = 'a_block_of_a_long_name_that_runs_past_sixty_characters'
json.dump(d, open('$tmp/long_clash.json', 'w'))"
refuse "$tmp/training_true.json" "layer base: called with training=True"
refuse "$tmp/long_clash.json" \
  "layer mix of nested model a_block_of_a_long_name_that_runs_past_sixty_characters is named as \
another layer of the file, and features/a_block_of_a_long_name_that_runs_past_sixty_characters/mix, \
its name where names clash, is longer than 63 characters"
expect_ok "a frozen base called with training=False trains and evaluates on photos" \
  "^Epoch 1, .*Accuracy" "$CLT" train --model "$MODELS/transfer_bn_k2/model.json" --data "$tmp/ph" \
  --weights "$MODELS/transfer_bn_k2/weights.npz" --epochs 1 --checkpoint-dir "$tmp/ck_transfer"
cp "$tmp/err" "$tmp/transfer_err.txt"
expect_ok "... and eval rebuilds it from the checkpoint" "Accuracy" \
  "$CLT" eval --checkpoint "$tmp/ck_transfer" --data "$tmp/ph"
# A tf.keras 2.x training=False on layers not frozen: noted, as cltrain trains them
# as Keras 3 does (batch statistics); none where they are frozen (transfer_bn_k2).
"$CLT" train --model "$MODELS/finetune_bn_k2/model.json" --data "$tmp/ph" --epochs 1 \
  --checkpoint-every 0 >/dev/null 2>"$tmp/ft.txt" || bad "finetune_bn_k2 trains"
if grep -q "^cltrain: note: .*finetune_bn_k2/model.json: layer batch_normalization and others, \
called with training=False, train as in Keras 3 (BatchNormalization on batch statistics" "$tmp/ft.txt" &&
  ! grep -q "training=False" "$tmp/transfer_err.txt"; then
  ok "training=False on layers not frozen is noted (tf.keras 2.x), on frozen ones not"
else
  bad "training=False on layers not frozen is noted (tf.keras 2.x), on frozen ones not ($(cat "$tmp/ft.txt"))"
fi
# Augmentation in a nested Sequential (Keras' guide: x = data_augmentation(inputs)) is
# the chain after the input that the photo loader runs.
for k in "" _k2; do
  expect_ok "nested_augment/model$k.json: a nested Sequential's augmentation layers augment the photos" \
    "^Augmentation of the training images .*: flip=horizontal,rotate=0.1\$" \
    "$CLT" train --model "$MODELS/nested_augment/model$k.json" --data "$tmp/ph" --epochs 1 \
    --checkpoint-every 0
done
"$CLT" train --model "$MODELS/transfer_bn_k2/model.json" --data "$tmp/ph" \
  --weights "$MODELS/transfer_bn_k2/weights.npz" --epochs 1 --checkpoint-dir "$tmp/ck_all" \
  --freeze-until none >"$tmp/all.txt" 2>&1
if ! grep -q "^Frozen:" "$tmp/all.txt" && grep -q "^Epoch 1, " "$tmp/all.txt"; then
  ok "--freeze-until none trains the model file's frozen base too"
else
  bad "--freeze-until none trains the model file's frozen base too ($(grep -m1 -E '^Frozen|error' "$tmp/all.txt"))"
fi

# ---- Normalization's statistics: get_weights' int64 count, kept by training -----------
# np.savez(F, *model.get_weights()) keeps Normalization's count as int64; training
# (a large rate, two replicas of unequal shares) leaves mean, variance and count as
# Keras adapted them.
ncx=$MODELS/norm_convnext
"$PY" -c "import numpy as np
w = np.load('$ncx/weights.npz'); a = [w['arr_%d' % i] for i in range(len(w.files))]
a[2] = np.array(7, dtype=np.int64); np.savez('$tmp/ncx_int.npz', *a)"
if POCL_DEVICES="pthread pthread" "$CLT" train --model "$ncx/model.json" --data "$tmp/ph" \
  --weights "$tmp/ncx_int.npz" --lr 0.5 --epochs 1 --split 2,1 --checkpoint-dir "$tmp/ck_ncx" \
  >"$tmp/ncx.txt" 2>&1 &&
  numpy_check "c = np.load('$tmp/ck_ncx/ckpt-1.npz'); w = np.load('$ncx/weights.npz'); \
  sys.exit(not (np.array_equal(c['normalization/mean'], w['arr_0']) and \
  np.array_equal(c['normalization/variance'], w['arr_1']) and \
  float(c['normalization/count']) == 7.0 and \
  not np.array_equal(c['conv2d/kernel'], w['arr_3'])))"; then
  ok "Normalization: an int64 count loads; training keeps mean, variance and count"
else
  bad "Normalization: an int64 count loads; training keeps mean, variance and count ($(tail -2 "$tmp/ncx.txt"))"
fi

# ---- Normalization's mean and variance in the config: Keras has no weights for them ----
# They start the layer's weights, with or without --weights (get_weights order or by
# name: neither has them); training keeps them, the checkpoint holds them, and
# --weights of that checkpoint reads them back.
nc=$MODELS/norm_const
"$MAKE" "$tmp/ph3" 3 4 6 >/dev/null || bad "make_photos"
nc_check="c = np.load('$tmp/ck_nc/ckpt-1.npz'); \
  m = [123.675, 116.28, 103.53]; v = [3409.976025, 3262.6944, 3291.890625]; \
  sys.exit(not (np.array_equal(c['normalization/mean'], np.float32(m)) and \
  np.array_equal(c['normalization/variance'], np.float32(v)) and \
  np.array_equal(c['normalization_1/variance'], np.float32([0.5, 2, 0.25])) and \
  np.array_equal(c['normalization_2/mean'], np.full(8, 0.25, np.float32)) and \
  np.array_equal(c['normalization_2/variance'], np.full(8, 4, np.float32))))"
for w in "" weights weights_named; do
  rm -rf "$tmp/ck_nc"
  if "$CLT" train --model "$nc/model.json" --data "$tmp/ph3" ${w:+--weights "$nc/$w.npz"} \
    --lr 0.5 --epochs 1 --checkpoint-dir "$tmp/ck_nc" >"$tmp/nc.txt" 2>&1 && numpy_check "$nc_check"
  then
    ok "Normalization: the config's mean and variance are its weights (${w:-no --weights})"
  else
    bad "Normalization: the config's mean and variance are its weights (${w:-no --weights}: $(tail -2 "$tmp/nc.txt"))"
  fi
done
expect_ok "Normalization: --weights of a checkpoint holding the config's values" "^Epoch 1, " \
  "$CLT" train --model "$nc/model.json" --data "$tmp/ph3" --weights "$tmp/ck_nc/ckpt-1.npz" \
  --epochs 1 --checkpoint-dir "$tmp/ck_nc2"

# ---- photos to ONNX: ONNX Runtime scores the exported model as `cltrain eval` does ----
# PNGs already of the model's size, so ONNX Runtime can be fed the very pixels.
if "$PY" -c 'import onnx, onnxruntime' 2>/dev/null; then
  "$PY" "$(dirname "$0")/onnx/exact_photos.py" "$tmp/exact" 32 5 8
  "$CLT" train --model "$mob" --data "$tmp/exact" --epochs 3 --batch-per-replica 8 \
    --checkpoint-dir "$tmp/ck_exact" >/dev/null 2>&1 || bad "mobilenet_small on exact-size photos"
  "$CLT" eval --checkpoint "$tmp/ck_exact" --data "$tmp/exact" --logits "$tmp/exact_logits.npy" \
    >/dev/null 2>&1 || bad "eval --logits on photos"
  "$CLT" export --checkpoint "$tmp/ck_exact" --onnx "$tmp/exact.onnx" >/dev/null 2>&1 ||
    bad "export of a model file"
  expect_ok "a model file trained on photos, exported: ONNX Runtime agrees with cltrain eval" \
    "check_onnx: ok" "$PY" "$(dirname "$0")/onnx/check_onnx.py" "$tmp/exact.onnx" \
    "$tmp/exact_logits.npy" --inputs "$tmp/exact.npy"
elif [ "${CI:-}" = true ]; then
  bad "onnxruntime and onnx importable by $PY (.ci/setup installs them)"
else
  echo "skipped: photos to ONNX (onnxruntime or onnx not importable by $PY; .ci/setup installs them)"
fi

# ---- Keras 3's numbered weight names: ConvNeXt's LayerScale weights ------------------
# Keras 3 names each weight made without a name "variable", "variable_1", ...: by
# name, "<layer>/variable_<n>" starts cltrain's "<layer>/gamma"; other suffixes stay
# refused.
cnx=$MODELS/zoo_convnext
"$MAKE" "$tmp/ph_cnx" 3 2 5 >/dev/null || bad "make_photos (3 classes)"
"$CLT" train --model "$cnx/model.json" --data "$tmp/ph_cnx" --weights "$cnx/weights_named.npz" \
  --lr 1e-12 --epochs 1 --checkpoint-dir "$tmp/ck_cnx" >"$tmp/cnx.txt" 2>&1 || bad "zoo_convnext from weights_named.npz"
if numpy_check "c = np.load('$tmp/ck_cnx/ckpt-1.npz'); w = np.load('$cnx/weights_named.npz'); \
  v = [n for n in w.files if '/variable_' in n]; \
  sys.exit(not (len(v) == 3 and all(float(np.abs(c[n.split('/')[0] + '/gamma'] - w[n]).max()) < 1e-6 \
  for n in v)))"; then
  ok "LayerScale: <layer>/variable_<n> by name starts <layer>/gamma"
else
  bad "LayerScale: <layer>/variable_<n> by name starts <layer>/gamma ($(tail -2 "$tmp/cnx.txt"))"
fi
numpy_check "w = dict(np.load('$cnx/weights_named.npz')); \
  n = [k for k in w if k.endswith('/variable_1')][0]; w[n.replace('variable_1', 'variable_x')] = w.pop(n); \
  np.savez('$tmp/cnx_bad.npz', **w)" || bad "writing cnx_bad.npz"
expect_fail "a weight named <layer>/variable_x is refused" "cnx_bad.npz.*no member.*layer_scale/gamma" \
  "$CLT" train --model "$cnx/model.json" --data "$tmp/ph_cnx" --weights "$tmp/cnx_bad.npz" \
  --epochs 1 --checkpoint-dir "$tmp/ck_cnx_bad"

finish
