#!/usr/bin/env python3
"""Keras' augmentation layers applied with fixed parameters: fixtures for test_augment.

Versions used to make the committed fixtures (Python 3.11.7, Linux x86-64):

    tensorflow-cpu==2.21.0   (pulls in keras==3.15.1)
    tf-keras==2.21.0         (RandomCrop at inference: see below)
    numpy==2.4.6

Regenerate (from the repository root; CI never runs this, it needs no TensorFlow):

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0 tf-keras==2.21.0
    /tmp/tfvenv/bin/python tests/augment/make_fixtures.py

It writes cases.npz next to this file: "input", a 12x10x3 image of random uint8
values (as float32), and per case NAME:
  NAME/spec    the --augment text of the stage (or stages) cltrain runs
  NAME/draw    float32 [flip, a, b, y0, x0]: the stage's draw (augment.h's
               clt_aug_draw); y0 = -1 for RandomCrop's inference path
  NAME/output  float32, what Keras 3 (TensorFlow backend) computes from "input"
Random factors are fixed by giving Keras a range of one value, e.g.
RandomRotation((0.25, 0.25)) turns by exactly 90 degrees; RandomFlip, RandomCrop
and RandomContrast, whose draws cannot be fixed so, are called through their
transform_images with the transformation given. Cases named chain_* run several
layers (a keras.Sequential) and cltrain's whole clt_augment_image on them.

It also writes model_k3.json and model_k2.json, a small functional model whose
every augmentation layer follows the input (Keras 3 and tf.keras 2.x), and
bad_after_conv.json, a RandomFlip after a convolution, which cltrain refuses.

RandomCrop at inference: Keras 3 documents the centred window of the target's
aspect ratio resized to the target size, but Keras 3.15.1's RandomCrop returns
its input unchanged there (not even the declared output shape); tf.keras 2.21
computes the documented result (smart_resize), so crop_inference_* are its.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    import tf_keras

    L = keras.layers
    rng = np.random.default_rng(20240611)
    image = rng.integers(0, 256, size=(12, 10, 3)).astype("float32")
    batch = tf.constant(image[None])
    out = {"input": image}

    def put(name, spec, result, draw=(0, 0, 0, 0, 0)):
        out[name + "/spec"] = np.array(spec)
        out[name + "/draw"] = np.array(draw, dtype="float32")
        out[name + "/output"] = np.asarray(result, dtype="float32")[0]

    def called(layer):
        return layer(batch, training=True)

    # RandomFlip: the flip drawn.
    for mode in ("horizontal", "vertical", "horizontal_and_vertical"):
        layer = L.RandomFlip(mode)
        t = {"flips": tf.constant([[[[True]]]]), "input_shape": batch.shape}
        put("flip_" + mode, "flip=" + mode, layer.transform_images(batch, t, training=True),
            (1, 0, 0, 0, 0))

    # RandomRotation: factor (f, f) turns by f * 360 degrees.
    rotations = [
        ("rotate_90", 0.25, {}, ""),
        ("rotate_30_reflect", 30 / 360, {}, ""),
        ("rotate_30_wrap", 30 / 360, {"fill_mode": "wrap"}, "fill=wrap,"),
        ("rotate_30_constant", 30 / 360, {"fill_mode": "constant", "fill_value": 7.0},
         "fill=constant,fill_value=7,"),
        ("rotate_30_nearest_fill", 30 / 360, {"fill_mode": "nearest"}, "fill=nearest,"),
        ("rotate_30_nearest_interpolation", 30 / 360, {"interpolation": "nearest"},
         "interpolation=nearest,"),
        ("rotate_minus_45", -45 / 360, {}, ""),
    ]
    for name, f, kw, options in rotations:
        angle = np.float32(f * 360.0)
        put(name, "%srotate=%r:%r" % (options, f, f), called(L.RandomRotation((f, f), **kw)),
            (0, angle, 0, 0, 0))

    # RandomZoom: height_factor (f, f) zooms by 1 + f.
    put("zoom_out", "zoom=0.2:0.2", called(L.RandomZoom((0.2, 0.2))),
        (0, np.float32(1.2), np.float32(1.2), 0, 0))
    put("zoom_in_width", "fill=constant,zoom=-0.3:-0.3/0.1:0.1",
        called(L.RandomZoom((-0.3, -0.3), (0.1, 0.1), fill_mode="constant")),
        (0, np.float32(1.1), np.float32(0.7), 0, 0))

    # RandomTranslation: fractions of the height and the width.
    put("translate", "fill=constant,translate=0.1:0.1/-0.2:-0.2",
        called(L.RandomTranslation((0.1, 0.1), (-0.2, -0.2), fill_mode="constant")),
        (0, np.float32(-0.2) * np.float32(10), np.float32(0.1) * np.float32(12), 0, 0))
    put("translate_reflect", "translate=-0.25:-0.25/0.35:0.35",
        called(L.RandomTranslation((-0.25, -0.25), (0.35, 0.35))),
        (0, np.float32(0.35) * np.float32(10), np.float32(-0.25) * np.float32(12), 0, 0))

    # RandomContrast: the factor given (clipped to the value range).
    for name, factor in (("contrast_1_8", 1.8), ("contrast_0_5", 0.5)):
        layer = L.RandomContrast(0.5)
        t = {"contrast_factor": tf.constant(np.full((1, 1, 1, 1), factor, "float32"))}
        put(name, "contrast=0.5", layer.transform_images(batch, t, training=True),
            (0, factor, 0, 0, 0))

    # RandomBrightness: factor (f, f) shifts by f * 255, clipped.
    for name, f in (("brightness_up", 0.1), ("brightness_down", -0.3)):
        put(name, "brightness=%r:%r" % (f, f), called(L.RandomBrightness((f, f))),
            (0, np.float32(f) * np.float32(255), 0, 0, 0))

    # RandomCrop: a window in training, the documented inference path.
    layer = L.RandomCrop(8, 7)
    put("crop_window", "crop=8x7", layer.transform_images(batch, (1, 2), training=True),
        (0, 0, 0, 1, 2))
    for name, (h, w) in (("crop_inference_8x7", (8, 7)), ("crop_inference_6x9", (6, 9)),
                         ("crop_inference_larger", (16, 13))):
        layer = tf_keras.layers.RandomCrop(h, w)
        put(name, "crop=%dx%d" % (h, w), layer(batch, training=False), (0, 0, 0, -1, -1))

    # Several stages in a row, every draw fixed.
    chain = keras.Sequential([
        L.RandomRotation((0.05, 0.05)),
        L.RandomZoom((0.1, 0.1), (-0.05, -0.05)),
        L.RandomTranslation((0.08, 0.08), (-0.1, -0.1), fill_mode="nearest"),
        L.RandomBrightness((0.05, 0.05)),
    ])
    put("chain_geometric",
        "rotate=0.05:0.05,zoom=0.1:0.1/-0.05:-0.05,fill=nearest,translate=0.08:0.08/-0.1:-0.1,"
        "brightness=0.05:0.05", chain(batch, training=True))

    np.savez_compressed(os.path.join(HERE, "cases.npz"), **out)
    print("wrote %s: %d cases" % (os.path.join(HERE, "cases.npz"), (len(out) - 1) // 3))
    write_models(keras, tf_keras)


def write_models(keras, tf_keras):
    """Model files with augmentation layers after the input, Keras 3 and tf.keras 2.x,
    and one with an augmentation layer where cltrain cannot run it."""

    def layers(L, k2):
        aug = [
            L.RandomFlip("horizontal"),
            L.RandomRotation(0.1, fill_mode="constant", fill_value=3.0),
            L.RandomZoom(0.1, (-0.05, 0.15)),
            L.RandomTranslation(0.1, 0.05),
            L.RandomContrast(0.2),
            L.RandomBrightness(0.1) if not k2 else L.RandomBrightness(0.1, value_range=(0, 255)),
            L.RandomCrop(32, 32),
        ]
        head = [L.Rescaling(1 / 255.0), L.Conv2D(4, 3, activation="relu"),
                L.GlobalAveragePooling2D(), L.Dense(3)]
        return aug, head

    for name, K, k2 in (("model_k3.json", keras, False), ("model_k2.json", tf_keras, True)):
        aug, head = layers(K.layers, k2)
        inputs = K.Input((40, 40, 3))
        x = inputs
        for layer in aug + head:
            x = layer(x)
        with open(os.path.join(HERE, name), "w") as f:
            f.write(K.Model(inputs, x).to_json())
    L = keras.layers
    model = keras.Sequential([keras.Input((40, 40, 3)), L.Conv2D(4, 3), L.RandomFlip(),
                              L.GlobalAveragePooling2D(), L.Dense(3)])
    with open(os.path.join(HERE, "bad_after_conv.json"), "w") as f:
        f.write(model.to_json())
    print("wrote model_k3.json, model_k2.json, bad_after_conv.json")


if __name__ == "__main__":
    main()
