#!/usr/bin/env bash
# CLTRAIN_WINOGRAD through the command line: the reference CNN's second
# convolution runs Winograd's kernels (--profile names them) with either tile,
# its first epoch's loss near the direct kernels'; with F(4x4), 1 epoch +
# resume = 2 epochs bit for bit and two replicas stay identical
# (--check-replicas); a bad value is one error line.
#   test_winograd.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"
small=(--train-limit 192 --test-limit 64 --seed 3 --checkpoint-every 1)

"$CLT" train --epochs 1 "${small[@]}" --checkpoint-dir "$tmp/off" --log "$tmp/off.jsonl" >/dev/null 2>&1 ||
  bad "training, off"
for w in 2 4; do
  epochs=1
  [ $w = 4 ] && epochs=2
  CLTRAIN_WINOGRAD=$w "$CLT" train --epochs $epochs "${small[@]}" --checkpoint-dir "$tmp/w$w" \
    --profile --log "$tmp/w$w.jsonl" >"$tmp/w$w.txt" 2>&1 ||
    bad "training, CLTRAIN_WINOGRAD=$w ($(tail -2 "$tmp/w$w.txt"))"
  if grep -q "wino_input" "$tmp/w$w.txt" && grep -q "wino_output" "$tmp/w$w.txt"; then
    ok "CLTRAIN_WINOGRAD=$w runs Winograd's kernels"
  else
    bad "CLTRAIN_WINOGRAD=$w runs Winograd's kernels ($(grep -c wino "$tmp/w$w.txt") profile lines)"
  fi
  a=$(field "$tmp/off.jsonl" 1 train_loss) b=$(field "$tmp/w$w.jsonl" 1 train_loss)
  if awk -v a="$a" -v b="$b" 'BEGIN { d = (a - b) / a; exit !(a != "" && b != "" && d < 1e-3 && d > -1e-3) }'; then
    ok "CLTRAIN_WINOGRAD=$w: the first epoch's loss near the direct kernels' ($b vs $a)"
  else
    bad "CLTRAIN_WINOGRAD=$w: the first epoch's loss near the direct kernels' ($b vs $a)"
  fi
done
CLTRAIN_WINOGRAD=4 "$CLT" train --epochs 1 "${small[@]}" --checkpoint-dir "$tmp/r4" >/dev/null 2>&1
CLTRAIN_WINOGRAD=4 "$CLT" train --epochs 2 --resume "${small[@]}" --checkpoint-dir "$tmp/r4" \
  >"$tmp/r4.txt" 2>&1
if cmp -s "$tmp/w4/ckpt-2.npz" "$tmp/r4/ckpt-2.npz"; then
  ok "CLTRAIN_WINOGRAD=4: 1 epoch + resume = 2 epochs, bit for bit"
else
  bad "CLTRAIN_WINOGRAD=4: 1 epoch + resume = 2 epochs, bit for bit ($(tail -2 "$tmp/r4.txt"))"
fi
if CLTRAIN_WINOGRAD=4 POCL_DEVICES="pthread pthread" "$CLT" train --epochs 1 --devices 0,1 \
  --split equal --batch-per-replica 32 --check-replicas "${small[@]}" --checkpoint-dir "$tmp/two" \
  >"$tmp/two.txt" 2>&1; then
  ok "two replicas with F(4x4) stay identical (--check-replicas)"
else
  bad "two replicas with F(4x4) stay identical ($(tail -2 "$tmp/two.txt"))"
fi
CLTRAIN_WINOGRAD=3 expect_fail "CLTRAIN_WINOGRAD=3 refused" "CLTRAIN_WINOGRAD=3: expected off, 2 or 4" \
  "$CLT" train --epochs 1 --train-limit 64 --test-limit 64 --checkpoint-every 0
finish
