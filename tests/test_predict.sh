#!/usr/bin/env bash
# cltrain predict end to end, on a photo model (resnet-small at 32x32, one epoch on
# a small make_photos folder) and a grey one (fmnist-cnn, IDX): its probabilities
# are the softmax of `cltrain eval --logits` on the same images (paired through
# FILE.paths.txt) and of ONNX Runtime on the export fed as docs/onnx.md says
# (tests/predict/check_predict.py); photos of other sizes; the three formats parse
# and agree; two replicas print what one does; a file that is not an image, one
# that does not decode, a missing path, a folder without images and an image over
# the pixel limit are each named in one line and skipped, the others printed, exit
# 1; --top-k's bounds; bad input fails in one line and writes nothing.
# Without onnxruntime for $PYTHON (default /usr/bin/python3) the ONNX Runtime part
# fails under CI=true and is skipped with a note otherwise.
#   test_predict.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # the tests cd
MAKE=$2
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
CHECK="$here/predict/check_predict.py"
. "$here/lib.sh"

# check NAME ARGS...: check_predict.py ARGS passes.
check() {
  local name=$1
  shift
  if "$PY" "$CHECK" "$@" >"$tmp/check.txt" 2>&1; then
    ok "$name: $(grep -v '^check_predict: ok' "$tmp/check.txt" | tr '\n' ' ')"
  else
    bad "$name: $(tail -3 "$tmp/check.txt" | tr '\n' ' ')"
  fi
}

# predict OUT ARGS...: cltrain predict ARGS, stdout to OUT, stderr to OUT.err; the exit status.
predict() {
  local out=$1
  shift
  "$CLT" predict "$@" >"$out" 2>"$out.err"
}

# --- a photo model, its logits and its export ------------------------------------------
"$MAKE" "$tmp/ph" 3 6 5 >/dev/null || bad "make_photos"
"$PY" "$here/onnx/check_photos.py" write "$tmp/sizes" 3 || bad "check_photos.py write"
"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 8 \
  --seed 3 --checkpoint-dir "$tmp/ck" >"$tmp/train.txt" 2>&1 || bad "training ($(tail -3 "$tmp/train.txt"))"
"$CLT" eval --checkpoint "$tmp/ck" --data "$tmp/ph" --logits "$tmp/ph.npy" >/dev/null 2>&1 ||
  bad "eval --logits on the training photos"
"$CLT" eval --checkpoint "$tmp/ck" --data "$tmp/sizes" --logits "$tmp/sizes.npy" >/dev/null 2>&1 ||
  bad "eval --logits on photos of other sizes"

# --- the same probabilities as eval --logits, in every format ---------------------------
for f in table csv jsonl; do
  predict "$tmp/ph.$f" --checkpoint "$tmp/ck" "$tmp/ph" --top-k 3 --format $f ||
    bad "predict --format $f (rc=$?: $(head -c 300 "$tmp/ph.$f.err"))"
done
check "table, CSV and JSON Lines parse and agree" formats 3 "$tmp/ph.table" "$tmp/ph.csv" "$tmp/ph.jsonl"
check "the softmax of eval --logits, image by image, in its order" eval "$tmp/ph.jsonl" "$tmp/ph.npy" "$tmp/ph"
if grep -Eq "^cltrain: predicted 18 of 18 images in [0-9.]+ s: [0-9.]+ images/s on 1 replica$" "$tmp/ph.jsonl.err" &&
  [ "$(wc -l <"$tmp/ph.jsonl.err")" -eq 1 ]; then
  ok "standard error: one line, the count and speed"
else
  bad "standard error: one line, the count and speed ($(head -c 300 "$tmp/ph.jsonl.err"))"
fi
predict "$tmp/sizes.jsonl" --checkpoint "$tmp/ck" "$tmp/sizes/" --top-k 3 --format jsonl ||
  bad "predict on photos of other sizes"
check "photos of other sizes (a folder given with a '/'): eval's softmax" eval "$tmp/sizes.jsonl" \
  "$tmp/sizes.npy" "$tmp/sizes"

# --- two replicas, --output, the default checkpoint -----------------------------------
POCL_DEVICES="pthread pthread" predict "$tmp/two.csv" --checkpoint "$tmp/ck" "$tmp/ph" "$tmp/sizes" \
  --top-k 2 --format csv --devices all --batch-per-replica 4
grep -q "on 2 replicas" "$tmp/two.csv.err" || bad "two replicas used ($(cat "$tmp/two.csv.err"))"
POCL_DEVICES="pthread pthread" predict "$tmp/one.csv" --checkpoint "$tmp/ck" "$tmp/ph" "$tmp/sizes" \
  --top-k 2 --format csv --devices 0 --batch-per-replica 4
if [ -s "$tmp/one.csv" ] && cmp -s "$tmp/one.csv" "$tmp/two.csv"; then
  ok "two replicas print what one does, byte for byte"
