#!/usr/bin/env python3
"""The cost model of training across hosts (docs/hosts.md, "A model of many
hosts"): images/s of P hosts with G devices each from a device's step time, the
link's latency and bandwidth (alpha, beta) and the host<->device copy cost.
Python 3 standard library only.

  cost_model.py predict --hosts P --devices G --batch B --step S --floats N \\
      --alpha A --beta BETA [--copy C] [--backward F] [--overlap] [--wire fp16] ...
  cost_model.py project --hosts 8,64,512 ... (same inputs): a markdown table
      of every algorithm, with and without overlap and fp16, and where the ring
      gives way
  cost_model.py fit --kind ring --procs P FLOATS:SECONDS ...   alpha and beta
  cost_model.py fit --kind copy FLOATS:SECONDS ...   the copy's alpha and cost per byte
  cost_model.py backward TRACE.json   the backward pass's share of device time

Times are seconds, sizes floats (4 bytes each), beta and copy seconds per byte.
"""
import argparse
import json
import math
import sys

ALGORITHMS = ("ring", "hd", "tree")


def ring(p, m, alpha, beta):
    """Ring all-reduce of m bytes over p members: reduce-scatter, then
    all-gather, 2(p-1) steps each moving m/p bytes."""
    return 0.0 if p < 2 else 2 * (p - 1) * (alpha + m / p * beta)


def halving_doubling(p, m, alpha, beta):
    """Recursive halving (reduce-scatter) then doubling (all-gather)
    (Rabenseifner; Thakur, Rabenseifner and Gropp 2005): 2 log2(p) steps and the
    ring's bytes on a power of two; otherwise the members beyond the largest
    power of two first hand their whole buffer to a partner and get the result
    back at the end."""
    if p < 2:
        return 0.0
    q = 1 << (p.bit_length() - 1)
    t = 2 * math.log2(q) * alpha + 2 * (q - 1) / q * m * beta
    return t if q == p else t + 2 * (alpha + m * beta)


def tree(p, m, alpha, beta):
    """Pipelined binary tree: a reduce to the root, then a broadcast, each
    (L + k - 1) steps of one segment of m/k bytes over L = ceil(log2 p) levels,
    with the number of segments k that minimises it (as NCCL's double binary
    tree, where every member receives one segment a step)."""
    if p < 2:
        return 0.0
    levels = math.ceil(math.log2(p))
    seg = m if levels == 1 else min(m, math.sqrt(m * alpha / ((levels - 1) * beta)))
    seg = max(seg, 1.0)
    return 2 * (levels + m / seg - 1) * (alpha + seg * beta)


CROSS = {"ring": ring, "hd": halving_doubling, "tree": tree}


class Parser(argparse.ArgumentParser):
    """Bad arguments in one line, without the usage text."""

    def error(self, message):
        sys.exit(f"{self.prog}: error: {message}")


def predict(a, algorithm=None, overlap=None, wire=None):
    """One configuration's times (seconds a step) and images/s, as a dict."""
    algorithm = algorithm or a.algorithm
    overlap = a.overlap if overlap is None else overlap
    wire = wire or a.wire
    p, g, n = a.hosts, a.devices, a.floats
    size = 4.0 * n
    # The device ring within a host: 2(G-1) steps, each a download and an
    # upload of a 1/G chunk through host memory.
    local = 2 * (g - 1) * (a.copy_alpha + 2 * size / g * a.copy) if g > 1 else 0.0
    down = up = conv = cross = cross_cpu = 0.0
    if p > 1:
        # The first replica downloads its host's sum; every replica uploads the total.
        down = up = a.copy_alpha + size * a.copy
        wire_bytes = size / 2 if wire == "fp16" else size
        buckets = math.ceil(n / a.bucket_floats) if overlap and a.bucket_floats else 1
        cross = buckets * CROSS[algorithm](p, wire_bytes / buckets, a.alpha, a.beta)
        # Host work on the cores the devices compute on (CPU devices): the bytes
        # each host sends and receives, at the unshaped link's cost per byte.
        cross_cpu = 2 * (p - 1) / p * wire_bytes * a.beta_cpu
        if wire == "fp16":
            # Every float a host sends is converted to half, every one it receives back.
            conv = 2 * 2 * (p - 1) / p * n * a.conv
    allreduce = local + down + cross + conv + up
    # What keeps the host's cores busy during the all-reduce: nothing a GPU
    # computes with, everything but the waits on the wire for CPU devices.
    busy = min(allreduce, local + down + up + conv + cross_cpu) if a.cpu_devices else 0.0
    backward = a.backward * a.step
    if overlap:
        step = a.step + busy + max(0.0, allreduce - busy - backward)
    else:
        step = a.step + allreduce
    images = p * g * a.batch
    return {
        "local_seconds": local,
        "copy_seconds": down + up,
        "cross_seconds": cross,
        "convert_seconds": conv,
        "allreduce_seconds": allreduce,
        "step_seconds": step,
        "images_per_second": images / step,
        "ideal_images_per_second": images / a.step,
        "scaling": a.step / step,
    }


