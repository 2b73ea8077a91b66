#!/usr/bin/env python3
"""Keras model fixtures for cltrain's Keras model loader, made by real Keras.

Versions used to make the committed fixtures (Python 3.11.7, Linux x86-64):

    tensorflow-cpu==2.21.0   (pulls in keras==3.15.1: the Keras 3 format)
    tf-keras==2.21.0         (tf.keras 2.x, imported as tf_keras: the _k2 format)
    numpy==2.4.6

Regenerate (from the repository root; CI never runs this, it needs no TensorFlow):

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0 tf-keras==2.21.0
    /tmp/tfvenv/bin/python tests/models/make_fixtures.py

That writes, next to this file, one folder per model (Keras 3: <name>/, tf.keras
2.x: <name>_k2/) with model.json, weights.npz, weights_named.npz and batch.npz,
and bad/ with model files the loader must refuse. See README.md for what each
file holds. The script runs itself twice, once per Keras, in child processes
(TF_USE_LEGACY_KERAS=1 and tf_keras for the 2.x one), so the two never share a
process.

Only the models, the batch and the gradients are exact Keras; on top of Keras'
own initializers the script gives every bias and every BatchNormalization
parameter (gamma, beta, moving mean and variance) small random values, so that
a loader that ignores, swaps or misplaces one of them shows in the numbers.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 1234
# Integer arrays are int64: cltrain's npz reader takes <f4, <i8, <u8 and <U<n>.
INT = "int64"


def run_children():
    for fmt in ("k3", "k2"):
        env = dict(os.environ)
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        env["PYTHONHASHSEED"] = "0"
        if fmt == "k2":
            env["TF_USE_LEGACY_KERAS"] = "1"
        else:
            env.pop("TF_USE_LEGACY_KERAS", None)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--format", fmt], env=env)
        if r.returncode != 0:
            sys.exit("make_fixtures: the %s run failed (exit %d)" % (fmt, r.returncode))


# ----------------------------------------------------------------------------
# Everything below runs in a child, with one Keras imported as `keras`.

def main(fmt):
    global np, tf, keras, L, keras_format
    keras_format = fmt
    import numpy as np
    import tensorflow as tf
    if fmt == "k2":
        import tf_keras as keras
    else:
        import keras
        assert keras.__version__.startswith("3."), keras.__version__
    L = keras.layers
    tf.config.experimental.enable_op_determinism()
    print("make_fixtures %s: tensorflow %s, keras %s, numpy %s"
          % (fmt, tf.__version__, keras.__version__, np.__version__))

    suffix = "_k2" if fmt == "k2" else ""
    texts = {}
    for name, build, classes, batch, pixels in MODELS + (MODELS_K3 if fmt == "k3" else []):
        reset()
        model = build()
        texts[name] = model.to_json(indent=1)
        write_fixture(model, os.path.join(HERE, name + suffix), classes, batch, pixels,
                      texts[name])
    write_bad(fmt, suffix, texts)
    write_nested_augment(suffix)


def reset():
    keras.backend.clear_session()  # layer names start again at conv2d, dense, ...
    keras.utils.set_random_seed(SEED)


def short_name(v):
    """A variable's own name: 'kernel', 'gamma', 'depthwise_kernel' (tf.keras)."""
    return v.name.split("/")[-1].split(":")[0]


def is_model(layer):
    return isinstance(layer, keras.Model)


def flat_layers(model):
    """[(name, layer)] of every layer that is not a model, nested models' layers
    where the model sits: the layers cltrain flattens the model into, named as
    cltrain names them (a nested model's layer named as another layer of the file
    becomes '<model>/<layer>', every nested model on the way, outermost first)."""
    out = []

    def walk(m, path):
        for layer in m.layers:
            if isinstance(layer, L.InputLayer):
                continue
            if is_model(layer):
                walk(layer, path + [layer.name])
            else:
                out.append((path, layer))
    walk(model, [])
    count = {}
    for _, layer in out:
        count[layer.name] = count.get(layer.name, 0) + 1
    return [("/".join(path + [l.name]) if path and count[l.name] > 1 else l.name, l)
            for path, l in out]


def weight_names(model):
    """{id(variable): '<layer>/<weight>'} over every layer of the model."""
    names = {}
    for name, layer in flat_layers(model):
        for v in layer.weights:
            key = name + "/" + short_name(v)
            assert key not in names.values(), key
            names[id(v)] = key
    return names


def savez(path, arrays):
    """np.savez, but the same arrays always give the same bytes: members in the
    given order, stored, a fixed timestamp and no zip64 extra fields."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def perturb(model, rng):
    """Small random values for biases and BatchNormalization's parameters."""
    for _, layer in flat_layers(model):
        for v in layer.weights:
            n = short_name(v)
            shape = tuple(v.shape)
            if n == "bias":
                v.assign(rng.uniform(-0.1, 0.1, shape).astype("float32"))
            elif n == "gamma":
                v.assign(rng.uniform(0.8, 1.2, shape).astype("float32"))
            elif n == "beta":
                v.assign(rng.uniform(-0.1, 0.1, shape).astype("float32"))
            elif n == "moving_mean":
                v.assign(rng.uniform(-0.2, 0.2, shape).astype("float32"))
            elif n == "moving_variance":
                v.assign(rng.uniform(0.5, 1.5, shape).astype("float32"))


def softmax_head(model):
    """The last layer if its activation is softmax (its `activation` attribute)."""
    last = model.layers[-1]
    act = getattr(last, "activation", None)
    if act is None:
        return None
    name = getattr(act, "__name__", "")
    return last if name == "softmax" else None


