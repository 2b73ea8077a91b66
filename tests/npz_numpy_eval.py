#!/usr/bin/env python3
"""Independent NumPy evaluation of a cltrain fmnist-cnn checkpoint.

Reads the .npz with numpy.load(allow_pickle=False), rebuilds the reference Keras
network from the Keras-layout weights (conv kernels HWIO, dense kernels
[in, out], NHWC flatten) with plain NumPy, and prints test accuracy and mean loss
on the first N test images in the same format as `cltrain eval`:

    npz_numpy_eval.py CHECKPOINT.npz DATA_DIR [LIMIT]
"""
import gzip
import sys

import numpy as np


def idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def conv_valid_relu(x, kernel, bias):
    """x (B,H,W,C), kernel (KH,KW,C,O): Keras Conv2D(padding='valid'), then ReLU."""
    kh, kw, _, _ = kernel.shape
    b, h, w, c = x.shape
    oh, ow = h - kh + 1, w - kw + 1
    patches = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))  # B,OH,OW,C,KH,KW
    patches = patches.transpose(0, 1, 2, 4, 5, 3).reshape(b, oh, ow, kh * kw * c)
    y = patches @ kernel.reshape(kh * kw * c, -1) + bias
    return np.maximum(y, 0)


def maxpool2(x):
    b, h, w, c = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2, :]
    return x.reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def main():
    path, data_dir = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    z = np.load(path, allow_pickle=False)
    w = {k: z[k].astype(np.float32) for k in z.files if not k.startswith("optimizer/") and z[k].dtype == np.float32}
    images = idx(data_dir + "/t10k-images-idx3-ubyte.gz")[:limit].astype(np.float32) / 255.0
    labels = idx(data_dir + "/t10k-labels-idx1-ubyte.gz")[:limit].astype(np.int64)
    correct, loss = 0, 0.0
    for start in range(0, len(images), 500):
        x = images[start:start + 500, :, :, None]
        x = maxpool2(conv_valid_relu(x, w["conv2d/kernel"], w["conv2d/bias"]))
        x = maxpool2(conv_valid_relu(x, w["conv2d_1/kernel"], w["conv2d_1/bias"]))
        x = x.reshape(len(x), -1)  # NHWC flatten, as Keras
        x = np.maximum(x @ w["dense/kernel"] + w["dense/bias"], 0)
        logits = (x @ w["dense_1/kernel"] + w["dense_1/bias"]).astype(np.float64)
        y = labels[start:start + 500]
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss -= logp[np.arange(len(y)), y].sum()
        correct += (logits.argmax(axis=1) == y).sum()
    print("Accuracy: %.2f" % (100.0 * correct / len(images)))
    print("Loss: %.4f" % (loss / len(images)))


if __name__ == "__main__":
    main()
