#!/usr/bin/env bash
# Heterogeneous replicas on PoCL's "basic" (single-threaded) and "pthread"
# (multi-threaded) CPU drivers, a slow and a fast device: --split auto moves the
# examples to the fast device, and whatever the split (auto, fixed weights, a
# replica with none) the update equals one device training on the whole batch.
# And a device made slow for a while (CLTRAIN_TEST_SLOW) leaves the step and
# rejoins it with the current state, the replicas bitwise identical throughout.
#   test_split.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
export POCL_DEVICES="basic pthread"
. "$(dirname "$0")/lib.sh"

# run NAME DEVICES BATCH SPLIT LIMIT EPOCHS [flags]
run() {
  local name=$1 devices=$2 batch=$3 split=$4 limit=$5 epochs=$6
  shift 6
  "$CLT" train --devices "$devices" --batch-per-replica "$batch" --split "$split" --train-limit "$limit" \
    --epochs "$epochs" --test-limit 200 --seed 13 --checkpoint-dir "$tmp/$name" --checkpoint-every "$epochs" \
    --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -2 "$tmp/$name.txt"))"
}
close() { expect_close "$1" "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz" "${4:-1e-4}"; }

# Auto converges to favour the fast device and to balance the devices' time.
# The fast device's share over epochs 2 and 3 measured 57-65% here: both PoCL
# devices share the same 2 cores, and with the vectorised kernels the
# single-threaded basic device trained at ~1,600 images/s next to pthread's
# ~2,500 (measured together).
# So the test asserts a clear majority, plus what the balancer is for: in the
# last epoch both devices spent about the same time computing.
# PoCL compiles a kernel for each new work-group shape at its first launch; a
# cold cache (a fresh CI machine) makes those steps slow and the balancer's
# timings noisy, so a short run warms the cache first (its result is unused).
# Since the GEMM read convolutions in place (issue 19) the basic device trains
# about as fast as the pthread device next to it (auto then kept 50-60%), so
# the slow device is also made 10 ms a step slower (CLTRAIN_TEST_SLOW): a
# difference the balancer must see, whatever this machine's kernels.
export CLTRAIN_TEST_SLOW="replica=0,from=1,to=1000000,ms=10"
run warmup 0,1 64 auto 1536 1
# The balance is timed, and a noisy host (another tenant on the cores) can skew
# one run's timings, or make the slowed device leave the step for a while: a
# run that misses it is run once more, and the second must balance.
for attempt in 1 2; do
  run auto 0,1 64 auto 6144 3
  share=$(sed -n '2,3p' "$tmp/auto.jsonl" | grep -Eo '"examples": [0-9]+' | cut -d' ' -f2 |
    awk '{ n[NR % 2] += $1 } END { if (n[0] + n[1]) printf "%.4f", n[0] / (n[0] + n[1]) }')
  times=$(sed -n 3p "$tmp/auto.jsonl" | grep -Eo '"compute_seconds": [0-9.]+' | cut -d' ' -f2 | tr '\n' ' ')
  if awk -v s="$share" -v t="$times" 'BEGIN { split(t, c, " "); hi = c[1] > c[2] ? c[1] : c[2]
      lo = c[1] > c[2] ? c[2] : c[1]; exit !(s != "" && s >= 0.55 && hi > 0 && (hi - lo) / hi <= 0.15) }' ||
    [ $attempt = 2 ]; then
    break
  fi
  echo "note: run $attempt: pthread share $share, compute times $times s: timing noise, running again"
done
if awk -v s="$share" 'BEGIN { exit !(s != "" && s >= 0.55) }'; then ok "auto gives the pthread device $share of the examples"; else
  bad "auto gives the pthread device >= 55% (got $share; $(tail -4 "$tmp/auto.txt"))"
fi
if awk -v t="$times" 'BEGIN { split(t, c, " "); hi = c[1] > c[2] ? c[1] : c[2]; lo = c[1] > c[2] ? c[2] : c[1]
    exit !(hi > 0 && (hi - lo) / hi <= 0.15) }'; then
  ok "auto balances the devices' compute time ($times s)"
else
  bad "auto balances the devices' compute time within 15% ($times s)"
fi
if grep -Eq '^  device 1 \(pthread.*\): share [0-9.]+%, [0-9]+ examples, [0-9]+ images/s, busy [0-9]+%$' "$tmp/auto.txt"; then
  ok "epoch output gives each device's share, images/s and busy %"
else
  bad "epoch output gives each device's share, images/s and busy %"
fi