def write_fixture(model, out, classes, batch, pixels, text):
    rng = np.random.default_rng(SEED)
    perturb(model, rng)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.json"), "w") as f:
        f.write(text)
        f.write("\n")

    names = weight_names(model)
    weights = [np.asarray(w, dtype="float32") for w in model.get_weights()]
    ordered = [names[id(v)] for v in model.weights]
    assert len(ordered) == len(weights)
    for v, w in zip(model.weights, weights):
        assert np.array_equal(np.asarray(v.numpy()), w)
    savez(os.path.join(out, "weights.npz"), [("arr_%d" % i, w) for i, w in enumerate(weights)])
    savez(os.path.join(out, "weights_named.npz"), list(zip(ordered, weights)))

    shape = (batch,) + tuple(model.inputs[0].shape[1:])
    if pixels:  # image-like: integers 0..255, for the models that rescale
        x = rng.integers(0, 256, size=shape).astype("float32")
    else:
        x = rng.standard_normal(size=shape).astype("float32")
    y = rng.integers(0, classes, size=(batch,)).astype(INT)

    head = softmax_head(model)
    dropouts = [l for _, l in flat_layers(model) if isinstance(l, L.Dropout)]
    saved = [np.array(w) for w in model.get_weights()]

    bn_updated = []

    def restore():
        # A training call updates BatchNormalization's moving statistics: undo it.
        now = model.get_weights()
        bn_updated.append(any(not np.array_equal(a, b) for a, b in zip(now, saved)))
        model.set_weights(saved)

    def call(training, logits):
        old = head.activation if head is not None else None
        if logits and head is not None:
            head.activation = keras.activations.linear
        try:
            return model(x, training=training)
        finally:
            if head is not None:
                head.activation = old

    rates = [d.rate for d in dropouts]
    for d in dropouts:
        d.rate = 0.0
    try:
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=head is None)
        trainable = list(model.trainable_weights)
        with tf.GradientTape() as tape:
            out_train = call(True, False)
            loss = loss_fn(y, out_train)
        grads = tape.gradient(loss, trainable)
        restore()
        logits_train = call(True, True)
        restore()
        out_train2 = call(True, False)
        restore()
    finally:
        for d, r in zip(dropouts, rates):
            d.rate = r
    logits_inf = call(False, True)
    out_inf = call(False, False)
    for v, w in zip(model.weights, saved):
        assert np.array_equal(np.asarray(v.numpy()), w), "weights changed"
    assert np.array_equal(np.asarray(out_train), np.asarray(out_train2)), "not deterministic"

    # Frozen layers (trainable false, their own or a nested model's) and the layers
    # that run as at inference in a training call (a tf.keras 2.x call with
    # training=False; Keras 3 replaces that by fit's training=True). Keras shows
    # the rule: a training call updates some BatchNormalization's moving statistics
    # iff one is neither frozen nor under training=False.
    flat = flat_layers(model)
    frozen = [n for n, l in flat if not l.trainable]
    inference = INFERENCE.get(model.name, []) if keras_format == "k2" else []
    batch_mode = [n for n, l in flat if isinstance(l, L.BatchNormalization)
                  and n not in frozen and n not in inference]
    assert bn_updated[0] == bool(batch_mode), (bn_updated, batch_mode)
    tnames = [names[id(v)] for v in trainable]
    b = {
        "x": x,
        "y": y,
        "logits": np.asarray(logits_train, dtype="float32"),
        "logits_inference": np.asarray(logits_inf, dtype="float32"),
        "loss": np.asarray(loss, dtype="float32").reshape(()),
        "trainable_names": np.array(tnames),
        "weight_names": np.array(ordered),
    }
    if head is not None:
        b["probabilities"] = np.asarray(out_train, dtype="float32")
        b["probabilities_inference"] = np.asarray(out_inf, dtype="float32")
        # the softmax of the logits is the output the loss saw
        p = np.exp(b["logits"] - b["logits"].max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        assert np.allclose(p, b["probabilities"], atol=1e-5)
    if dropouts:
        b["dropout_disabled"] = np.array(1, dtype=INT)
    if frozen:
        b["frozen_layers"] = np.array(frozen)
    if inference:
        b["inference_layers"] = np.array(inference)
    for i, (n, g) in enumerate(zip(tnames, grads)):
        g = np.asarray(g, dtype="float32")
        b["grad_%d" % i] = g
        b["grad/" + n] = g
    # the loss is the mean over the batch of -log p[y] (checked from the logits)
    lg = b["logits"].astype("float64")
    lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
    ref = float(np.mean(lse - lg[np.arange(len(y)), y]))
    assert abs(ref - float(b["loss"])) < 1e-4 * max(1.0, abs(ref)), (ref, b["loss"])
    savez(os.path.join(out, "batch.npz"), list(b.items()))

    classes_ = sorted({type(l).__name__ for l in model.layers}
                      | {type(l).__name__ for _, l in flat_layers(model)})
    print("  %-28s %6d params  %s" % (os.path.basename(out), model.count_params(),
                                       " ".join(classes_)))


# ----------------------------------------------------------------------------
# The models.

def seq_cnn():
    # TensorFlow's custom-training tutorial CNN, smaller.
    return keras.Sequential([
        L.Input(shape=(28, 28, 1)),
        L.Rescaling(1.0 / 255),
        L.Conv2D(8, 3, activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(12, 3, activation="relu", padding="same"),
        L.MaxPooling2D(),
        L.Flatten(),
        L.Dense(16, activation="relu"),
        L.Dense(10),
    ])


def functional_add_concat():
    inp = keras.Input(shape=(16, 16, 3))
    a = L.Conv2D(8, 3, padding="same", activation="relu")(inp)                # 16x16x8
    b1 = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(a)         # 8x8x8
    b2 = L.Conv2D(4, 1, strides=2, padding="valid", activation="relu")(a)     # 8x8x4
    c2 = L.Concatenate()([b1, b2])                                            # 8x8x12
    c = L.Conv2D(12, 3, padding="same")(c2)                                   # 8x8x12
    s = L.Add()([c, c2])                                                      # 8x8x12
    d1 = L.Conv2D(6, 3, strides=2, padding="same", activation="relu")(s)      # 4x4x6
    d2 = L.Conv2D(4, 2, strides=2, padding="valid", use_bias=False)(s)        # 4x4x4
    d3 = L.MaxPooling2D(2)(s)                                                 # 4x4x12
    c3 = L.Concatenate()([d1, d2, d3])                                        # 4x4x22
    r = L.Activation("relu")(c3)
    g = L.GlobalAveragePooling2D()(r)
    out = L.Dense(5, activation="softmax")(g)
    return keras.Model(inp, out, name="functional_add_concat")


def dw_bn_dropout():
    inp = keras.Input(shape=(16, 16, 4))
    x = L.DepthwiseConv2D(3, padding="same", depth_multiplier=1)(inp)        # 16x16x4
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2,
                          use_bias=False)(x)                                  # 8x8x8
    x = L.BatchNormalization(center=False)(x)
    x = L.ReLU(6.0)(x)
    x = L.Conv2D(8, 1, use_bias=False)(x)                                     # 8x8x8
    x = L.BatchNormalization(scale=False)(x)
    x = L.ReLU()(x)
    x = L.AveragePooling2D(2)(x)                                              # 4x4x8
    x = L.Dropout(0.3)(x)
    x = L.GlobalMaxPooling2D()(x)                                             # 8
    x = L.Dropout(0.3)(x)
    out = L.Dense(10)(x)
    return keras.Model(inp, out, name="dw_bn_dropout")


def _bn_relu6(x):
    x = L.BatchNormalization(epsilon=1e-3, momentum=0.999)(x)
    return L.ReLU(6.0)(x)


def _inverted_residual(x, expand, out_ch, stride):
    in_ch = x.shape[-1]
    y = L.Conv2D(in_ch * expand, 1, padding="same", use_bias=False)(x)
    y = _bn_relu6(y)
    if stride == 2:
        y = L.ZeroPadding2D(padding=((0, 1), (0, 1)))(y)
        y = L.DepthwiseConv2D(3, strides=2, padding="valid", use_bias=False)(y)
    else:
        y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(y)
    y = _bn_relu6(y)
    y = L.Conv2D(out_ch, 1, padding="same", use_bias=False)(y)
    y = L.BatchNormalization(epsilon=1e-3, momentum=0.999)(y)
    if stride == 1 and in_ch == out_ch:
        y = L.Add()([x, y])
    return y


def mobilenet_small():
    # MobileNetV2's layer pattern, as keras.applications.MobileNetV2 writes it.
    inp = keras.Input(shape=(32, 32, 3))
    x = L.Rescaling(1.0 / 127.5, offset=-1.0)(inp)
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x)         # 16x16x8
    x = _bn_relu6(x)
    x = _inverted_residual(x, 1, 8, 1)                                        # 16x16x8 +add
    x = _inverted_residual(x, 3, 12, 2)                                       # 8x8x12
    x = _inverted_residual(x, 3, 12, 1)                                       # 8x8x12 +add
    x = _inverted_residual(x, 3, 16, 2)                                       # 4x4x16
    x = _inverted_residual(x, 3, 16, 1)                                       # 4x4x16 +add
    x = L.Conv2D(32, 1, use_bias=False)(x)
    x = _bn_relu6(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.2)(x)
    out = L.Dense(5, activation="softmax")(x)
    return keras.Model(inp, out, name="mobilenet_small")


