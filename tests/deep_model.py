#!/usr/bin/env python3
"""Writes a deep DenseNet-like Keras model file (tf.keras 2 JSON) for
tests/test_deep_model.sh, from the layers of tests/models/functional_add_concat_k2:
a 3x3 stem, then BLOCKS blocks of a 1x1 Conv2D (2 filters, relu) concatenated to
its input, a 1x1 Conv2D back to 4 channels after every 8 blocks, global average
pooling and a Dense of 3 logits. Layers are named as NASNet's and ConvNeXt's
are, in up to 40 characters, so the model's description runs past 80 KB. Pure
Python (json only).

    deep_model.py TEMPLATE.json BLOCKS OUT.json
"""
import copy
import json
import sys


def main():
    template, blocks, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    d = json.load(open(template))
    by_class = {}
    for l in d["config"]["layers"]:
        by_class.setdefault(l["class_name"], l)
    layers = []

    def add(cls, name, inputs, **config):
        l = copy.deepcopy(by_class[cls])
        l["name"] = l["config"]["name"] = name
        l["config"].update(config)
        l["config"].pop("build_config", None)
        l.pop("build_config", None)
        l["inbound_nodes"] = [[[i, 0, 0, {}] for i in inputs]] if inputs else []
        layers.append(l)
        return name

    inp = add("InputLayer", "input_1", [], batch_input_shape=[None, 6, 6, 3])
    x = add("Conv2D", "stem", [inp], filters=4, kernel_size=[3, 3], padding="same",
            activation="relu")
    for b in range(blocks):
        y = add("Conv2D", "densenet_like_block_%d_pointwise_conv" % b, [x], filters=2,
                kernel_size=[1, 1], padding="same", activation="relu")
        x = add("Concatenate", "densenet_like_block_%d_concatenate" % b, [x, y], axis=-1)
        if b % 8 == 7:
            x = add("Conv2D", "densenet_like_transition_%d_conv" % b, [x], filters=4,
                    kernel_size=[1, 1], padding="same", activation="linear")
    x = add("GlobalAveragePooling2D", "pool", [x])
    x = add("Dense", "logits", [x], units=3, activation="linear")
    d["config"]["name"] = "deep_densenet"
    d["config"]["layers"] = layers
    d["config"]["input_layers"] = [[inp, 0, 0]]
    d["config"]["output_layers"] = [[x, 0, 0]]
    json.dump(d, open(out, "w"))


if __name__ == "__main__":
    main()
