#!/usr/bin/env python3
"""Keras' initializers end to end (tests/test_initializers.sh), numpy only.

    keras_initializers.py write SEQ_CNN.json DIR   writes DIR/NAME.json per case
    keras_initializers.py check NAME CKPT.npz      checks the weights a run of
                                                   DIR/NAME.json started from

Each case sets the initializers of seq_cnn's second Conv2D kernel (3x3x8x12:
fans 72 and 108), its first Dense kernel (432x16) and that Dense's bias, as Keras
writes them; `check` compares the checkpoint's values (trained one step at a
negligible learning rate) with Keras' formula: their mean and standard deviation,
and the bounds of uniform and truncated distributions.
"""
import json
import math
import sys

import numpy as np

T = 0.87962566103423978  # the stddev of a standard normal truncated at 2


def obj(cls, **config):
    return {"module": "keras.initializers", "class_name": cls, "config": dict(config, seed=None),
            "registered_name": None}


def scaling(scale, mode, dist):
    """(distribution, width) of VarianceScaling for the conv and dense kernels."""
    out = []
    for fan_in, fan_out in ((72, 108), (432, 16)):
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        s = scale / max(1.0, fan)
        out.append(("truncated", math.sqrt(s) / T) if dist == "truncated_normal" else
                   ("normal", math.sqrt(s)) if dist == "untruncated_normal" else
                   ("uniform", math.sqrt(3 * s)))
    return out


# name: (kernel initializer, bias initializer, [(dist, width)] for the two kernels
# (mean 0), bias (dist, a, b))
CASES = {
    "he_normal": (obj("HeNormal"), obj("Zeros"), scaling(2, "fan_in", "truncated_normal"),
                  ("constant", 0, 0)),
    "he_uniform": (obj("HeUniform"), obj("Ones"), scaling(2, "fan_in", "uniform"),
                   ("constant", 1, 0)),
    "lecun_normal": (obj("LecunNormal"), obj("Constant", value=0.3),
                     scaling(1, "fan_in", "truncated_normal"), ("constant", 0.3, 0)),
    "lecun_uniform": ("lecun_uniform", "zeros", scaling(1, "fan_in", "uniform"),
                      ("constant", 0, 0)),
    "glorot_normal": (obj("GlorotNormal"), obj("RandomUniform", minval=0.1, maxval=0.2),
                      scaling(1, "fan_avg", "truncated_normal"), ("uniform", 0.1, 0.2)),
    "glorot_uniform": (obj("GlorotUniform", input_axes=None, output_axes=None), obj("Zeros"),
                       scaling(1, "fan_avg", "uniform"), ("constant", 0, 0)),
    "truncated": (obj("TruncatedNormal", mean=0.0, stddev=0.02),
                  obj("TruncatedNormal", mean=1.0, stddev=0.5),
                  [("truncated", 0.02)] * 2, ("truncated", 1.0, 0.5)),
    "random_normal": (obj("RandomNormal", mean=0.0, stddev=0.1),
                      obj("RandomNormal", mean=-1.0, stddev=0.01),
                      [("normal", 0.1)] * 2, ("normal", -1.0, 0.01)),
    "random_uniform": (obj("RandomUniform", minval=-0.2, maxval=0.2), obj("Zeros"),
                       [("uniform", 0.2)] * 2, ("constant", 0, 0)),
}
# Every mode and every distribution once (test_init checks each pair); Keras reads
# "normal" as "truncated_normal".
for mode, dist in (("fan_in", "untruncated_normal"), ("fan_out", "uniform"),
                   ("fan_avg", "truncated_normal"), ("fan_out", "normal")):
    CASES["vs_%s_%s" % (mode, dist)] = (
        obj("VarianceScaling", scale=1.5, mode=mode, distribution=dist), obj("Zeros"),
        scaling(1.5, mode, "truncated_normal" if dist == "normal" else dist), ("constant", 0, 0))


def write(template, folder):
    for name, (kernel, bias, _, _) in CASES.items():
        d = json.load(open(template))
        layers = d["config"]["layers"]
        conv = [l for l in layers if l["class_name"] == "Conv2D"][1]["config"]
        dense = [l for l in layers if l["class_name"] == "Dense"][0]["config"]
        conv["kernel_initializer"] = kernel
        dense["kernel_initializer"] = kernel
        dense["bias_initializer"] = bias
        json.dump(d, open("%s/%s.json" % (folder, name), "w"))
    print(" ".join(CASES))


def moments_ok(v, dist, mean, width):
    """Sample moments within 4 standard errors (mean) and 12% (stddev); bounds."""
    sd = {"normal": width, "truncated": width * T, "uniform": width / math.sqrt(3)}[dist]
    n = v.size
    bad = []
    if abs(v.mean() - mean) > 4 * sd / math.sqrt(n) + 1e-6:
        bad.append("mean %.5g, formula %.5g" % (v.mean(), mean))
    if abs(v.std() - sd) > 0.12 * sd:
        bad.append("stddev %.5g, formula %.5g" % (v.std(), sd))
    bound = 2 * width if dist == "truncated" else width if dist == "uniform" else None
    if bound is not None and np.abs(v - mean).max() > bound * (1 + 1e-5):
        bad.append("a value %.5g beyond the bound %.5g" % (np.abs(v - mean).max(), bound))
    if bound is None and np.abs(v - mean).max() < 2 * sd:
        bad.append("no value beyond 2 stddev: not a normal")
    return bad


def check(name, ckpt):
    _, _, kernels, bias = CASES[name]
    a = np.load(ckpt)
    bad = []
    for key, (dist, width) in zip(("conv2d_1/kernel", "dense/kernel"), kernels):
        bad += ["%s: %s" % (key, b) for b in moments_ok(a[key].astype(np.float64), dist, 0, width)]
    b = a["dense/bias"].astype(np.float64)
    kind, p, q = bias
    if kind == "constant":
        if np.abs(b - np.float32(p)).max() > 1e-9:  # one step at a negligible rate
            bad.append("dense/bias: %s, not all %g" % (b[:3], p))
    elif kind == "uniform":
        if b.min() < p or b.max() > q or b.std() == 0:
            bad.append("dense/bias: [%g, %g] not a spread within [%g, %g]" % (b.min(), b.max(), p, q))
    elif kind == "truncated":
        if np.abs(b - p).max() > 2 * q or b.std() == 0:
            bad.append("dense/bias: beyond mean %g +- 2 x %g" % (p, q))
    elif abs(b.mean() - p) > 4 * q or b.std() == 0:
        bad.append("dense/bias: mean %g, formula %g" % (b.mean(), p))
    if bad:
        print("%s: %s" % (name, "; ".join(bad)))
        sys.exit(1)
    print("%s: the initial weights follow Keras' formula" % name)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        check(sys.argv[2], sys.argv[3])
