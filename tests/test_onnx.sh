#!/usr/bin/env bash
# ONNX export end to end: trains the reference CNN briefly, exports it, and has
# onnx.checker and ONNX Runtime (tests/onnx/check_onnx.py) run the exported model
# on the test images cltrain evaluated (`cltrain eval --logits`, from two replicas
# so the logits of both slices are gathered): top-1 agreement >= 99.9% and logits
# within 1e-4 of the largest. The same for a Keras model file (tests/models/seq_cnn:
# its own Rescaling, raw preprocessing). Bad inputs fail in one line and leave no file.
# Without onnxruntime and onnx for $PYTHON (default /usr/bin/python3) the ONNX
# Runtime part fails under CI=true (.ci/setup installs them) and is skipped (exit
# 77) otherwise.
#   test_onnx.sh CLTRAIN
set -u
CLT=$1
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

# --- bad inputs: one line, non-zero exit, no file ------------------------------------
expect_fail "export without --onnx" "--checkpoint DIR\|FILE and --onnx FILE are required" \
  "$CLT" export --checkpoint "$tmp/ck"
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
finish
