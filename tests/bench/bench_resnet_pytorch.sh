#!/usr/bin/env bash
# ResNet50 training, cltrain on one PoCL device against the current PyTorch
# (torchvision's resnet50, 2 threads), on the same photo folder, at the same image
# size and batch, back to back. Each round runs, per --sizes image size:
#   cltrain (1 PoCL device)    cltrain train --model resnet50 --devices 0
#                              (Keras' ResNet50 and its default optimizer,
#                              Adam 1e-3, eps 1e-7) on the algorithms `cltrain
#                              tune` chose for this device and size before the
#                              rounds (its time and whole-step verdict are
#                              printed; files in the bench's temporary folder,
#                              so an earlier cache plays no part);
#   cltrain (--tune off)       the same on the backend's defaults;
#   PyTorch X (glibc defaults) tests/bench/pytorch_resnet.py: torchvision's
#                              resnet50(weights=None, num_classes=the folder's
#                              classes), Adam 1e-3, eps 1e-7, in the venv of
#                              common.sh's torch_venv (the current PyTorch from
#                              PyPI, created once outside the repository:
#                              ${CLTRAIN_TORCH_VENV:-~/.cache/cltrain/venv-torch});
#   PyTorch X (no trim)        the same with glibc's trimming off
#                              (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
#                              MALLOC_TOP_PAD_, as bench_vs_pytorch.sh);
#   PyTorch X (channels_last, no trim)  the same with the model and images in
#                              torch.channels_last (CLT_TORCH_CHANNELS_LAST=1);
#   PyTorch X (torch.compile, no trim) and (torch.compile, channels_last, no trim)
#                              the model compiled by torch.compile
#                              (CLT_TORCH_COMPILE=1; its compilation falls in
#                              epoch 1, left out).
# Each run trains --epochs epochs (3) of the same images and keeps the median of
# epochs 2 on: epoch 1 holds cltrain's PoCL kernel builds, decoding into its
# image cache and first-touch page faults, and PyTorch's first allocations.
# Decoding is outside both clocks after epoch 1: cltrain keeps its decoded images
# (the log's wait for images is printed, 0 when none), and pytorch_resnet.py
# decodes its images once (Pillow, bilinear resize, Keras' caffe preprocessing)
# before its clock starts. Per configuration the output gives each column's
# images/s (median over --runs rounds [min-max]) and peak RSS (/usr/bin/time;
# PoCL's device memory is host memory, so cltrain's includes it), the fastest
# PyTorch column and the ratio cltrain/fastest PyTorch, then one row per size for
# the README's Figures table.
#
#   tests/bench/bench_resnet_pytorch.sh [--data DIR] [--sizes "96 224"] [--images N]
#       [--batch N] [--epochs N] [--runs N] [--torch-v1] [--isa native|avx2]
#
# --isa avx2: every column runs AVX2 code only, on an AVX-512 host (common.sh's
# isa_env): the AVX2 kind's code paths measured side by side.
#
# --data: a photo folder (one subfolder per class); by default a synthetic one
# of 3 classes written with build/tests/make_photos. --images: images per epoch
# (the first N of the folder for cltrain's --train-limit, the first N of a seeded
# shuffle for PyTorch); by default 48 at sizes under 160 and 16 from 160 up, so
# that the defaults (sizes 96 and 224, batch 16, 3 epochs, 1 round) take about 2
# minutes on 2 cores, under 1 of it at 96 (ResNet50 trains at 10-25 images/s at
# 96x96 here, a few at 224x224); each further round (--runs) as much again.
# --torch-v1: give torchvision's network Keras' strides (ResNet v1, stride on
# each stage's first 1x1 convolution): the same arithmetic as cltrain's network;
# by default torchvision's v1.5 does 6% more (4.09 against 3.86 GMAC forward at
# 224x224, 0.75 against 0.71 at 96x96). Keras' (and cltrain's) convolutions have
# biases, torchvision's not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
data=""
sizes="96 224"
images=""
batch=16
epochs=3
runs=1
v1=""
isa_opt=native
args=$*
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --torch-v1) v1=v1; shift ;;
    --isa) isa_opt=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_resnet_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 2 ] || { echo "bench_resnet_pytorch.sh: --epochs must be at least 2 (the first is not measured)" >&2; exit 2; }
