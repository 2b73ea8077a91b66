#!/usr/bin/env bash
# --trace: the Chrome trace-event file of runs on one, two and three devices (and
# of a photo run, with its decoders) is valid JSON in the schema Perfetto and
# chrome://tracing read, with the tracks of every replica, the phases of every
# traced step, every kernel of every traced step on its device's track (one
# optimizer update per step), a span per step from its first launch to its end,
# device spans covering the busiest device's compute (on several devices, its
# forward and backward phases; the host's all-reduce left out), kernels grouped
# by layer and pass, the all-reduce's steps and copies, and no two spans of one
# track overlapping; the per-replica figures of the same runs add up (JSONL and
# epoch lines); bad paths fail before training.
#   test_trace.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE=$2
. "$(dirname "$0")/lib.sh"

# check FILE STEPS REPLICAS KIND: the schema and contents, in Python. KIND: idx;
# some (a few steps, the first's start-up a large part: no coverage check); or
# photos (decoders' tracks too; the device may wait for photos: no coverage check).
check() {
  /usr/bin/python3 - "$@" <<'EOF'
import json, os, re, sys
path, steps, replicas, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
photos = kind == "photos"
with open(path) as f:
    doc = json.load(f)
events = doc["traceEvents"]
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
need(doc.get("displayTimeUnit") == "ms", "displayTimeUnit")
need(doc["otherData"]["dropped"] == 0, "no span dropped")
meta = [e for e in events if e["ph"] == "M"]
spans = [e for e in events if e["ph"] == "X"]
begins = [e for e in events if e["ph"] == "b"]
ends = {e["id"]: e for e in events if e["ph"] == "e"}
need(len(meta) + len(spans) + len(begins) + len(ends) == len(events), "only M, X and b/e events")
for e in spans + begins + list(ends.values()):
    ok = (isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
          and e["name"] and isinstance(e["ts"], (int, float)) and e["ts"] >= 0
          and (e["ph"] != "X" or (isinstance(e["dur"], (int, float)) and e["dur"] >= 0)))
    need(ok, "span fields: %s" % e)
    if not ok:
        break
procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
for r in range(replicas):
    need(procs.get(r + 1, "").startswith("replica %d: device " % r), "process of replica %d: %s" % (r, procs))
    for tid, name in ((1, "host thread"), (2, "all-reduce (host side)"), (3, "device: layers"),
                      (4, "device: kernels and copies")):
        need(threads.get((r + 1, tid)) == name, "track %s of replica %d" % (name, r))
        if tid != 2 or replicas > 1:  # one replica has no ring to trace
            need(any(e["pid"] == r + 1 and e["tid"] == tid for e in spans), "spans on %s of replica %d" % (name, r))
# One track is one thread or queue: its spans never overlap.
by_track = {}
for e in spans:
    by_track.setdefault((e["pid"], e["tid"]), []).append(e)
for key, lst in by_track.items():
    lst.sort(key=lambda e: e["ts"])
    for a, b in zip(lst, lst[1:]):
        if b["ts"] < a["ts"] + a["dur"] - 1e-3:
            need(False, "overlap on track %s: %s and %s" % (key, a, b))
            break
# The steps' async spans: each begin has its end, later, in the same process.
step_span = {}
for b in begins:
    e = ends.get(b["id"])
    need(e is not None and e["pid"] == b["pid"] and e["ts"] >= b["ts"] and b["name"] == "step",
         "step span %s ends (%s)" % (b, e))
    if e is not None:
        key = (b["pid"], b["args"]["step"])
        need(key not in step_span, "one span of step %s" % (key,))
        step_span[key] = (b["ts"], e["ts"])
need(len(ends) == len(begins), "as many ends as begins")
coverage = []
for r in range(replicas):
    host = by_track.get((r + 1, 1), [])
    # Each replica's host thread shows every traced step's phases, steps 1..N.
    got = sorted({e["args"]["step"] for e in host if e["name"] == "forward and backward"})
    need(got == list(range(1, steps + 1)), "steps traced on replica %d: %s" % (r, got))
    names = {e["name"] for e in host}
    want = {"load", "forward and backward", "all-reduce", "update and checks"}
    if replicas > 1:
        want.add("wait for the slowest replica")
    need(want <= names, "host phases of replica %d: %s" % (r, names))
    kernels = by_track.get((r + 1, 4), [])
    need(any(e.get("cat") == "conv2d_1 backward" or (photos and e.get("cat", "").endswith("backward"))
             for e in kernels), "kernels carry their layer and pass")
    # Every device span belongs to a traced step, and every traced step has its
    # kernels, one optimizer update among them, within the step's span.
    dev_steps = {}
    for e in kernels:
        dev_steps.setdefault(e.get("args", {}).get("step"), []).append(e)
    need(sorted(dev_steps, key=lambda s: s or 0) == list(range(1, steps + 1)),
         "device spans of replica %d by step: %s" % (r, sorted(dev_steps, key=lambda s: s or 0)))
    updates = [len([e for e in dev_steps.get(s, []) if re.fullmatch(r"[a-z]+_update", e["name"])])
               for s in range(1, steps + 1)]
    need(updates == [1] * steps, "one optimizer update per step on replica %d: %s" % (r, updates))
    need(sorted(s for p, s in step_span if p == r + 1) == list(range(1, steps + 1)),
         "a step span per traced step on replica %d" % r)
    for s in range(1, steps + 1):
        if (r + 1, s) not in step_span or s not in dev_steps:
            continue
        t0, t1 = step_span[(r + 1, s)]
        first = min(e["ts"] for e in dev_steps[s])
        last = max(e["ts"] + e["dur"] for e in dev_steps[s])
        # The step's end is its last kernel's; its start is the host's clock, onto
        # which the device's is mapped within some 0.1 ms on a busy host.
        need(t0 <= first + 300 and last <= t1 + 1,
             "step %d of replica %d spans %.0f-%.0f us, its kernels %.0f-%.0f" % (s, r, t0, t1, first, last))
    # How much of the device's expected busy time it spent on spans of its tracks
    # (its queue and its transfer queue). With several replicas the host waits for
    # the device at the end of each "forward and backward" phase, so those phases
    # are the windows, and the all-reduce's host side (whose length depends on the
    # host's load) is left out; one replica's host runs ahead of its queue, so
    # there the window is the traced steps', first start to last end.
    if step_span:
        if replicas > 1:
            windows = [(e["ts"], e["ts"] + e["dur"]) for e in host if e["name"] == "forward and backward"]
        else:
            windows = [(min(v[0] for k, v in step_span.items() if k[0] == r + 1),
                        max(v[1] for k, v in step_span.items() if k[0] == r + 1))]
        busy = sorted((e["ts"], e["ts"] + e["dur"]) for tid in (4, 5) for e in by_track.get((r + 1, tid), []))
        covered, length = 0.0, 0.0
        for w0, w1 in windows:
            length += w1 - w0
            reach = w0
            for a, b in busy:
                a, b = max(a, w0), min(b, w1)
                if b > reach and b > a:
                    covered += b - max(a, reach)
                    reach = b
        coverage.append(covered / length if length > 0 else 0.0)
    if replicas > 1:
        need({"download", "upload"} <= {e["name"] for e in kernels}, "the ring's copies on replica %d" % r)
        ring = {e["name"] for e in by_track.get((r + 1, 2), [])}
        need({"reduce-scatter step", "all-gather step"} <= ring, "the ring's steps on replica %d" % r)
    layers = by_track.get((r + 1, 3), [])
    need(len(layers) < len(kernels), "layers group kernels (%d layers, %d kernels)" % (len(layers), len(kernels)))
if kind == "idx":
    # A sanitizer build (its ctest sets LSAN_OPTIONS) runs the host's side several
    # times slower, so the gaps between the launches grow.
    least = 0.8 if "LSAN_OPTIONS" in os.environ else 0.9
    need(coverage and max(coverage) >= least,
         "device spans cover >= %d%% of the busiest device's windows: %s"
         % (least * 100, ["%.3f" % c for c in coverage]))
if photos:
    need(procs.get(1000) == "photo decoding (host threads)", "the decoders' process")
    need(any(e["pid"] == 1000 and e["name"] in ("decode", "copy from cache") for e in spans), "decode spans")
for p in problems[:5]:
    print("problem:", p)
print("%d spans on %d tracks, %d steps; device coverage %s" % (len(spans), len(by_track), len(step_span),
      " ".join("%.3f" % c for c in coverage)))
sys.exit(1 if problems else 0)
EOF
}

