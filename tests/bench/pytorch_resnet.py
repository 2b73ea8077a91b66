#!/usr/bin/env python3
"""ResNet50 in PyTorch on a photo folder, for tests/bench/bench_resnet_pytorch.sh.

Trains torchvision's resnet50 (weights=None, num_classes = the folder's number of
classes) the way `cltrain train --model resnet50` trains Keras' ResNet50 by
default: Adam lr 1e-3, eps 1e-7 (Keras' epsilon), cross-entropy, BatchNormalization
in training mode with each batch's statistics, batch BATCH, shuffled every epoch.

The folder is read as cltrain reads it: one subfolder per class (sorted names,
hidden ones ignored), its .jpg/.jpeg/.png files (nested folders included). The
first IMAGES files of a seeded shuffle of that list are decoded once, before any
clock starts (Pillow: RGB, bilinear resize to SIZE x SIZE), and kept as one
float tensor with Keras' `caffe` preprocessing (RGB to BGR, minus the ImageNet
channel means), as cltrain keeps its decoded images: timing excludes decoding,
as cltrain's epochs after the first do.

Prints "torch VERSION", "network ..." (its parameters), "decoded N images of
SIZExSIZE in S s", "startup_seconds S" (launch to the end of the first training
step, importing torch and decoding included) and one line per epoch:
"epoch E images_per_second R".

    pytorch_resnet.py DATA_DIR SIZE BATCH IMAGES EPOCHS [THREADS [v1]]

THREADS: torch.set_num_threads (2 by default). v1: move each stage's stride from
the 3x3 convolution (torchvision's ResNet v1.5) to the first 1x1 one, as in
Keras' ResNet50 (v1) and so cltrain's: the same shapes and arithmetic as
cltrain's network (Keras' convolutions also have biases, torchvision's not).
torchvision's own v1.5 does about 6% more arithmetic (4.09 against 3.86 GMAC
forward per 224x224 image). With CLT_TORCH_CHANNELS_LAST=1 the network and the
images are in torch.channels_last (NHWC), the memory format PyTorch's CPU guides
recommend for convolutions. With CLT_TORCH_COMPILE=1 the network is compiled
with torch.compile (TorchInductor's default mode; it needs a C++ compiler).
"""
import time

LAUNCH = time.time()  # start-up is timed from here (before importing torch)

import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from PIL import Image  # noqa: E402
from torch import nn  # noqa: E402

CAFFE_MEANS_BGR = np.array([103.939, 116.779, 123.68], np.float32)


def photo_files(data_dir):
    classes = sorted(d for d in os.listdir(data_dir)
                     if not d.startswith(".") and os.path.isdir(os.path.join(data_dir, d)))
    files = []
    for label, name in enumerate(classes):
        for root, dirs, names in os.walk(os.path.join(data_dir, name)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(names):
                if f.lower().endswith((".jpg", ".jpeg", ".png")):
                    files.append((os.path.join(root, f), label))
    return classes, files


def decode(path, size):
    with Image.open(path) as img:
        rgb = img.convert("RGB").resize((size, size), Image.BILINEAR)
    bgr = np.asarray(rgb, np.float32)[:, :, ::-1] - CAFFE_MEANS_BGR
    return bgr.transpose(2, 0, 1)  # CHW


def main():
    data_dir, size, batch, images, epochs = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                             int(sys.argv[4]), int(sys.argv[5]))
    torch.set_num_threads(int(sys.argv[6]) if len(sys.argv) > 6 else 2)
    v1 = len(sys.argv) > 7 and sys.argv[7] == "v1"
    print("torch %s torchvision %s" % (torch.__version__, torchvision.__version__), flush=True)

    classes, files = photo_files(data_dir)
    if not files:
        sys.exit("pytorch_resnet.py: no .jpg/.jpeg/.png files in the class folders of %s" % data_dir)
    random.Random(42).shuffle(files)
    files = files[:images]
    images = len(files)
    t0 = time.perf_counter()
    x = torch.from_numpy(np.stack([decode(path, size) for path, _ in files]))
    y = torch.tensor([label for _, label in files], dtype=torch.int64)
    print("decoded %d images of %dx%d in %.2f s" % (images, size, size, time.perf_counter() - t0), flush=True)

    torch.manual_seed(42)
    model = torchvision.models.resnet50(weights=None, num_classes=len(classes))
    if v1:
        for stage in (model.layer2, model.layer3, model.layer4):
            stride = stage[0].conv2.stride
            stage[0].conv1.stride, stage[0].conv2.stride = stride, (1, 1)
    print("network torchvision resnet50%s: %d parameters, %d classes" % (
        " (strides as ResNet v1)" if v1 else " (v1.5)",
        sum(p.numel() for p in model.parameters()), len(classes)), flush=True)
    if os.environ.get("CLT_TORCH_CHANNELS_LAST") == "1":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if os.environ.get("CLT_TORCH_COMPILE") == "1":
        # Compiled at the first step (epoch 1, which the benches leave out).
        model = torch.compile(model)
        print("torch.compile (inductor)", flush=True)
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
            if epoch == 1 and first == 0:
                print("startup_seconds %.2f" % (time.time() - LAUNCH), flush=True)
        seconds = time.perf_counter() - start
        print("epoch %d images_per_second %.2f loss %.4f" % (epoch, images / seconds, loss.item()), flush=True)


if __name__ == "__main__":
    main()
