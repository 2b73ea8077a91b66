#!/usr/bin/env python3
"""The frozen-layer fixture for cltrain's --freeze-until, made by real Keras.

A Sequential model whose first layers are frozen (trainable=False: Conv2D, a
BatchNormalization, which Keras 3 then runs in inference mode, and its ReLU),
trained one step by Keras' own train_on_batch with each optimizer from the same
weights and batch. tests/test_freeze.c loads the model file, freezes the same
layers with clt_model_freeze_until, takes one step and compares every weight.

Versions used to make the committed fixture (Python 3.11.7, Linux x86-64):

    tensorflow-cpu==2.21.0   (pulls in keras==3.15.1)
    numpy==2.4.6

Regenerate (from the repository root; CI never runs this, it needs no TensorFlow):

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python tests/models/make_freeze_fixtures.py

That writes tests/models/freeze/ (see ../README.md):

    model.json   model.to_json(indent=1) with every layer trainable, as cltrain's
                 importer reads it: the test freezes with --freeze-until's function
    weights.npz  the starting weights in get_weights() order (arr_0, arr_1, ...)
    step.npz     x, y: the batch; <optimizer>/<layer>/<weight>: every weight after
                 one train_on_batch with that optimizer (moving statistics
                 included), from weights.npz and zero optimizer state

No batch.npz: tests/models/*/batch.npz are test_keras' fixtures, whose numbers are
those of a model without frozen layers.
"""

import io
import os
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "freeze")
SEED = 4321
BATCH = 4
CLASSES = 3
FROZEN = ("conv2d", "batch_normalization", "re_lu")  # --freeze-until batch_normalization
# Keras' optimizers and the arguments test_freeze.c gives cltrain's.
OPTIMIZERS = {
    "adam": ("Adam", {"learning_rate": 0.01}),
    "sgd": ("SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    "rmsprop": ("RMSprop", {"learning_rate": 0.01}),
}


def savez(path, arrays):
    """np.savez, but the same arrays always give the same bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def build():
    keras.backend.clear_session()  # layer names start again at conv2d, ...
    keras.utils.set_random_seed(SEED)
    return keras.Sequential([
        L.Input(shape=(8, 8, 3)),
        L.Conv2D(4, 3, padding="same"),
        L.BatchNormalization(),
        L.ReLU(),
        L.Conv2D(6, 3, strides=2, padding="same", activation="relu"),
        L.BatchNormalization(),
        L.GlobalAveragePooling2D(),
        L.Dense(CLASSES),
    ])


def names_of(model):
    """'<layer>/<weight>' of every weight, in model.weights order."""
    return [l.name + "/" + v.name.split("/")[-1].split(":")[0]
            for l in model.layers for v in l.weights]


def main():
    global np, tf, keras, L
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    import numpy as np
    import tensorflow as tf
    import keras
    assert keras.__version__.startswith("3."), keras.__version__
    L = keras.layers
    tf.config.experimental.enable_op_determinism()
    print("make_freeze_fixtures: tensorflow %s, keras %s, numpy %s"
          % (tf.__version__, keras.__version__, np.__version__))

    rng = np.random.default_rng(SEED)
    model = build()
    # Biases and BatchNormalization's parameters away from their initial 0 and 1,
    # so that a frozen layer normalising with its batch's statistics shows.
    for v in model.weights:
        n = v.name.split("/")[-1].split(":")[0]
        lo, hi = {"bias": (-0.1, 0.1), "gamma": (0.8, 1.2), "beta": (-0.1, 0.1),
                  "moving_mean": (-0.3, 0.3), "moving_variance": (0.5, 1.5)}.get(n, (0, 0))
        if lo != hi:
            v.assign(rng.uniform(lo, hi, tuple(v.shape)).astype("float32"))
    text = model.to_json(indent=1)
    assert '"trainable": false' not in text
    weights = [np.asarray(w, dtype="float32") for w in model.get_weights()]
    names = names_of(model)
    x = rng.standard_normal(size=(BATCH, 8, 8, 3)).astype("float32")
    y = rng.integers(0, CLASSES, size=(BATCH,)).astype("int64")

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "model.json"), "w") as f:
        f.write(text)
        f.write("\n")
    savez(os.path.join(OUT, "weights.npz"), [("arr_%d" % i, w) for i, w in enumerate(weights)])

    step = [("x", x), ("y", y)]
    for key, (cls, args) in OPTIMIZERS.items():
        model = build()
        model.set_weights(weights)
        for layer in model.layers:
            layer.trainable = layer.name not in FROZEN
        assert [l.name for l in model.layers if not l.trainable] == list(FROZEN)
        model.compile(optimizer=getattr(keras.optimizers, cls)(**args),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        loss = model.train_on_batch(x, y)
        after = [np.asarray(w, dtype="float32") for w in model.get_weights()]
        changed = [n for n, a, b in zip(names, weights, after) if not np.array_equal(a, b)]
        assert not any(n.split("/")[0] in FROZEN for n in changed), changed
        print("  %-8s loss %.6f, %d of %d weights changed" % (key, float(loss), len(changed),
                                                             len(names)))
        step += [(key + "/" + n, a) for n, a in zip(names, after)]
    savez(os.path.join(OUT, "step.npz"), step)


if __name__ == "__main__":
    main()
