#!/usr/bin/env bash
# cltrain on one PoCL device against the current PyTorch (2 threads) training the
# same CNN (Fashion-MNIST, tests/bench/pytorch_fmnist.py) on the same images with
# the same batch (64) and optimizer (Adam 1e-3, eps 1e-7). Each round runs, back to
# back, 3 epochs of --images images in each of these columns:
#   cltrain (1 PoCL device)    --devices 0, on the algorithms `cltrain tune`
#                              chose for this device before the rounds (its
#                              time and whole-step verdict are printed; a
#                              file in the bench's temporary folder, so an
#                              earlier cache plays no part);
#   cltrain (--tune off)       the same on the backend's defaults;
#   PyTorch X (glibc defaults) the current PyTorch from PyPI, in the venv of
#                              common.sh's torch_venv (created once, outside the
#                              repository: ${CLTRAIN_TORCH_VENV:-~/.cache/cltrain/venv-torch});
#   PyTorch X (no trim)        the same with glibc's trimming off
#                              (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
#                              MALLOC_TOP_PAD_): on these machines the first
#                              touch of fresh memory is slow, and with default
#                              trimming PyTorch re-faults its temporaries every
#                              step;
#   PyTorch X (channels_last, no trim)  the same with the model and batches in
#                              torch.channels_last (CLT_TORCH_CHANNELS_LAST=1);
#   PyTorch X (torch.compile, no trim) and (torch.compile, channels_last, no trim)
#                              the model compiled by torch.compile
#                              (CLT_TORCH_COMPILE=1; its compilation falls in
#                              epoch 1, left out);
#   PyTorch 1.13 (Debian, no trim)  /usr/bin/python3's python3-torch, only when
#                              it imports torch;
#   TensorFlow X               tests/bench/tf_fmnist.py (the seed's Keras
#                              Sequential CNN, a custom tf.function training
#                              step, 2 threads) in the venv given by --tf-venv
#                              DIR (pip install tensorflow-cpu); skipped without.
# A column's figure of a run is the median of its epochs 2-3 (epoch 1 includes
# PoCL's kernel builds or PyTorch's first allocations); the summary gives per
# column the median over the rounds [min-max], the ratio cltrain/column, the
# fastest PyTorch column (by median) and cltrain/fastest PyTorch; the launch to
# the end of the first training step (importing torch included) and peak host
# memory (RSS; PoCL's device memory is host memory, so it is included).
#
# Also measured: cltrain's start-up with a cold and a warm PoCL kernel cache
# (PoCL compiles a kernel at its first launch); two replicas on the same CPU, as
# two PoCL devices (POCL_DEVICES="pthread pthread", sharing one thread pool) and
# as two sub-devices of one (--devices 0/2, one core each), against one device
# run again in each of their rounds (skipped with --no-replicas); and the
# fraction of the CPU's FMA peak that cltrain's training step reaches. Its
# arithmetic is counted as GEMM work, 2mnk per product, per training image
# (28x28x1 input):
#   forward: conv1 2*(26*26)*64*9 = 0.779 MFLOP, conv2 2*(11*11)*80*576 = 11.151,
#            dense 2*2000*64 = 0.256, dense_1 2*64*10 = 0.001: 12.19 MFLOP;
#   backward: each weight gradient as much as its forward (12.19 MFLOP) plus the
#            input gradients of conv2, dense and dense_1 (11.41 MFLOP; conv1's
#            is not computed, its input being the image): 23.6 MFLOP;
# so 35.8 MFLOP an image (pooling, ReLU, bias, loss and Adam are left out), and
# GFLOP/s = images/s * 35.8e-3, divided by the peak that build/tests/bench_gemm
# --peak measures ("FMA peak: not measured" when it cannot).
#
#   tests/bench/bench_vs_pytorch.sh [--runs N] [--images N] [--no-replicas] [--tf-venv DIR]
#       [--isa native|avx2]
#
# --isa avx2: every column runs AVX2 code only, on an AVX-512 host (common.sh's
# isa_env): the AVX2 kind's code paths measured side by side.
#
# Defaults: 3 rounds of 6,400 images, about 4-5 minutes on 2 idle cores once the
# venv exists: a round takes about 65 s, 40 of them PyTorch with glibc defaults
# (a few hundred images/s), the two-replica rounds about 60 s in all; --tf-venv adds
# about 10 s a round. Printed: each round's images/s per column, then the
# summary, the CPU kind, the training step's share of the FMA peak and a row for
# the README's Figures table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
data=/usr/share/datasets/fashion-mnist
runs=3
images=6400
replicas=1
tf_venv=""
isa_opt=native
args=$*
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --no-replicas) replicas=0; shift ;;
    --tf-venv) tf_venv=$2; shift 2 ;;
    --isa) isa_opt=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. "$here/common.sh"
