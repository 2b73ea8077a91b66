#!/usr/bin/env python3
"""Writes the model files of the `zoo` ctest label (tests/models/zoo/README.md).

    ~/.cache/cltrain/venv-tf/bin/python tests/models/zoo/make_zoo_models.py [--only REGEX]

Needs TensorFlow (tensorflow-cpu 2.21, Keras 3); CI never runs it. For the
smallest full-size model of each CNN family of keras.applications it writes
tests/models/zoo/<family>.json.gz: Keras' model.to_json() (weights=None, so
cltrain initialises the weights from the Keras initializers the file names),
gzip -9 without a name or time stamp, so the same Keras writes the same bytes.
Every model takes 96x96x3 and ends in 3 classes, half of them as Keras builds
them with include_top=True, classes=3, the others include_top=False with a head
of our own (GlobalAveragePooling2D and a Dense softmax of 3), either on the
base's output or with the base called as a nested model.

One change to Keras' models: every BatchNormalization's momentum is 0, so its
moving statistics after the test's epoch (three steps) are the last batch's.
With Keras' 0.99 they would still be nearly the initial mean 0 and variance 1,
on which the untrained networks saturate: every image would get the same
logits, and comparing ONNX Runtime's logits with cltrain's would test nothing.
"""
import argparse
import gzip
import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

SIZE = 96
# (file name, application, form): "top" include_top=True, classes=3; "head" our own
# head on the base's output; "nested" the base called as a nested model.
MODELS = [
    ("mobilenet", "MobileNet", "top"),
    ("mobilenet_v2", "MobileNetV2", "head"),
    ("mobilenet_v3_small", "MobileNetV3Small", "top"),
    ("resnet50", "ResNet50", "nested"),
    ("resnet50_v2", "ResNet50V2", "top"),
    ("efficientnet_b0", "EfficientNetB0", "top"),
    ("efficientnet_v2_b0", "EfficientNetV2B0", "head"),
    ("densenet121", "DenseNet121", "head"),
    ("vgg16", "VGG16", "nested"),
    ("xception", "Xception", "top"),
    ("inception_v3", "InceptionV3", "head"),
    ("inception_resnet_v2", "InceptionResNetV2", "top"),
    ("nasnet_mobile", "NASNetMobile", "nested"),  # include_top=True needs 224x224
    ("convnext_tiny", "ConvNeXtTiny", "top"),
]


def build(keras, app_name, form):
    app = getattr(keras.applications, app_name)
    shape = (SIZE, SIZE, 3)
    if form == "top":
        return app(weights=None, include_top=True, classes=3, input_shape=shape)
    base = app(weights=None, include_top=False, input_shape=shape)
    if form == "head":
        inputs, x = base.input, base.output
    else:
        inputs = keras.Input(shape)
        x = base(inputs)
    x = keras.layers.GlobalAveragePooling2D(name="head_pool")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="head_dense")(x)
    return keras.Model(inputs, outputs, name=app_name.lower() + "_" + form)


def zero_momentum(node):
    """The model file's dict with every BatchNormalization's momentum 0."""
    if isinstance(node, dict):
        if node.get("class_name") == "BatchNormalization":
            node["config"]["momentum"] = 0.0
        for value in node.values():
            zero_momentum(value)
    elif isinstance(node, list):
        for value in node:
            zero_momentum(value)
    return node


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="regular expression of the file names to write")
    args = ap.parse_args()
    import keras

    here = os.path.dirname(os.path.abspath(__file__))
    for name, app_name, form in MODELS:
        if args.only and not re.search(args.only, name):
            continue
        keras.utils.set_random_seed(1)
        model = build(keras, app_name, form)
        text = json.dumps(zero_momentum(json.loads(model.to_json())))
        path = os.path.join(here, name + ".json.gz")
        with open(path, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as f:
            f.write(text.encode())
        print("wrote %s: %s %s, %d layers, %d parameters" % (
            os.path.relpath(path), app_name, form, len(model.layers), model.count_params()),
            file=sys.stderr)
        keras.backend.clear_session()


if __name__ == "__main__":
    main()
