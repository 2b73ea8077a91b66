#!/usr/bin/env python3
"""Keras' side of tests/bench/bench_zoo.sh (TensorFlow 2.21, Keras 3).

    zoo_keras.py write NAME SIZE FILE.json
    zoo_keras.py train FILE.json IMAGES EPOCHS BATCH THREADS MODE[,MODE...]

write: keras.applications.NAME(weights=None, include_top=True, classes=3,
input_shape=(SIZE, SIZE, 3)) written with model.to_json() to FILE.json, the
file cltrain trains; prints "params N" (Keras' count_params).

train: the model of FILE.json (keras.models.model_from_json, Keras' own
initialisation) compiled with Adam(1e-3) and SparseCategoricalCrossentropy
(from_logits unless the last layer ends in a softmax) and fitted on IMAGES
random images of its input shape (float32 0..255) with random labels, batch
BATCH, EPOCHS epochs, verbose 0, with TensorFlow's intra-op and inter-op thread
pools set to THREADS, once per MODE, each on a model of its own read afresh
(one process spares TensorFlow's import): "default" compiles as model.compile
does by default (jit_compile="auto": Keras turns XLA off on a CPU-only
machine); "xla" passes jit_compile=True. Prints per mode one line per epoch,
"MODE epoch E images_per_second R" (the epoch's wall time as a callback sees
it: epoch 1 holds the graph tracing and XLA's compilation), then "MODE
jit_compile X" (the setting model.fit resolved).
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def write(name, size, path):
    import keras

    model = getattr(keras.applications, name)(weights=None, include_top=True, classes=3,
                                              input_shape=(size, size, 3))
    with open(path, "w") as f:
        f.write(model.to_json())
    print("params %d" % model.count_params())


def train(path, images, epochs, batch, threads, modes):
    import numpy as np
    import tensorflow as tf

    # Before anything runs on TensorFlow's thread pools.
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import keras

    for mode in modes:
        keras.backend.clear_session()
        fit(keras, np, path, images, epochs, batch, mode)


def fit(keras, np, path, images, epochs, batch, mode):
    with open(path) as f:
        model = keras.models.model_from_json(f.read())
    last = model.layers[-1]
    act = getattr(last, "activation", None)
    softmax = getattr(act, "__name__", "") == "softmax" or type(last).__name__ == "Softmax"
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax),
                  jit_compile=True if mode == "xla" else "auto")

    shape = tuple(model.input_shape[1:])
    classes = int(model.output_shape[-1])
    rng = np.random.default_rng(42)
    x = rng.integers(0, 256, size=(images,) + shape).astype(np.float32)
    y = rng.integers(0, classes, size=(images,)).astype(np.int32)

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            s = time.perf_counter() - self.t0
            print("%s epoch %d images_per_second %.3f" % (mode, epoch + 1, images / s), flush=True)

    model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0, shuffle=True, callbacks=[Timer()])
    print("%s jit_compile %s" % (mode, model.jit_compile), flush=True)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif (len(sys.argv) == 8 and sys.argv[1] == "train"
          and set(sys.argv[7].split(",")) <= {"default", "xla"}):
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
              sys.argv[7].split(","))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main()