isa_env "$isa_opt"
[ -x "$build/cltrain" ] || { echo "bench_vs_pytorch.sh: $build/cltrain not built (run .ci/setup)" >&2; exit 1; }
torch=$(torch_venv) || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
notrim=(MALLOC_MMAP_THRESHOLD_=17179869184 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824)

# The columns: key and label (PyTorch columns start with "PyTorch").
version() { "$1" -c "import importlib.metadata as m; print(m.version('$2'))" 2>/dev/null | sed 's/+.*//'; }
tv=$(version "$torch" torch)
cols=(cltrain cltrain-off torch torch-notrim torch-cl torch-compile torch-compile-cl)
declare -A label=([cltrain]="cltrain (1 PoCL device)" [cltrain-off]="cltrain (--tune off)" [torch]="PyTorch $tv (glibc defaults)"
  [torch-notrim]="PyTorch $tv (no trim)" [torch-cl]="PyTorch $tv (channels_last, no trim)"
  [torch-compile]="PyTorch $tv (torch.compile, no trim)"
  [torch-compile-cl]="PyTorch $tv (torch.compile, channels_last, no trim)")
torch_compiles "$torch" || cols=(cltrain cltrain-off torch torch-notrim torch-cl)
if dv=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  cols+=(debian)
  label[debian]="PyTorch ${dv%%+*} (Debian, no trim)"
else
  echo "note: /usr/bin/python3 does not import torch (apt-get install python3-torch): no PyTorch 1.13 column"
fi
if [ -n "$tf_venv" ]; then
  if "$tf_venv/bin/python" -c 'import tensorflow' 2>/dev/null; then
    cols+=(tf)
    label[tf]="TensorFlow $(version "$tf_venv/bin/python" tensorflow-cpu || version "$tf_venv/bin/python" tensorflow)"
  else
    echo "note: $tf_venv/bin/python does not import tensorflow: no TensorFlow column"
  fi
fi

