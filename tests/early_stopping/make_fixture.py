#!/usr/bin/env python3
"""Keras' EarlyStopping decisions on fixed sequences of monitored values, for
cltrain's early-stopping rule (tests/test_early_stop.c compares every epoch).

Versions used to make the committed fixture (Python 3.11.7, Linux x86-64):

    tensorflow-cpu==2.21.0   (pulls in keras==3.15.1)
    numpy==2.4.6

Regenerate (from the repository root; CI never runs this, it needs no TensorFlow):

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python tests/early_stopping/make_fixture.py

It writes keras.json next to this file: a list of cases, each with the
callback's arguments (Keras' names; baseline null for None), the monitored
values fed to on_epoch_end one epoch at a time as model.fit does (stopping when
the callback sets model.stop_training), and what Keras did after each epoch
(wait, best, best_epoch, whether it stopped), then after on_train_end the epoch
whose weights the model holds (the dummy model's kernel is set to the epoch
number before each epoch's end, so the weights say which epoch they are from).
"""

import json
import os
import random

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def dummy_model():
    """A model whose compiled metrics hold "accuracy", so mode "auto" can tell
    that accuracy goes up (Keras builds them on the first batch)."""
    m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse", metrics=["accuracy"])
    m.fit(np.zeros((2, 1)), np.zeros((2, 1)), epochs=1, verbose=0)
    return m


def run(model, args, values):
    monitor = args.get("monitor", "val_loss")
    cb = keras.callbacks.EarlyStopping(**args)
    cb.set_model(model)
    model.stop_training = False
    cb.on_train_begin()
    epochs = []
    for epoch, v in enumerate(values):
        model.layers[0].set_weights([np.full((1, 1), float(epoch)), np.zeros(1)])
        cb.on_epoch_end(epoch, {monitor: v})
        epochs.append({"wait": int(cb.wait),
                       "best": None if cb.best is None else float(cb.best),
                       "best_epoch": int(cb.best_epoch),
                       "stop": bool(model.stop_training)})
        if model.stop_training:
            break
    model.layers[0].set_weights([np.full((1, 1), -1.0), np.zeros(1)])
    cb.on_train_end()
    restored = float(model.layers[0].get_weights()[0][0, 0])
    return {"args": args, "values": values, "epochs": epochs,
            "stopped_epoch": int(cb.stopped_epoch),
            "weights_epoch": None if restored < 0 else int(restored)}


def walk(rng, n, start, step, drift):
    """A noisy walk: a loss that falls then rises, an accuracy that climbs."""
    v, out = start, []
    for _ in range(n):
        v += drift + rng.uniform(-step, step)
        out.append(round(v, 6))
    return out


def main():
    rng = random.Random(34)
    loss_u = [0.9, 0.7, 0.55, 0.5, 0.48, 0.49, 0.47, 0.5, 0.52, 0.55, 0.6, 0.62, 0.7]
    acc = [0.6, 0.7, 0.75, 0.78, 0.78, 0.79, 0.785, 0.79, 0.78, 0.77, 0.8, 0.76]
    ties = [0.5, 0.5, 0.4, 0.4, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3]
    # Values that differ in float64 but not in float32: Keras compares in float32.
    near = [0.3, 0.3 - 1e-10, 0.3 - 2e-10, 0.3 - 3e-10, 0.29, 0.29 + 1e-12, 0.29 - 1e-11, 0.28]
    noisy = walk(rng, 14, 1.0, 0.05, -0.04)
    noisy += walk(rng, 8, noisy[-1], 0.05, 0.03)
    noisy_acc = walk(rng, 20, 0.5, 0.03, 0.01)
    cases = [
        ({"monitor": "val_loss", "patience": 3}, loss_u),
        ({"monitor": "val_loss", "patience": 0}, loss_u),
        ({"monitor": "val_loss", "patience": 2, "restore_best_weights": True}, loss_u),
        ({"monitor": "val_loss", "patience": 5, "restore_best_weights": True}, loss_u),
        ({"monitor": "val_loss", "patience": 10, "restore_best_weights": True}, loss_u),
        ({"monitor": "val_loss", "patience": 1, "min_delta": 0.03}, loss_u),
        ({"monitor": "val_loss", "patience": 1, "min_delta": -0.03}, loss_u),
        ({"monitor": "val_loss", "patience": 2, "baseline": 0.45}, loss_u),
        ({"monitor": "val_loss", "patience": 4, "baseline": 0.6, "restore_best_weights": True},
         loss_u),
        ({"monitor": "val_loss", "patience": 3, "baseline": 0.95, "restore_best_weights": True},
         loss_u),
        ({"monitor": "val_loss", "patience": 2, "start_from_epoch": 3}, loss_u),
        ({"monitor": "val_loss", "patience": 0, "start_from_epoch": 6,
          "restore_best_weights": True}, loss_u),
        ({"monitor": "val_loss", "patience": 1, "start_from_epoch": 20,
          "restore_best_weights": True}, loss_u),
        ({"monitor": "val_loss", "patience": 2, "mode": "max"}, loss_u),
        ({"monitor": "loss", "patience": 2, "mode": "min", "min_delta": 0.01}, loss_u),
        ({"monitor": "val_accuracy", "patience": 2}, acc),
        ({"monitor": "accuracy", "patience": 3, "restore_best_weights": True}, acc),
        ({"monitor": "val_accuracy", "patience": 2, "min_delta": 0.01}, acc),
        ({"monitor": "val_accuracy", "patience": 3, "baseline": 0.79,
          "restore_best_weights": True}, acc),
        ({"monitor": "val_accuracy", "patience": 1, "mode": "min"}, acc),
        ({"monitor": "val_loss", "patience": 1}, ties),
        ({"monitor": "val_loss", "patience": 2, "restore_best_weights": True}, ties),
        ({"monitor": "val_loss", "patience": 2}, near),
        ({"monitor": "val_loss", "patience": 2, "min_delta": 0.005}, near),
        ({"monitor": "val_loss", "patience": 3, "restore_best_weights": True}, noisy),
        ({"monitor": "val_loss", "patience": 2, "min_delta": 0.02, "start_from_epoch": 2,
          "restore_best_weights": True}, noisy),
        ({"monitor": "val_loss", "patience": 4, "baseline": 0.8, "min_delta": 0.01}, noisy),
        ({"monitor": "val_accuracy", "patience": 3, "restore_best_weights": True}, noisy_acc),
        ({"monitor": "val_accuracy", "patience": 2, "mode": "max", "baseline": 0.6,
          "start_from_epoch": 1}, noisy_acc),
    ]
    model = dummy_model()
    out = [run(model, args, values) for args, values in cases]
    with open(os.path.join(HERE, "keras.json"), "w") as f:
        f.write("{\"keras_version\": %s, \"cases\": [\n" % json.dumps(keras.__version__))
        f.write(",\n".join(json.dumps(c) for c in out))
        f.write("\n]}\n")
    print(f"wrote {len(out)} cases to {os.path.join(HERE, 'keras.json')}")


if __name__ == "__main__":
    main()
