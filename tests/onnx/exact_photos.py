#!/usr/bin/env python3
"""Writes a photo folder whose PNGs already have the model's size, and their pixels.

    exact_photos.py DIR SIZE CLASSES PER_CLASS

DIR/class_<c>/img_<j>.png: SIZE x SIZE RGB, random pixels with a little class
signal. DIR.npy: every image (N, SIZE, SIZE, 3) uint8, in the order cltrain (and
Keras) read the folder: classes sorted, then file names sorted. cltrain decodes
and resizes nothing away from these pixels, so ONNX Runtime can be fed exactly
what `cltrain eval` saw (tests/onnx/check_onnx.py --inputs DIR.npy). PNG is
written by hand (zlib, CRC-32): no imaging library needed.
"""
import os
import struct
import sys
import zlib

import numpy as np


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(img):
    h, w, _ = img.shape
    raw = b"".join(b"\0" + img[y].tobytes() for y in range(h))  # filter 0 per row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    root, size, classes, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(5)
    images = []
    for c in range(classes):
        os.makedirs(os.path.join(root, "class_%d" % c), exist_ok=True)
        for j in range(per):
            img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            img[:, :, c % 3] //= 2
            with open(os.path.join(root, "class_%d" % c, "img_%03d.png" % j), "wb") as f:
                f.write(png(img))
            images.append(img)
    np.save(root.rstrip("/") + ".npy", np.stack(images))


if __name__ == "__main__":
    main()
