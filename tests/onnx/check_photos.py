#!/usr/bin/env python3
"""Checks a photo model exported by `cltrain export` on photos of other sizes.

    check_photos.py write DIR CLASSES
    check_photos.py check MODEL.onnx LOGITS.npy DOCS.md --data DIR
                    [--decoder png|pil] [--sorted] [--rel-tol 1e-4]

`write` makes DIR/class_<c>/img_<j>.png: RGB and grey PNGs of sizes from 17 to
150 pixels a side (none square but one), random pixels with a class colour,
written by hand (zlib, CRC-32, filter 0), so no imaging library is needed.

`check` reads the metadata of MODEL.onnx through onnx and through ONNX Runtime
(the same keys both ways; class_names the sorted subfolders of DIR; the input
size and layout those of the graph's input), takes the resize function from
DOCS.md (the python block after the `cltrain-resize` marker), and runs ONNX
Runtime on every image LOGITS.paths.txt lists (relative to DIR, one per line of
LOGITS, which `cltrain eval --logits` wrote), each decoded (our own PNGs, or
any JPEG/PNG through Pillow's convert("RGB") with --decoder pil) and resized
with that function. Asserts the same top-1 class and logits within --rel-tol of
the largest |logit|; and, so that the resize is what is tested, that some
images are not of the model's size and that resizing with corner-aligned
coordinates instead gives logits further off than that. --sorted: the list is
also the documented order of a whole folder (class, then path).
"""
import argparse
import json
import os
import re
import struct
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort

SIZES = [(80, 50), (37, 120), (20, 45), (150, 17), (64, 64), (45, 33)]  # (width, height)


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(img):
    h, w, c = img.shape
    raw = b"".join(b"\0" + img[y].tobytes() for y in range(h))  # filter 0 on every row
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if c == 3 else 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
            chunk(b"IEND", b""))


def png_read(path):
    """The PNGs png_bytes writes (8-bit RGB or grey, filter 0) as (h, w, 3) uint8."""
    with open(path, "rb") as f:
        data = f.read()
    w, h, depth, colour = struct.unpack(">IIBB", data[16:26])
    if depth != 8 or colour not in (0, 2):
        sys.exit(f"check_photos: {path}: not a PNG this script wrote")
    c = 3 if colour == 2 else 1
    at, idat = 8, b""
    while at < len(data):
        n = struct.unpack(">I", data[at:at + 4])[0]
        if data[at + 4:at + 8] == b"IDAT":
            idat += data[at + 8:at + 8 + n]
        at += 12 + n
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    if rows[:, 0].any():
        sys.exit(f"check_photos: {path}: a row filter other than 0")
    img = rows[:, 1:].reshape(h, w, c)
    return np.repeat(img, 3, axis=2) if c == 1 else img.copy()


def write(root, classes):
    rng = np.random.default_rng(11)
    k = 0
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
        for j in range(len(SIZES)):
            w, h = SIZES[k % len(SIZES)]
            k += 1
            img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            img[:, :, c % 3] = img[:, :, c % 3] // 4 + 190  # the class's colour
            if j == 2:
                img = img[:, :, :1]  # a grey PNG: cltrain expands it to RGB
            with open(os.path.join(root, f"class_{c}", f"img_{j:02d}.png"), "wb") as f:
                f.write(png_bytes(img))


