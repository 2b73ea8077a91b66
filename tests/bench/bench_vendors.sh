#!/usr/bin/env bash
# Two vendors in one run: Oclgrind's simulated GPU (seconds per example) beside
# PoCL's CPU device, through a private vendors folder (tests/vendors.sh), trained
# as a user would: `cltrain train --devices all --epochs 2 --train-limit IMAGES`
# (--split auto, the default). Each round runs, back to back, the pair, PoCL alone
# with its default batch (64) and PoCL alone with the pair's global batch (128),
# and prints per round and as medians [min-max]:
# - epoch 2's training images/s, and the pair's over PoCL alone's (each batch);
# - the pair's epoch 1 over its epoch 2, whole epochs (evaluation of the test set
#   included, as the epoch line prints them) and training alone;
# - start-up, launch to the end of the first step (the set-up probe included).
#
#   tests/bench/bench_vendors.sh [--rounds N] [--images N] [--cltrain PATH]
#
# --cltrain: the binary to measure (default: build/cltrain), e.g. a build of an
# older tree in a git worktree for a before/after comparison.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
clt=$here/../../build/cltrain
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --cltrain) clt=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
. "$here/common.sh"
. "$here/../vendors.sh"
rounds_images 3 "${args[@]}"
[ "$images" = 6400 ] && ! printf '%s\n' "${args[@]}" | grep -q -- --images && images=1280
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset POCL_DEVICES CLTRAIN_DEVICES CLTRAIN_KERNELS CLTRAIN_TEST_SLOW
make_vendors "$tmp/vendors" || exit 1
export OCL_ICD_VENDORS=$tmp/vendors
CLT=$clt
pocl=$(vendor_index '^[0-9]+ +CPU +Portable Computing Language')
echo "cltrain: $clt; devices: $(OCL_ICD_VENDORS=$tmp/vendors "$clt" devices | cut -c1-80 | paste -sd';')"
echo "$images training images, 2 epochs, the whole test set evaluated after each"

# field FILE LINE NAME: a number from line LINE of a JSONL file.
field() { sed -n "$2p" "$1" | grep -Eo "\"$3\": [0-9.eE+-]+" | head -1 | cut -d' ' -f2; }
# train NAME DEVICES [flags]: one run; its log in $tmp/NAME.jsonl, output in $tmp/NAME.txt.
train() {
  local name=$1 devices=$2
  shift 2
  (cd "$tmp" && "$clt" train --devices "$devices" --epochs 2 --train-limit "$images" \
    --checkpoint-every 0 --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.txt" 2>&1)
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
startup() { grep -Eo 'start-up [0-9.]+s' "$tmp/$1.txt" | grep -Eo '[0-9.]+' | head -1; }

printf '%5s %10s %10s %10s %9s %9s %10s %10s %9s %9s\n' round pair_ips alone64 alone128 \
  vs_alone64 vs_alone128 e1/e2_all e1/e2_train start_pair start_one
for ((r = 1; r <= rounds; r++)); do
  train pair all
  train alone64 "$pocl"
  train alone128 "$pocl" --batch-per-replica 128
  p=$(field "$tmp/pair.jsonl" 2 images_per_second)
  a=$(field "$tmp/alone64.jsonl" 2 images_per_second)
  b=$(field "$tmp/alone128.jsonl" 2 images_per_second)
  e_all=$(ratio "$(field "$tmp/pair.jsonl" 1 seconds)" "$(field "$tmp/pair.jsonl" 2 seconds)")
  e_train=$(ratio "$(field "$tmp/pair.jsonl" 1 train_seconds)" "$(field "$tmp/pair.jsonl" 2 train_seconds)")
  printf '%5d %10s %10s %10s %9s %9s %10s %10s %9s %9s\n' "$r" "$p" "$a" "$b" "$(ratio "$p" "$a")" \
    "$(ratio "$p" "$b")" "$e_all" "$e_train" "$(startup pair)" "$(startup alone64)" | tee -a "$tmp/rows"
  grep -E '^  device|^Set-up|note' "$tmp/pair.txt" | sed 's/^/      /' | head -8
done
# summary COLUMN NAME: the median and range of a column of the rows.
summary() {
  local col=$1 name=$2 med lo hi
  med=$(awk -v c="$col" '{ print $c }' "$tmp/rows" | median)
  lo=$(awk -v c="$col" '{ print $c }' "$tmp/rows" | sort -g | head -1)
  hi=$(awk -v c="$col" '{ print $c }' "$tmp/rows" | sort -g | tail -1)
  printf '  %-48s %s [%s-%s]\n' "$name" "$med" "$lo" "$hi"
}
echo "medians over $rounds rounds [min-max] (CPU: $cpu):"
summary 2 "pair, epoch 2 images/s"
summary 3 "PoCL alone (batch 64), epoch 2 images/s"
summary 4 "PoCL alone (batch 128), epoch 2 images/s"
summary 5 "pair / PoCL alone (batch 64), epoch 2"
summary 6 "pair / PoCL alone (batch 128), epoch 2"
summary 7 "pair: epoch 1 / epoch 2 (whole epochs)"
summary 8 "pair: epoch 1 / epoch 2 (training)"
summary 9 "pair: start-up, s"
summary 10 "PoCL alone: start-up, s"