# figures LOG OUTPUT REPLICAS: each replica's figures in the JSONL log add up,
# and the epoch lines print the same.
figures() {
  /usr/bin/python3 - "$@" <<'EOF'
import json, re, sys
log, output, replicas = sys.argv[1], sys.argv[2], int(sys.argv[3])
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
lines = [l for l in open(output) if l.startswith("  device ")]
for rec in map(json.loads, open(log)):
    train, reps = rec["train_seconds"], rec["replicas"]
    need(len(reps) == replicas, "replicas in the log")
    need(sum(r["examples"] for r in reps) == rec["train_examples"], "examples add up")
    for i, r in enumerate(reps):
        c, b = r["compute_seconds"], r["busy_seconds"]
        need(0 <= c <= b <= train <= rec["seconds"] and (c > 0) == (r["examples"] > 0),
             "replica %d: compute %s <= busy %s <= training %s <= epoch %s" % (i, c, b, train, rec["seconds"]))
        # examples over compute time, within the rounding of compute_seconds (%.3f)
        rate = r["examples"] / c if c else 0
        c = c or 1
        need(abs(r["examples_per_second"] - rate) <= rate * 0.0005 / c + 0.1,
             "replica %d: examples_per_second %s, examples / compute %.1f" % (i, r["examples_per_second"], rate))
        if replicas > 1:
            m = re.search(r": share ([0-9.]+)%, (\d+) examples, (\d+) images/s, busy (\d+)%", lines[i]) if i < len(lines) else None
            need(m and int(m.group(2)) == r["examples"] and abs(int(m.group(3)) - r["examples_per_second"]) <= 1
                 and abs(int(m.group(4)) - 100 * b / train) <= 1,
                 "epoch line of device %d: %s" % (i, lines[i].strip() if i < len(lines) else None))
    if replicas == 1:
        ratio = reps[0]["examples_per_second"] / rec["images_per_second"]
        need(abs(ratio - 1) <= 0.1, "one device: examples_per_second %s within 10%% of the epoch's %s images/s"
             % (reps[0]["examples_per_second"], rec["images_per_second"]))
for p in problems[:5]:
    print("problem:", p)
sys.exit(1 if problems else 0)
EOF
}

