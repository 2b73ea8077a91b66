#!/usr/bin/env python3
"""What cltrain says of every CNN family of keras.applications (issue 38).

    ~/.cache/cltrain/venv-tf/bin/python tests/models/zoo/check_zoo.py OUT \\
        --cltrain build/cltrain --make-photos build/tests/make_photos \\
        [--only REGEX] [--size 96] [--max-params N] [--timeout 600]

Needs TensorFlow (tensorflow-cpu 2.21, Keras 3); CI never runs it. For each model
(MobileNet, MobileNetV2, MobileNetV3Small/Large, ResNet50/101/152 and V2,
EfficientNetB0-B7, EfficientNetV2B0-B3/S/M/L, DenseNet121/169/201, VGG16/19,
Xception, InceptionV3, InceptionResNetV2, NASNetMobile/Large, ConvNeXtTiny to
XLarge) it writes, into folder OUT, Keras' JSON (weights=None, 3 classes) of

  <name>_top.json    include_top=True;
  <name>_notop.json  include_top=False as a user fine-tunes it: the base called
                     as a nested model with training=False, then
                     GlobalAveragePooling2D and a Dense of 3 logits;

at --size x --size x 3 (96), or the family's own size where Keras allows no
other (NASNet with its top). It then runs the cltrain binary on each, the
cheapest command that builds the model and reports its size (cltrain has no
dry run): one training step, `cltrain train --epochs 1 --train-limit 2
--batch-per-replica 2` on a photo folder of 3 classes made by make_photos, every
model however large (host memory is about 21 bytes per parameter:
ConvNeXtXLarge's 348M took 7.2 GB). With --max-params, a model of more
parameters is only imported: cltrain is stopped once it has printed the model's
line ("Model X: N parameters, L layers"), before it allocates anything.

Prints a table (Markdown), one row per file: the model, Keras' layers and
parameters, cltrain's layers and parameters, and cltrain's outcome: "trains a
step", "imports" (not trained: over --max-params), or its one-line refusal.
The table is also written to OUT/zoo.md.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# (application name, the only size Keras allows with include_top, or None)
FAMILIES = [
    ("MobileNet", None), ("MobileNetV2", None), ("MobileNetV3Small", None),
    ("MobileNetV3Large", None),
    ("ResNet50", None), ("ResNet101", None), ("ResNet152", None),
    ("ResNet50V2", None), ("ResNet101V2", None), ("ResNet152V2", None),
] + [("EfficientNetB%d" % i, None) for i in range(8)] + [
    ("EfficientNetV2B0", None), ("EfficientNetV2B1", None), ("EfficientNetV2B2", None),
    ("EfficientNetV2B3", None), ("EfficientNetV2S", None), ("EfficientNetV2M", None),
    ("EfficientNetV2L", None),
    ("DenseNet121", None), ("DenseNet169", None), ("DenseNet201", None),
    ("VGG16", None), ("VGG19", None), ("Xception", None), ("InceptionV3", None),
    ("InceptionResNetV2", None), ("NASNetMobile", 224), ("NASNetLarge", 331),
    ("ConvNeXtTiny", None), ("ConvNeXtSmall", None), ("ConvNeXtBase", None),
    ("ConvNeXtLarge", None), ("ConvNeXtXLarge", None),
]


def write_models(out, only, size):
    """Writes each model's JSON; returns {file: (keras layers, keras params)}."""
    import keras

    info_path = os.path.join(out, "keras.json")
    info = json.load(open(info_path)) if os.path.exists(info_path) else {}
    for name, fixed in FAMILIES:
        if only and not re.search(only, name):
            continue
        app = getattr(keras.applications, name)
        for top in (True, False):
            f = "%s_%s.json" % (name, "top" if top else "notop")
            if f in info and os.path.exists(os.path.join(out, f)):
                continue
            s = fixed if top and fixed else size
            try:
                if top:
                    m = app(weights=None, include_top=True, classes=3, input_shape=(s, s, 3))
                else:
                    base = app(weights=None, include_top=False, input_shape=(s, s, 3))
                    inputs = keras.Input((s, s, 3))
                    x = base(inputs, training=False)
                    x = keras.layers.GlobalAveragePooling2D()(x)
                    m = keras.Model(inputs, keras.layers.Dense(3)(x), name=name + "_notop")
                layers = len(m.layers) if top else len(base.layers) + 2
                with open(os.path.join(out, f), "w") as fh:
                    fh.write(m.to_json())
                info[f] = [layers, int(m.count_params()), s]
            except Exception as ex:  # Keras itself refuses the configuration
                info[f] = [0, 0, s, "Keras: %s" % str(ex).splitlines()[0][:120]]
            keras.backend.clear_session()
            with open(info_path + ".tmp", "w") as fh:  # whole, for a run reading it
                json.dump(info, fh, indent=1)
            os.replace(info_path + ".tmp", info_path)
            print("wrote %s" % f, file=sys.stderr, flush=True)
    return info