def nested_seq():
    # A functional model (block) within a Sequential (features) within a
    # Sequential, some layers frozen: a Conv2D by its own trainable, block and
    # everything in it by the model's, the top's Dense by its own. block's 1x1
    # Conv2D is named as the top's Dense: cltrain calls it features/block/mix.
    inp = keras.Input(shape=(7, 7, 6))
    x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)                # 7x7x8
    block = keras.Model(inp, L.Conv2D(8, 1, name="mix")(x), name="block")
    features = keras.Sequential([
        L.Conv2D(6, 3, activation="relu"),                                    # 14x14x6
        L.MaxPooling2D(),                                                     # 7x7x6
        block,
        L.Conv2D(8, 3, activation="relu"),                                    # 5x5x8
    ], name="features")
    model = keras.Sequential([
        L.Input(shape=(16, 16, 3)),
        L.Rescaling(1.0 / 255),
        features,
        L.Flatten(),
        L.Dense(16, activation="relu", name="mix"),
        L.Dense(10),
    ], name="nested_seq")
    features.layers[0].trainable = False
    block.trainable = False
    model.get_layer("mix").trainable = False
    return model


def small_base():
    # A small functional CNN with BatchNormalization and a residual Add, as
    # keras.applications' models are without their top: feature maps out.
    inp = keras.Input(shape=(16, 16, 3))
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(inp)       # 8x8x8
    x = L.BatchNormalization()(x)
    x = L.ReLU()(x)
    y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = L.Conv2D(8, 1, use_bias=False)(y)
    y = L.BatchNormalization()(y)
    x = L.Add()([x, y])
    x = L.Conv2D(16, 1, use_bias=False)(x)                                    # 8x8x16
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    return keras.Model(inp, x, name="base")


def transfer(name, trainable_base):
    # Keras' transfer-learning guide: the base frozen (trainable_base False), or
    # unfrozen to fine-tune (True), called with training=False either way. The
    # fine-tuned one has its head in a nested Sequential, which is its output.
    base = small_base()
    base.trainable = trainable_base
    inputs = keras.Input(shape=(16, 16, 3))
    x = L.Rescaling(1.0 / 127.5, offset=-1.0)(inputs)
    x = base(x, training=False)
    x = L.GlobalAveragePooling2D()(x)
    if trainable_base:
        outputs = keras.Sequential([L.Dropout(0.2), L.Dense(5)], name="head")(x)
    else:
        outputs = L.Dense(5)(L.Dropout(0.2)(x))
    INFERENCE[name] = [l.name for l in base.layers if not isinstance(l, L.InputLayer)]
    return keras.Model(inputs, outputs, name=name)


def norm_convnext():
    # Normalization at the input (adapted), Cropping2D, a ConvNeXt block without the
    # layer scale (gelu as relu, its Dense layers as 1x1 Conv2D), grouped Conv2D.
    inp = keras.Input(shape=(14, 14, 3))
    norm = L.Normalization()
    norm.adapt(np.random.default_rng(SEED).normal(0.5, 2.0, (64, 14, 14, 3)).astype("float32"))
    x = norm(inp)
    x = L.Conv2D(8, 3)(x)                                                     # 12x12x8
    x = L.Cropping2D(((1, 0), (0, 2)))(x)                                     # 11x10x8
    y = L.Conv2D(8, 7, padding="same", groups=8)(x)                           # depthwise
    y = L.LayerNormalization(epsilon=1e-6)(y)
    y = L.Conv2D(32, 1, activation="relu")(y)
    y = L.Conv2D(8, 1)(y)
    x = L.Add()([x, y])
    x = L.Conv2D(12, 3, strides=2, padding="same", groups=4, activation="relu")(x)  # 6x5x12
    x = L.LayerNormalization(epsilon=1e-6, center=False)(x)
    x = L.Cropping2D(1)(x)                                                    # 4x3x12
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(5)(x)
    return keras.Model(inp, out, name="norm_convnext")