else
  bad "two replicas print what one does ($(diff "$tmp/one.csv" "$tmp/two.csv" | head -3))"
fi
predict "$tmp/o.out" --checkpoint "$tmp/ck" "$tmp/ph" "$tmp/sizes" --top-k 2 --format csv \
  -o "$tmp/o.csv" --devices 0 --batch-per-replica 4
if [ ! -s "$tmp/o.out" ] && cmp -s "$tmp/o.csv" "$tmp/one.csv"; then
  ok "--output FILE holds what standard output would"
else
  bad "--output FILE holds what standard output would"
fi
echo old >"$tmp/target.csv"
ln -s target.csv "$tmp/link.csv"
"$CLT" predict --checkpoint "$tmp/ck" "$tmp/ph" "$tmp/sizes" --top-k 2 --format csv -o "$tmp/link.csv" \
  --devices 0 --batch-per-replica 4 2>/dev/null
if [ -L "$tmp/link.csv" ] && cmp -s "$tmp/target.csv" "$tmp/one.csv"; then
  ok "--output through a link: the link kept, its file written"
else
  bad "--output through a link: the link kept, its file written"
fi
mkdir -p "$tmp/cwd"
ln -s "$tmp/ck" "$tmp/cwd/training_checkpoints"
expect_ok "without --checkpoint: ./training_checkpoints" "^\.\./ph/class_0/img_000\.jpg +class_" \
  bash -c 'cd "$1/cwd" && "$2" predict ../ph' _ "$tmp" "$CLT"

# --- --top-k's bounds ------------------------------------------------------------------
predict "$tmp/k9.jsonl" --checkpoint "$tmp/ck" "$tmp/ph/class_1" --top-k 9 --format jsonl
if "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 6 and all(len(r["top"]) == 3 for r in rows), rows' "$tmp/k9.jsonl"; then
  ok "--top-k 9 of 3 classes: 3 each"
else
  bad "--top-k 9 of 3 classes: 3 each"
fi
expect_ok "--top-k 1 (the default): one class" "^path +top 1 +prob$" \
  "$CLT" predict --checkpoint "$tmp/ck" "$tmp/ph/class_1/img_000.jpg"
expect_fail "--top-k 0 refused" "cltrain predict: --top-k: expected an integer in \[1, 1000000\], got '0'" \
  "$CLT" predict --checkpoint "$tmp/ck" --top-k 0 "$tmp/ph"

# --- images that cannot be used: named, skipped, exit 1 ------------------------------
mkdir -p "$tmp/mixed/sub" "$tmp/mixed/.hidden" "$tmp/empty"
cp "$tmp/ph/class_0/img_000.jpg" "$tmp/mixed/a.jpg"
cp "$tmp/ph/class_0/img_001.png" "$tmp/mixed/sub/b.png"
cp "$tmp/ph/class_0/img_001.png" "$tmp/mixed/.hidden/c.png"
head -c 400 "$tmp/ph/class_0/img_002.jpg" >"$tmp/mixed/cut.jpg"
echo "not an image" >"$tmp/mixed/text.png"
echo "notes" >"$tmp/mixed/notes.txt"
echo "plain text" >"$tmp/readme.txt"
"$MAKE" --blank "$tmp/big.png" 2000 2000 >/dev/null || bad "make_photos --blank"
predict "$tmp/mixed.txt" --checkpoint "$tmp/ck" "$tmp/mixed" "$tmp/readme.txt" "$tmp/none.jpg" \
  "$tmp/empty" "$tmp/big.png" "$tmp/ph/class_2/img_000.jpg" --max-image-pixels 1000000
rc=$?
want_out="$tmp/mixed/a.jpg $tmp/mixed/sub/b.png $tmp/ph/class_2/img_000.jpg"
got_out=$(tail -n +2 "$tmp/mixed.txt" | awk '{ print $1 }' | tr '\n' ' ')
if [ $rc -eq 1 ] && [ "$got_out" = "$want_out " ]; then
  ok "exit 1; the other images printed in order (hidden folders and other names left out)"
else
  bad "exit 1 and the others printed (rc=$rc, got: $got_out, want: $want_out)"
fi
want_err="cltrain: skipped: $tmp/none.jpg: No such file or directory
cltrain: skipped: $tmp/empty: a folder holding no .jpg, .jpeg or .png file
cltrain: skipped: file $tmp/mixed/cut.jpg: cannot decode: Premature end of JPEG file
cltrain: skipped: file $tmp/mixed/text.png: cannot decode: neither JPEG nor PNG (magic bytes)
cltrain: skipped: file $tmp/readme.txt: cannot decode: neither JPEG nor PNG (magic bytes)
cltrain: skipped: file $tmp/big.png: 2000x2000 = 4000000 pixels exceeds the limit of 1000000 (a decompression bomb?); raise it with --max-image-pixels"
if [ "$(grep -v '^cltrain: predicted' "$tmp/mixed.txt.err")" = "$want_err" ] &&
  grep -q "^cltrain: predicted 3 of 9 images" "$tmp/mixed.txt.err"; then
  ok "each skipped path named in one line with its cause"