# train KEY R: round R's run of column KEY; leaves KEY-R.txt (its output) and
# appends its images/s, peak RSS (MiB) and start-up (s) to KEY.rate, .rss, .start.
train() {
  local key=$1 r=$2 out=$tmp/$1-$2.txt
  local time=(/usr/bin/time -f %M -o "$tmp/rss")
  case $key in
 cltrain | cltrain-off)
      local tune=(--tune-file "$tmp/tune.json")
      [ "$key" = cltrain ] || tune=(--tune off)
      "${time[@]}" "$build/cltrain" train --devices 0 --epochs 3 --train-limit "$images" --test-limit 64 \
        --checkpoint-every 0 "${tune[@]}" --log "$tmp/c$r.jsonl" >"$out"
      sed -n '2,3p' "$tmp/c$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/$key.rate"
      grep -Eo 'start-up [0-9.]+s' "$out" | grep -Eo '[0-9.]+' >>"$tmp/$key.start" ;;
    torch) "${time[@]}" "$torch" "$here/pytorch_fmnist.py" "$data" "$images" 3 2 >"$out" ;;
    torch-notrim) env "${notrim[@]}" "${time[@]}" "$torch" "$here/pytorch_fmnist.py" "$data" "$images" 3 2 >"$out" ;;
    torch-cl) env "${notrim[@]}" CLT_TORCH_CHANNELS_LAST=1 "${time[@]}" "$torch" "$here/pytorch_fmnist.py" \
      "$data" "$images" 3 2 >"$out" ;;
    torch-compile) env "${notrim[@]}" CLT_TORCH_COMPILE=1 "${time[@]}" "$torch" "$here/pytorch_fmnist.py" \
      "$data" "$images" 3 2 >"$out" ;;
    torch-compile-cl) env "${notrim[@]}" CLT_TORCH_COMPILE=1 CLT_TORCH_CHANNELS_LAST=1 "${time[@]}" "$torch" \
      "$here/pytorch_fmnist.py" "$data" "$images" 3 2 >"$out" ;;
    debian) env "${notrim[@]}" "${time[@]}" /usr/bin/python3 "$here/pytorch_fmnist.py" "$data" "$images" 3 2 >"$out" ;;
    tf) "${time[@]}" "$tf_venv/bin/python" "$here/tf_fmnist.py" "$data" "$images" 3 2 >"$out" 2>"$tmp/tf.err" ||
      { cat "$tmp/tf.err" >&2; return 1; } ;;
  esac
  if [ "${key%-off}" != cltrain ]; then
    grep '^epoch' "$out" | sed -n '2,3p' | awk '{ print $4 }' | median >>"$tmp/$key.rate"
    grep -Eo 'startup_seconds [0-9.]+' "$out" | cut -d' ' -f2 >>"$tmp/$key.start"
  fi
  echo $(($(cat "$tmp/rss") / 1024)) >>"$tmp/$key.rss"
}
# range FILE: "median [min-max]" of its numbers, images/s without decimals.
range() { printf '%.0f [%.0f-%.0f]' "$(median <"$1")" "$(sort -g "$1" | head -n1)" "$(sort -g "$1" | tail -n1)"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# commas X: X rounded, with thousands separators (4469.2 -> 4,469).
commas() { printf '%.0f' "$1" | sed -E ':a; s/^([0-9]+)([0-9]{3})/\1,\2/; ta'; }

# The algorithms of the cltrain column, tuned ahead on this device.
/usr/bin/time -f %e -o "$tmp/tune.s" "$build/cltrain" tune --model fmnist-cnn --batch 64 --devices 0 \
  --tune-file "$tmp/tune.json" >"$tmp/tune.txt"
echo "cltrain tune (empty tuning file): $(cat "$tmp/tune.s") s;$(grep -m1 '^  step:' "$tmp/tune.txt" | sed 's/^  step: / whole step /')"

# Start-up, cold (an empty PoCL cache) then warm.
for kind in cold warm; do
  POCL_CACHE_DIR=$tmp/pocl-cache "$build/cltrain" train --devices 0 --epochs 1 --train-limit 64 \
    --test-limit 64 --checkpoint-every 0 --tune-file "$tmp/tune.json" >"$tmp/start-$kind.txt"
done
cold=$(grep -Eo 'start-up [0-9.]+s' "$tmp/start-cold.txt" | grep -Eo '[0-9.]+')
warm=$(grep -Eo 'start-up [0-9.]+s' "$tmp/start-warm.txt" | grep -Eo '[0-9.]+')
echo "cltrain start-up (launch to the end of the first step): cold kernel cache $cold s, warm $warm s"

echo "images/s of each run (median of epochs 2-3 of 3 epochs of $images images, batch 64, 2 threads):"
for ((r = 1; r <= runs; r++)); do
  line=""
  for key in "${cols[@]}"; do
    train "$key" "$r"
    line+="${line:+ | }${label[$key]} $(printf '%.0f' "$(tail -n1 "$tmp/$key.rate")")"
  done
  echo "round $r: $line"
done

# Two replicas on the same cores against one device: each round runs one device,
# then the two-replica configurations, and the ratio is the median of the
# rounds' ratios (one device measured minutes apart, in the rounds above, moved
# with the machine's drift by more than the effect measured).
c=$(median <"$tmp/cltrain.rate")
if [ "$replicas" -eq 1 ]; then
  # one RUN POCL_DEVICES SELECTION: epochs 2-3's median images/s.
  one() {
    POCL_DEVICES=$2 "$build/cltrain" train --devices "$3" --epochs 3 --train-limit "$images" \
      --test-limit 64 --checkpoint-every 0 --log "$tmp/two$1.jsonl" >/dev/null
    sed -n '2,3p' "$tmp/two$1.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median
  }
  rm -f "$tmp/alone" "$tmp/pocl2" "$tmp/sub2" "$tmp/pocl2.ratio" "$tmp/sub2.ratio"
  for ((r = 1; r <= runs; r++)); do
    a=$(one "$r" pthread 0)
    p=$(one "$r" "pthread pthread" 0,1)
    s=$(one "$r" pthread 0/2)
    echo "$a" >>"$tmp/alone"
    echo "$p" >>"$tmp/pocl2"
    echo "$s" >>"$tmp/sub2"
    ratio "$p" "$a" >>"$tmp/pocl2.ratio"
    echo >>"$tmp/pocl2.ratio"
    ratio "$s" "$a" >>"$tmp/sub2.ratio"
    echo >>"$tmp/sub2.ratio"
    printf 'replicas round %d: one device %.0f | two PoCL devices %.0f (%s) | --devices 0/2 %.0f (%s) images/s\n' \
      "$r" "$a" "$p" "$(ratio "$p" "$a")" "$s" "$(ratio "$s" "$a")"
  done
  for cfg in "pocl2|two PoCL devices" "sub2|two sub-devices of one (--devices 0/2)"; do
    IFS='|' read -r key what <<<"$cfg"
    printf '2 replicas, %s, 64 per replica: %.0f images/s, %.2f [%.2f-%.2f] of one device (%.0f), medians of %d rounds\n' \
      "$what" "$(median <"$tmp/$key")" "$(median <"$tmp/$key.ratio")" "$(sort -g "$tmp/$key.ratio" | head -n1)" \
      "$(sort -g "$tmp/$key.ratio" | tail -n1)" "$(median <"$tmp/alone")" "$runs"
  done
fi

fastest=""
echo
echo "summary over $runs rounds, median [min-max]:"
printf '  %-42s %22s %14s %12s %13s\n' column "images/s" "cltrain/this" "start-up s" "peak RSS MiB"
for key in "${cols[@]}"; do
  m=$(median <"$tmp/$key.rate")
  rel="-"
  [ "$key" = cltrain ] || rel=$(ratio "$c" "$m")
  printf '  %-42s %22s %14s %12.1f %13.0f\n' "${label[$key]}" "$(range "$tmp/$key.rate")" "$rel" \
    "$(median <"$tmp/$key.start")" "$(median <"$tmp/$key.rss")"
  case $key in
    torch*|debian)
      if [ -z "$fastest" ] || [ "$(awk -v a="$m" -v b="$(median <"$tmp/$fastest.rate")" 'BEGIN { print (a > b) }')" = 1 ]; then
        fastest=$key
      fi ;;
  esac