def activations_small():
    # Keras 3's activations as layers' activation options, Activation layers and
    # the standalone LeakyReLU and ELU (tf.keras 2.x has no hard_silu: swish there;
    # its hard_sigmoid is another function, which cltrain tells by the file).
    k3 = keras_format == "k3"
    slope = {"negative_slope": 0.1} if k3 else {"alpha": 0.1}
    inp = keras.Input(shape=(8, 8, 3))
    x = L.Conv2D(8, 3, padding="same", activation="swish")(inp)               # 8x8x8
    x = L.DepthwiseConv2D(3, padding="same",
                          activation="hard_silu" if k3 else "swish")(x)
    x = L.Conv2D(8, 1, activation="hard_sigmoid")(x)
    x = L.SeparableConv2D(8, 3, strides=2, padding="same", activation="gelu")(x)  # 4x4x8
    x = L.Activation("elu")(x)
    x = L.Conv2D(8, 1)(x)
    x = L.Activation("selu")(x)
    x = L.Conv2D(8, 1, activation="leaky_relu")(x)
    x = L.Activation("hard_swish" if k3 else "silu")(x)
    x = L.Conv2D(8, 1)(x)
    x = L.LeakyReLU(**slope)(x)
    x = L.Conv2D(8, 1)(x)
    x = L.ELU(alpha=0.5)(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(8, activation="gelu")(x)
    out = L.Dense(4)(x)
    return keras.Model(inp, out, name="activations_small")


def dropconnect_dense4d():
    # EfficientNet's drop-connect (Dropout with noise_shape (None, 1, 1, 1) before
    # the residual Add), ConvNeXt's pointwise Dense layers on 4-D inputs, a Dropout
    # per channel and one on a flat input with a noise_shape.
    inp = keras.Input(shape=(6, 6, 4))
    x = L.Conv2D(8, 3, padding="same")(inp)                                    # 6x6x8
    y = L.Dense(12, activation="gelu")(x)                                      # 6x6x12
    y = L.Dense(8)(y)                                                          # 6x6x8
    y = L.Dropout(0.2, noise_shape=(None, 1, 1, 1))(y)
    x = L.Add()([x, y])
    x = L.Dropout(0.3, noise_shape=(None, 1, 1, 8))(x)
    x = L.Dense(6, activation="relu", use_bias=False)(x)                       # 6x6x6
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.2, noise_shape=(None, 1))(x)
    out = L.Dense(3)(x)
    return keras.Model(inp, out, name="dropconnect_dense4d")


def norm_const():
    # Normalization with its mean and variance in the config (Keras then has no
    # weights for it): ConvNeXt's on pixels, per channel; EfficientNetV2's with
    # axis 3; scalars, which Keras broadcasts to every channel.
    inp = keras.Input(shape=(6, 6, 3))
    x = L.Normalization(mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                        variance=[(0.229 * 255) ** 2, (0.224 * 255) ** 2,
                                  (0.225 * 255) ** 2])(inp)
    x = L.Normalization(axis=3, mean=[0.1, -0.2, 0.3], variance=[0.5, 2.0, 0.25])(x)
    x = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = L.Normalization(mean=0.25, variance=4.0)(x)
    x = L.Conv2D(6, 3, strides=2)(x)
    out = L.Dense(3)(L.GlobalAveragePooling2D()(x))
    return keras.Model(inp, out, name="norm_const")


# The layers each model calls with training=False (through a nested model).
INFERENCE = {}

# name, builder, classes, batch size, integer pixels (for the rescaling models)
MODELS = [
    ("seq_cnn", lambda: seq_cnn(), 10, 8, True),
    ("functional_add_concat", lambda: functional_add_concat(), 5, 6, False),
    ("dw_bn_dropout", lambda: dw_bn_dropout(), 10, 4, False),
    ("mobilenet_small", lambda: mobilenet_small(), 5, 4, True),
    ("nested_seq", lambda: nested_seq(), 10, 4, True),
    ("transfer_bn", lambda: transfer("transfer_bn", False), 5, 4, True),
    ("finetune_bn", lambda: transfer("finetune_bn", True), 5, 4, True),
    ("norm_convnext", lambda: norm_convnext(), 5, 4, False),
    ("activations_small", lambda: activations_small(), 4, 4, False),
    ("dropconnect_dense4d", lambda: dropconnect_dense4d(), 3, 4, False),
    ("norm_const", lambda: norm_const(), 3, 4, True),
]


def se_ops():
    # Squeeze-and-excitation as MobileNetV3 (GlobalAveragePooling2D with keepdims,
    # the (1, 1, C) row first) and EfficientNet (Reshape, the row second) write it,
    # MobileNetV3's hard sigmoid from Keras 3 operations (x + 3.0, x * (1/6)),
    # ConvNeXt's residual inputs + x (an operation of two tensors), Subtract.
    inp = keras.Input(shape=(8, 8, 3))
    x = L.Conv2D(8, 3, padding="same")(inp)                                   # 8x8x8
    hs = L.ReLU(6.0)(x + 3.0) * (1.0 / 6.0)
    x = L.Multiply()([x, hs])                                                 # hard swish
    s = L.GlobalAveragePooling2D(keepdims=True)(x)                            # 1x1x8
    s = L.Conv2D(4, 1, activation="relu")(s)
    s = L.Conv2D(8, 1, activation="sigmoid")(s)
    x = L.Multiply()([s, x])                                                  # 8x8x8
    t = L.GlobalAveragePooling2D()(x)                                         # 8
    t = L.Reshape((1, 1, 8))(t)
    t = L.Conv2D(8, 1, activation="sigmoid")(t)                               # 1x1x8
    y = L.Multiply()([x, t])
    y = L.Conv2D(8, 3, padding="same")(y)
    y = x + y
    y = L.Add()([y, t])
    y = L.Subtract()([y, t])
    y = L.Subtract()([t, y])
    g = L.GlobalAveragePooling2D()(y)
    out = L.Dense(3)(g)
    return keras.Model(inp, out, name="se_ops")


def custom_scale():
    # InceptionResNetV2's residual: x + scale * branch, by its CustomScaleLayer.
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer
    inp = keras.Input(shape=(6, 6, 4))
    x = L.Conv2D(6, 3, padding="same", activation="relu")(inp)
    r = L.Conv2D(6, 3, padding="same")(x)
    x = CustomScaleLayer(0.17)([x, r])
    x = L.Activation("relu")(x)
    out = L.Dense(3)(L.GlobalAveragePooling2D()(x))
    return keras.Model(inp, out, name="custom_scale")


def layer_scale():
    # ConvNeXt's residual: inputs + LayerScale(branch), an operation of two tensors.
    # gamma (Keras' "variable") gets random values: init_values' 1e-6 would hide it.
    from keras.src.applications.convnext import LayerScale
    inp = keras.Input(shape=(6, 6, 5))
    x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    r = L.Conv2D(8, 1)(x)
    scale = LayerScale(1e-6, 8)
    x = x + scale(r)
    out = L.Dense(3)(L.GlobalAveragePooling2D()(x))
    scale.weights[0].assign(np.random.default_rng(SEED + 1).uniform(0.5, 1.5, (8,)).astype("float32"))
    return keras.Model(inp, out, name="layer_scale")


# Keras 3 only (tf.keras 2.x writes operations as TFOpLambda layers; the
# applications' own layers are Keras 3's).
MODELS_K3 = [
    ("se_ops", lambda: se_ops(), 3, 4, False),
    ("custom_scale", lambda: custom_scale(), 3, 4, False),
    ("layer_scale", lambda: layer_scale(), 3, 4, False),
]


