#!/usr/bin/env python3
"""Checks `cltrain predict`'s output (tests/test_predict.sh).

    check_predict.py formats K TABLE CSV JSONL
    check_predict.py eval JSONL LOGITS.npy PREFIX
    check_predict.py onnx JSONL MODEL.onnx DOCS.md [--grey]

`formats` parses the three formats of one run with --top-k K (the table by its
columns, CSV with the csv module, JSON Lines with json) and asserts that they
hold the same images, in the same order, with K classes each, most likely first,
the same classes and the same probabilities (the table's to its 4 places).

`eval` pairs each predicted image (its path less PREFIX/) with the row of
`cltrain eval --logits` that LOGITS.paths.txt names, in the same order, and
asserts that predict's probabilities are the softmax of those logits to 1e-6.

`onnx` runs ONNX Runtime on MODEL.onnx (an export of the same checkpoint) fed
each predicted image as docs/onnx.md says: decoded (PNGs as
tests/onnx/check_photos.py writes them), resized with the documented function,
and with --grey converted to grey by the formula `cltrain predict --help` gives;
asserts the softmax of its logits equals predict's probabilities to 1e-5, and,
so that the conversion is what is tested, that a plain mean of R, G and B
instead would be further off.
"""
import csv
import json
import os
import re
import sys

import numpy as np


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["path"], [(t["class"], t["probability"]) for t in r["top"]]) for r in rows]


def read_csv(path, k):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    want = ["path"] + [f"{w}_{q}" for q in range(1, k + 1) for w in ("class", "probability")]
    if rows[0] != want:
        fail(f"{path}: header {rows[0]}, want {want}")
    return [(r[0], [(r[1 + 2 * q], float(r[2 + 2 * q])) for q in range(k)]) for r in rows[1:]]


