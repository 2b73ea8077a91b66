#!/usr/bin/env python3
"""The worked fine-tuning example's model file, written by real Keras.

A Keras transfer-learning model as Keras' guide builds it: augmentation layers,
a base (include_top=False) nested and frozen, called with training=False, and a
new head. Keras' ImageNet weights are not reachable from the machines cltrain is
tested on, so the base's weights here are Keras' own initialisation
(weights=None); with internet access, pass weights="imagenet" to get the real
pretrained ones (docs/finetune.md).

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python examples/finetune/make_model.py [--base B] OUT_DIR [imagenet]

--base mobilenetv2 (the default): MobileNetV2 (alpha 0.35) after MobileNetV2's
input scaling (Rescaling(1/127.5, offset=-1)), 5 classes, model
"flowers_mobilenetv2". --base efficientnetb0: EfficientNetB0, which scales and
normalises its 0-255 input itself (its own Rescaling and Normalization layers),
5 classes, model "flowers_efficientnetb0". Both at 96x96.

writes OUT_DIR/model.json (model.to_json()) and OUT_DIR/weights.npz
(np.savez(FILE, *model.get_weights())), what `cltrain train --model --weights` reads.
"""

import argparse
import os

import numpy as np
import keras

ap = argparse.ArgumentParser(description="The worked fine-tuning example's model file.")
ap.add_argument("--base", choices=("mobilenetv2", "efficientnetb0"), default="mobilenetv2")
ap.add_argument("out")
ap.add_argument("weights", nargs="?", choices=("imagenet",), default=None)
args = ap.parse_args()
out, weights = args.out, args.weights
os.makedirs(out, exist_ok=True)
keras.utils.set_random_seed(7)

size, classes = 96, 5
if args.base == "efficientnetb0":
    base = keras.applications.EfficientNetB0(input_shape=(size, size, 3), include_top=False,
                                             weights=weights)
else:
    base = keras.applications.MobileNetV2(input_shape=(size, size, 3), alpha=0.35,
                                          include_top=False, weights=weights)
base.trainable = False

inputs = keras.Input((size, size, 3))
x = keras.layers.RandomFlip("horizontal")(inputs)
x = keras.layers.RandomRotation(0.05)(x)
x = keras.layers.RandomZoom(0.1)(x)
if args.base == "mobilenetv2":
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(x)  # MobileNetV2's preprocess_input
x = base(x, training=False)
x = keras.layers.GlobalAveragePooling2D()(x)
x = keras.layers.Dropout(0.2)(x)
outputs = keras.layers.Dense(classes)(x)
model = keras.Model(inputs, outputs, name="flowers_" + args.base)

with open(os.path.join(out, "model.json"), "w") as f:
    f.write(model.to_json())
np.savez(os.path.join(out, "weights.npz"), *model.get_weights())
print("wrote", out, "layers", len(model.layers), "weights", model.count_params())