# Same maths whatever the split, against one device with the global batch:
# fixed weights 1,3 and 0,1 on one step of 128; auto on three steps (the first
# two equal, the first being each replica's warm-up, the third re-balanced by
# the second's timings; with the slow device's delay the third split is far
# from equal). Kept short on purpose:
# a slice size changes the split of the weight gradients' long sums and the
# all-reduce's order, and so the rounding, and over more steps this network
# amplifies rounding chaotically (a near-tie in a pooling window flips its
# argmax): after 5-6 steps the same comparisons gave anywhere from 7e-7 to
# 2e-3. The auto comparison trains with SGD: Adam's first steps divide each
# gradient by its own magnitude, so a weight whose gradient is rounding noise
# moves by up to the learning rate either way, and with Adam two runs of the
# same auto split came out 4e-7 or 2.6e-4 from one device (2 of 5 runs, before
# and after issue 19's kernels), while SGD gave 2.6e-8 in 6 of 6 whatever the
# third split. The optimizer is applied to the summed gradient the same way on
# every replica: what the split could change is the gradient. SGD's updates
# are small (lr 0.01 times the gradient), so its limit is 1e-6, 40 times the
# rounding seen (training on 383 images instead of 384 moved them 1.4e-3).
run one1 1 128 equal 128 1
run weights 0,1 64 1,3 128 1
run zero 0,1 64 0,1 128 1
run one2 1 128 equal 384 1 --optimizer sgd
# The third split rests on one timed step per device, and on 2 shared cores
# the pthread device's threads may wait on the basic device's: a 10 ms delay
# was lost in that noise once (the split stayed equal). Here the basic device
# is made 50 ms slower, and a run that still kept the equal split runs once more.
for attempt in 1 2; do
  rm -rf "$tmp/auto_eq" "$tmp/auto_eq.jsonl"
  CLTRAIN_TEST_SLOW="replica=0,from=1,to=1000000,ms=50" run auto_eq 0,1 64 auto 384 1 --optimizer sgd
  n=$(grep -Eo '"examples": [0-9]+' "$tmp/auto_eq.jsonl" | cut -d' ' -f2 | tr '\n' ' ')
  [ "$n" != "192 192 " ] && break
  echo "note: run $attempt of auto_eq kept the equal split: timing noise, running again"
done
unset CLTRAIN_TEST_SLOW
close "fixed split 1,3 = one device" one1 weights
close "split 0,1 (a replica with no examples) = one device" one1 zero
close "auto split = one device (SGD)" one2 auto_eq 1e-6
if [ "$n" != "192 192 " ] && [ -n "$n" ]; then ok "auto re-balanced at the third step ($n)"; else bad "auto re-balanced at the third step ($n)"; fi

# Leaving and rejoining. The pthread device (replica 1) is made 100 ms slower at
# steps 3-20: any share of it would lengthen the step, so it leaves; it is probed
# at most every 16 steps and 20x its probe's time (about 2 s here: the run is
# long enough for that wait, 4,800 images having become too few as the
# kernels got faster) and rejoins once
# a probe shows it fast, taking the parameters, optimizer moments and step count
# from the basic device: --check-replicas after every step (a moment or the step
# count amiss would show in the next update's bits). Training still equals that
# of a run without the delay (a different split: the same loss up to rounding).
CLTRAIN_TEST_SLOW="replica=1,from=3,to=20,ms=100" run leave 0,1 8 auto 9600 1 --check-replicas
run steady 0,1 8 auto 9600 1
# With 8 examples a replica the step is mostly fixed costs, and on these two
# devices sharing 2 cores the timing noise may send the pthread device out again
# later (seen once, in the fresh-clone CI run of fc2174e: it left again at step
# 313 and rejoined at 331; 3 local runs after it left once): the
# record keeps the latest leave, so the window of the first is checked when it
# left once, and each leave must have ended in a rejoin.
rec=$(grep -o '{"index": 1, [^}]*}' "$tmp/leave.jsonl")
left=$(grep -Eo '"left_at_step": [0-9]+' <<<"$rec" | cut -d' ' -f2)
joined=$(grep -Eo '"joined_at_step": [0-9]+' <<<"$rec" | cut -d' ' -f2)
nleft=$(grep -Eo '"left": [0-9]+' <<<"$rec" | cut -d' ' -f2)
njoined=$(grep -Eo '"joined": [0-9]+' <<<"$rec" | cut -d' ' -f2)
if grep -q '"in_step": true, ' <<<"$rec" && [ -n "$nleft" ] && [ "$nleft" -ge 1 ] &&
  [ "$njoined" = "$nleft" ] && [ -n "$left" ] && [ -n "$joined" ] && [ "$joined" -gt 21 ] &&
  [ "$joined" -gt "$left" ] && { [ "$nleft" -gt 1 ] || { [ "$left" -ge 4 ] && [ "$left" -le 12 ]; }; } &&
  ! grep -q '"probes": 0,' <<<"$rec"; then
  ok "a device slowed at steps 3-20 left the step at step $left and rejoined at step $joined ($nleft leave(s))"
else
  bad "a device slowed at steps 3-20 leaves and rejoins ($rec; $(tail -4 "$tmp/leave.txt"))"
fi
if grep -Eq "^  device 1 \(pthread.*\): share [0-9.]+%, [0-9]+ examples, [0-9]+ images/s, busy [0-9]+%; left the step at step $left, rejoined at step $joined; [0-9]+ speed probes? \([0-9.]+s\)$" "$tmp/leave.txt" &&
  ! grep -q "different parameters" "$tmp/leave.txt"; then
  ok "the epoch line says so, and the replicas stayed bitwise identical"
else
  bad "the epoch line says so, and the replicas stayed bitwise identical ($(tail -4 "$tmp/leave.txt"))"
fi
l1=$(field "$tmp/steady.jsonl" 1 train_loss) l2=$(field "$tmp/leave.jsonl" 1 train_loss)
if awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(a != "" && b != "" && (a - b) / a < 0.02 && (b - a) / a < 0.02) }'; then
  ok "leaving and rejoining trains as without (loss $l2 vs $l1)"
else
  bad "leaving and rejoining trains as without (loss $l2 vs $l1)"
fi

expect_fail "weights must match the devices" "--split 1,2,3: 3 weights for 2 devices" \
  "$CLT" train --devices 0,1 --split 1,2,3
expect_fail "bad split" "--split fast: expected auto, equal or non-negative weights" \
  "$CLT" train --devices 0,1 --split fast

finish