def run_cltrain(args, path, photos, params):
    """(cltrain layers, cltrain params, outcome, seconds)."""
    cmd = [args.cltrain, "train", "--model", path, "--data", photos, "--epochs", "1",
           "--train-limit", "2", "--batch-per-replica", "2", "--checkpoint-every", "0"]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    layers = count = None
    import_only = params > args.max_params
    outcome = None
    try:
        for line in p.stdout:
            mm = re.match(r"Model .*: (\d+) parameters, (\d+) layers", line)
            if mm:
                count, layers = int(mm.group(1)), int(mm.group(2))
                if import_only:
                    p.kill()
                    outcome = "imports (not trained: over %.0fM parameters)" % (
                        args.max_params / 1e6)
                    break
            if time.time() - t0 > args.timeout:
                p.kill()
                outcome = "timeout after %d s" % args.timeout
                break
        p.wait(timeout=max(1, args.timeout - (time.time() - t0)))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        outcome = "timeout after %d s" % args.timeout
    err = p.stderr.read().strip().splitlines()
    if outcome is None:
        if p.returncode == 0:
            outcome = "trains a step"
        else:
            msg = err[-1] if err else "exit status %d" % p.returncode
            outcome = re.sub(r"^cltrain: error: [^:]*: ", "", msg)
            outcome = re.sub(r" \(supported: [^)]*\)", "", outcome)
    return layers, count, outcome, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--cltrain", required=True)
    ap.add_argument("--make-photos", required=True)
    ap.add_argument("--only", help="regular expression of the applications to check")
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--max-params", type=float, default=float("inf"))
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    info = write_models(args.out, args.only, args.size)
    rows = ["| model | Keras layers | Keras parameters | cltrain layers | cltrain parameters "
            "| cltrain | seconds |", "|---|---|---|---|---|---|---|"]
    for name, _ in FAMILIES:
        if args.only and not re.search(args.only, name):
            continue
        for top in ("top", "notop"):
            f = "%s_%s.json" % (name, top)
            klayers, kparams, s = info[f][:3]
            if len(info[f]) > 3:
                rows.append("| %s %s %d | | | | | %s | |" % (name, top, s, info[f][3]))
                print(rows[-1], flush=True)
                continue
            photos = os.path.join(args.out, "photos_%d" % s)
            if not os.path.isdir(photos):
                subprocess.run([args.make_photos, photos, "3", "2", str(s)], check=True,
                               stdout=subprocess.DEVNULL)
            layers, count, outcome, secs = run_cltrain(args, os.path.join(args.out, f), photos,
                                                       kparams)
            same = "" if count is None or count == kparams else " (differs)"
            rows.append("| %s %s %d | %d | %d | %s | %s%s | %s | %.0f |" % (
                name, top, s, klayers, kparams, layers if layers is not None else "",
                count if count is not None else "", same, outcome.replace("|", "/"), secs))
            print(rows[-1], flush=True)
    table = "\n".join(rows) + "\n"
    open(os.path.join(args.out, "zoo.md"), "w").write(table)
    print(table)


if __name__ == "__main__":
    main()