# run NAME DEVICES STEPS BATCH [FLAG...]: a run of STEPS steps of BATCH examples per
# device on POCL_DEVICES=DEVICES, every step traced, then its checks. Big slices
# keep the devices busy beside the all-reduce's host side; with three devices
# sharing two cores, weights make one the busy one. The device's coverage and one
# device's rate against the epoch's are timed: another tenant on the cores can
# leave a device idle for a while, so a run that misses is run once more, and the
# second must pass.
run() {
  local name=$1 devices=$2 steps=$3 batch=$4 n attempt trace figs
  shift 4
  n=$(wc -w <<<"$devices")
  for attempt in 1 2; do
    POCL_DEVICES=$devices "$CLT" train --epochs 1 --train-limit $((steps * batch * n)) --test-limit 64 \
      --batch-per-replica "$batch" --checkpoint-every 0 --trace "$tmp/$name.json" --trace-steps "$steps" \
      --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1 || bad "$name run with --trace ($(tail -2 "$tmp/$name.txt"))"
    trace=$(check "$tmp/$name.json" "$steps" "$n" idx) && figs=$(figures "$tmp/$name.jsonl" "$tmp/$name.txt" "$n") && break
    [ $attempt = 2 ] || echo "note: $name, run $attempt: $trace ${figs:-}: running again"
  done
  if trace=$(check "$tmp/$name.json" "$steps" "$n" idx); then
    ok "$name trace: schema, tracks, every traced kernel and step, coverage, no overlap ($trace)"
  else
    bad "$name trace ($trace)"
  fi
  if figs=$(figures "$tmp/$name.jsonl" "$tmp/$name.txt" "$n"); then
    ok "$name: compute <= busy <= training time, examples/s over compute, as printed"
  else
    bad "$name: figures ($figs)"
  fi
}
run one-device pthread 24 128
run two-device "pthread pthread" 4 256
run three-device "pthread pthread pthread" 4 256 --split 1,1,4
if grep -q "^Epoch 1, Loss" "$tmp/two-device.txt" && [ ! -e "$tmp/two-device.json.tmp-"* ]; then
  ok "the epoch line is unchanged; no temp file left"
else
  bad "the epoch line is unchanged; no temp file left"
fi

# Traced steps are the first N of the run: past them, no device spans.
POCL_DEVICES=pthread "$CLT" train --epochs 1 --train-limit 640 --test-limit 64 --checkpoint-every 0 \
  --trace "$tmp/part.json" --trace-steps 3 >"$tmp/part.txt" 2>&1 || bad "a run longer than its traced steps"
if out=$(check "$tmp/part.json" 3 1 some); then ok "3 traced steps of 10 ($out)"; else bad "3 traced steps of 10 ($out)"; fi

"$MAKE" "$tmp/ph" 3 24 5 >/dev/null || bad "make_photos"
POCL_DEVICES=pthread "$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 8 \
  --checkpoint-every 0 --trace "$tmp/photos.json" --trace-steps 3 >"$tmp/photos.txt" 2>&1 ||
  bad "photo run with --trace ($(tail -2 "$tmp/photos.txt"))"
if out=$(check "$tmp/photos.json" 3 1 photos); then ok "photo trace: the decoders' tracks too ($out)"; else
  bad "photo trace ($out)"; fi

expect_fail "an unwritable --trace path fails before training" "$tmp/nodir/t.json \(--trace\): folder .*nodir: No such file" \
  "$CLT" train --epochs 1 --train-limit 64 --trace "$tmp/nodir/t.json"
expect_fail "--trace-steps 0 is refused" "--trace-steps: expected an integer in \[1, 100000\]" \
  "$CLT" train --epochs 1 --train-limit 64 --trace "$tmp/x.json" --trace-steps 0
expect_fail "--trace-steps without --trace is refused" "--trace-steps applies to --trace FILE.json" \
  "$CLT" train --epochs 1 --train-limit 64 --trace-steps 5
finish