# ----------------------------------------------------------------------------
# keras.applications' families, small: each model built by the family's own
# model function (with a short stack of the family's blocks where the function
# takes one) or from its own block functions (keras.src.applications.<family>),
# so the file holds the layer graph keras.applications writes (preprocessing
# layers, stem, blocks, top, layer names), with fewer blocks and channels, at
# 32x32 (Keras' minimum) and 3 classes. Keras 3 only, but for MobileNetV3:
# tf.keras 2.x writes the same graphs for the others, and MobileNetV3's
# operations (x + 3.0, * (1/6)) as TFOpLambda layers.

ZOO_INPUT = (32, 32, 3)


def zoo_app(family):
    """keras.src.applications.<family>, tf_keras' for the _k2 files."""
    import importlib
    top = "tf_keras" if keras_format == "k2" else "keras"
    return importlib.import_module("%s.src.applications.%s" % (top, family))


def zoo_mobilenet():
    # MobileNet (V1) whole, alpha 1/32 (1 to 32 channels), 64x64 (its last blocks
    # 2x2: BatchNormalization over more than the batch); its top is
    # GlobalAveragePooling2D(keepdims=True), Dropout, a 1x1 Conv2D, Reshape((3,))
    # and Activation("softmax").
    return keras.applications.MobileNet(input_shape=(64, 64, 3), alpha=0.03125, depth_multiplier=1,
                                        weights=None, classes=3, name="zoo_mobilenet")


