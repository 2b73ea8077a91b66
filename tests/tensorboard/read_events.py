#!/usr/bin/env python3
"""TensorBoard event files read by TensorBoard's own reader: prints their scalars.

    read_events.py DIR [--expect-json FILE]

Every run under DIR (each folder holding event files, as TensorBoard names runs:
its path below DIR, "." for DIR itself) is loaded with tensorboard's
EventAccumulator, keeping every scalar. Before that each event file is read whole
by TensorBoard's record reader and every record parsed as a tensorboard.Event,
the first being the file_version event: a bad CRC, a truncated record or a
malformed event is an error here (the accumulator would stop at it quietly).

Prints one line per scalar, sorted by run, tag and step: "RUN TAG STEP VALUE",
e.g. "train epoch_loss 1 0.5123", the value as the shortest decimal that reads
back as the same float32 (0.5123, 1e-07, 3.0, nan).

--expect-json FILE: FILE holds a JSON object {"RUN/TAG": [[STEP, VALUE], ...],
...}. It must list every tag of every run exactly: no tag, step or value missing,
none extra; values equal as float32 within a relative 1e-6 (NaN equals NaN). The
first difference is named on stderr.

Exit status: 0 read (and matching), 1 no event files, a file TensorBoard cannot
read whole, or a difference, 2 bad usage or tensorboard missing.
"""
import argparse
import json
import math
import os
import sys

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing import io_wrapper
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
except ImportError as exc:
    print(f"read_events: tensorboard not importable ({exc}): pip install tensorboard",
          file=sys.stderr)
    sys.exit(2)

REL_TOL = 1e-6


class Failure(Exception):
    """A file unreadable or a difference from the expected scalars."""


def event_files(folder):
    """The event files directly in folder, sorted as TensorBoard reads them."""
    names = sorted(os.listdir(folder))
    return [os.path.join(folder, n) for n in names
            if io_wrapper.IsTensorFlowEventsFile(n) and os.path.isfile(os.path.join(folder, n))]


def find_runs(logdir):
    """{run name: folder} of every folder under logdir holding event files."""
    runs = {}
    for root, dirs, _ in os.walk(logdir):
        dirs.sort()
        if event_files(root):
            runs[os.path.relpath(root, logdir)] = root
    return runs


def check_records(path):
    """Reads every record of path with TensorBoard's reader; returns their count."""
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    count = 0
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            break
        except errors.DataLossError as exc:
            why = exc.message  # "PATH failed header crc32 check", "PATH has truncated record..."
            if why.startswith(path):
                why = why[len(path):].lstrip()
            raise Failure(f"{path}: record {count + 1}: {why}") from exc
        event = event_pb2.Event()
        try:
            event.ParseFromString(reader.record())
        except Exception as exc:  # google.protobuf's DecodeError, by version
            raise Failure(f"{path}: record {count + 1}: not an Event: {exc}") from exc
        if count == 0 and not event.file_version.startswith("brain.Event:"):
            raise Failure(f"{path}: the first event is not a file_version event")
        count += 1
    if count == 0:
        raise Failure(f"{path}: no records")
    return count


def f32(v):
    return np.float32(v)


def show(v):
    """The shortest decimal reading back as float32 v."""
    return str(f32(v))


def load(logdir):
    """[(run, tag, step, value)] of every scalar under logdir, sorted."""
    runs = find_runs(logdir)
    if not runs:
        raise Failure(f"{logdir}: no event files")
    rows = []
    for run, folder in sorted(runs.items()):
        for path in event_files(folder):
            check_records(path)
        acc = event_accumulator.EventAccumulator(
            folder, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        for tag in acc.Tags()[event_accumulator.SCALARS]:
            rows.extend((run, tag, s.step, s.value) for s in acc.Scalars(tag))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    return rows


def same_value(a, b):
    a, b = float(f32(a)), float(f32(b))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def compare(rows, expect_path):
    """Raises Failure naming the first difference between rows and the JSON file."""
    try:
        with open(expect_path, encoding="utf-8") as f:
            expect = json.load(f)
    except (OSError, ValueError) as exc:
        raise Failure(f"{expect_path}: {exc}") from exc
    if not isinstance(expect, dict):
        raise Failure(f"{expect_path}: not a JSON object of \"run/tag\": [[step, value], ...]")
    got = {}
    for run, tag, step, value in rows:
        got.setdefault(f"{run}/{tag}", []).append((step, value))
    for key in sorted(got):
        if key not in expect:
            raise Failure(f"{key}: in the event files, not in {expect_path}")
    for key in sorted(expect):
        want = expect[key]
        if (not isinstance(want, list) or
                not all(isinstance(p, list) and len(p) == 2 for p in want)):
            raise Failure(f"{expect_path}: {key}: not a list of [step, value]")
        if key not in got:
            raise Failure(f"{key}: missing from the event files")
        want = sorted((int(s), float(v)) for s, v in want)
        have = got[key]
        for i in range(max(len(want), len(have))):
            if i >= len(have):
                raise Failure(f"{key}: step {want[i][0]} missing from the event files")
            if i >= len(want):
                raise Failure(f"{key}: step {have[i][0]} in the event files, not in {expect_path}")
            (ws, wv), (hs, hv) = want[i], have[i]
            if ws != hs:
                first = min(ws, hs)
                where = "missing from the event files" if first == ws else \
                    f"in the event files, not in {expect_path}"
                raise Failure(f"{key}: step {first} {where}")
            if not same_value(wv, hv):
                raise Failure(f"{key}: step {ws}: value {show(hv)}, expected {show(wv)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the log folder: runs are its folders holding event files")
    ap.add_argument("--expect-json", metavar="FILE",
                    help='{"run/tag": [[step, value], ...]}: all scalars expected')
    args = ap.parse_args()
    try:
        if not os.path.isdir(args.dir):
            raise Failure(f"{args.dir}: not a folder")
        rows = load(args.dir)
        for run, tag, step, value in rows:
            print(f"{run} {tag} {step} {show(value)}")
        sys.stdout.flush()
        if args.expect_json:
            compare(rows, args.expect_json)
            print(f"read_events: {len(rows)} scalars match {args.expect_json}", file=sys.stderr)
    except Failure as exc:
        print(f"read_events: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