def crossover(a, overlap, wire, margin, largest=1 << 16):
    """The fewest hosts (powers of two up to largest) where halving-doubling or the
    tree all-reduces across hosts in at least `margin` less time than the ring,
    with that algorithm and both times; None when the ring holds throughout."""
    p = 2
    while p <= largest:
        b = argparse.Namespace(**vars(a))
        b.hosts = p
        r = predict(b, "ring", overlap, wire)["cross_seconds"]
        for alg in ("hd", "tree"):
            t = predict(b, alg, overlap, wire)["cross_seconds"]
            if t < (1 - margin) * r:
                return p, alg, r, t
        p *= 2
    return None


def cmd_predict(a):
    for k, v in predict(a).items():
        print(f"{k} {v:.6g}")


def cmd_project(a):
    hosts = a.host_list
    print("| hosts | GPUs | algorithm | overlap | wire | all-reduce ms | step ms | images/s | "
          "of ideal |")
    print("| ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for p in hosts:
        b = argparse.Namespace(**vars(a))
        b.hosts = p
        for alg in ALGORITHMS:
            for overlap in (False, True):
                for wire in ("fp32", "fp16"):
                    r = predict(b, alg, overlap, wire)
                    print(f"| {p} | {p * a.devices} | {alg} | {'on' if overlap else 'off'} | "
                          f"{wire} | {r['allreduce_seconds'] * 1e3:.1f} | "
                          f"{r['step_seconds'] * 1e3:.1f} | {r['images_per_second']:.0f} | "
                          f"{100 * r['scaling']:.0f}% |")
    for overlap in (False, True) if a.bucket_floats else (False,):
        c = crossover(a, overlap, "fp32", a.margin)
        what = f"buckets of {a.bucket_floats} floats" if overlap else "one buffer"
        if c is None:
            print(f"crossover ({what}): the ring stays within {100 * a.margin:.0f}% of the "
                  f"others up to {1 << 16} hosts")
        else:
            p, alg, r, t = c
            print(f"crossover ({what}): from {p} hosts {alg} all-reduces across hosts in "
                  f"{t * 1e3:.1f} ms against the ring's {r * 1e3:.1f} ms "
                  f"(at least {100 * a.margin:.0f}% less)")


def points(pairs):
    out = []
    for s in pairs:
        try:
            n, t = s.split(":")
            out.append((float(n) * 4, float(t)))
        except ValueError:
            sys.exit(f"cost_model.py: {s}: expected FLOATS:SECONDS")
    if len(out) < 2 or len({n for n, _ in out}) < 2:
        sys.exit("cost_model.py: fit needs at least two sizes")
    if any(t <= 0 or n <= 0 for n, t in out):
        sys.exit("cost_model.py: fit needs positive sizes and times")
    return out


def cmd_fit(a):
    """t = x1 * alpha + x2 * beta, where for the ring over P processes x1 = 2(P-1)
    and x2 = 2(P-1)/P * bytes, for a download and an upload x1 = 2 and x2 = 2 *
    bytes. beta is the least-squares slope over the larger half of the sizes (at
    least the two largest), where the bytes dominate; alpha what the smallest
    size's time leaves after its bytes at that beta (at least 0): a joint fit
    would let the large sizes' noise, milliseconds, swamp a latency of
    microseconds."""
    data = points(a.pairs)
    if a.kind == "ring":
        if a.procs < 2:
            sys.exit("cost_model.py: fit --kind ring needs --procs of 2 or more")
        rows = [(2 * (a.procs - 1), 2 * (a.procs - 1) / a.procs * b, t) for b, t in data]
    else:
        rows = [(2.0, 2.0 * b, t) for b, t in data]
    rows.sort(key=lambda r: r[1])
    upper = rows[min(len(rows) // 2, len(rows) - 2):]
    mx = sum(r[1] for r in upper) / len(upper)
    mt = sum(r[2] for r in upper) / len(upper)
    sxx = sum((r[1] - mx) ** 2 for r in upper)
    if sxx <= 0:
        sys.exit("cost_model.py: fit needs at least two sizes")
    beta = sum((r[1] - mx) * (r[2] - mt) for r in upper) / sxx
    if beta <= 0:
        sys.exit("cost_model.py: fit: the larger sizes do not take longer: no cost per byte")
    x1, x2, t = rows[0]
    alpha = max(0.0, (t - x2 * beta) / x1)
    worst = max(abs(x1 * alpha + x2 * beta - t) / t for x1, x2, t in rows)
    print(f"alpha {alpha:.6g}")
    print(f"beta {beta:.6g}")
    print(f"worst_relative_error {worst:.4g}")


def cmd_backward(a):
    """The share of device time in backward passes among the `device: layers`
    spans of a --trace file (layer and pass spans, named "<layer> backward")."""
    try:
        with open(a.trace, encoding="utf-8") as f:
            events = json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"cost_model.py: {a.trace}: {err}")
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    tracks = {(e.get("pid"), e.get("tid")) for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"
              and e.get("args", {}).get("name") == "device: layers"}
    total = back = 0.0
    for e in events:
        if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in tracks:
            total += e.get("dur", 0)
            if str(e.get("name", "")).endswith(" backward"):
                back += e.get("dur", 0)
    if total <= 0:
        sys.exit(f"cost_model.py: {a.trace}: no 'device: layers' spans")
    print(f"backward {back / total:.4f}")


def positive(kind):
    def check(s):
        v = kind(s)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{s}: must be positive")
        return v
    return check


def non_negative(s, kind=float):
    v = kind(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{s}: must be >= 0")
    return v


def fraction(s):
    v = float(s)
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"{s}: must be in [0, 1]")
    return v


def host_counts(s):
    try:
        v = [int(h) for h in s.split(",")]
    except ValueError:
        v = []
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"{s}: expected host counts like 8,64,512")
    return v


def count(s):
    return non_negative(s, int)


def model_args(p, hosts_list):
    if hosts_list:
        p.add_argument("--hosts", dest="host_list", type=host_counts, required=True,
                       help="comma-separated host counts")
    else:
        p.add_argument("--hosts", type=positive(int), required=True, help="P")
    p.add_argument("--devices", type=positive(int), default=1, help="G, devices per host")
    p.add_argument("--batch", type=positive(int), required=True, help="images per replica")
    p.add_argument("--step", type=positive(float), required=True,
                   help="a device's step time alone (s)")
    p.add_argument("--backward", type=fraction, default=0.0,
                   help="the backward pass's share of the step")
    p.add_argument("--floats", type=positive(int), required=True, help="gradient floats")
    p.add_argument("--alpha", type=non_negative, required=True,
                   help="latency of one exchange between hosts (s)")
    p.add_argument("--beta", type=positive(float), required=True,
                   help="seconds per byte between hosts")
    p.add_argument("--beta-cpu", type=non_negative, default=0.0,
                   help="seconds per byte of that which is host CPU work (--cpu-devices)")
    p.add_argument("--copy", type=non_negative, default=0.0,
                   help="seconds per byte of one device<->host copy")
    p.add_argument("--copy-alpha", type=non_negative, default=0.0,
                   help="seconds per copy, besides its bytes")
    p.add_argument("--conv", type=non_negative, default=0.0,
                   help="seconds per float converted to or from half (--wire fp16)")
    p.add_argument("--cpu-devices", action="store_true",
                   help="the devices compute on the host's cores (the all-reduce's copies "
                        "and CPU work cannot hide behind the backward pass)")
    p.add_argument("--bucket-floats", type=count, default=0,
                   help="with overlap: the gradient crosses hosts in buckets of this many "
                        "floats, each paying the latency (0: one buffer)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="ring",
                   help="across hosts: ring, hd (recursive halving-doubling), tree")
    p.add_argument("--overlap", action="store_true",
                   help="the cross-host all-reduce runs during the backward pass")
    p.add_argument("--wire", choices=("fp32", "fp16"), default="fp32")


def main():
    ap = Parser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    model_args(sub.add_parser("predict", help="one configuration"), False)
    pr = sub.add_parser("project", help="a table over host counts")
    model_args(pr, True)
    pr.add_argument("--margin", type=non_negative, default=0.1,
                    help="the crossover: how much faster an algorithm must be (0.1: 10%%)")
    fit = sub.add_parser("fit", help="alpha and beta from timed sizes")
    fit.add_argument("--kind", choices=("ring", "copy"), required=True)
    fit.add_argument("--procs", type=int, default=2)
    fit.add_argument("pairs", nargs="+", metavar="FLOATS:SECONDS")
    bw = sub.add_parser("backward", help="the backward share of a --trace file")
    bw.add_argument("trace")
    a = ap.parse_args()
    {"predict": cmd_predict, "project": cmd_project, "fit": cmd_fit,
     "backward": cmd_backward}[a.cmd](a)


if __name__ == "__main__":
    main()
