#!/usr/bin/env bash
# --tensorboard, read back by TensorBoard's own reader (tests/tensorboard/read_events.py:
# EventAccumulator): every tag and value of a two-device and a one-device run
# against its JSONL log (each replica's busy share within [0, 1]), the batch loss
# of every step (its epoch mean is the epoch's loss), a resumed run appending a
# new event file with continuing steps, and a bad folder refused.
#   test_tb_training.sh CLTRAIN
set -u
CLT=$1
READ="$(dirname "$0")/tensorboard/read_events.py"
. "$(dirname "$0")/lib.sh"

if ! /usr/bin/python3 -c 'import tensorboard' 2>/dev/null; then
  # CI installs tensorboard (.ci/setup): there its absence is a failure.
  if [ -n "${CI:-}" ]; then bad "tensorboard importable"; finish; exit 1; fi
  echo "skipped: python3 cannot import tensorboard (pip install tensorboard; .ci/setup does)"
  exit 77
fi
export POCL_DEVICES="pthread pthread"
T=(train --train-limit 1024 --test-limit 200 --checkpoint-every 1 --checkpoint-dir "$tmp/ck"
  --tensorboard "$tmp/tb" --tensorboard-every 1 --log "$tmp/log.jsonl")
"$CLT" "${T[@]}" --epochs 2 >"$tmp/run.txt" 2>&1 || bad "training with --tensorboard ($(tail -2 "$tmp/run.txt"))"

# compare EPOCHS STEPS [NAME]: what the reader prints of $tmp/NAME (tb) against
# its log $tmp/NAME.jsonl (log.jsonl).
compare() {
  local dir=$tmp/${3:-tb} log=$tmp/${3:+$3.}log.jsonl
  /usr/bin/python3 "$READ" "$dir" >"$tmp/read.txt" 2>"$tmp/read.err" || { cat "$tmp/read.err"; return 1; }
  /usr/bin/python3 - "$tmp/read.txt" "$log" "$1" "$2" <<'EOF'
import json, math, sys
read, log, epochs, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
got = {}
for line in open(read):
    run, tag, step, value = line.split()
    got.setdefault((run, tag), {})
    if int(step) in got[(run, tag)]:
        print("step %s of %s/%s twice" % (step, run, tag)); sys.exit(1)
    got[(run, tag)][int(step)] = float(value)
recs = {}
for line in open(log):
    r = json.loads(line)
    recs[r["epoch"]] = r
problems = []
def near(run, tag, step, want, tol):
    v = got.get((run, tag), {}).get(step)
    if v is None or not abs(v - want) <= tol:
        problems.append("%s/%s step %d: %s, log says %s" % (run, tag, step, v, want))
replicas = len(recs[1]["replicas"])
want_tags = {("train", t) for t in ("epoch_loss", "epoch_accuracy", "epoch_learning_rate",
                                    "epoch_images_per_second", "epoch_allreduce_seconds", "batch_loss")}
want_tags |= {("train", "replica_%d/%s" % (i, k)) for i in range(replicas) for k in ("share", "busy")}
want_tags |= {("validation", "epoch_loss"), ("validation", "epoch_accuracy")}
if set(got) != want_tags:
    problems.append("tags: extra %s, missing %s" % (sorted(set(got) - want_tags), sorted(want_tags - set(got))))
for e in range(1, epochs + 1):
    r = recs[e]
    # Tolerances: the log's own rounding (%.6f, %.4f percent, %.1f, %.3f).
    near("train", "epoch_loss", e, r["train_loss"], 1e-6 + 1e-6 * r["train_loss"])
    near("train", "epoch_accuracy", e, r["train_accuracy"] / 100, 1e-6)
    near("validation", "epoch_loss", e, r["test_loss"], 1e-6 + 1e-6 * r["test_loss"])
    near("validation", "epoch_accuracy", e, r["test_accuracy"] / 100, 1e-6)
    near("train", "epoch_learning_rate", e, 0.001, 1e-9)
    near("train", "epoch_images_per_second", e, r["images_per_second"], 0.06 + 1e-6 * r["images_per_second"])
    near("train", "epoch_allreduce_seconds", e, r["allreduce_seconds"], 6e-4)
    for i, rep in enumerate(r["replicas"]):
        near("train", "replica_%d/share" % i, e, rep["share"], 6e-5)
        near("train", "replica_%d/busy" % i, e, rep["busy_seconds"] / r["train_seconds"], 0.01)
        busy = got.get(("train", "replica_%d/busy" % i), {}).get(e)
        if busy is not None and not 0 <= busy <= 1:
            problems.append("replica_%d/busy of epoch %d: %s, not a fraction" % (i, e, busy))
batches = got.get(("train", "batch_loss"), {})
if sorted(batches) != list(range(1, steps + 1)):
    problems.append("batch_loss steps %s, want 1..%d" % (sorted(batches)[:5], steps))
else:
    per = steps // epochs
    for e in range(1, epochs + 1):
        mean = sum(batches[s] for s in range((e - 1) * per + 1, e * per + 1)) / per
        if abs(mean - recs[e]["train_loss"]) > 1e-5 * recs[e]["train_loss"] + 1e-6:
            problems.append("epoch %d: mean batch_loss %g, epoch_loss %g" % (e, mean, recs[e]["train_loss"]))
for p in problems[:6]:
    print(p)
print("%d tags, %d values" % (len(got), sum(len(v) for v in got.values())))
sys.exit(1 if problems else 0)
EOF
}
if out=$(compare 2 16); then ok "TensorBoard's reader finds every tag and value of the log ($out)"; else
  bad "TensorBoard's reader finds every tag and value of the log ($out)"; fi

POCL_DEVICES=pthread "$CLT" train --train-limit 1024 --test-limit 200 --checkpoint-every 0 --epochs 2 \
  --tensorboard "$tmp/one" --tensorboard-every 1 --log "$tmp/one.log.jsonl" >"$tmp/one.txt" 2>&1 ||
  bad "one-device training with --tensorboard ($(tail -2 "$tmp/one.txt"))"
if out=$(compare 2 32 one); then ok "one device: every tag and value of the log, busy within [0, 1] ($out)"; else
  bad "one device: every tag and value of the log ($out)"; fi

"$CLT" "${T[@]}" --epochs 3 --resume >"$tmp/resume.txt" 2>&1 || bad "resume with --tensorboard ($(tail -2 "$tmp/resume.txt"))"
n=$(ls "$tmp/tb/train" | grep -c '^events\.out\.tfevents\.')
if [ "$n" = 2 ]; then ok "--resume appends a new event file"; else bad "--resume appends a new event file ($n files)"; fi
if out=$(compare 3 24); then ok "after --resume the steps continue, 1..24, epochs 1..3 ($out)"; else
  bad "after --resume the steps continue ($out)"; fi

touch "$tmp/afile"
expect_fail "--tensorboard naming a file fails before training" "afile" \
  "$CLT" train --epochs 1 --train-limit 64 --tensorboard "$tmp/afile"
expect_fail "--tensorboard-every without --tensorboard is refused" "--tensorboard-every applies to --tensorboard DIR" \
  "$CLT" train --epochs 1 --train-limit 64 --tensorboard-every 5
finish
