#!/usr/bin/env bash
# ONNX export end to end: trains the reference CNN briefly, exports it, and has
# onnx.checker and ONNX Runtime (tests/onnx/check_onnx.py) run the exported model
# on the test images cltrain evaluated (`cltrain eval --logits`, from two replicas
# so the logits of both slices are gathered): top-1 agreement >= 99.9% and logits
# within 1e-4 of the largest. The same for a Keras model file (tests/models/seq_cnn:
# its own Rescaling, raw preprocessing). Bad inputs fail in one line and leave no file.
# A photo model (resnet-small at 32x32) says in its metadata what it expects, and
# ONNX Runtime fed photos of other sizes, resized with the function docs/onnx.md
# shows (tests/onnx/check_photos.py), agrees with `cltrain eval --logits`, whose
# list of rows (FILE.paths.txt) names each row's image.
# Without onnxruntime and onnx for $PYTHON (default /usr/bin/python3) the ONNX
# Runtime part fails under CI=true (.ci/setup installs them) and is skipped (exit
# 77) otherwise.
#   test_onnx.sh CLTRAIN MAKE_PHOTOS
set -u
CLT=$1
MAKE=$2
DATA=/usr/share/datasets/fashion-mnist
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# no_file NAME PATH: the failed command left neither PATH nor a temp file beside it.
no_file() {
  local left
  left=$(find "$(dirname "$2")" -maxdepth 1 -name ".$(basename "$2").tmp-*" 2>/dev/null)
  if [ ! -e "$2" ] && [ -z "$left" ]; then ok "$1: no file left"; else bad "$1: left $2 $left"; fi
}

# --- a checkpoint, its export and cltrain's logits ------------------------------------
"$CLT" train --epochs 1 --train-limit 2000 --test-limit 1000 --seed 7 --checkpoint-dir "$tmp/ck" \
  >"$tmp/train.txt" 2>&1 || bad "training ($(tail -3 "$tmp/train.txt"))"
expect_ok "export of a checkpoint folder" "^Exported fmnist-cnn \(175514 parameters, epoch 1\)" \
  "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/model.onnx"
expect_ok "export of a .npz file; --verbose lists the nodes" "Transpose input/nchw <- preprocess/unit" \
  "$CLT" export --checkpoint "$tmp/ck/ckpt-1.npz" --onnx "$tmp/again.onnx" --verbose
mkdir "$tmp/no_icds"
expect_ok "export needs no OpenCL device (no ICD at all)" "^Exported fmnist-cnn" \
  env OCL_ICD_VENDORS="$tmp/no_icds" "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/noicd.onnx"
if [ -s "$tmp/model.onnx" ] && cmp -s "$tmp/model.onnx" "$tmp/again.onnx"; then
  ok "the export is deterministic (same bytes twice)"
else
  bad "the export is deterministic (same bytes twice)"
fi
expect_ok "eval --logits on two replicas" "^Accuracy: " env POCL_DEVICES="pthread pthread" \
  "$CLT" eval --checkpoint "$tmp/ck" --test-limit 1000 --logits "$tmp/logits.npy"
# 1000 x 10 float32 after a 128-byte .npy preamble
size=$(stat -c %s "$tmp/logits.npy" 2>/dev/null || echo 0)
if [ "$size" -eq $((128 + 1000 * 10 * 4)) ]; then ok "logits .npy of 1000 x 10 float32"; else
  bad "logits .npy of 1000 x 10 float32 ($size bytes)"
fi
if seq 0 999 | cmp -s - "$tmp/logits.paths.txt"; then ok "IDX: logits.paths.txt lists the rows' indices 0..999"; else
  bad "IDX: logits.paths.txt lists the rows' indices 0..999 ($(head -c 60 "$tmp/logits.paths.txt" 2>&1))"
fi

# --- bad inputs: one line, non-zero exit, no file ------------------------------------
expect_fail "export without --onnx" "cltrain export: --onnx FILE is required" \
  "$CLT" export --checkpoint "$tmp/ck"
# --checkpoint defaults to train's --checkpoint-dir, ./training_checkpoints.
mkdir -p "$tmp/bare" "$tmp/default"
ln -s "$tmp/ck" "$tmp/default/training_checkpoints"
expect_ok "export without --checkpoint reads ./training_checkpoints" \
  "from \./training_checkpoints/ckpt-1\.npz to default\.onnx" \
  bash -c 'cd "$1/default" && "$2" export --onnx default.onnx' _ "$tmp" "$CLT"
expect_fail "export without --checkpoint where there is none names the default" \
  "^cltrain: error: \./training_checkpoints: no such checkpoint folder \(the default --checkpoint" \
  bash -c 'cd "$1/bare" && "$2" export --onnx none.onnx' _ "$tmp" "$CLT"
