#!/usr/bin/env bash
# Two OpenCL vendors in one run: PoCL's CPU device and Oclgrind's simulated GPU
# (tests/vendors.sh makes a private vendors folder; nothing system-wide changes).
# The simulator is slow (seconds per example), so it gets a few examples at most.
# - `cltrain devices` lists both;
# - replicas on the two vendors (1 + 15 examples per step) compute what PoCL
#   alone computes on the whole batch (2 steps, within 1e-5 of the largest
#   weight), and stay bitwise identical (--check-replicas);
# - a checkpoint written on the pair resumes on PoCL alone, and one written on
#   PoCL alone resumes on the pair, both equal to a straight run on PoCL;
# - --split auto (the default) leaves the simulator out of the step from the first
#   one: the run writes the same bytes as PoCL alone, and says so;
# - a model the simulator cannot hold (ResNet50) trains on PoCL under the default
#   --devices all, with one note naming the device skipped; named explicitly, the
#   device is an error.
# Skipped (77) where oclgrind or PoCL is missing, except under CI=true.
#   test_vendors.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
PHOTOS=$3
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vendors.sh"
unset POCL_DEVICES CLTRAIN_DEVICES CLTRAIN_KERNELS CLTRAIN_TEST_SLOW CLTRAIN_FAULT
if ! make_vendors "$tmp/vendors"; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: two vendors need PoCL and Oclgrind (.ci/setup installs both)"
    exit 1
  fi
  echo "SKIP: two vendors need PoCL and Oclgrind"
  exit 77
fi
export OCL_ICD_VENDORS=$tmp/vendors

listing=$("$CLT" devices 2>&1)
sim=$(vendor_index '^[0-9]+ +GPU +Oclgrind +Oclgrind Simulator ')
cpu=$(vendor_index '^[0-9]+ +CPU +Portable Computing Language +pthread')
if [ -n "$sim" ] && [ -n "$cpu" ] && [ "$(wc -l <<<"$listing")" -eq 2 ]; then
  ok "cltrain devices lists Oclgrind's GPU ($sim) and PoCL's CPU ($cpu)"
else
  bad "cltrain devices lists Oclgrind's GPU and PoCL's CPU ($listing)"
  finish
  exit
fi

# run NAME DEVICES BATCH_PER_REPLICA LIMIT EPOCHS [flags]: training into $tmp/NAME.
run() {
  local name=$1 devices=$2 batch=$3 limit=$4 epochs=$5
  shift 5
  "$CLT" train --devices "$devices" --batch-per-replica "$batch" --train-limit "$limit" \
    --epochs "$epochs" --test-limit 16 --seed 5 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 \
    --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -3 "$tmp/$name.txt"))"
}
# resume NAME FROM DEVICES BATCH EPOCHS [flags]: continues a copy of run FROM to EPOCHS.
resume() {
  local name=$1 from=$2 devices=$3 batch=$4 epochs=$5
  shift 5
  cp -r "$tmp/$from" "$tmp/$name"
  "$CLT" train --resume --devices "$devices" --batch-per-replica "$batch" --train-limit 32 \
    --epochs "$epochs" --test-limit 16 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 "$@" \
    >"$tmp/$name.txt" 2>&1 || bad "resume $name ($(tail -3 "$tmp/$name.txt"))"
}

# PoCL alone on the whole batch of 16: one epoch of 2 steps, and two epochs.
run one "$cpu" 16 32 1
run one2 "$cpu" 16 32 2

# The pair with the simulator's share fixed at 1 of 16 examples.
run pair "$sim,$cpu" 8 32 1 --split 1,15 --check-replicas
expect_close "Oclgrind + PoCL (1 + 15 examples) = PoCL alone after 2 steps" \
  "$tmp/one/ckpt-1.npz" "$tmp/pair/ckpt-1.npz" 1e-5
