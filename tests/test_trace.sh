#!/usr/bin/env bash
# --trace: the Chrome trace-event file of a two-device run (and of a photo run, with
# its decoders) is valid JSON in the schema Perfetto and chrome://tracing read,
# with the tracks of every replica, the phases of every traced step, kernels
# grouped by layer and pass, the all-reduce's steps and copies, and no two spans
# of one track overlapping; bad paths fail before training.
#   test_trace.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE=$2
. "$(dirname "$0")/lib.sh"

# check FILE STEPS REPLICAS [photos]: the schema and contents, in Python.
check() {
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys
path, steps, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
photos = len(sys.argv) > 4
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
need(len(meta) + len(spans) == len(events), "only M and X events")
for e in spans:
    ok = (isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
          and e["name"] and isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
          and e["ts"] >= 0 and e["dur"] >= 0)
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
# Each replica's host thread shows every traced step's phases, steps 1..N.
for r in range(replicas):
    host = by_track.get((r + 1, 1), [])
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
    if replicas > 1:
        need({"download", "upload"} <= {e["name"] for e in kernels}, "the ring's copies on replica %d" % r)
        ring = {e["name"] for e in by_track.get((r + 1, 2), [])}
        need({"reduce-scatter step", "all-gather step"} <= ring, "the ring's steps on replica %d" % r)
    layers = by_track.get((r + 1, 3), [])
    need(len(layers) < len(kernels), "layers group kernels (%d layers, %d kernels)" % (len(layers), len(kernels)))
if photos:
    need(procs.get(1000) == "photo decoding (host threads)", "the decoders' process")
    need(any(e["pid"] == 1000 and e["name"] in ("decode", "copy from cache") for e in spans), "decode spans")
for p in problems[:5]:
    print("problem:", p)
print("%d spans on %d tracks" % (len(spans), len(by_track)))
sys.exit(1 if problems else 0)
EOF
}

POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 --train-limit 1024 --test-limit 64 --checkpoint-every 0 \
  --trace "$tmp/two.json" --trace-steps 4 >"$tmp/two.txt" 2>&1 || bad "two-device run with --trace ($(tail -2 "$tmp/two.txt"))"
if out=$(check "$tmp/two.json" 4 2); then ok "two-device trace: schema, tracks, steps, no overlap ($out)"; else
  bad "two-device trace ($out)"; fi
if grep -q "^Epoch 1, Loss" "$tmp/two.txt" && [ ! -e "$tmp/two.json.tmp-"* ]; then ok "the epoch line is unchanged; no temp file left"; else
  bad "the epoch line is unchanged; no temp file left"; fi

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