no_file "missing default checkpoint" "$tmp/bare/none.onnx"
# A device or pipe where an output goes is refused, never renamed over (as root
# that would replace /dev/null); a FIFO stands in for one.
mkfifo "$tmp/fifo"
expect_fail "export onto a pipe is refused" "fifo \(output\): not a regular file" \
  "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/fifo"
expect_fail "eval --logits onto a pipe is refused" "fifo \(--logits\): not a regular file" \
  "$CLT" eval --checkpoint "$tmp/ck" --test-limit 64 --logits "$tmp/fifo"
if [ -p "$tmp/fifo" ]; then ok "the pipe is still a pipe"; else bad "the pipe was replaced"; fi
expect_fail "export of a missing checkpoint" "$tmp/none" \
  "$CLT" export --checkpoint "$tmp/none" --onnx "$tmp/none.onnx"
no_file "missing checkpoint" "$tmp/none.onnx"
head -c 5000 "$tmp/ck/ckpt-1.npz" >"$tmp/corrupt.npz"
expect_fail "export of a truncated checkpoint" "corrupt.npz" \
  "$CLT" export --checkpoint "$tmp/corrupt.npz" --onnx "$tmp/corrupt.onnx"
no_file "truncated checkpoint" "$tmp/corrupt.onnx"
cp "$tmp/model.onnx" "$tmp/kept.onnx"
expect_fail "export of a truncated checkpoint over an existing file" "corrupt.npz" \
  "$CLT" export --checkpoint "$tmp/corrupt.npz" --onnx "$tmp/kept.onnx"
if cmp -s "$tmp/model.onnx" "$tmp/kept.onnx"; then ok "the existing file is untouched"; else
  bad "the existing file is untouched"
fi
expect_fail "export into a missing folder" "$tmp/nodir/m.onnx: cannot create" \
  "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/nodir/m.onnx"
no_file "missing folder" "$tmp/nodir/m.onnx"
mkdir "$tmp/adir"
expect_fail "export onto a folder" "$tmp/adir: cannot rename into place" \
  "$CLT" export --checkpoint "$tmp/ck" --onnx "$tmp/adir"
if [ -z "$(find "$tmp" -maxdepth 1 -name '.adir.tmp-*')" ]; then ok "onto a folder: no temp file left"; else
  bad "onto a folder: temp file left"
fi
expect_fail "eval --logits into a missing folder" "$tmp/nodir/l.npy: cannot create" \
  "$CLT" eval --checkpoint "$tmp/ck" --test-limit 100 --logits "$tmp/nodir/l.npy"
mkdir "$tmp/taken.paths.txt"
expect_fail "eval --logits whose list of rows would replace a folder" \
  "$tmp/taken.paths.txt \(--logits' list of rows\): is a folder" \
  "$CLT" eval --checkpoint "$tmp/ck" --test-limit 100 --logits "$tmp/taken.npy"
no_file "list of rows onto a folder" "$tmp/taken.npy"

# --- a Keras model file -------------------------------------------------------------
"$CLT" train --model "$here/models/seq_cnn/model.json" --epochs 1 --train-limit 2000 \
  --test-limit 1000 --seed 7 --checkpoint-dir "$tmp/ck_seq" >"$tmp/train_seq.txt" 2>&1 ||
  bad "training seq_cnn ($(tail -3 "$tmp/train_seq.txt"))"
expect_ok "export of a Keras model file's checkpoint" "^Exported model.json" \
  "$CLT" export --checkpoint "$tmp/ck_seq" --onnx "$tmp/seq.onnx"
expect_ok "eval --logits of it" "^Accuracy: " \
  "$CLT" eval --checkpoint "$tmp/ck_seq" --test-limit 1000 --logits "$tmp/seq.npy"

# --- onnx.checker and ONNX Runtime ----------------------------------------------------
if ! "$PY" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
  if [ "${CI:-}" = true ]; then
    bad "onnxruntime and onnx importable by $PY (.ci/setup installs them: python3 -m pip install onnxruntime==1.20.1 onnx==1.17.0)"
    finish
    exit 1
  fi
  echo "SKIP: onnxruntime or onnx not importable by $PY (python3 -m pip install onnxruntime onnx);" \
    "the ONNX Runtime comparison did not run"
  finish || exit 1
  exit 77