def zoo_mobilenet_v2():
    # MobileNetV2()'s stem and top (Conv_1 with 64 filters, not 1280) around its
    # first five inverted residual blocks, alpha 0.35.
    from keras.src.applications import mobilenet_v2 as m
    alpha = 0.35
    inp = keras.Input(shape=ZOO_INPUT)
    x = L.Conv2D(m._make_divisible(32 * alpha, 8), kernel_size=3, strides=(2, 2), padding="same",
                 use_bias=False, name="Conv1")(inp)
    x = L.BatchNormalization(epsilon=1e-3, momentum=0.999, name="bn_Conv1")(x)
    x = L.ReLU(6.0, name="Conv1_relu")(x)
    x = m._inverted_res_block(x, filters=16, alpha=alpha, stride=1, expansion=1, block_id=0)
    x = m._inverted_res_block(x, filters=24, alpha=alpha, stride=2, expansion=6, block_id=1)
    x = m._inverted_res_block(x, filters=24, alpha=alpha, stride=1, expansion=6, block_id=2)
    x = m._inverted_res_block(x, filters=32, alpha=alpha, stride=2, expansion=6, block_id=3)
    x = m._inverted_res_block(x, filters=32, alpha=alpha, stride=1, expansion=6, block_id=4)
    x = L.Conv2D(64, kernel_size=1, use_bias=False, name="Conv_1")(x)
    x = L.BatchNormalization(epsilon=1e-3, momentum=0.999, name="Conv_1_bn")(x)
    x = L.ReLU(6.0, name="out_relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(3, activation="softmax", name="predictions")(x)
    return keras.Model(inp, x, name="zoo_mobilenet_v2")


def zoo_mobilenet_v3():
    # MobileNetV3() (Small's) with the first four of MobileNetV3Small's blocks,
    # alpha 0.25, last_point_ch 32: Rescaling, hard_swish, squeeze-and-excitation
    # with the hard sigmoid of operations (x + 3.0, * (1/6)), kernel 5. tf.keras
    # 2.x writes hard_swish as x * that hard sigmoid (Multiply), not Activation.
    m = zoo_app("mobilenet_v3")
    alpha = 0.25

    def stack_fn(x, kernel, activation, se_ratio):
        def depth(d):
            return m._depth(d * alpha)

        x = m._inverted_res_block(x, 1, depth(16), 3, 2, se_ratio, m.relu, 0)
        x = m._inverted_res_block(x, 72.0 / 16, depth(24), 3, 2, None, m.relu, 1)
        x = m._inverted_res_block(x, 88.0 / 24, depth(24), 3, 1, None, m.relu, 2)
        x = m._inverted_res_block(x, 4, depth(40), kernel, 2, se_ratio, activation, 3)
        return x

    named = {} if keras_format == "k2" else {"name": "zoo_mobilenet_v3"}
    return m.MobileNetV3(stack_fn, 32, input_shape=ZOO_INPUT, alpha=alpha, model_type="small",
                         weights=None, classes=3, **named)


def zoo_resnet(preact):
    # ResNet() with two stacks of two bottleneck blocks (ResNet50's
    # stack_residual_blocks_v1, or ResNet50V2's _v2 with preact), 4 and 8 filters.
    from keras.src.applications import resnet as m

    def stack_fn(x):
        if preact:
            x = m.stack_residual_blocks_v2(x, 4, 2, name="conv2")
            return m.stack_residual_blocks_v2(x, 8, 2, stride1=1, name="conv3")
        x = m.stack_residual_blocks_v1(x, 4, 2, stride1=1, name="conv2")
        return m.stack_residual_blocks_v1(x, 8, 2, name="conv3")

    return m.ResNet(stack_fn, preact, True, weights=None, input_shape=ZOO_INPUT, classes=3,
                    name="zoo_resnet_v2" if preact else "zoo_resnet")


def zoo_set_normalization(model, mean, variance):
    # Normalization's mean and variance (weights, zeros and ones until adapted):
    # values near ImageNet's, so that a loader that ignores them shows. Keras
    # computes with the tensors finalize_state() makes of them (as adapt() and
    # load_weights() end).
    norm = next(l for l in model.layers if isinstance(l, L.Normalization))
    rng = np.random.default_rng(SEED + 2)
    for v in norm.weights:
        n = short_name(v)
        if n in ("mean", "variance"):
            base = mean if n == "mean" else variance
            v.assign((np.asarray(base) * rng.uniform(0.9, 1.1, (3,))).astype("float32")
                     .reshape(tuple(v.shape)))
    norm.finalize_state()


def zoo_efficientnet():
    # EfficientNet() (B0's stem, blocks and top: Rescaling, Normalization, swish,
    # squeeze-and-excitation, drop-connect), width 0.1 (top_conv 128 filters), two
    # of B0's stages: kernel 3 expand 1, then kernel 5 expand 6 stride 2 twice.
    from keras.src.applications import efficientnet as m
    blocks = [
        dict(m.DEFAULT_BLOCKS_ARGS[0], filters_out=160),
        dict(m.DEFAULT_BLOCKS_ARGS[2], filters_in=160, filters_out=160),
    ]
    model = m.EfficientNet(0.1, 1.0, 32, blocks_args=blocks, weights=None,
                           input_shape=ZOO_INPUT, classes=3, name="zoo_efficientnet")
    zoo_set_normalization(model, [0.485, 0.456, 0.406], [0.229**2, 0.224**2, 0.225**2])
    return model


def zoo_efficientnet_v2():
    # EfficientNetV2() (S, M and L's preprocessing, Rescaling(1/128, offset=-1),
    # the B models' Normalization takes mean and variance in its config), width
    # 0.1 (top_conv 128 filters): a FusedMBConv block without expansion (with
    # Add), one with, stride 2, and two MBConv blocks with squeeze-and-excitation,
    # stride 2 (depthwise, padding same), then Add and drop-connect.
    from keras.src.applications import efficientnet_v2 as m
    common = {"kernel_size": 3, "num_repeat": 1, "se_ratio": 0, "strides": 1}
    blocks = [
        dict(common, input_filters=80, output_filters=80, expand_ratio=1, conv_type=1),
        dict(common, input_filters=80, output_filters=160, expand_ratio=4, strides=2,
             conv_type=1),
        dict(common, num_repeat=2, input_filters=160, output_filters=160, expand_ratio=4,
             se_ratio=0.25, strides=2, conv_type=0),
    ]
    return m.EfficientNetV2(0.1, 1.0, 32, blocks_args=blocks, weights=None,
                            input_shape=ZOO_INPUT, classes=3, name="zoo_efficientnet_v2")


MODELS_K3 += [
    ("zoo_mobilenet", lambda: zoo_mobilenet(), 3, 2, False),
    ("zoo_mobilenet_v2", lambda: zoo_mobilenet_v2(), 3, 4, False),
    ("zoo_resnet", lambda: zoo_resnet(False), 3, 4, False),
    ("zoo_resnet_v2", lambda: zoo_resnet(True), 3, 4, False),
    ("zoo_efficientnet", lambda: zoo_efficientnet(), 3, 4, True),
    ("zoo_efficientnet_v2", lambda: zoo_efficientnet_v2(), 3, 4, True),
]


def tf_ops():
    # Operations on tensors as tf.keras 2.x writes them (TFOpLambda layers; Keras 3:
    # operation nodes): a tensor and a number (x + 3.0, x - 1.5, x / 4.0,
    # tf.math.multiply(x, 0.5), Keras 3: keras.ops.multiply) and two tensors
    # (x - y, x * y, x + y).
    multiply = tf.math.multiply if keras_format == "k2" else keras.ops.multiply
    inp = keras.Input(shape=(6, 6, 3))
    x = L.Conv2D(6, 3, padding="same")(inp)
    y = L.Conv2D(6, 1, activation="sigmoid")(x)
    a = L.ReLU()(x + 3.0) - 1.5
    b = multiply(a / 4.0, 0.5)
    c = (b - y) * y
    d = c + x
    out = L.Dense(3)(L.GlobalAveragePooling2D()(d))
    return keras.Model(inp, out, name="tf_ops")


MODELS += [
    ("zoo_mobilenet_v3", lambda: zoo_mobilenet_v3(), 3, 4, True),
    ("tf_ops", lambda: tf_ops(), 3, 4, False),
]


# ----------------------------------------------------------------------------
# keras.applications families, each as the family's own code writes it
# (keras.src.applications.<family>), made small: the application function's own
# options for depth and width where it has them, otherwise its model file with
# every Conv2D's filters and Dense's units divided (narrow_widths) and repeated
# blocks taken out (cut_blocks). The head keeps its softmax.

def applications_json(model):
    """The model's to_json() as a dict, without the layers' build_config (the
    shapes they were built for: a narrowed layer builds again on its input)."""
    full = json.loads(model.to_json())
    for layer in layers_of(full):
        layer.pop("build_config", None)
    return full


def from_applications_json(full):
    return keras.models.model_from_json(json.dumps(full))


def narrow_widths(full, divisor, units_divisor=None, keep=("predictions",)):
    """Divides every layer's filters (and units, by units_divisor) but keep's,
    rounded, at least 1. Where channels meet (Add, a concatenation's sum) the
    family's widths divide evenly, so they still meet."""
    for layer in layers_of(full):
        c = layer["config"]
        if layer["name"] in keep:
            continue
        if "filters" in c:
            c["filters"] = max(1, int(round(c["filters"] / divisor)))
        if "units" in c:
            c["units"] = max(1, int(round(c["units"] / (units_divisor or divisor))))
    return full


def cut_blocks(full, keep_end, drop_end):
    """Takes out the layers after layer keep_end up to layer drop_end (those that
    drop_end depends on and keep_end does not): the layers that took drop_end
    take keep_end."""
    layers = layers_of(full)
    by_name = {l["name"]: l for l in layers}

    def ancestors(name):
        seen, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += inbound_names(by_name[n])
        return seen
    gone = ancestors(drop_end) - ancestors(keep_end)
    full["config"]["layers"] = [l for l in layers if l["name"] not in gone]
    for layer in layers_of(full):
        if drop_end in inbound_names(layer):
            rename_inbound(layer, drop_end, keep_end)
    outs = full["config"]["output_layers"]  # [name, 0, 0] or a list of them
    assert all(o[0] != drop_end for o in (outs if isinstance(outs[0], list) else [outs]))
    return full


def layer_taking(full, class_name, source):
    """The name of the layer of class class_name that takes layer source."""
    for layer in layers_of(full):
        if layer["class_name"] == class_name and source in inbound_names(layer):
            return layer["name"]
    raise KeyError((class_name, source))


def zoo_densenet():
    # DenseNet121's graph with one conv_block per dense block (DenseNet(blocks=...),
    # as DenseNet121 calls it with [6, 12, 24, 16]), at an eighth of the width.
    from keras.src.applications import densenet
    model = densenet.DenseNet([1, 1, 1, 1], weights=None, input_shape=(32, 32, 3), classes=3,
                              name="densenet121")
    return from_applications_json(narrow_widths(applications_json(model), 8))


def zoo_vgg():
    # VGG16 at a 32nd of the convolutions' width and a 256th of fc1's and fc2's.
    from keras.src.applications import vgg16
    model = vgg16.VGG16(weights=None, input_shape=(32, 32, 3), classes=3)
    return from_applications_json(narrow_widths(applications_json(model), 32, 256))


def zoo_xception():
    # Xception with one of the middle flow's eight blocks (block5), at a 64th of
    # the width.
    from keras.src.applications import xception
    model = xception.Xception(weights=None, input_shape=(71, 71, 3), classes=3)
    full = applications_json(model)
    full = cut_blocks(full, layer_taking(full, "Add", "block5_sepconv3_bn"),
                      layer_taking(full, "Add", "block12_sepconv3_bn"))
    return from_applications_json(narrow_widths(full, 64))


def zoo_inception_v3():
    # InceptionV3 with one block of each kind (mixed0, mixed3, mixed4, mixed8,
    # mixed9: mixed1-2, mixed5-7 and mixed10 repeat them), at a 64th of the width.
    from keras.src.applications import inception_v3
    model = inception_v3.InceptionV3(weights=None, input_shape=(75, 75, 3), classes=3)
    full = applications_json(model)
    for keep_end, drop_end in (("mixed0", "mixed2"), ("mixed4", "mixed7"), ("mixed9", "mixed10")):
        full = cut_blocks(full, keep_end, drop_end)
    return from_applications_json(narrow_widths(full, 64))


def zoo_inception_resnet_v2():
    # InceptionResNetV2 with the first inception_resnet_block of each of its three
    # repeats (block35_1, block17_1, block8_1) and block8_10 (no activation), its
    # CustomScaleLayer in each, at a 32nd of the width. Batch 4: its last blocks
    # are 1x1, where batch statistics of 2 values leave float32 (TensorFlow's and
    # cltrain's alike) a few 1e-5 from the exact loss.
    from keras.src.applications import inception_resnet_v2
    model = inception_resnet_v2.InceptionResNetV2(weights=None, input_shape=(75, 75, 3),
                                                  classes=3)
    full = applications_json(model)
    for keep_end, drop_end in (("block35_1_ac", "block35_10_ac"),
                               ("block17_1_ac", "block17_20_ac"),
                               ("block8_1_ac", "block8_9_ac")):
        full = cut_blocks(full, keep_end, drop_end)
    return from_applications_json(narrow_widths(full, 32))


def zoo_nasnet():
    # NASNetMobile's graph (NASNet() with its options: skip_reduction False,
    # filter_multiplier 2) with two normal cells per stage, up to the first
    # stage's end (the stem cells, normal cells 0 and 1), an 11th of the width.
    from keras.src.applications import nasnet
    model = nasnet.NASNet(input_shape=(32, 32, 3), penultimate_filters=96, num_blocks=2,
                          stem_block_filters=8, skip_reduction=False, filter_multiplier=2,
                          weights=None, classes=3, default_size=224, name="nasnet_mobile")
    full = cut_blocks(applications_json(model), "normal_concat_1", "normal_concat_6")
    return from_applications_json(full)


def zoo_convnext():
    # ConvNeXtTiny's graph (ConvNeXt() with its options) with one ConvNeXtBlock per
    # stage, 4 to 16 channels (ConvNeXtTiny's 96 to 768). The LayerScale layers' gamma get random values:
    # their 1e-6 would hide the blocks.
    from keras.src.applications import convnext
    model = convnext.ConvNeXt(depths=[1, 1, 1, 1], projection_dims=[4, 8, 12, 16],
                              include_preprocessing=True, weights=None,
                              input_shape=(32, 32, 3), classes=3, name="convnext_tiny")
    rng = np.random.default_rng(SEED + 1)
    for layer in model.layers:
        if isinstance(layer, convnext.LayerScale):
            layer.weights[0].assign(rng.uniform(0.5, 1.5, tuple(layer.weights[0].shape))
                                    .astype("float32"))
    return model


# Keras 3 only: keras.src.applications is Keras 3's (tf.keras 2.x writes these
# families with the same layers).
MODELS_K3 += [
    ("zoo_densenet", lambda: zoo_densenet(), 3, 4, True),
    ("zoo_vgg", lambda: zoo_vgg(), 3, 4, True),
    ("zoo_xception", lambda: zoo_xception(), 3, 2, True),
    ("zoo_inception_v3", lambda: zoo_inception_v3(), 3, 2, True),
    ("zoo_inception_resnet_v2", lambda: zoo_inception_resnet_v2(), 3, 4, True),
    ("zoo_nasnet", lambda: zoo_nasnet(), 3, 4, True),
    ("zoo_convnext", lambda: zoo_convnext(), 3, 4, True),
]


# ----------------------------------------------------------------------------
# A model file without batch: the augmentation in a nested Sequential, as Keras'
# transfer-learning guide writes it (data_augmentation(inputs)), before a frozen
# base called with training=False.

def write_nested_augment(suffix):
    reset()
    augmentation = keras.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1)],
                                    name="data_augmentation")
    base = small_base()
    base.trainable = False
    inputs = keras.Input(shape=(16, 16, 3))
    x = augmentation(inputs)
    x = L.Rescaling(1.0 / 127.5, offset=-1.0)(x)
    x = base(x, training=False)
    x = L.GlobalAveragePooling2D()(x)
    outputs = L.Dense(5)(L.Dropout(0.2)(x))
    model = keras.Model(inputs, outputs, name="nested_augment")
    out = os.path.join(HERE, "nested_augment")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model%s.json" % suffix), "w") as f:
        f.write(model.to_json(indent=1) + "\n")
    print("  nested_augment/model%s.json" % suffix)