. "$here/common.sh"
isa_env "$isa_opt"
for f in "$build/cltrain" "$build/tests/make_photos"; do
  [ -x "$f" ] || { echo "bench_resnet_pytorch.sh: $f not built (run .ci/setup)" >&2; exit 1; }
done
torch=$(torch_venv) || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
notrim=(MALLOC_MMAP_THRESHOLD_=17179869184 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824)

# count SIZE: images per epoch at SIZE.
count() {
  if [ -n "$images" ]; then echo "$images"; elif [ "$1" -lt 160 ]; then echo 48; else echo 16; fi
}
if [ -z "$data" ]; then
  most=0
  for size in $sizes; do [ "$(count "$size")" -gt "$most" ] && most=$(count "$size"); done
  data=$tmp/photos
  "$build/tests/make_photos" "$data" 3 $(((most + 2) / 3)) 1 >/dev/null
  echo "photo folder: synthetic, 3 classes of $(((most + 2) / 3)) JPEGs and PNGs (40-150 pixels a side), build/tests/make_photos"
else
  echo "photo folder: $data"
fi

tv=$("$torch" -c "import importlib.metadata as m; print(m.version('torch'))" | sed 's/+.*//')
cols=(cltrain cltrain-off torch torch-notrim torch-cl torch-compile torch-compile-cl)
declare -A label=([cltrain]="cltrain (1 PoCL device)" [cltrain-off]="cltrain (--tune off)" [torch]="PyTorch $tv (glibc defaults)"
  [torch-notrim]="PyTorch $tv (no trim)" [torch-cl]="PyTorch $tv (channels_last, no trim)"
  [torch-compile]="PyTorch $tv (torch.compile, no trim)"
  [torch-compile-cl]="PyTorch $tv (torch.compile, channels_last, no trim)")
torch_compiles "$torch" || cols=(cltrain cltrain-off torch torch-notrim torch-cl)
later() { sed -n "2,\$p"; } # epochs 2 on

# train KEY SIZE R: round R's run of column KEY at SIZE; appends its images/s and
# peak RSS (MiB) to KEY-SIZE.rate and .rss (cltrain: its wait for images to .wait).
train() {
  local key=$1 size=$2 r=$3 n out=$tmp/$1-$2-$3.txt
  local time=(/usr/bin/time -f %M -o "$tmp/rss")
  n=$(count "$size")
  case $key in
 cltrain | cltrain-off)
      local tune=(--tune-file "$tmp/tune-$size.json")
      [ "$key" = cltrain ] || tune=(--tune off)
      "${time[@]}" "$build/cltrain" train --data "$data" --model resnet50 --image-size "$size" \
        --batch-per-replica "$batch" --devices 0 --epochs "$epochs" --train-limit "$n" --checkpoint-every 0 \
        "${tune[@]}" --log "$tmp/c-$size-$r.jsonl" >"$out"
      later <"$tmp/c-$size-$r.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/$key-$size.rate"
      later <"$tmp/c-$size-$r.jsonl" | grep -Eo '"data_wait_seconds": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/$key-$size.wait" ;;
    torch) "${time[@]}" "$torch" "$here/pytorch_resnet.py" "$data" "$size" "$batch" "$n" "$epochs" 2 $v1 >"$out" ;;
    torch-notrim)
      env "${notrim[@]}" "${time[@]}" "$torch" "$here/pytorch_resnet.py" "$data" "$size" "$batch" "$n" "$epochs" 2 $v1 >"$out" ;;
    torch-cl)
      env "${notrim[@]}" CLT_TORCH_CHANNELS_LAST=1 "${time[@]}" "$torch" "$here/pytorch_resnet.py" "$data" "$size" \
        "$batch" "$n" "$epochs" 2 $v1 >"$out" ;;
    torch-compile)
      env "${notrim[@]}" CLT_TORCH_COMPILE=1 "${time[@]}" "$torch" "$here/pytorch_resnet.py" "$data" "$size" \
        "$batch" "$n" "$epochs" 2 $v1 >"$out" ;;
    torch-compile-cl)
      env "${notrim[@]}" CLT_TORCH_COMPILE=1 CLT_TORCH_CHANNELS_LAST=1 "${time[@]}" "$torch" "$here/pytorch_resnet.py" \
        "$data" "$size" "$batch" "$n" "$epochs" 2 $v1 >"$out" ;;
  esac
  [ "${key%-off}" = cltrain ] || grep '^epoch' "$out" | later | awk '{ print $4 }' | median >>"$tmp/$key-$size.rate"
  echo $(($(cat "$tmp/rss") / 1024)) >>"$tmp/$key-$size.rss"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# range FILE: "median [min-max]" of its numbers, one decimal.
