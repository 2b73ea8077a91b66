#!/usr/bin/env bash
# --optimizer adam|sgd|rmsprop through the command line: each trains (the loss falls
# over two short epochs) with Keras' default learning rate unless --lr is given,
# replicas stay bit-identical, and meaningless flag combinations are refused with
# one error line. (The update's arithmetic: test_optimizers.c; exact resume:
# test_checkpoint.sh.)
#   test_optimizers.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"
short=(--epochs 2 --train-limit 640 --test-limit 200 --seed 3 --checkpoint-every 0)

check_run() { # NAME OPTIMIZER-LINE FLAGS...
  local name=$1 line=$2
  shift 2
  "$CLT" train "${short[@]}" "$@" --log "$tmp/$name.jsonl" >"$tmp/$name.txt" 2>&1
  local rc=$? l1 l2
  l1=$(field "$tmp/$name.jsonl" 1 train_loss)
  l2=$(field "$tmp/$name.jsonl" 2 train_loss)
  if [ $rc -eq 0 ] && awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(a != "" && b != "" && b < a) }'; then
    ok "$name [$*] trains: loss $l1 -> $l2"
  else
    bad "$name [$*] trains (rc=$rc, loss $l1 -> $l2: $(tail -2 "$tmp/$name.txt"))"
  fi
  if grep -qx -- "$line" "$tmp/$name.txt"; then ok "$name: $line"; else
    bad "$name: $line ($(grep '^Optimizer' "$tmp/$name.txt"))"
  fi
}

check_run adam "Optimizer adam: learning rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-07"
check_run sgd "Optimizer sgd: learning rate 0.01, momentum 0" --optimizer sgd
check_run nesterov "Optimizer sgd: learning rate 0.05, momentum 0.9, Nesterov, weight decay 0.0001" \
  --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 1e-4
check_run rmsprop "Optimizer rmsprop: learning rate 0.001, rho 0.9, momentum 0, epsilon 1e-07" \
  --optimizer rmsprop
check_run rmsprop-momentum \
  "Optimizer rmsprop: learning rate 0.0005, rho 0.9, momentum 0.5, epsilon 1e-07, weight decay 0.004" \
  --optimizer rmsprop --lr 5e-4 --momentum 0.5 --weight-decay 0.004
check_run adamw "Optimizer adam: learning rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-07, weight decay 0.004" \
  --weight-decay 0.004

# Two replicas apply the same update to the same gradient: the same bits after every step.
if POCL_DEVICES="pthread pthread" "$CLT" train --devices 0,1 --split equal --check-replicas --epochs 1 \
  --train-limit 256 --test-limit 64 --checkpoint-every 0 --optimizer sgd --momentum 0.9 --nesterov \
  --weight-decay 1e-3 >"$tmp/replicas.txt" 2>&1; then
  ok "SGD with Nesterov and weight decay keeps two replicas bit-identical"
else
  bad "SGD with Nesterov and weight decay keeps two replicas bit-identical ($(tail -2 "$tmp/replicas.txt"))"
fi

bad_flags() { # NAME REGEX FLAGS...
  local name=$1 re=$2
  shift 2
  expect_fail "$name" "$re" "$CLT" train --epochs 1 --train-limit 64 --checkpoint-every 0 "$@"
}
bad_flags "an unknown optimizer" "--optimizer adagrad: expected adam, sgd or rmsprop" --optimizer adagrad
bad_flags "--momentum with adam" "--momentum applies to --optimizer sgd and rmsprop, not adam" \
  --momentum 0.9
bad_flags "--nesterov with rmsprop" "--nesterov applies to --optimizer sgd, not rmsprop" \
  --optimizer rmsprop --momentum 0.9 --nesterov
bad_flags "--nesterov without momentum" "--nesterov needs --momentum above 0" --optimizer sgd --nesterov
bad_flags "a negative momentum" "--momentum: expected a number in \[0, 1\], got '-0.1'" \
  --optimizer sgd --momentum -0.1
bad_flags "a momentum above 1" "--momentum: expected a number in \[0, 1\], got '1.5'" \
  --optimizer sgd --momentum 1.5
bad_flags "a negative weight decay" "--weight-decay: expected a number in \[0, 1e\+06\], got '-1'" \
  --weight-decay -1
bad_flags "a zero learning rate" "--lr: expected a number in" --optimizer sgd --lr 0
expect_ok "--help names the optimizers" \
  "--optimizer NAME +adam, sgd or rmsprop" "$CLT" train --help
if "$CLT" train --help | grep -q "0.01 for sgd, 0.001 for"; then ok "--help gives the default learning rates"; else
  bad "--help gives the default learning rates"
fi

finish
