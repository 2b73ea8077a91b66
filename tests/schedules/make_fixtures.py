#!/usr/bin/env python3
"""Fixtures for cltrain's learning-rate schedules and ReduceLROnPlateau, made by Keras.

Versions used to make the committed fixtures (Python 3.11.7, Linux x86-64):

    tensorflow-cpu==2.21.0   (pulls in keras==3.15.1)

Regenerate (from the repository root; CI never runs this, it needs no TensorFlow):

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python tests/schedules/make_fixtures.py

It writes, next to this file:

  schedules.json  for each schedule (--lr-schedule's text, the initial rate --lr),
                  the learning rate Keras' SGD applies at chosen steps: an SGD
                  built on keras.optimizers.schedules.<Class>(...) takes one step
                  with gradient 1 on a variable set to 0 after its iterations are
                  set to the step, so the variable ends at minus the step's rate,
                  exactly (float32). The step is the optimizer's iterations before
                  the step, as Keras counts them (0 at the first step).
  plateau.json    for each ReduceLROnPlateau (--reduce-lr-on-plateau's text, the
                  starting rate), a sequence of monitored values fed to Keras' own
                  keras.callbacks.ReduceLROnPlateau.on_epoch_end on a compiled
                  model (SGD with a float learning rate, metrics=["accuracy"] so
                  mode auto knows accuracy improves upwards), and after each epoch
                  the optimizer's rate and the callback's wait, cooldown_counter
                  and best.

tests/test_schedules.c compares cltrain's schedule.c with them.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
S = keras.optimizers.schedules

# (text for --lr-schedule, --lr, the Keras schedule, the steps to check)
def schedule_cases():
    common = [0, 1, 2, 3, 10, 99, 100, 101, 1000, 123457, 16777217, 10**9]

    def steps(*extra):
        return sorted(set(common) | set(extra))

    return [
        ("cosine:decay_steps=1000", 0.001, S.CosineDecay(0.001, 1000),
         steps(499, 500, 501, 999, 1001, 2000)),
        ("CosineDecay:decay_steps=1000,alpha=0.1", 0.01, S.CosineDecay(0.01, 1000, alpha=0.1),
         steps(250, 750, 999, 1001)),
        ("cosine:decay_steps=900,alpha=0.05,warmup_target=0.01,warmup_steps=100", 1e-4,
         S.CosineDecay(1e-4, 900, alpha=0.05, warmup_target=0.01, warmup_steps=100),
         steps(50, 98, 102, 550, 999, 1001)),
        ("cosine:decay_steps=7,warmup_target=0.3,warmup_steps=0", 0.1,
         S.CosineDecay(0.1, 7, warmup_target=0.3, warmup_steps=0), steps(4, 5, 6, 7, 8)),
        ("cosine:decay_steps=3,warmup_target=0.05,warmup_steps=7", 0.001,
         S.CosineDecay(0.001, 3, warmup_target=0.05, warmup_steps=7), steps(4, 5, 6, 7, 8, 9)),
        ("exponential:decay_steps=100,decay_rate=0.96", 0.1, S.ExponentialDecay(0.1, 100, 0.96),
         steps(50, 150, 250, 12345)),
        ("ExponentialDecay:decay_steps=100,decay_rate=0.96,staircase=true", 0.1,
         S.ExponentialDecay(0.1, 100, 0.96, staircase=True), steps(199, 200, 201)),
        # A rate that grows (to float32's infinity past step 1000 or so: not checked).
        ("exponential:decay_steps=3,decay_rate=1.5", 0.001, S.ExponentialDecay(0.001, 3, 1.5),
         [0, 1, 2, 3, 4, 5, 7, 10, 50, 99, 100, 101]),
        ("piecewise:boundaries=100/200,values=0.1/0.01/0.001", 0.1,
         S.PiecewiseConstantDecay([100, 200], [0.1, 0.01, 0.001]), steps(199, 200, 201)),
        ("PiecewiseConstantDecay:boundaries=0,values=0.5/0.05", 0.5,
         S.PiecewiseConstantDecay([0], [0.5, 0.05]), steps()),
        ("piecewise:boundaries=1/2/3/1000,values=0.3/0.2/0.1/0.05/0.003", 0.3,
         S.PiecewiseConstantDecay([1, 2, 3, 1000], [0.3, 0.2, 0.1, 0.05, 0.003]), steps(999, 1001)),
        ("polynomial:decay_steps=1000", 0.01, S.PolynomialDecay(0.01, 1000),
         steps(500, 999, 1001)),
        ("PolynomialDecay:decay_steps=1000,end_learning_rate=0.001,power=0.5", 0.1,
         S.PolynomialDecay(0.1, 1000, end_learning_rate=0.001, power=0.5), steps(500, 999)),
        ("polynomial:decay_steps=300,end_learning_rate=0,power=2,cycle=true", 0.05,
         S.PolynomialDecay(0.05, 300, end_learning_rate=0.0, power=2.0, cycle=True),
         steps(150, 299, 300, 301, 450, 600, 601)),
        ("inverse_time:decay_steps=10,decay_rate=0.5", 0.1, S.InverseTimeDecay(0.1, 10, 0.5),
         steps(5, 15, 33)),
        ("InverseTimeDecay:decay_steps=10,decay_rate=0.5,staircase=true", 0.1,
         S.InverseTimeDecay(0.1, 10, 0.5, staircase=True), steps(9, 11, 19, 21)),
    ]


def applied_rate(opt, var, step):
    """The rate Keras' SGD applies at the step taken after `step` iterations."""
    opt.iterations.assign(step)
    var.assign(0.0)
    opt.apply_gradients([(keras.ops.ones(()), var)])
    return 0.0 - float(var.numpy())  # 0.0, not -0.0, for a rate of 0


