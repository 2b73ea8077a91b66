#!/usr/bin/env python3
"""PyTorch's side of tests/bench/bench_zoo.sh: a torchvision twin of a Keras model.

    zoo_torch.py NAME SIZE BATCH IMAGES EPOCHS THREADS SETTING[,SETTING...]

Trains torchvision.models.NAME(weights=None, num_classes=3) (inception_v3
without its auxiliary classifier, as Keras' InceptionV3 has none) the way
bench_zoo.sh's Keras column trains Keras' model: Adam lr 1e-3, eps 1e-7
(Keras' epsilon), cross-entropy, BatchNormalization in training mode, batch
BATCH, on IMAGES random images of SIZE x SIZE x 3 (float32 0..255) with random
labels, shuffled every epoch, EPOCHS epochs, torch.set_num_threads(THREADS),
once per SETTING, each on a network of its own (same seed): "default" (NCHW),
"cl" (the network and the images in torch.channels_last), "compile" and
"compile-cl" (the same compiled with torch.compile, TorchInductor's default
mode, in epoch 1; as CLT_TORCH_COMPILE=1 does in the other benches).

Prints "params N" and per setting one line per epoch:
"SETTING epoch E images_per_second R".
"""
import sys
import time

import torch
import torchvision
from torch import nn


SETTINGS = ("default", "cl", "compile", "compile-cl")


def main():
    if len(sys.argv) != 8 or not set(sys.argv[7].split(",")) <= set(SETTINGS):
        sys.exit(__doc__.split("\n\n")[1])
    name = sys.argv[1]
    size, batch, images, epochs, threads = (int(a) for a in sys.argv[2:7])
    torch.set_num_threads(threads)
    for setting in sys.argv[7].split(","):
        train(name, size, batch, images, epochs, setting)


def train(name, size, batch, images, epochs, setting):
    torch.manual_seed(42)
    extra = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
    model = getattr(torchvision.models, name)(weights=None, num_classes=3, **extra)
    print("params %d" % sum(p.numel() for p in model.parameters()), flush=True)
    x = torch.rand(images, 3, size, size) * 255
    y = torch.randint(0, 3, (images,))
    if setting.endswith("cl"):
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if setting.startswith("compile"):
        model = torch.compile(model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(images)
        start = time.perf_counter()
        for first in range(0, images, batch):
            idx = order[first:first + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - start
        print("%s epoch %d images_per_second %.3f" % (setting, epoch, images / seconds), flush=True)


if __name__ == "__main__":
    main()