def read_table(path, k):
    """The table, read by the header's columns (so names and paths may hold
    spaces), checking its layout: each class starts where its "top q" does, each
    probability ends where its "prob" does, padded with spaces between."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    head = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", lines[0])]
    want = ["path"] + [w for q in range(1, k + 1) for w in ("top", str(q), "prob")]
    if [h[0] for h in head] != want:
        fail(f"{path}: header {lines[0]!r}, want the words {want}")
    class_at = [h[1] for h in head[1::3]]
    prob_end = [h[2] for h in head[3::3]]
    rows = []
    for line in lines[1:]:
        if len(line) != prob_end[-1] or line[class_at[0] - 2:class_at[0]] != "  ":
            fail(f"{path}: line {line!r} not as long as the header {lines[0]!r}")
        tops = []
        for q in range(k):
            cls = line[class_at[q]:prob_end[q] - 6]
            prob = line[prob_end[q] - 6:prob_end[q]]
            if cls[:1].isspace() or not cls.endswith("  ") or not re.fullmatch(r"\d\.\d{4}", prob):
                fail(f"{path}: line {line!r}: column {q + 1} not aligned with the header")
            tops.append((cls.rstrip(), float(prob)))
        rows.append((line[:class_at[0]].rstrip(), tops))
    return rows


def formats(k, table, csv_path, jsonl):
    t, c, j = read_table(table, k), read_csv(csv_path, k), read_jsonl(jsonl)
    if not j:
        fail("no predictions")
    if [r[0] for r in t] != [r[0] for r in j] or [r[0] for r in c] != [r[0] for r in j]:
        fail("the formats list other images or another order")
    for (path, tops), (_, ctops), (_, ttops) in zip(j, c, t):
        if len(tops) != k:
            fail(f"{path}: {len(tops)} classes, want {k}")
        probs = [p for _, p in tops]
        if probs != sorted(probs, reverse=True):
            fail(f"{path}: not most likely first: {tops}")
        if [n for n, _ in ctops] != [n for n, _ in tops] or [n for n, _ in ttops] != [n for n, _ in tops]:
            fail(f"{path}: other classes: {tops} {ctops} {ttops}")
        if max(abs(a - b) for (_, a), (_, b) in zip(ctops, tops)) > 0:
            fail(f"{path}: CSV and JSON probabilities differ: {ctops} {tops}")
        if max(abs(a - b) for (_, a), (_, b) in zip(ttops, tops)) > 0.5e-4 + 1e-9:
            fail(f"{path}: the table's probabilities are not JSON's rounded: {ttops} {tops}")
    print(f"formats: {len(j)} images, {k} classes each, the same in table, CSV and JSON Lines")


def softmax(logits):
    z = np.exp(logits.astype(np.float64) - logits.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def compare(name, rows, names, probs, tol):
    """rows: predict's; probs[i] the reference probabilities of rows[i]'s image."""
    worst = 0.0
    for (path, tops), p in zip(rows, probs):
        for cls, prob in tops:
            worst = max(worst, abs(prob - p[names.index(cls)]))
        best = names[int(np.argmax(p))]
        if tops[0][0] != best:
            fail(f"{path}: predict's most likely class {tops[0][0]}, {name}'s {best}")
    print(f"{name}: {len(rows)} images, max |probability difference| {worst:.3g} (limit {tol:g})")
    if not worst <= tol:
        fail(f"{name}'s probabilities differ from predict's by {worst:.3g}")
    return worst


def eval_check(jsonl, logits_path, prefix):
    rows = read_jsonl(jsonl)
    logits = np.load(logits_path)
    with open(re.sub(r"\.npy$", "", logits_path) + ".paths.txt", encoding="utf-8") as f:
        listed = f.read().splitlines()
    got = [os.path.relpath(p, prefix) for p, _ in rows]
    if got != listed:
        fail(f"predict's images {got[:3]}... are not eval's rows {listed[:3]}...")
    names = sorted({c for _, tops in rows for c, _ in tops})
    if len(names) != logits.shape[1]:
        fail(f"run with --top-k covering every class: {len(names)} names, {logits.shape[1]} logits")
    compare("eval --logits", rows, names, softmax(logits), 1e-6)


def onnx_check(jsonl, model, docs, grey):
    import onnxruntime as ort

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
    from check_photos import documented_resize, png_read

    rows = read_jsonl(jsonl)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    meta = sess.get_modelmeta().custom_metadata_map
    names = json.loads(meta["class_names"])
    h, w = int(meta["input_height"]), int(meta["input_width"])
    resize = documented_resize(docs)
    images = [resize(png_read(p), h, w) for p, _ in rows]
    if all(png_read(p).shape[:2] == (h, w) for p, _ in rows):
        fail(f"every image is {h}x{w} already: nothing resized")

    def run(to_grey):
        x = np.stack([to_grey(i) for i in images]).astype(np.float32)
        return softmax(sess.run(["logits"], {"input": x})[0])

    def luma(rgb):  # the formula of `cltrain predict --help`
        v = rgb.astype(np.uint32) @ np.array([19595, 38470, 7471], np.uint32)
        return ((v + 32768) >> 16).astype(np.uint8)[:, :, None]

    def mean(rgb):
        return np.round(rgb.astype(np.float64).mean(axis=2)).astype(np.uint8)[:, :, None]

    worst = compare("ONNX Runtime", rows, names, run(luma if grey else (lambda i: i)), 1e-5)
    if grey:
        off = float(max(abs(prob - p[names.index(c)]) for (_, tops), p in zip(rows, run(mean))
                        for c, prob in tops))
        print(f"a plain mean of R, G and B instead: {off:.3g}")
        if not off > worst:
            fail("a plain mean of R, G and B agrees as well: the conversion is not tested")


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "formats":
        formats(int(a[1]), a[2], a[3], a[4])
    elif len(a) == 4 and a[0] == "eval":
        eval_check(a[1], a[2], a[3])
    elif len(a) in (4, 5) and a[0] == "onnx" and a[4:] in ([], ["--grey"]):
        onnx_check(a[1], a[2], a[3], a[4:] == ["--grey"])
    else:
        sys.exit(__doc__)
    print("check_predict: ok")


if __name__ == "__main__":
    main()
