#!/usr/bin/env bash
# The command line: help, flag errors, device listing and selection, and bad data
# folders. Every failure must exit non-zero with one error line naming the cause.
set -u
CLT=$1
MAKE_PHOTOS=$2
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
n=$(grep -Ec '^[0-9]+ +(CPU|GPU|ACCELERATOR|OTHER) +.+ [0-9]+ compute units? +[0-9.]+ GiB$' <<<"$out")
pocl=$(grep -c 'Portable Computing Language' <<<"$out")
if [ "$pocl" -eq 2 ] && [ "$n" -eq "$(wc -l <<<"$out")" ]; then ok "devices lists two PoCL devices"; else
  bad "devices lists two PoCL devices (got: $out)"
fi
expect_fail "device index out of range" "--devices 7: no device 7" env POCL_DEVICES=pthread "$CLT" train --devices 7
expect_fail "bad CPU vector width" "CLTRAIN_CPU_VECTOR_WIDTH=7: not 4, 8 or 16" env CLTRAIN_CPU_VECTOR_WIDTH=7 "$CLT" devices
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
expect_fail "log in a missing folder" "$tmp/nodir/log.jsonl \(--log\): folder .*nodir: No such file" \
  "$CLT" train --data "$tmp/good" --epochs 1 --log "$tmp/nodir/log.jsonl"

# --- outputs: checked before anything is created, every write checked ----------------
mkdir -p "$tmp/logdir"
expect_fail "--log naming a folder is refused" "logdir \(--log\): is a folder, not a file" \
  "$CLT" train --data "$tmp/good" --epochs 1 --log "$tmp/logdir" --checkpoint-dir "$tmp/new/ck"
if [ ! -e "$tmp/new" ]; then ok "a refused --log leaves no checkpoint folder behind"; else
  bad "a refused --log left $(find "$tmp/new")"
fi
expect_fail "--trace in a missing folder is refused first" "nodir/t.json \(--trace\)" \
  "$CLT" train --data "$tmp/good" --epochs 1 --trace "$tmp/nodir/t.json" --checkpoint-dir "$tmp/new2"
[ ! -e "$tmp/new2" ] && ok "a refused --trace leaves no checkpoint folder behind" || bad "--trace: $tmp/new2 created"
expect_fail "a log on a full disk stops the run, naming the file" "/dev/full: cannot write log: No space left" \
  "$CLT" train --data "$tmp/good" --epochs 2 --log /dev/full --checkpoint-every 1 --checkpoint-dir "$tmp/full"
if [ -f "$tmp/full/ckpt-1.npz" ] && [ ! -e "$tmp/full/ckpt-2.npz" ]; then
  ok "... after saving that epoch's checkpoint, before the next epoch"
else
  bad "a log on a full disk: checkpoints $(ls "$tmp/full" 2>&1)"
fi
if "$CLT" devices >/dev/full 2>"$tmp/err"; then bad "output to a full disk exits 0"; else
  grep -q "standard output: cannot write" "$tmp/err" && ok "output to a full disk fails, saying so" ||
    bad "output to a full disk: $(cat "$tmp/err")"
fi
expect_fail "--devices 0/0 is refused" "--devices 0/0: device 0 .* splits into 2 to" "$CLT" train --devices 0/0
"$MAKE_PHOTOS" "$tmp/ph" 2 4 >/dev/null
"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 4 \
  --checkpoint-dir "$tmp/ph-ck" >/dev/null 2>&1 || bad "a photo run to resume"
expect_fail "--resume at another --image-size says what the checkpoint expects" \
  "ph-ck.*was trained on 32x32 images, not --image-size 48" \
  "$CLT" train --data "$tmp/ph" --image-size 48 --epochs 2 --checkpoint-dir "$tmp/ph-ck" --resume
expect_fail "--devices 0/1 is refused" "--devices 0/1: device 0 .* splits into 2 to" "$CLT" train --devices 0/1

# --- one epoch of one step: counts of one in the singular; a resume with nothing to do -
one=(--data "$tmp/good" --batch-per-replica 100 --test-limit 1 --checkpoint-dir "$tmp/one")
# plural_free NAME FILE: no count of 1 with a plural noun ("1 epochs", "1 test images").
plural_free() {
  local hits
  hits=$(grep -Eo '(^|[^0-9.])1 ([a-z]+ )?(epochs|steps|images|examples|replicas|devices|classes|layers|outputs|files|processes)\b' "$2")
  [ -z "$hits" ] && ok "$1: no count of 1 with a plural noun" || bad "$1: $hits"
}
"$CLT" train "${one[@]}" --epochs 1 >"$tmp/one.txt" 2>&1 || bad "a run of one epoch (rc $?: $(tail -1 "$tmp/one.txt"))"
grep -q "^Global batch 100 (100 per replica), 1 step per epoch, epoch 1$" "$tmp/one.txt" &&
  ok "one epoch of one step: the batch line in the singular" || bad "the batch line: $(grep '^Global' "$tmp/one.txt")"
plural_free "train, one epoch" "$tmp/one.txt"
"$CLT" train "${one[@]}" --epochs 1 --resume >"$tmp/again.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/again.txt")" -eq 1 ] &&
  grep -q "^Nothing to train: $tmp/one/ckpt-1.npz has 1 epoch done and --epochs is 1, the epoch to stop after; give --epochs 2 or more to continue$" "$tmp/again.txt"; then
  ok "--resume --epochs 1 after one epoch: one line saying what to give, exit 0"
else
  bad "--resume --epochs 1 after one epoch (rc $rc): $(cat "$tmp/again.txt")"
fi
"$CLT" train "${one[@]}" --epochs 2 --resume >"$tmp/two.txt" 2>&1 || bad "the resume to epoch 2 (rc $?)"
grep -q "^Resuming from $tmp/one/ckpt-1.npz: 1 epoch and 1 step done$" "$tmp/two.txt" &&
  grep -q ", 1 step per epoch, epoch 2$" "$tmp/two.txt" && ok "the resume's lines in the singular" ||
  bad "the resume's lines: $(grep -E '^(Resuming|Global)' "$tmp/two.txt")"
plural_free "train --resume" "$tmp/two.txt"
"$CLT" eval --checkpoint "$tmp/one/ckpt-1.npz" --data "$tmp/good" --test-limit 1 >"$tmp/eval.txt" 2>&1 ||
  bad "eval of the one-epoch checkpoint (rc $?)"
grep -q "^Checkpoint $tmp/one/ckpt-1.npz: model fmnist-cnn, 1 epoch, 1 step; 1 test image on 1 device$" "$tmp/eval.txt" &&
  ok "eval's line in the singular" || bad "eval's line: $(head -1 "$tmp/eval.txt")"
plural_free "eval" "$tmp/eval.txt"

finish
