#!/usr/bin/env bash
# cltrain against Keras (TensorFlow CPU, the tool users come from) training the
# same Keras model files, with the same input size, batch (32), optimizer (Adam
# 1e-3) and number of training images, on the same CPU cores:
#   - tests/models/examples/mobilenet_photos.json (MobileNetV2-like, 64x64x3,
#     5 classes) on a synthetic photo folder made by make_photos (5 classes x
#     --per-class images); cltrain decodes and resizes the photos, Keras gets
#     random arrays of the same shape;
#   - tests/models/examples/fmnist_cnn.json (the reference CNN, 28x28x1) on the
#     first --cnn-images Fashion-MNIST training images for cltrain, random
#     arrays of the same shape for Keras.
# Training throughput only: images/s of each epoch after the first (the first
# includes PoCL's kernel builds and TensorFlow's graph tracing), median per run,
# then the median over --rounds rounds that alternate cltrain and Keras; the
# table gives both and the ratio cltrain/Keras, with the CPU's vector flags and
# the PoCL device. cltrain runs on one device (its default selection) and
# reports images/s per epoch in its --log JSONL; Keras runs
# tests/bench/keras_models.py (model_from_json, compile, fit with verbose 0, a
# callback timing each epoch) with TensorFlow's intra-op and inter-op thread
# pools set to --threads (default: all cores, nproc). Also printed: each run's
# epochs and the load average after each round (this benchmark adds about 2),
# and the median wall time of a whole run (launch to exit: Python and
# TensorFlow's import and graph tracing, cltrain's set-up and PoCL's kernel
# builds, from its cache when warm).
#
#   tests/bench/keras_models.sh [--build DIR] [--python PY] [--rounds N]
#       [--mobilenet-epochs E] [--per-class N] [--cnn-epochs E] [--cnn-images N]
#       [--threads N]
#
# Needs: a cltrain build (DIR/cltrain and DIR/tests/make_photos; default
# ./build at the repository root), Fashion-MNIST in /usr/share/datasets/fashion-mnist,
# and a Python with tensorflow-cpu and Keras 3 (default /tmp/tfvenv/bin/python,
# e.g. python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu).
# With the defaults it takes about 7.5 minutes on 2 idle cores. Run it on an
# otherwise idle machine (other work slows cltrain's PoCL kernels more than
# TensorFlow): it prints the load average before, during and after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
python=/tmp/tfvenv/bin/python
data=/usr/share/datasets/fashion-mnist
rounds=5
mn_epochs=3
per_class=128
cnn_epochs=2
cnn_images=8192
threads=$(nproc)
batch=32
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --python) python=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --mobilenet-epochs) mn_epochs=$2; shift 2 ;;
    --per-class) per_class=$2; shift 2 ;;
    --cnn-epochs) cnn_epochs=$2; shift 2 ;;
    --cnn-images) cnn_images=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "keras_models.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for f in "$build/cltrain" "$build/tests/make_photos"; do
  [ -x "$f" ] || { echo "keras_models.sh: $f not found (build cltrain and make_photos, or pass --build DIR)" >&2; exit 1; }
done
if ! "$python" -c 'import keras, tensorflow' 2>/dev/null; then
  echo "keras_models.sh: $python cannot import keras and tensorflow (pass --python PY)" >&2
  exit 1
fi
if [ "$mn_epochs" -lt 2 ] || [ "$cnn_epochs" -lt 2 ]; then
  echo "keras_models.sh: epochs must be at least 2 (the first is not measured)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"

models=$root/tests/models/examples
mn_images=$((5 * per_class))
"$build/tests/make_photos" "$tmp/photos" 5 "$per_class" 7 >/dev/null

# Median images/s of epochs 2..E: of cltrain's JSONL log, of keras_models.py's output.
c_epochs() { sed -n "2,\$p" "$1" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2; }
k_epochs() { grep '^epoch' "$1" | sed -n "2,\$p" | awk '{ print $6 }'; }

