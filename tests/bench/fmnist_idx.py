"""Fashion-MNIST's IDX .gz files as NumPy arrays, for the benchmarks' Python sides
(pytorch_fmnist.py, tf_fmnist.py)."""
import gzip

import numpy as np


def idx(path):
    """The array in one IDX .gz file (uint8; shape from its header)."""
    with gzip.open(path) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