if grep -Eq "^  device $sim \(Oclgrind Simulator\): share 6\.2%, 2 examples" "$tmp/pair.txt" &&
  ! grep -q "different parameters" "$tmp/pair.txt"; then
  ok "both vendors trained (the simulator 2 examples) and stayed bitwise identical"
else
  bad "both vendors trained and stayed bitwise identical ($(cat "$tmp/pair.txt"))"
fi

# Checkpoints cross between the pair and PoCL alone, both ways.
resume pair_then_one pair "$cpu" 16 2
expect_close "a checkpoint of the pair resumes on PoCL alone" \
  "$tmp/one2/ckpt-2.npz" "$tmp/pair_then_one/ckpt-2.npz" 1e-5
resume one_then_pair one "$sim,$cpu" 8 2 --split 1,15 --check-replicas
expect_close "a checkpoint of PoCL alone resumes on the pair (bitwise identical replicas)" \
  "$tmp/one2/ckpt-2.npz" "$tmp/one_then_pair/ckpt-2.npz" 1e-5
if grep -q "different parameters" "$tmp/one_then_pair.txt"; then bad "resumed pair identical"; fi

# --split auto on --devices all: timed before the first step, the simulator is
# out of the step from it, so PoCL alone trains: the same bytes in every member,
# the metadata's record of each replica and its convolution algorithms aside
# (the pair's lists both replicas).
run auto all 8 32 1 --check-replicas
same=$(same_state "$tmp/one/ckpt-1.npz" "$tmp/auto/ckpt-1.npz" conv_algorithms replicas)
if [ "$same" = same ]; then
  ok "--split auto leaves the simulator out: the same checkpoint bytes as PoCL alone"
else
  bad "--split auto on the pair = PoCL alone, byte for byte (differ: $same; $(max_rel_diff "$tmp/one/ckpt-1.npz" "$tmp/auto/ckpt-1.npz"))"
fi
if grep -Eq "^  device $sim \(Oclgrind Simulator\): share 0\.0%, 0 examples, .*; out of the step$" "$tmp/auto.txt" &&
  grep -q "note: --split auto left device $sim out of the step" "$tmp/auto.txt" &&
  grep -Eq '^Set-up \(kernels, buffers, data upload, speed probe [0-9.]+s\)' "$tmp/auto.txt" &&
  grep -q '"device": "Oclgrind Simulator", "examples": 0, .*"in_step": false' "$tmp/auto.jsonl"; then
  ok "the epoch line, the note and the log say the simulator is out of the step"
else
  bad "the epoch line, the note and the log say the simulator is out ($(cat "$tmp/auto.txt"))"
fi

# A model the simulator cannot hold: skipped under --devices all, an error by index.
"$PHOTOS" "$tmp/photos" 2 4 2 >/dev/null
"$CLT" train --data "$tmp/photos" --image-size 32 --epochs 1 --batch-per-replica 4 \
  --checkpoint-every 0 >"$tmp/r50.txt" 2>"$tmp/r50.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/r50.err")" -eq 1 ] &&
  grep -Eq "^cltrain: note: skipping device $sim \(Oclgrind Simulator\): its 128 MiB cannot hold model resnet50 \(one example needs [0-9]+ MiB\)$" "$tmp/r50.err" &&
  grep -q "^Replica 0: device $cpu, pthread" "$tmp/r50.txt" && ! grep -q "^Replica 1" "$tmp/r50.txt"; then
  ok "ResNet50 under --devices all: the simulator skipped in one line, PoCL trains"
else
  bad "ResNet50 under --devices all skips the simulator (rc=$rc: $(cat "$tmp/r50.err") $(tail -3 "$tmp/r50.txt"))"
fi
expect_fail "ResNet50 on the simulator named by index is an error" \
  "device $sim \(Oclgrind Simulator\): 128 MiB cannot hold even one example of model resnet50" \
  "$CLT" train --data "$tmp/photos" --image-size 32 --epochs 1 --devices "$sim,$cpu" --checkpoint-every 0

finish
