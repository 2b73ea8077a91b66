#!/usr/bin/env bash
# Mirrored data parallelism on PoCL devices: N replicas x batch B compute what one
# device computes with batch N*B, replicas stay bitwise identical
# (--check-replicas), and the epoch record reports every replica.
#
# Parameters are compared while rounding differences are still small (one step,
# and six steps ending in an uneven batch). Over hundreds of steps they are not:
# this network amplifies rounding chaotically (Adam's sign-like update on tiny
# gradients, argmax flips in max pooling). Measured: one weight changed by one
# ulp on a single device grows to a 1.6e-4 relative difference in 40 steps, and
# summing the same gradient in another order (2 replicas vs 1) gives 2e-6 after
# 15 steps but 2e-3 after 25. So after an epoch the test compares what training
# produced (mean loss and accuracy over the epoch) instead.
#   test_mirrored.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
. "$(dirname "$0")/lib.sh"

# run NAME DEVICES BATCH_PER_REPLICA TRAIN_LIMIT [extra flags]: one epoch into $tmp/NAME.
run() {
  local name=$1 devices=$2 batch=$3 limit=$4
  shift 4
  POCL_DEVICES="pthread pthread pthread" "$CLT" train --epochs 1 --devices "$devices" --split equal \
    --batch-per-replica "$batch" --train-limit "$limit" --test-limit 200 --seed 9 \
    --checkpoint-dir "$tmp/$name" --checkpoint-every 1 --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1 ||
    bad "run $name ($(tail -2 "$tmp/$name.txt"))"
}
# close NAME A B LIMIT: the parameters of runs A and B.
close() { expect_close "$1" "$tmp/$2/ckpt-1.npz" "$tmp/$3/ckpt-1.npz" "$4"; }

# One step: global batch 48.
run one_1step 0 48 48
run two_1step 0,1 24 48 --check-replicas
run three_1step 0,1,2 16 48 --check-replicas
close "2 replicas x 24 = 1 x 48 after one step" one_1step two_1step 1e-4
close "3 replicas x 16 = 1 x 48 after one step" one_1step three_1step 1e-4

# Six steps, the last one of 2 examples (2 replicas: 1 + 1; 3 replicas: 1 + 1 + 0,
# so one replica joins the all-reduce with no examples).
run one_uneven 0 48 242
run two_uneven 0,1 24 242 --check-replicas
run three_uneven 0,1,2 16 242 --check-replicas
close "2 replicas = 1 device after 6 steps ending in an uneven batch" one_uneven two_uneven 1e-4
close "3 replicas (one with an empty last slice) = 1 device after 6 steps" one_uneven three_uneven 1e-4

# An epoch of 201 steps, again with a last batch of 2: the same training, judged
# by the epoch's mean loss and accuracy (over every step; the test accuracy of
# the epoch's last weights swung by 4 points between such runs).
run one_epoch 0 48 9602
run two_epoch 0,1 24 9602 --check-replicas
run three_epoch 0,1,2 16 9602 --check-replicas
for name in two_epoch three_epoch; do
  l1=$(field "$tmp/one_epoch.jsonl" 1 train_loss) l2=$(field "$tmp/$name.jsonl" 1 train_loss)
  a1=$(field "$tmp/one_epoch.jsonl" 1 train_accuracy) a2=$(field "$tmp/$name.jsonl" 1 train_accuracy)
  if awk -v l1="$l1" -v l2="$l2" -v a1="$a1" -v a2="$a2" \
    'BEGIN { exit !(l2 != "" && (l2 - l1) / l1 < 0.02 && (l1 - l2) / l1 < 0.02 && a2 - a1 <= 1.5 && a1 - a2 <= 1.5) }'; then
    ok "$name trains like one device (loss $l2 vs $l1, training accuracy $a2 vs $a1)"
  else
    bad "$name trains like one device (loss $l2 vs $l1, training accuracy $a2 vs $a1)"
  fi
  if grep -q "different parameters" "$tmp/$name.txt"; then bad "$name replicas identical"; fi
done

# The epoch record: global figures plus one entry per replica.
rec=$(cat "$tmp/three_epoch.jsonl")
n=$(grep -Eo '"examples": [0-9]+' <<<"$rec" | cut -d' ' -f2 | tr '\n' ' ')
if [ "$n" = "3201 3201 3200 " ]; then ok "JSONL replicas carry their examples ($n)"; else bad "JSONL replicas carry their examples ($n)"; fi
if grep -Eq '"allreduce_seconds": [0-9.]+' <<<"$rec" && [ "$(grep -o '"busy_seconds"' <<<"$rec" | wc -l)" -eq 3 ]; then
  ok "JSONL has allreduce_seconds and busy_seconds per replica"
else
  bad "JSONL has allreduce_seconds and busy_seconds per replica ($rec)"
fi
if [ "$(grep -Ec '^  device [0-2] \(.*\): share [0-9.]+%, [0-9]+ examples, [0-9]+ images/s, busy [0-9]+%$' "$tmp/three_epoch.txt")" -eq 3 ]; then
  ok "epoch output shows every device's examples/s and busy %"
else
  bad "epoch output shows every device's examples/s and busy % ($(cat "$tmp/three_epoch.txt"))"
fi

finish
