#!/usr/bin/env bash
# The command line: help, flag errors, device listing and selection, and bad data
# folders. Every failure must exit non-zero with one error line naming the cause.
set -u
CLT=$1
DATA=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/lib.sh"



# Writes a big-endian 32-bit integer as four bytes.
be32() {
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
    $(($1 >> 8 & 255)) $(($1 & 255)))"
}
# idx_images FILE COUNT ROWS COLS
idx_images() {
  { printf '\x00\x00\x08\x03'; be32 "$2"; be32 "$3"; be32 "$4"; head -c $(($2 * $3 * $4)) /dev/urandom; } >"$1"
}
# idx_labels FILE COUNT [FIRST_LABEL]: labels i % 10 (first one overridable).
idx_labels() {
  {
    printf '\x00\x00\x08\x01'
    be32 "$2"
    local i
    for ((i = 0; i < $2; i++)); do
      if [ $i -eq 0 ] && [ -n "${3:-}" ]; then printf "\\x$(printf %02x "$3")"; else printf "\\x0$((i % 10))"; fi
    done
  } >"$1"
}
# make_data DIR ROWS COLS: a small valid gzipped set of 100 train / 50 test images.
make_data() {
  mkdir -p "$1"
  idx_images "$1/train-images-idx3-ubyte" 100 "$2" "$3"
  idx_labels "$1/train-labels-idx1-ubyte" 100
  idx_images "$1/t10k-images-idx3-ubyte" 50 "$2" "$3"
  idx_labels "$1/t10k-labels-idx1-ubyte" 50
  gzip -f "$1"/*-ubyte
}

# --- help and flags -----------------------------------------------------------------
expect_ok "cltrain --help lists commands" "commands:" "$CLT" --help
expect_ok "train --help lists flags" "--batch-per-replica" "$CLT" train --help
expect_ok "devices --help" "usage: cltrain devices" "$CLT" devices --help
expect_fail "unknown command" "unknown command 'frobnicate'" "$CLT" frobnicate
expect_fail "unknown flag" "unknown option --bogus" "$CLT" train --bogus 1
expect_fail "epochs 0" "--epochs: expected an integer in \[1, " "$CLT" train --epochs 0
expect_fail "epochs not a number" "--epochs: .*got 'ten'" "$CLT" train --epochs ten
expect_fail "negative learning rate" "--lr: expected a number" "$CLT" train --lr -0.1
expect_fail "flag without value" "--batch-per-replica needs a value" "$CLT" train --batch-per-replica
expect_fail "negative seed" "--seed: expected a non-negative integer" "$CLT" train --seed -3
expect_fail "stray argument" "unexpected argument 'extra'" "$CLT" train extra
expect_fail "unknown model" "unknown model 'resnet9000'" "$CLT" train --model resnet9000 --epochs 1

# --- devices ------------------------------------------------------------------------
out=$(POCL_DEVICES="pthread pthread" "$CLT" devices)
n=$(grep -Ec '^[0-9]+ +(CPU|GPU|ACCELERATOR|OTHER) +.+ [0-9]+ compute units +[0-9.]+ GiB$' <<<"$out")
pocl=$(grep -c 'Portable Computing Language' <<<"$out")
if [ "$pocl" -eq 2 ] && [ "$n" -eq "$(wc -l <<<"$out")" ]; then ok "devices lists two PoCL devices"; else
  bad "devices lists two PoCL devices (got: $out)"
fi
expect_fail "device index out of range" "--devices 7: no device 7" env POCL_DEVICES=pthread "$CLT" train --devices 7
expect_fail "device listed twice" "device 0 listed twice" "$CLT" train --devices 0,0
expect_fail "device list malformed" "--devices 0,: expected" "$CLT" train --devices 0,
if ! "$CLT" devices | grep -q ' GPU '; then
  expect_fail "no GPU to select" "--devices gpu: no device of that type" "$CLT" train --devices gpu
fi

# --- data ---------------------------------------------------------------------------
expect_fail "missing data folder" "$tmp/nowhere" "$CLT" train --data "$tmp/nowhere"
make_data "$tmp/wrongsize" 32 32
expect_fail "wrong image size for the model" "32x32x1, model fmnist-cnn expects 28x28x1" \
  "$CLT" train --data "$tmp/wrongsize"
make_data "$tmp/truncated" 28 28
head -c 300 "$tmp/truncated/train-images-idx3-ubyte.gz" >"$tmp/t" && mv "$tmp/t" "$tmp/truncated/train-images-idx3-ubyte.gz"
expect_fail "truncated gzip names the file" "truncated/train-images-idx3-ubyte.gz: .*truncated" \
  "$CLT" train --data "$tmp/truncated"
make_data "$tmp/badlabel" 28 28
gunzip "$tmp/badlabel/t10k-labels-idx1-ubyte.gz"
idx_labels "$tmp/badlabel/t10k-labels-idx1-ubyte" 50 12
gzip "$tmp/badlabel/t10k-labels-idx1-ubyte"
expect_fail "label out of range" "t10k-labels-idx1-ubyte.gz: label 12 at index 0 is out of range" \
  "$CLT" train --data "$tmp/badlabel"
make_data "$tmp/mismatch" 28 28
rm "$tmp/mismatch/train-labels-idx1-ubyte.gz"
idx_labels "$tmp/mismatch/train-labels-idx1-ubyte" 99
expect_fail "image and label counts differ" "100 images but .*99 labels" "$CLT" train --data "$tmp/mismatch"
make_data "$tmp/good" 28 28
expect_fail "log in a missing folder" "$tmp/nodir/log.jsonl: cannot open log" \
  "$CLT" train --data "$tmp/good" --epochs 1 --log "$tmp/nodir/log.jsonl"

finish