else
  bad "each skipped path named in one line with its cause: $(cat "$tmp/mixed.txt.err")"
fi
predict "$tmp/no.out" --checkpoint "$tmp/ck" "$tmp/readme.txt" "$tmp/mixed/text.png" -o "$tmp/no.csv"
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -vc '^cltrain: skipped: ' "$tmp/no.out.err")" -eq 1 ] &&
  grep -q "^cltrain: error: none of the 2 images could be predicted$" "$tmp/no.out.err" &&
  [ ! -e "$tmp/no.csv" ] && [ ! -s "$tmp/no.out" ]; then
  ok "no image decodes: an error after the skipped ones, nothing written"
else
  bad "no image decodes: an error, nothing written (rc=$rc: $(cat "$tmp/no.out.err"))"
fi
predict "$tmp/none.out" --checkpoint "$tmp/ck" "$tmp/empty"
rc=$?
if [ $rc -eq 1 ] && [ "$(tail -1 "$tmp/none.out.err")" = \
  "cltrain: error: no image to predict (every path given was skipped)" ]; then
  ok "nothing to predict: an error"
else
  bad "nothing to predict: an error (rc=$rc: $(cat "$tmp/none.out.err"))"
fi

# --- bad input: one line, nothing written ------------------------------------------
expect_fail "no image given" "cltrain predict: expected the images to predict, FILE\|FOLDER" \
  "$CLT" predict --checkpoint "$tmp/ck"
expect_fail "an unknown --format" "cltrain predict: --format: expected table, csv or jsonl, got 'xml'" \
  "$CLT" predict --checkpoint "$tmp/ck" --format xml "$tmp/ph"
expect_fail "--output into a missing folder, before any work" "$tmp/nodir/p.csv" \
  "$CLT" predict --checkpoint "$tmp/ck" "$tmp/ph" -o "$tmp/nodir/p.csv"
expect_fail "a missing checkpoint" "$tmp/nock" "$CLT" predict --checkpoint "$tmp/nock" "$tmp/ph"
expect_fail "without --checkpoint where there is none" "^cltrain: error: \./training_checkpoints: no such checkpoint folder" \
  bash -c 'cd "$1/empty" && "$2" predict ../ph' _ "$tmp" "$CLT"

# --- a grey model: Fashion-MNIST's names, photos as luma --------------------------------
"$CLT" train --epochs 1 --train-limit 500 --test-limit 100 --seed 7 --checkpoint-dir "$tmp/ckg" \
  >"$tmp/train_g.txt" 2>&1 || bad "training fmnist-cnn ($(tail -3 "$tmp/train_g.txt"))"
predict "$tmp/grey.jsonl" --checkpoint "$tmp/ckg" "$tmp/sizes" --top-k 10 --format jsonl ||
  bad "predict with a grey model ($(head -c 300 "$tmp/grey.jsonl.err"))"
if grep -q '"class": "Ankle boot"' "$tmp/grey.jsonl"; then ok "a grey model: Fashion-MNIST's class names"; else
  bad "a grey model: Fashion-MNIST's class names"
fi
for f in table csv; do
  predict "$tmp/grey.$f" --checkpoint "$tmp/ckg" "$tmp/sizes" --top-k 10 --format $f ||
    bad "predict --format $f with a grey model"
done
check "ten classes, names with spaces and '/': the formats agree" formats 10 "$tmp/grey.table" \
  "$tmp/grey.csv" "$tmp/grey.jsonl"

# --- ONNX Runtime on the exports -------------------------------------------------------
if ! "$PY" -c 'import numpy, onnxruntime' 2>/dev/null; then
  if [ "${CI:-}" = true ]; then
    bad "onnxruntime importable by $PY (.ci/setup installs it)"
  else
    echo "note: onnxruntime not importable by $PY: the ONNX Runtime comparison did not run"
  fi
  finish
  exit $?
fi
"$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/photos.onnx" >/dev/null || bad "export of the photo model"
check "ONNX Runtime on the export, photos resized as docs/onnx.md says" onnx "$tmp/sizes.jsonl" \
  "$tmp/photos.onnx" "$here/../docs/onnx.md"
"$CLT" export --checkpoint "$tmp/ckg" --onnx "$tmp/grey.onnx" >/dev/null || bad "export of the grey model"
check "ONNX Runtime on the grey export, photos as luma" onnx "$tmp/grey.jsonl" "$tmp/grey.onnx" \
  "$here/../docs/onnx.md" --grey
finish