range() { printf '%.1f [%.1f-%.1f]' "$(median <"$1")" "$(sort -g "$1" | head -n1)" "$(sort -g "$1" | tail -n1)"; }

# The algorithms of the cltrain column, tuned ahead per size on this device.
for size in $sizes; do
  /usr/bin/time -f %e -o "$tmp/tune.s" "$build/cltrain" tune --model resnet50 --image-size "$size" \
    --batch "$batch" --devices 0 --tune-file "$tmp/tune-$size.json" >"$tmp/tune-$size.txt"
  echo "cltrain tune at ${size}x$size (empty tuning file): $(cat "$tmp/tune.s") s;$(grep -m1 '^  step:' \
    "$tmp/tune-$size.txt" | sed 's/^  step: / whole step /')"
done

for ((r = 1; r <= runs; r++)); do
  for size in $sizes; do
    line=""
    for key in "${cols[@]}"; do
      train "$key" "$size" "$r"
      line+="${line:+ | }${label[$key]} $(printf '%.1f' "$(tail -n1 "$tmp/$key-$size.rate")")"
    done
    echo "round $r, ${size}x$size, $(count "$size") images/epoch: $line images/s"
  done
done

echo
cpu_kind
rows=()
for size in $sizes; do
  n=$(count "$size")
  first=$(grep -m1 '^decoded' "$tmp/torch-$size-1.txt" | awk '{ print $2 }')
  echo "resnet50 ${size}x$size, batch $batch, $n images x $epochs epochs (PyTorch decoded $first), images/s:" \
    "median of epochs 2-$epochs, over $runs rounds [min-max]:"
  c=$(median <"$tmp/cltrain-$size.rate")
  fastest=""
  figure=""
  for key in "${cols[@]}"; do
    m=$(median <"$tmp/$key-$size.rate")
    extra=""
    if [ "$key" = cltrain ]; then
      extra="waited $(printf "%.2f" "$(median <"$tmp/cltrain-$size.wait")") s/epoch for images"
    elif [ "$key" = cltrain-off ]; then
      extra="cltrain/this $(ratio "$c" "$m") (the tuner's gain)"
    else
      extra="cltrain/this $(ratio "$c" "$m")"
      if [ -z "$fastest" ] || [ "$(awk -v a="$m" -v b="$(median <"$tmp/$fastest-$size.rate")" 'BEGIN { print (a > b) }')" = 1 ]; then
        fastest=$key
      fi
    fi
    printf '  %-42s %24s images/s   peak RSS %6.0f MiB   %s\n' "${label[$key]}" "$(range "$tmp/$key-$size.rate")" \
      "$(median <"$tmp/$key-$size.rss")" "$extra"
    figure+="${figure:+; }${label[$key]} $(printf '%.1f' "$m") images/s, $(printf '%.0f' "$(median <"$tmp/$key-$size.rss")") MiB"
  done
  f=$(median <"$tmp/$fastest-$size.rate")
  echo "  fastest PyTorch: ${label[$fastest]}: cltrain/fastest PyTorch $(ratio "$c" "$f")"
  rows+=("| ResNet50 training at ${size}×$size, batch $batch, $n images × $epochs epochs, one PoCL device against PyTorch (2 threads$([ -n "$v1" ] && echo ", v1 strides")), back to back, $cpu host | $figure (peak RSS; medians of $runs rounds): **cltrain/fastest PyTorch $(ratio "$c" "$f")** | \`tests/bench/bench_resnet_pytorch.sh${args:+ $args}\` |")
done
echo "PyTorch: $(grep -m1 '^torch' "$tmp/torch-${sizes%% *}-1.txt"), $(grep -m1 '^network' "$tmp/torch-${sizes%% *}-1.txt" | cut -d' ' -f2-)"
echo "cltrain: $(grep -m1 '^Model' "$tmp/cltrain-${sizes%% *}-1.txt" | cut -d';' -f1), PoCL device" \
  "$(grep -Eo '"device": "[^"]*"' "$tmp/c-${sizes%% *}-1.jsonl" | head -n1 | cut -d'"' -f4)"
echo
echo "for the README's Figures table:"
printf '%s\n' "${rows[@]}"
