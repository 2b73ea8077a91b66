#!/usr/bin/env python3
"""The reference CNN in TensorFlow, for tests/bench/bench_vs_pytorch.sh --tf-venv.

The seed's network and training step (shared/seeds/01: a Keras Sequential model,
Conv2D 64 3x3 relu, MaxPool 2, Conv2D 80 3x3 relu, MaxPool 2, Flatten, Dense 64
relu, Dense 10; SparseCategoricalCrossentropy from logits averaged over the
batch, Adam lr 1e-3 eps 1e-7, a custom training step under tf.function; batch
64) on one device, without MirroredStrategy: the same network as
`cltrain --model fmnist-cnn` and tests/bench/pytorch_fmnist.py. Trains on the
first IMAGES Fashion-MNIST training images for EPOCHS epochs with THREADS
intra-op and inter-op threads, shuffling every epoch, and prints, as
pytorch_fmnist.py does: "tensorflow VERSION", "startup_seconds S" (launch to the
end of the first training step, importing TensorFlow and tracing the step
included), and one line per epoch: "epoch E images_per_second R".

    tf_fmnist.py DATA_DIR IMAGES EPOCHS [THREADS]
"""
import time

LAUNCH = time.time()  # start-up is timed from here (before importing tensorflow)

import os  # noqa: E402
import sys  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from fmnist_idx import idx  # noqa: E402
import tensorflow as tf  # noqa: E402


def main():
    data_dir, images, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    print("tensorflow %s" % tf.__version__, flush=True)
    tf.random.set_seed(42)
    x = tf.constant(idx(data_dir + "/train-images-idx3-ubyte.gz")[:images, :, :, None].astype(np.float32) / 255.0)
    y = tf.constant(idx(data_dir + "/train-labels-idx1-ubyte.gz")[:images].astype(np.int64))
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(80, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10)])
    opt = tf.keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-7)
    loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def train_step(batch):
        xb, yb = tf.gather(x, batch), tf.gather(y, batch)
        with tf.GradientTape() as tape:
            loss = loss_obj(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for epoch in range(1, epochs + 1):
        order = tf.random.shuffle(tf.range(images, dtype=tf.int32))
        start = time.perf_counter()
        for first in range(0, images, 64):
            loss = train_step(order[first:first + 64])
            if epoch == 1 and first == 0:
                loss.numpy()  # wait for the step
                print("startup_seconds %.2f" % (time.time() - LAUNCH), flush=True)
        loss.numpy()
        seconds = time.perf_counter() - start
        print("epoch %d images_per_second %.1f" % (epoch, images / seconds), flush=True)


if __name__ == "__main__":
    main()
