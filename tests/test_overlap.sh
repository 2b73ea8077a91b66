#!/usr/bin/env bash
# The all-reduce overlapping the backward pass (trainer.h): the gradient in buckets
# from the last layers down, each reduced on a second queue while the backward
# pass goes on, gives the same bits as the whole gradient reduced after it
# (CLTRAIN_ALLREDUCE_BUCKETS=0), whatever the buckets (16384 floats: 3 for
# fmnist-cnn; 1: a layer each), with 2 and 3 replicas, an empty slice,
# sub-devices, fixed weights and BatchNormalization's statistics; N replicas still
# equal one device on the whole batch; --profile says how much of the all-reduce
# the backward pass hid. PoCL's devices are CPUs, where the buckets are off unless
# asked for: that default is checked too.
#   test_overlap.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
MAKE=$3
. "$(dirname "$0")/lib.sh"
export POCL_DEVICES="pthread pthread pthread"

# run NAME BUCKETS DEVICES BATCH LIMIT [flags]: one epoch into $tmp/NAME with
# CLTRAIN_ALLREDUCE_BUCKETS=BUCKETS ("": unset, the default).
run() {
  local name=$1 buckets=$2 devices=$3 batch=$4 limit=$5
  shift 5
  CLTRAIN_ALLREDUCE_BUCKETS=$buckets "$CLT" train --epochs 1 --devices "$devices" --batch-per-replica "$batch" \
    --train-limit "$limit" --test-limit 100 --seed 9 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 \
    --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -2 "$tmp/$name.txt"))"
}
# same NAME A B: runs A and B saved the same checkpoint, byte for byte.
same() {
  if [ -s "$tmp/$2/ckpt-1.npz" ] && cmp -s "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz"; then ok "$1"; else
    bad "$1 ($("$TOOL" diff "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz" 2>&1))"
  fi
}
# buckets NAME N: the run's profile names N buckets a step on every replica.
buckets() {
  local lines
  lines=$(grep -c "^  all-reduce: .* collectives ($2 buckets a step" "$tmp/$1.txt")
  [ "$lines" -ge 2 ] || bad "$1 overlapped $2 buckets a step ($(grep 'all-reduce:' "$tmp/$1.txt" | head -2))"
}

# Six steps of global batch 48, the last of 2 examples: with 3 replicas 1 + 1 + 0, so
# one takes part with no examples (its gradient zeroed, its buckets marked at once).
run one "" 0 48 242
for n in 2 3; do
  devs=0,1 batch=24
  [ $n = 3 ] && devs=0,1,2 batch=16
  run whole$n 0 $devs $batch 242 --split equal --check-replicas --profile
  run b16k$n 16384 $devs $batch 242 --split equal --check-replicas --profile
  run layers$n 1 $devs $batch 242 --split equal --check-replicas --profile
  buckets b16k$n 3
  buckets layers$n 4
  same "$n replicas: the buckets overlapped = the whole gradient after the backward pass, bit for bit" whole$n b16k$n
  same "$n replicas: a bucket per layer = the whole gradient, bit for bit" whole$n layers$n
  expect_close "$n replicas with buckets = 1 device x 48 after 6 steps" "$tmp/one/ckpt-1.npz" "$tmp/b16k$n/ckpt-1.npz" 1e-4
  if grep -q "different parameters" "$tmp/b16k$n.txt" "$tmp/layers$n.txt"; then bad "$n replicas stay identical"; fi
done
if grep -q "^  all-reduce: .* collectives (the whole gradient after the backward pass), none hidden" "$tmp/whole2.txt"; then
  ok "--profile: the whole-gradient all-reduce is said to hide nothing"
else
  bad "--profile: the whole-gradient all-reduce ($(grep 'all-reduce:' "$tmp/whole2.txt" | head -1))"
fi
run unset "" 0,1 24 242 --split equal --profile
if [ "$(grep -c "^  all-reduce: 0.[0-9]*s in 6 collectives (the whole gradient after the backward pass)" "$tmp/unset.txt")" -eq 2 ]; then
  ok "CPU devices reduce the whole gradient after the backward pass unless buckets are asked for"
else
  bad "CPU devices' default ($(grep 'all-reduce:' "$tmp/unset.txt" | head -2))"
fi
same "the default on CPU devices = the whole gradient, bit for bit" whole2 unset

# Fixed unequal weights, on the two halves of one CPU (the case the overlap is for).
POCL_DEVICES=pthread run subwhole 0 0/2 32 640 --split 1,3 --check-replicas
POCL_DEVICES=pthread run subdefault 16384 0/2 32 640 --split 1,3 --check-replicas
same "2 sub-devices, weights 1,3: buckets = the whole gradient, bit for bit" subwhole subdefault

# BatchNormalization: its statistics' slots (the buffer's tail, written by the
# forward pass) ride in the first bucket.
"$MAKE" "$tmp/ph" 3 24 5 >/dev/null || bad "make_photos"
for b in 0 1; do
  name=bn$b
  CLTRAIN_ALLREDUCE_BUCKETS=$b POCL_DEVICES="pthread pthread" "$CLT" train --data "$tmp/ph" --model resnet-small \
    --image-size 32 --epochs 1 --batch-per-replica 8 --devices 0,1 --split equal --check-replicas --profile \
    --checkpoint-dir "$tmp/$name" --checkpoint-every 1 >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -2 "$tmp/$name.txt"))"
