#!/usr/bin/env python3
"""The reference CNN in PyTorch, for tests/bench/bench_vs_pytorch.sh.

Trains the same network as `cltrain --model fmnist-cnn` (Conv2D 64 3x3 relu,
MaxPool 2, Conv2D 80 3x3 relu, MaxPool 2, Flatten, Dense 64 relu, Dense 10;
Adam lr 1e-3, eps 1e-7; batch 64) on the first IMAGES Fashion-MNIST training
images for EPOCHS epochs with THREADS threads, shuffling every epoch, and prints
"torch VERSION", "startup_seconds S" (launch to the end of the first training
step, importing torch included), and one line per epoch: "epoch E
images_per_second R". Any PyTorch from 1.13 on runs it (Debian's python3-torch,
or the current one from PyPI in the venv of tests/bench/common.sh's torch_venv).

    pytorch_fmnist.py DATA_DIR IMAGES EPOCHS [THREADS [DEVICE]]

DEVICE is a torch device, cpu by default (tests/bench/bench_vs_pytorch.sh); with
another one, such as cuda or cuda:1 (tests/gpu/run.sh), the images, the labels and
the network live on it, the clocks stop only once it has finished its work, and a
line "device D NAME" comes first. With CLT_TORCH_CHANNELS_LAST=1 the network and
the images are in torch.channels_last (NHWC), the memory format PyTorch's CPU
guides recommend for convolutions. With CLT_TORCH_COMPILE=1 the network is compiled
with torch.compile (TorchInductor's default mode; it needs a C++ compiler).
On a CUDA device CLT_TORCH_TF32=1 or 0 turns TensorFloat-32 on or off for both
convolutions and matrix products (PyTorch's defaults: on for convolutions, off
for matrix products; unset keeps them), and a line "tf32 conv C matmul M" says
what ran.
"""
import time

LAUNCH = time.time()  # start-up is timed from here (before importing torch)

import os  # noqa: E402
import sys  # noqa: E402

import numpy as np
from fmnist_idx import idx  # noqa: E402
import torch
from torch import nn


def main():
    data_dir, images, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    print("torch %s" % torch.__version__, flush=True)
    device = torch.device(sys.argv[5] if len(sys.argv) > 5 else "cpu")
    if device.type == "cuda":
        print("device %s %s" % (device, torch.cuda.get_device_name(device)), flush=True)
        tf32 = os.environ.get("CLT_TORCH_TF32")
        if tf32 in ("0", "1"):
            torch.backends.cudnn.allow_tf32 = tf32 == "1"
            torch.backends.cuda.matmul.allow_tf32 = tf32 == "1"
        print("tf32 conv %d matmul %d" % (torch.backends.cudnn.allow_tf32,
                                          torch.backends.cuda.matmul.allow_tf32), flush=True)

    def sync():  # the work queued on the device is done
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    torch.manual_seed(42)
    x = torch.from_numpy(idx(data_dir + "/train-images-idx3-ubyte.gz")[:images].astype(np.float32) / 255.0)
    x = x.unsqueeze(1).to(device)
    y = torch.from_numpy(idx(data_dir + "/train-labels-idx1-ubyte.gz")[:images].astype(np.int64)).to(device)
    model = nn.Sequential(
        nn.Conv2d(1, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 80, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2000, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    if os.environ.get("CLT_TORCH_CHANNELS_LAST") == "1":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if os.environ.get("CLT_TORCH_COMPILE") == "1":
        # Compiled at the first step (epoch 1, which the benches leave out).
        model = torch.compile(model)
        print("torch.compile (inductor)", flush=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(images).to(device)
        sync()
        start = time.perf_counter()
        for first in range(0, images, 64):
            idx_batch = order[first:first + 64]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx_batch]), y[idx_batch])
            loss.backward()
            opt.step()
            if epoch == 1 and first == 0:
                sync()
                print("startup_seconds %.2f" % (time.time() - LAUNCH), flush=True)
        sync()
        seconds = time.perf_counter() - start
        print("epoch %d images_per_second %.1f" % (epoch, images / seconds), flush=True)


if __name__ == "__main__":
    main()