def make_schedules():
    out = []
    for text, initial, sched, steps in schedule_cases():
        opt = keras.optimizers.SGD(learning_rate=sched)
        var = keras.Variable(0.0, dtype="float32")
        opt.build([var])
        rates = [applied_rate(opt, var, s) for s in steps]
        # The schedule called directly gives the same float32 numbers.
        for s, r in zip(steps, rates):
            direct = float(np.float32(keras.ops.convert_to_numpy(sched(s))))
            assert direct == r, (text, s, direct, r)
        out.append({"schedule": text, "lr": initial, "steps": steps, "rates": rates})
    return out


# (text for --reduce-lr-on-plateau, Keras' arguments, starting rate, monitored values)
def plateau_cases():
    down_then_flat = [1.0, 0.8, 0.7, 0.7, 0.69995, 0.7, 0.71, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    return [
        ("monitor=val_loss,factor=0.5,patience=2", dict(monitor="val_loss", factor=0.5, patience=2),
         0.001, down_then_flat),
        ("patience=1,cooldown=2,min_lr=0.0002,factor=0.3",
         dict(patience=1, cooldown=2, min_lr=0.0002, factor=0.3), 0.01,
         [2.0, 2.1, 2.2, 2.3, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4]),
        ("monitor=val_accuracy,patience=2,min_delta=0.01",
         dict(monitor="val_accuracy", patience=2, min_delta=0.01), 0.1,
         [0.5, 0.505, 0.52, 0.525, 0.529, 0.54, 0.54, 0.54, 0.9, 0.9, 0.9]),
        ("monitor=accuracy,mode=min,patience=1,factor=0.9",
         dict(monitor="accuracy", mode="min", patience=1, factor=0.9), 0.05,
         [0.5, 0.6, 0.4, 0.4, 0.3, 0.35]),
        ("monitor=loss,mode=max,patience=0,factor=0.25,min_delta=0",
         dict(monitor="loss", mode="max", patience=0, factor=0.25, min_delta=0.0), 0.001,
         [1.0, 0.9, 1.1, 1.1, 1.2]),
        # Improvements below float32's resolution are none (Keras compares float32
        # tensors); a negative min_delta counts as its absolute value.
        ("monitor=val_loss,patience=1,min_delta=0,factor=0.5",
         dict(monitor="val_loss", patience=1, min_delta=0.0, factor=0.5), 0.001,
         [0.5, 0.49999999, 0.4999999, 0.49999996, 0.4999999]),
        ("monitor=val_loss,patience=1,min_delta=-0.05",
         dict(monitor="val_loss", patience=1, min_delta=-0.05), 0.2,
         [1.0, 0.96, 0.94, 0.9, 0.86, 0.5]),
        # Reductions to the floor and past float32's smallest normal rate.
        ("patience=0,factor=0.1", dict(patience=0, factor=0.1), 0.001, [1.0] * 44),
        ("mode=auto", dict(mode="auto"), 0.001, [1.0] * 12 + [0.5] + [1.0] * 11),
    ]


def make_plateau():
    x = np.zeros((2, 2), "float32")
    y = np.zeros((2,), "int64")
    out = []
    for text, kwargs, lr, values in plateau_cases():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.evaluate(x, y, verbose=0)  # builds the metrics mode auto looks at
        cb = keras.callbacks.ReduceLROnPlateau(**kwargs)
        cb.set_model(model)
        cb.on_train_begin()
        monitor = kwargs.get("monitor", "val_loss")
        rates, waits, cooldowns, bests = [], [], [], []
        for epoch, v in enumerate(values):
            cb.on_epoch_end(epoch, {monitor: v})
            rates.append(float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)))
            waits.append(cb.wait)
            cooldowns.append(cb.cooldown_counter)
            bests.append(None if cb.best is None else float(cb.best))
        out.append({"plateau": text, "lr": lr, "values": values, "rates": rates, "wait": waits,
                    "cooldown_counter": cooldowns, "best": bests})
    return out


def main():
    for name, data in (("schedules.json", make_schedules()), ("plateau.json", make_plateau())):
        path = os.path.join(HERE, name)
        with open(path, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(d, allow_nan=False) for d in data) + "\n]\n")
        print("wrote", path, len(data), "cases")


if __name__ == "__main__":
    main()