# name|model file|images|epochs|cltrain's data options
cases=("mobilenet_photos|$models/mobilenet_photos.json|$mn_images|$mn_epochs|--data $tmp/photos --image-size 64"
  "fmnist_cnn|$models/fmnist_cnn.json|$cnn_images|$cnn_epochs|--data $data --train-limit $cnn_images --test-limit 64")

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name file images epochs opts <<<"$c"
    # Alternate which side goes first from round to round.
    order="c k"
    [ $((r % 2)) -eq 0 ] && order="k c"
    for side in $order; do
      t0=$(date +%s.%N)
      if [ "$side" = c ]; then
        # shellcheck disable=SC2086 # $opts is a list of options
        "$build/cltrain" train --model "$file" $opts --epochs "$epochs" --batch-per-replica "$batch" \
          --checkpoint-every 0 --log "$tmp/c-$name-$r.jsonl" >"$tmp/c-$name-$r.txt" 2>&1 ||
          { cat "$tmp/c-$name-$r.txt" >&2; exit 1; }
        c_epochs "$tmp/c-$name-$r.jsonl" >"$tmp/ce"
        median <"$tmp/ce" >>"$tmp/c-$name"
      else
        "$python" "$here/keras_models.py" "$file" "$images" "$epochs" "$batch" "$threads" \
          >"$tmp/k-$name-$r.txt" 2>"$tmp/k-$name-$r.err" || { cat "$tmp/k-$name-$r.err" >&2; exit 1; }
        k_epochs "$tmp/k-$name-$r.txt" >"$tmp/ke"
        median <"$tmp/ke" >>"$tmp/k-$name"
      fi
      echo "$(date +%s.%N) - $t0" | bc -l >>"$tmp/$side-wall-$name"
    done
    # The epochs measured, and the load average (this benchmark itself adds about 2).
    printf 'round %d %-17s cltrain %7.1f images/s (%s), Keras %7.1f images/s (%s); load %s\n' "$r" "$name" \
      "$(tail -n1 "$tmp/c-$name")" "$(paste -sd' ' "$tmp/ce")" "$(tail -n1 "$tmp/k-$name")" \
      "$(paste -sd' ' "$tmp/ke")" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { case " $flags " in *" $1 "*) echo yes ;; *) echo no ;; esac; }
device=$(grep -Eo '"device": "[^"]*"' "$tmp/c-fmnist_cnn-1.jsonl" | head -n1 | cut -d'"' -f4)
cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
keras=$(grep -m1 '^keras' "$tmp/k-fmnist_cnn-1.txt" | awk '{ print "Keras " $2 ", TensorFlow " $4 }')
echo
echo "CPU: $cpu, $(nproc) cores; avx2 $(has avx2), avx512f $(has avx512f)"
echo "cltrain: PoCL device $device (one device), batch $batch"
echo "Keras: $keras, $threads intra-op / $threads inter-op threads, batch $batch"
echo "images/s: median over $rounds rounds of the median of epochs 2.. of a run"
printf '%-18s %8s %7s %18s %16s %15s\n' model images epochs "cltrain images/s" "Keras images/s" "cltrain/Keras"
for c in "${cases[@]}"; do
  IFS='|' read -r name file images epochs opts <<<"$c"
  cm=$(median <"$tmp/c-$name")
  km=$(median <"$tmp/k-$name")
  printf '%-18s %8d %7d %18.1f %16.1f %15.2f\n' "$name" "$images" "$epochs" "$cm" "$km" \
    "$(echo "$cm / $km" | bc -l)"
done
echo "whole run, launch to exit (start-up, kernel builds or graph tracing, all epochs), median:"
for c in "${cases[@]}"; do
  IFS='|' read -r name file images epochs opts <<<"$c"
  printf '  %-18s cltrain %6.1f s, Keras %6.1f s\n' "$name" "$(median <"$tmp/c-wall-$name")" \
    "$(median <"$tmp/k-wall-$name")"
done