done
grep -Eq "^  all-reduce: .* collectives \([0-9]+ buckets a step" "$tmp/bn1.txt" || bad "resnet-small overlapped in buckets"
same "resnet-small (BatchNormalization), 2 replicas: a bucket per layer = the whole gradient, bit for bit" bn0 bn1

# An epoch of 100 steps: the backward pass hides some of the all-reduce, and
# --profile says how much, per replica.
run epoch 16384 0,1 32 6400 --split equal --profile
hidden=$(grep -Eo "collectives \(3 buckets a step, from the last layers' down\), [0-9.]+s of it \([0-9]+%\) hidden behind the backward pass, [0-9.]+s after it" "$tmp/epoch.txt" |
  sed -E 's/.*, ([0-9.]+)s of it.*/\1/' | tr '\n' ' ')
if [ "$(wc -w <<<"$hidden")" -eq 2 ] && awk -v h="$hidden" 'BEGIN { split(h, a, " "); exit !(a[1] > 0 && a[2] > 0) }'; then
  ok "--profile: each replica's all-reduce partly hidden behind the backward pass (${hidden% }: seconds)"
else
  bad "--profile: the all-reduce hidden behind the backward pass ($(grep 'all-reduce:' "$tmp/epoch.txt"))"
fi

# --trace: the buckets' copies and adds on the transfer queue's own track, beside the
# kernels; the host phases of every step as without buckets.
run traced 16384 0,1 32 640 --split equal --trace "$tmp/trace.json" --trace-steps 4
if /usr/bin/python3 - "$tmp/trace.json" <<'PY'; then ok "--trace shows the transfer queue's copies and the steps' phases"; else bad "--trace with buckets"; fi
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [e for e in events if e["ph"] == "X"]
for pid in (1, 2):
    assert names.get((pid, 5)) == "device: all-reduce transfer queue", names
    copies = {e["name"] for e in spans if (e["pid"], e["tid"]) == (pid, 5)}
    assert {"download", "upload", "add"} <= copies, copies
    host = {e["name"] for e in spans if (e["pid"], e["tid"]) == (pid, 1)}
    assert {"forward and backward", "wait for the slowest replica", "all-reduce"} <= host, host
    steps = {e["args"]["step"] for e in spans if (e["pid"], e["tid"]) == (pid, 1) and e["name"] == "all-reduce"}
    assert steps == {1, 2, 3, 4}, steps
PY

# A replica slowed for a while leaves the step and rejoins it: the ring's members
# change between overlapped steps (the others wait at a barrier for the change).
# As test_split.sh's run (9,600 images: the probe waits about 2 s), with a bucket
# per layer.
CLTRAIN_TEST_SLOW="replica=1,from=3,to=20,ms=100" POCL_DEVICES="basic pthread" run leave 1 0,1 8 9600 \
  --split auto --seed 13 --check-replicas --profile
# Each leave ended in a rejoin (timing noise may add a later one: test_split.sh).
rec=$(grep -o '{"index": 1, [^}]*}' "$tmp/leave.jsonl")
nleft=$(grep -Eo '"left": [0-9]+' <<<"$rec" | cut -d' ' -f2)
if [ -n "$nleft" ] && [ "$nleft" -ge 1 ] && grep -q "\"joined\": $nleft, " <<<"$rec" &&
  grep -q '"in_step": true, ' <<<"$rec" && ! grep -q "different parameters" "$tmp/leave.txt" &&
  grep -Eq "^  all-reduce: .* collectives \(4 buckets a step" "$tmp/leave.txt"; then
  ok "with buckets, a slowed replica leaves the step and rejoins it, the replicas identical throughout"
else
  bad "with buckets, a slowed replica leaves and rejoins ($rec; $(tail -3 "$tmp/leave.txt"))"
fi

# Faults inside the overlapped all-reduce: a stalled replica is named by the
# watchdog, a failed download stops every replica; both in bounded time.
# fault NAME SPEC REGEX: a 3-replica run with CLTRAIN_FAULT=SPEC fails with one line.
fault() {
  local t0 rc
  t0=$(date +%s)
  CLTRAIN_ALLREDUCE_BUCKETS=1 CLTRAIN_FAULT=$2 timeout 60 "$CLT" train --devices 0,1,2 --split equal \
    --train-limit 576 --test-limit 96 --epochs 3 --checkpoint-every 0 --allreduce-timeout 3 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -Eq -- "$3" "$tmp/err"; then
    ok "$1 (exit $rc after $(($(date +%s) - t0))s)"
  else
    bad "$1 (rc=$rc: $(head -c 400 "$tmp/err"))"
  fi
}
fault "a replica stalling in a bucket's all-reduce is named" "replica=1,step=5,call=stall" \
  "all-reduce step 5: replica 1 \(device 1, .*\) made no progress in it for 3 s; stopping"
fault "a bucket's download failing stops the run" "replica=2,step=5,call=read" \
  "device 2 \(.*\): all-reduce download: CL_OUT_OF_RESOURCES \(injected by CLTRAIN_FAULT\)"

CLTRAIN_ALLREDUCE_BUCKETS=x expect_fail "a malformed CLTRAIN_ALLREDUCE_BUCKETS is refused" \
  "CLTRAIN_ALLREDUCE_BUCKETS=x: expected floats >= 0" "$CLT" train --epochs 1 --devices 0,1 --train-limit 64 \
  --checkpoint-dir "$tmp/bad"
finish