# ----------------------------------------------------------------------------
# Model files the loader must refuse.

def layers_of(cfg):
    return cfg["config"]["layers"]


def find_layer(cfg, name):
    for l in layers_of(cfg):
        if l["config"]["name"] == name or l.get("name") == name:
            return l
    raise KeyError(name)


def inbound_names(layer):
    """The layer names a functional layer's inbound nodes refer to, either format."""
    out = []

    def walk(o):
        if isinstance(o, dict):
            if "keras_history" in o:
                out.append(o["keras_history"][0])
            elif o.get("class_name") == "__keras_tensor__":
                walk(o["config"])
            else:
                for v in o.values():
                    walk(v)
        elif isinstance(o, list):
            # tf.keras 2.x: [name, node_index, tensor_index, kwargs]
            if len(o) == 4 and isinstance(o[0], str) and isinstance(o[1], int):
                out.append(o[0])
            else:
                for v in o:
                    walk(v)
    walk(layer["inbound_nodes"])
    return out


def rename_inbound(layer, old, new):
    """Replaces references to layer `old` in layer's inbound nodes by `new`."""
    def walk(o):
        if isinstance(o, dict):
            if "keras_history" in o and o["keras_history"][0] == old:
                o["keras_history"][0] = new
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            if len(o) == 4 and o[0] == old and isinstance(o[1], int):
                o[0] = new
            for v in o:
                walk(v)
    walk(layer["inbound_nodes"])
    assert new in inbound_names(layer), (old, new)


