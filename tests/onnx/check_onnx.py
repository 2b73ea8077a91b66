#!/usr/bin/env python3
"""Checks a model exported by `cltrain export` against `cltrain eval`.

    check_onnx.py MODEL.onnx LOGITS (--data DIR | --inputs IMAGES)
                  [--agreement 0.999] [--rel-tol 1e-4]

MODEL.onnx must pass onnx.checker (full check, with shape inference); ONNX
Runtime then runs it on the test images cltrain evaluated, in the same order:
the first len(LOGITS) images of an IDX folder's t10k-images-idx3-ubyte[.gz]
(--data), or an array of images (N, H, W, C) of pixel values 0..255 (--inputs).
LOGITS is what `cltrain eval --logits` wrote. Arrays are .npy files, or members
of an .npz as FILE.npz:MEMBER (tests/models' batch.npz:x, :logits_inference). Asserts that the top-1
predictions agree on at least --agreement of the examples and that the largest
logit difference is at most --rel-tol of the largest |logit|; a 'probabilities'
output, where the model has one, must be the softmax of the logits. Nothing here
knows the model: shapes come from the ONNX graph. Exit status 0 when all hold.
"""
import argparse
import gzip
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def idx_file(folder, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            return path
    sys.exit(f"check_onnx: no {name}[.gz] in {folder}")


def array(spec):
    """FILE.npy, or FILE.npz:MEMBER."""
    path, _, member = spec.partition(".npz:")
    if member:
        with np.load(path + ".npz", allow_pickle=False) as z:
            return z[member]
    return np.load(spec, allow_pickle=False)


def dims_of(value_info):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in value_info.type.tensor_type.shape.dim]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("logits")
    ap.add_argument("--data", help="IDX folder (t10k-images-idx3-ubyte[.gz], t10k-labels-...)")
    ap.add_argument("--inputs", help=".npy of images (N, H, W, C), pixel values 0..255")
    ap.add_argument("--agreement", type=float, default=0.999)
    ap.add_argument("--rel-tol", type=float, default=1e-4)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()

    model = onnx.load(a.model)
    onnx.checker.check_model(model, full_check=True)
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    meta = {p.key: p.value for p in model.metadata_props}
    print(f"onnx.checker: ok (ir_version {model.ir_version}, opsets {opsets}, "
          f"{len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers, "
          f"producer {model.producer_name} {model.producer_version})")
    print(f"model {meta.get('model', '?')}, preprocessing: {meta.get('preprocessing', '?')}")
    inputs = {v.name: dims_of(v) for v in model.graph.input}
    outputs = [v.name for v in model.graph.output]
    if list(inputs) != ["input"] or outputs[:1] != ["logits"]:
        sys.exit(f"check_onnx: inputs {list(inputs)}, outputs {outputs}; "
                 "want 'input' and 'logits' first")
    _, h, w, c = inputs["input"]

    ref = array(a.logits)
    if ref.dtype != np.float32 or ref.ndim != 2:
        sys.exit(f"check_onnx: {a.logits}: {ref.dtype} {ref.shape}, want float32 (N, classes)")
    n = ref.shape[0]
    labels = None
    if a.inputs:
        images = array(a.inputs)
    elif a.data:
        images = idx(idx_file(a.data, "t10k-images-idx3-ubyte"))
        labels = idx(idx_file(a.data, "t10k-labels-idx1-ubyte"))[:n].astype(np.int64)
    else:
        sys.exit("check_onnx: give --data DIR or --inputs IMAGES.npy")
    images = images[:n]
    if images.ndim == 3:
        images = images[..., None]  # IDX: (N, H, W) grey
    if images.shape != (n, h, w, c):
        sys.exit(f"check_onnx: images {images.shape}, model input (N, {h}, {w}, {c}), "
                 f"{n} logits rows")

    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    got, probs = [], []
    for s in range(0, n, a.batch):
        res = sess.run(None, {"input": images[s:s + a.batch].astype(np.float32)})
        got.append(res[0])
        if "probabilities" in outputs:
            probs.append(res[outputs.index("probabilities")])
    got = np.concatenate(got)
    if got.shape != ref.shape:
        sys.exit(f"check_onnx: ONNX Runtime gave logits {got.shape}, cltrain {ref.shape}")

    agree = float(np.mean(got.argmax(1) == ref.argmax(1)))
    max_diff = float(np.max(np.abs(got - ref)))
    scale = float(np.max(np.abs(ref)))
    rel = max_diff / scale if scale > 0 else max_diff
    print(f"onnxruntime {ort.__version__}: {n} examples, top-1 agreement {100 * agree:.2f}%, "
          f"max |diff| {max_diff:.3g}, max |logit| {scale:.4g}, relative {rel:.3g}")
    if labels is not None:
        print(f"accuracy: onnxruntime {100 * np.mean(got.argmax(1) == labels):.2f}%, "
              f"cltrain {100 * np.mean(ref.argmax(1) == labels):.2f}%")
    ok = True
    if agree < a.agreement:
        print(f"FAIL: top-1 agreement {100 * agree:.2f}% < {100 * a.agreement:.2f}%")
        ok = False
    if not rel <= a.rel_tol:
        print(f"FAIL: relative logit difference {rel:.3g} > {a.rel_tol:g}")
        ok = False
    if probs:
        p = np.concatenate(probs)
        e = np.exp(got - got.max(1, keepdims=True))
        d = float(np.max(np.abs(p - e / e.sum(1, keepdims=True))))
        print(f"probabilities: max |diff| from softmax(logits) {d:.3g}")
        if not d <= 1e-5:
            print("FAIL: 'probabilities' is not the softmax of 'logits'")
            ok = False
    print("check_onnx: ok" if ok else "check_onnx: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