def documented_resize(docs):
    """The function docs/onnx.md shows, run from its text."""
    text = open(docs, encoding="utf-8").read()
    m = re.search(r"<!-- cltrain-resize\b.*?-->\s*```python\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"check_photos: {docs}: no python block after a cltrain-resize marker")
    scope = {}
    exec(compile(m.group(1), docs, "exec"), scope)  # noqa: S102 (our own docs)
    return scope["cltrain_resize"]


def corner_resize(rgb, height, width):
    """A bilinear resize with corner-aligned coordinates: the wrong arithmetic."""
    def axis(n, out):
        f = np.arange(out) * ((n - 1) / max(out - 1, 1))
        lo = np.floor(f).astype(np.intp)
        return lo, np.minimum(lo + 1, n - 1), f - lo
    y0, y1, ty = axis(rgb.shape[0], height)
    x0, x1, tx = axis(rgb.shape[1], width)
    p = rgb.astype(np.float64)
    tx, ty = tx[None, :, None], ty[:, None, None]
    top = p[y0][:, x0] * (1 - tx) + p[y0][:, x1] * tx
    bottom = p[y1][:, x0] * (1 - tx) + p[y1][:, x1] * tx
    return np.round(top * (1 - ty) + bottom * ty).astype(np.uint8)


def fail(msg):
    print(f"FAIL: {msg}")
    return False


def check(a):
    ok = True
    model = onnx.load(a.model)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    if sess.get_modelmeta().custom_metadata_map != meta:
        ok = fail("onnx and onnxruntime read other metadata")
    dims = [d.dim_value or d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
    h, w = int(meta.get("input_height", -1)), int(meta.get("input_width", -1))
    shape = (meta.get("input_layout"), h, w, int(meta.get("input_channels", -1)))
    if shape != ("NHWC", dims[1], dims[2], dims[3]) or dims[3] != 3:
        ok = fail(f"metadata input {shape}, graph input {dims}")
    classes = sorted(e.name for e in os.scandir(a.data) if e.is_dir() and e.name[0] != ".")
    names = json.loads(meta.get("class_names", "null"))
    if names != classes:
        ok = fail(f"metadata class_names {names}, folder classes {classes}")
    if not meta.get("resize", "").startswith("bilinear, half_pixel"):
        ok = fail(f"metadata resize: {meta.get('resize')}")
    print(f"metadata: classes {names}, input {shape}, preprocessing {meta.get('preprocessing')}, "
          f"resize: {meta.get('resize')}")

    resize = documented_resize(a.docs)
    ref = np.load(a.logits)
    listing = re.sub(r"\.npy$", "", a.logits) + ".paths.txt"
    with open(listing, encoding="utf-8") as f:
        paths = f.read().splitlines()
    if len(paths) != len(ref):
        return fail(f"{listing}: {len(paths)} lines for {len(ref)} rows of logits")
    if a.sorted:
        want = sorted(os.path.relpath(os.path.join(d, f), a.data)
                      for d, _, files in os.walk(a.data) for f in files)
        want.sort(key=lambda p: (classes.index(p.split("/")[0]), p))
        if paths != want:
            ok = fail(f"rows not in (class, path) order: {paths[:4]}..., want {want[:4]}...")
    if a.decoder == "pil":
        from PIL import Image

        images = [np.asarray(Image.open(os.path.join(a.data, p)).convert("RGB")) for p in paths]
    else:
        images = [png_read(os.path.join(a.data, p)) for p in paths]
    sizes = sorted({i.shape[:2] for i in images})
    if all(s == (h, w) for s in sizes):
        ok = fail(f"every image is {h}x{w} already: nothing resized")

    def logits(resize_fn):
        x = np.stack([resize_fn(i, h, w) for i in images]).astype(np.float32)
        return sess.run(["logits"], {"input": x})[0]

    got = logits(resize)
    scale = float(np.abs(ref).max())
    rel = float(np.abs(got - ref).max()) / scale
    agree = float(np.mean(got.argmax(1) == ref.argmax(1)))
    wrong = float(np.abs(logits(corner_resize) - ref).max()) / scale
    print(f"{len(paths)} images of {len(sizes)} sizes (h, w) {sizes[:6]} resized to {h}x{w}: "
          f"top-1 agreement {100 * agree:.1f}%, max |diff| / max |logit| {rel:.3g} "
          f"(corner-aligned resize instead: {wrong:.3g})")
    if agree < 1 or not rel <= a.rel_tol:
        ok = fail(f"ONNX Runtime on the documented resize differs from cltrain eval: {rel:.3g}")
    if not wrong > a.rel_tol:
        ok = fail(f"a corner-aligned resize agrees as well ({wrong:.3g}): the test tests nothing")
    print("check_photos: ok" if ok else "check_photos: FAILED")
    return ok


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["check"])
    ap.add_argument("model")
    ap.add_argument("logits")
    ap.add_argument("docs")
    ap.add_argument("--data", required=True)
    ap.add_argument("--decoder", choices=["png", "pil"], default="png")
    ap.add_argument("--sorted", action="store_true")
    ap.add_argument("--rel-tol", type=float, default=1e-4)
    return 0 if check(ap.parse_args()) else 1


if __name__ == "__main__":
    sys.exit(main())