def write_bad(fmt, suffix, texts):
    bad = os.path.join(HERE, "bad")
    os.makedirs(bad, exist_ok=True)

    def save(name, text):
        with open(os.path.join(bad, name + suffix + ".json"), "w") as f:
            f.write(text)
        print("  bad/%s%s.json" % (name, suffix))

    def save_model(name, model):
        save(name, model.to_json(indent=1) + "\n")

    def small_input():
        return keras.Input(shape=(16, 16, 3))

    # A layer class cltrain does not support.
    reset()
    inp = small_input()
    x = L.Conv2D(4, 3, strides=2, padding="same", activation="relu")(inp)
    x = L.Conv2DTranspose(4, 3, strides=2, padding="same")(x)
    x = L.GlobalAveragePooling2D()(x)
    save_model("unsupported_conv2d_transpose", keras.Model(inp, L.Dense(5)(x)))

    reset()
    save_model("unsupported_lstm", keras.Sequential([
        L.Input(shape=(28, 28)), L.LSTM(8), L.Dense(10)]))

    # Conv2D with dilation_rate 2.
    reset()
    save_model("conv2d_dilation2", keras.Sequential([
        L.Input(shape=(16, 16, 3)), L.Conv2D(4, 3, dilation_rate=2, activation="relu"),
        L.Flatten(), L.Dense(5)]))

    # data_format channels_first (the input is (C, H, W)).
    reset()
    save_model("channels_first", keras.Sequential([
        L.Input(shape=(3, 16, 16)),
        L.Conv2D(4, 3, data_format="channels_first", activation="relu"),
        L.MaxPooling2D(data_format="channels_first"),
        L.Flatten(), L.Dense(5)]))

    # A functional model with two outputs.
    reset()
    inp = small_input()
    x = L.Conv2D(4, 3, activation="relu")(inp)
    x = L.GlobalAveragePooling2D()(x)
    save_model("two_outputs", keras.Model(inp, [L.Dense(5)(x), L.Dense(3)(x)]))

    # Hand edits of a valid functional model (functional_add_concat).
    base = texts["functional_add_concat"]

    # The file cut in the middle.
    save("truncated", base[: len(base) // 2])

    # An inbound node naming a layer that does not exist.
    cfg = json.loads(base)
    add = next(l for l in layers_of(cfg) if l["class_name"] == "Add")
    rename_inbound(add, inbound_names(add)[0], "no_such_layer")
    save("unknown_inbound", json.dumps(cfg, indent=1) + "\n")

    # A cycle: conv2d_3 (c = Conv2D(12)(c2)) takes concatenate's input, and
    # concatenate's first input (conv2d_1) becomes conv2d_3: concatenate ->
    # conv2d_3 -> concatenate. (tf_keras 2.21 loops forever on the _k2 one.)
    cfg = json.loads(base)
    cat = find_layer(cfg, "concatenate")
    conv_c = find_layer(cfg, "conv2d_3")  # c = Conv2D(12)(c2)
    assert inbound_names(conv_c) == ["concatenate"], inbound_names(conv_c)
    rename_inbound(cat, inbound_names(cat)[0], "conv2d_3")
    save("cycle", json.dumps(cfg, indent=1) + "\n")

    # Shapes that do not connect: the Add's inputs get 8 and 16 channels. Keras
    # refuses to build that, so edit a valid model's filters.
    reset()
    inp = small_input()
    a = L.Conv2D(8, 3, padding="same")(inp)
    b = L.Conv2D(8, 1, padding="same", name="conv_to_edit")(inp)
    x = L.Add()([a, b])
    x = L.GlobalAveragePooling2D()(x)
    text = keras.Model(inp, L.Dense(5)(x)).to_json()
    cfg = json.loads(text)
    layer = find_layer(cfg, "conv_to_edit")
    assert layer["config"]["filters"] == 8
    layer["config"]["filters"] = 16
    save("add_shape_mismatch", json.dumps(cfg, indent=1) + "\n")

    # Nested models cltrain does not flatten. A shared one: called twice.
    def conv_base(name, inputs=1, outputs=1):
        ins = [keras.Input(shape=(16, 16, 3)) for _ in range(inputs)]
        x = ins[0] if inputs == 1 else L.Add()(ins)
        x = L.Conv2D(3, 3, padding="same")(x)
        outs = [x] if outputs == 1 else [x, L.Conv2D(3, 1)(x)]
        return keras.Model(ins if inputs > 1 else ins[0], outs if outputs > 1 else outs[0],
                           name=name)

    def head(x):
        return L.Dense(5)(L.GlobalAveragePooling2D()(x))

    reset()
    base = conv_base("base")
    inp = small_input()
    save_model("nested_shared", keras.Model(inp, head(base(base(inp)))))

    reset()
    base = conv_base("base", outputs=2)
    inp = small_input()
    a, b = base(inp)
    save_model("nested_two_outputs", keras.Model(inp, head(L.Add()([a, b]))))

    reset()
    base = conv_base("base", inputs=2)
    inp = small_input()
    x = L.Conv2D(3, 1)(inp)
    save_model("nested_two_inputs", keras.Model(inp, head(base([inp, x]))))

    # Hand edits of a valid model with a nested one (transfer_bn).
    nested = texts["transfer_bn"]

    # The nested model's layers are not a list.
    cfg = json.loads(nested)
    find_layer(cfg, "base")["config"]["layers"] = {"a": 1}
    save("nested_no_layers", json.dumps(cfg, indent=1) + "\n")

    # A layer of the nested model takes a layer of the outer one as input.
    cfg = json.loads(nested)
    inner = find_layer(find_layer(cfg, "base"), "conv2d")
    rename_inbound(inner, inbound_names(inner)[0], "rescaling")
    save("nested_outer_inbound", json.dumps(cfg, indent=1) + "\n")

    if fmt == "k3":
        save("not_a_model", '{"a": 1}\n')
        # Keras 3 operations cltrain does not import, and a Reshape to rank 2.
        inp = keras.Input(shape=(4, 4, 3))
        x = L.Conv2D(4, 3)(inp)
        x = keras.ops.maximum(x, 0.5)
        save("op_maximum", keras.Model(inp, L.Dense(3)(L.Flatten()(x))).to_json(indent=1) + "\n")
        inp = keras.Input(shape=(4, 4, 3))
        x = L.Reshape((16, 3))(inp)
        save("reshape_rank2", keras.Model(inp, L.Dense(3)(L.Flatten()(x))).to_json(indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--format":
        main(sys.argv[2])
    elif len(sys.argv) == 1:
        run_children()
    else:
        sys.exit("usage: make_fixtures.py")