fi
# compare NAME MODEL LOGITS: check_onnx.py on the IDX test images passes.
compare() {
  if "$PY" "$here/onnx/check_onnx.py" "$2" "$3" --data "$DATA" >"$tmp/check.txt" 2>&1; then
    ok "$1: ONNX Runtime agrees with cltrain eval: $(grep -o 'top-1 agreement.*' "$tmp/check.txt")"
  else
    bad "$1: ONNX Runtime agrees with cltrain eval: $(tail -5 "$tmp/check.txt" | tr '\n' ' ')"
  fi
  cat "$tmp/check.txt"
}
compare fmnist-cnn "$tmp/model.onnx" "$tmp/logits.npy"
compare seq_cnn "$tmp/seq.onnx" "$tmp/seq.npy"
expect_ok "fmnist-cnn's metadata: Fashion-MNIST's class names, 28x28x1 NHWC, no resize" "^ok$" \
  "$PY" -c 'import json, sys, onnx
m = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
names = json.loads(m["class_names"])
got = (names[0], names[9], len(names), m["input_layout"], m["input_height"], m["input_width"],
       m["input_channels"], m["input_channel_order"], m["resize"][:5], m["preprocessing"])
want = ("T-shirt/top", "Ankle boot", 10, "NHWC", "28", "28", "1", "grey", "none:", "unit")
print("ok" if got == want else got)' "$tmp/model.onnx"

# --- photos of other sizes than the model's ------------------------------------------
# check_photos NAME LOGITS DIR [ARGS]: check_photos.py on the photo model passes.
check_photos() {
  local name=$1 logits=$2 dir=$3
  shift 3
  if "$PY" "$here/onnx/check_photos.py" check "$tmp/photos.onnx" "$logits" "$here/../docs/onnx.md" \
    --data "$dir" "$@" >"$tmp/check.txt" 2>&1; then
    ok "$name: $(grep -o 'top-1 agreement.*' "$tmp/check.txt")"
  else
    bad "$name: $(grep FAIL "$tmp/check.txt" | head -3 | tr '\n' ' ')$(tail -1 "$tmp/check.txt")"
  fi
  cat "$tmp/check.txt"
}
"$MAKE" "$tmp/ph" 3 6 5 >/dev/null || bad "make_photos"
"$CLT" train --data "$tmp/ph" --model resnet-small --image-size 32 --epochs 1 --batch-per-replica 8 \
  --seed 3 --checkpoint-dir "$tmp/ck_ph" >"$tmp/train_ph.txt" 2>&1 ||
  bad "training on photos ($(tail -3 "$tmp/train_ph.txt"))"
expect_ok "export of a photo model" "^Exported resnet-small" \
  "$CLT" export --checkpoint "$tmp/ck_ph" --onnx "$tmp/photos.onnx"
"$PY" "$here/onnx/check_photos.py" write "$tmp/sizes" 3 || bad "check_photos.py write"
expect_ok "eval --logits on photos of other sizes, two replicas" "^Accuracy: " \
  env POCL_DEVICES="pthread pthread" "$CLT" eval --checkpoint "$tmp/ck_ph" --data "$tmp/sizes" \
  --logits "$tmp/sizes.npy"
check_photos "the documented resize, ONNX Runtime and eval agree; rows in (class, path) order" \
  "$tmp/sizes.npy" "$tmp/sizes" --sorted
expect_ok "eval --logits of a validation split (rows shuffled)" "^Accuracy: " \
  "$CLT" eval --checkpoint "$tmp/ck_ph" --data "$tmp/sizes" --validation-split 0.5 --seed 3 \
  --logits "$tmp/split"
check_photos "a split's list names each row's image" "$tmp/split" "$tmp/sizes"
cp -r "$tmp/sizes" "$tmp/newline"
mv "$tmp/newline/class_1/img_03.png" "$tmp/newline/class_1/img
03.png"
expect_fail "a file name with a line break cannot be listed: refused" \
  "newline: class_1/img\?03.png: a file name with a line break cannot be listed" \
  "$CLT" eval --checkpoint "$tmp/ck_ph" --data "$tmp/newline" --logits "$tmp/newline.npy"
no_file "line break" "$tmp/newline.npy"
# The docs' decoding advice (Pillow) on make_photos' JPEGs, grey JPEGs and RGBA PNGs,
# where Pillow is installed.
if "$PY" -c 'import PIL' 2>/dev/null; then
  expect_ok "eval --logits on JPEG and PNG photos" "^Accuracy: " \
    "$CLT" eval --checkpoint "$tmp/ck_ph" --data "$tmp/ph" --logits "$tmp/ph.npy"
  check_photos "Pillow's convert('RGB') and the documented resize" "$tmp/ph.npy" "$tmp/ph" \
    --decoder pil --sorted
else
  echo "note: Pillow not importable by $PY: the JPEG comparison did not run"
fi
finish
