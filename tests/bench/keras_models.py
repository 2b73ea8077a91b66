#!/usr/bin/env python3
"""Keras' side of tests/bench/keras_models.sh: trains a Keras model file with
Keras itself (TensorFlow CPU) and prints its training speed.

Loads FILE with keras.models.model_from_json, compiles it with Adam(1e-3) and
SparseCategoricalCrossentropy (from_logits unless the last layer ends in a
softmax), and fits it on COUNT random images of the model's input shape (float32
values 0..255, as uint8 pixels fed raw) with random labels, batch BATCH, EPOCHS
epochs, verbose 0, with TensorFlow limited to THREADS threads (intra-op and
inter-op). Prints one line per epoch: "epoch E seconds S images_per_second R"
(wall time from the epoch's begin to its end, as a callback sees it; no
validation).

    keras_models.py FILE COUNT EPOCHS [BATCH [THREADS [SEED]]]
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def main():
    path, count, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 42

    import numpy as np
    import tensorflow as tf

    # Before anything runs on TensorFlow's thread pools.
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import keras

    with open(path) as f:
        model = keras.models.model_from_json(f.read())
    last = model.layers[-1]
    act = getattr(last, "activation", None)
    softmax = (getattr(act, "__name__", "") == "softmax" or type(last).__name__ == "Softmax")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax),
                  metrics=["accuracy"])

    shape = tuple(model.input_shape[1:])
    classes = int(model.output_shape[-1])
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(count,) + shape).astype(np.float32)
    y = rng.integers(0, classes, size=(count,)).astype(np.int32)

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            s = time.perf_counter() - self.t0
            print("epoch %d seconds %.3f images_per_second %.1f" % (epoch + 1, s, count / s), flush=True)

    print("keras %s tensorflow %s threads %d/%d input %s classes %d params %d from_logits %s"
          % (keras.__version__, tf.__version__, tf.config.threading.get_intra_op_parallelism_threads(),
             tf.config.threading.get_inter_op_parallelism_threads(), shape, classes,
             model.count_params(), not softmax), flush=True)
    model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0, shuffle=True, callbacks=[Timer()])


if __name__ == "__main__":
    main()