done
f=$(median <"$tmp/$fastest.rate")
printf 'fastest PyTorch: %s, %.0f images/s; cltrain %.0f images/s: cltrain/fastest PyTorch %s\n' \
  "${label[$fastest]}" "$f" "$c" "$(ratio "$c" "$f")"
echo "start-up: launch to the end of the first training step (cltrain with a warm PoCL kernel cache; importing" \
  "torch or tensorflow included); peak RSS: /usr/bin/time's, cltrain's including its device buffers" \
  "($(grep -Eo 'device memory per replica: [0-9]+ MiB' "$tmp/cltrain-1.txt" | grep -Eo '[0-9]+ MiB'):" \
  "PoCL's device memory is host memory)"
echo "PyTorch $(grep -m1 '^torch' "$tmp/torch-1.txt" | cut -d' ' -f2) from $torch$([ -f "$tmp/debian-1.txt" ] &&
  echo ", PyTorch $(grep -m1 '^torch' "$tmp/debian-1.txt" | cut -d' ' -f2) from /usr/bin/python3")"
cpu_kind
gflops=$(awk -v c="$c" 'BEGIN { printf "%.1f", c * 35.8e-3 }')
peak=$(fma_peak "$build") || peak=""
if [ -n "$peak" ]; then
  share=$(awk -v g="$gflops" -v p="$peak" 'BEGIN { printf "%.1f", 100 * g / p }')
  echo "cltrain's training step: $gflops GFLOP/s ($(commas "$c") images/s x 35.8 MFLOP), $share% of the FMA peak" \
    "($peak GFLOP/s, bench_gemm --peak)"
else
  echo "cltrain's training step: $gflops GFLOP/s ($(commas "$c") images/s x 35.8 MFLOP); FMA peak: not measured" \
    "($build/tests/bench_gemm --peak missing or failed)"
fi

# One row for the README's Figures table.
figure=""
for key in "${cols[@]}"; do
  figure+="${figure:+; }${label[$key]} $(commas "$(median <"$tmp/$key.rate")") images/s"
  figure+=" [$(commas "$(sort -g "$tmp/$key.rate" | head -n1)")–$(commas "$(sort -g "$tmp/$key.rate" | tail -n1)")]"
done
figure+=": **cltrain/fastest PyTorch $(ratio "$c" "$f")**"
for key in "${cols[@]}"; do
  [ "$key" = cltrain ] || [ "$key" = "$fastest" ] || figure+=", cltrain/${label[$key]} $(ratio "$c" "$(median <"$tmp/$key.rate")")"
done
figure+="; training step at $gflops GFLOP/s${peak:+, $share% of the FMA peak ($peak GFLOP/s)}"
echo
echo "for the README's Figures table:"
echo "| training throughput, one PoCL device, against PyTorch (2 threads), back to back, $(commas "$images") images" \
  "× 3 epochs, $cpu host | $figure (medians of $runs rounds [min–max]) |" \
  "\`tests/bench/bench_vs_pytorch.sh${args:+ $args}\` (the current PyTorch from PyPI in a venv, created once) |"
