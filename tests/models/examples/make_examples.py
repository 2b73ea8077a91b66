"""The README's example model files, written by real Keras (see ../README.md for the
versions): the reference Fashion-MNIST CNN (cltrain's built-in fmnist-cnn, as TensorFlow's
custom-training tutorial defines it) and a small MobileNetV2-like network for photos.

    /tmp/tfvenv/bin/python tests/models/examples/make_examples.py
"""
import os

import keras
from keras import layers

here = os.path.dirname(os.path.abspath(__file__))

# TensorFlow's tutorial model; cltrain's fmnist-cnn is the same network.
fmnist = keras.Sequential([
    keras.Input((28, 28, 1)),
    layers.Conv2D(64, 3, activation="relu"),
    layers.MaxPooling2D(),
    layers.Conv2D(80, 3, activation="relu"),
    layers.MaxPooling2D(),
    layers.Flatten(),
    layers.Dense(64, activation="relu"),
    layers.Dense(10),
], name="fmnist_cnn")
with open(os.path.join(here, "fmnist_cnn.json"), "w") as f:
    f.write(fmnist.to_json(indent=1))


def block(x, expand, out, stride, name):
    """MobileNetV2's inverted residual block."""
    y = layers.Conv2D(expand, 1, use_bias=False, name=name + "_expand")(x)
    y = layers.BatchNormalization(name=name + "_expand_bn")(y)
    y = layers.ReLU(6.0, name=name + "_expand_relu")(y)
    if stride == 2:
        y = layers.ZeroPadding2D(((0, 1), (0, 1)), name=name + "_pad")(y)
    y = layers.DepthwiseConv2D(3, strides=stride, padding="same" if stride == 1 else "valid",
                               use_bias=False, name=name + "_depthwise")(y)
    y = layers.BatchNormalization(name=name + "_depthwise_bn")(y)
    y = layers.ReLU(6.0, name=name + "_depthwise_relu")(y)
    y = layers.Conv2D(out, 1, use_bias=False, name=name + "_project")(y)
    y = layers.BatchNormalization(name=name + "_project_bn")(y)
    if stride == 1 and x.shape[-1] == out:
        y = layers.Add(name=name + "_add")([x, y])
    return y


inp = keras.Input((64, 64, 3))
x = layers.Rescaling(1 / 127.5, offset=-1)(inp)
x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="stem")(x)
x = layers.BatchNormalization(name="stem_bn")(x)
x = layers.ReLU(6.0, name="stem_relu")(x)
for i, (expand, out, stride) in enumerate([(32, 16, 1), (64, 24, 2), (96, 24, 1), (96, 32, 2),
                                           (128, 32, 1), (128, 64, 2)]):
    x = block(x, expand, out, stride, "block%d" % (i + 1))
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dropout(0.2)(x)
x = layers.Dense(5, activation="softmax")(x)
mobilenet = keras.Model(inp, x, name="mobilenet_photos")
with open(os.path.join(here, "mobilenet_photos.json"), "w") as f:
    f.write(mobilenet.to_json(indent=1))
print(fmnist.count_params(), mobilenet.count_params())
