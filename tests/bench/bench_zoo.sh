#!/usr/bin/env bash
# Training speed of the smallest full-size model of each CNN family of
# keras.applications: cltrain on one PoCL device against Keras/TensorFlow and
# PyTorch's torchvision twin (where one exists), each in its fastest setting,
# on the same cores, back to back. Per family (MobileNet, MobileNetV2,
# MobileNetV3Small, ResNet50, ResNet50V2, EfficientNetB0, EfficientNetV2B0,
# DenseNet121, VGG16, Xception, InceptionV3, InceptionResNetV2, NASNetMobile,
# ConvNeXtTiny), at --size x --size (96; every family's minimum is lower), batch
# --batch (16), 3 classes, weights None:
#   cltrain (1 PoCL device)    cltrain train --model NAME.json --devices 0 on a
#                              synthetic photo folder (build/tests/make_photos);
#                              NAME.json is written once by Keras in this script
#                              (tests/bench/zoo_keras.py write: include_top,
#                              classes=3, weights=None, model.to_json());
#   Keras/TF (fit default)     tests/bench/zoo_keras.py train: the same JSON,
#                              model.fit with compile's default jit_compile
#                              ("auto": no XLA on a CPU-only machine), Adam 1e-3;
#   Keras/TF (XLA)             the same with jit_compile=True;
#   torchvision (default) and (channels_last)  tests/bench/zoo_torch.py: the
#                              torchvision twin (mobilenet_v2, mobilenet_v3_small,
#                              resnet50, efficientnet_b0, efficientnet_v2_s (a
#                              larger network: torchvision has no V2 B0),
#                              densenet121, vgg16, inception_v3, convnext_tiny),
#                              Adam 1e-3, eps 1e-7, NCHW and torch.channels_last;
#   torchvision (torch.compile) and (torch.compile, channels_last)  with
#                              --compile only (CLT_TORCH_COMPILE=1; TorchInductor
#                              compiles each network for minutes on 2 cores).
# Round 1 runs every column; later rounds (--runs) run cltrain and, of Keras and
# of torchvision, only the setting that was fastest in round 1 (XLA and
# torch.compile compile for minutes on 2 cores); each family's rounds run back
# to back, its columns in the order Keras, cltrain, torchvision.
# Keras and PyTorch train on random arrays of the model's input shape; cltrain
# decodes its photos in epoch 1 and keeps them decoded. Each run trains --epochs
# epochs (2) of --images images (48: 3 steps) and keeps the median images/s of
# epochs 2 on: epoch 1 holds PoCL's kernel builds, TensorFlow's tracing and XLA's
# compilation, torch.compile's compilation and first allocations. TensorFlow's
# intra-op and inter-op pools and torch.set_num_threads get --threads (nproc);
# PoCL's device uses every core (nproc). The output gives, per family, the
# parameters (cltrain's and Keras' count; torchvision's twin's), each column's
# images/s (median over --runs rounds [min-max]), the fastest setting of Keras
# and of torchvision and the ratios cltrain/fastest, and a Markdown table for
# docs/zoo.md. A run that fails (cltrain refusing a layer, say) shows its last
# line instead of a figure.
#
#   tests/bench/bench_zoo.sh [--only REGEX] [--runs N] [--size N] [--batch N]
#       [--images N] [--epochs N] [--threads N] [--keras default,xla] [--compile]
#
# --keras: Keras' settings to run: default (fit's default), xla or both (the
# default); XLA compiles a large network for many minutes on 2 loaded cores.
# --only: the families whose Keras name matches the extended regular expression.
# Needs a cltrain build (./build: cltrain, tests/make_photos), TensorFlow 2.21 in
# ${CLTRAIN_TF_VENV:-~/.cache/cltrain/venv-tf} and PyTorch with torchvision in
# ${CLTRAIN_TORCH_VENV:-~/.cache/cltrain/venv-torch} (common.sh's torch_venv
# creates it when missing). It runs for minutes per family (TensorFlow's tracing
# and XLA's compilation of the larger networks take most of it), far longer on a
# loaded machine; CI never runs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
only=""
runs=1
size=96
batch=16
images=48
epochs=2
threads=$(nproc)
compile=""
keras_modes="default,xla"
args=$*
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --compile) compile=1; shift ;;
    --keras) keras_modes=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_zoo.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 2 ] || { echo "bench_zoo.sh: --epochs must be at least 2 (the first is not measured)" >&2; exit 2; }
[ "$images" -ge "$batch" ] || { echo "bench_zoo.sh: --images must be at least --batch" >&2; exit 2; }
. "$here/common.sh"
for f in "$build/cltrain" "$build/tests/make_photos"; do
  [ -x "$f" ] || { echo "bench_zoo.sh: $f not built (run .ci/setup)" >&2; exit 1; }
done
tf=${CLTRAIN_TF_VENV:-$HOME/.cache/cltrain/venv-tf}/bin/python
"$tf" -c 'import tensorflow' 2>/dev/null || { echo "bench_zoo.sh: $tf cannot import tensorflow" >&2; exit 1; }
torch=$(torch_venv) || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Keras name and torchvision twin ("-": none).
families=(MobileNet:- MobileNetV2:mobilenet_v2 MobileNetV3Small:mobilenet_v3_small ResNet50:resnet50
  ResNet50V2:- EfficientNetB0:efficientnet_b0 EfficientNetV2B0:efficientnet_v2_s DenseNet121:densenet121
  VGG16:vgg16 Xception:- InceptionV3:inception_v3 InceptionResNetV2:- NASNetMobile:- ConvNeXtTiny:convnext_tiny)
picked=()
for fam in "${families[@]}"; do
  [ -z "$only" ] || [[ ${fam%%:*} =~ $only ]] && picked+=("$fam")
done
[ ${#picked[@]} -gt 0 ] || { echo "bench_zoo.sh: --only $only matches no family" >&2; exit 2; }

cols=(cltrain)
case $keras_modes in
  default) cols+=(keras) ;;
  xla) cols+=(keras-xla) ;;
  default,xla | xla,default) cols+=(keras keras-xla) ;;
  *) echo "bench_zoo.sh: --keras must be default, xla or default,xla, not $keras_modes" >&2; exit 2 ;;
esac
cols+=(torch torch-cl)
[ -n "$compile" ] && torch_compiles "$torch" && cols+=(torch-compile torch-compile-cl)
tv=$("$torch" -c "import importlib.metadata as m; print(m.version('torch'))" | sed 's/+.*//')
kv=$("$tf" -c "import importlib.metadata as m; print(m.version('tensorflow-cpu'))" 2>/dev/null ||
  "$tf" -c "import importlib.metadata as m; print(m.version('tensorflow'))")
declare -A label=([cltrain]="cltrain (1 PoCL device)" [keras]="Keras/TF $kv (fit default)"
  [keras-xla]="Keras/TF $kv (XLA)" [torch]="torchvision, torch $tv (default)"
  [torch-cl]="torchvision, torch $tv (channels_last)" [torch-compile]="torchvision, torch $tv (torch.compile)"
  [torch-compile-cl]="torchvision, torch $tv (torch.compile, channels_last)")

"$build/tests/make_photos" "$tmp/photos" 3 $(((images + 2) / 3)) 1 >/dev/null
echo "photo folder (cltrain): synthetic, 3 classes of $(((images + 2) / 3)) JPEGs and PNGs, build/tests/make_photos"
cpu_kind
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"


later() { sed -n "2,\$p"; } # epochs 2 on
# fail KEY NAME OUT: keeps the last line of a failed run as its outcome.
fail() { tail -n1 "$3" | sed -E 's/^cltrain: error: //' | cut -c1-160 >"$tmp/$2-$1.err"; }

# setting KEY: the mode of zoo_keras.py or setting of zoo_torch.py of column KEY.
setting() {
  case $1 in
    keras) echo default ;;
    keras-xla) echo xla ;;
    torch) echo default ;;
    *) echo "${1#torch-}" ;;
  esac
}
# rates KEY NAME OUT: appends column KEY's images/s in OUT (lines "SETTING epoch E
# images_per_second R", epochs 2 on) to NAME-KEY.rate, or OUT's last line to
# NAME-KEY.err when it has none.
rates() {
  local s
  s=$(setting "$1")
  if grep -q "^$s epoch 2 " "$3"; then
    grep "^$s epoch" "$3" | later | awk '{ print $5 }' | median >>"$tmp/$2-$1.rate"
  else
    fail "$1" "$2" "$3"
  fi
}

# first_fastest NAME TOOL: the column of TOOL (keras, torch) fastest in round 1,
# or the first when none ran.
first_fastest() {
  local best="" k v bv=0
  for k in "${cols[@]}"; do
    [[ $k == "$2"* ]] || continue
    [ -n "$best" ] || best=$k
    v=$(head -n1 "$tmp/$1-$k.rate" 2>/dev/null || echo 0)
    if [ "$(awk -v a="$v" -v b="$bv" 'BEGIN { print (a > b) }')" = 1 ]; then best=$k bv=$v; fi
  done
  echo "$best"
}

# run TOOL NAME TWIN R: round R's run of TOOL (cltrain, keras: both of its
# columns in one process, torch: all of its columns in one process) on family
# NAME; appends each column's images/s to NAME-KEY.rate, or the run's last line
# to NAME-KEY.err when it fails.
run() {
  local tool=$1 name=$2 twin=$3 r=$4 out=$tmp/$2-$1-$4.txt log=$tmp/$2-$4.jsonl key list=""
  local -a keys=()
  for key in "${cols[@]}"; do
    [[ $key == "$tool"* ]] || continue
    # After round 1, only the setting that was fastest in it.
    [ "$r" -gt 1 ] && [ "$tool" != cltrain ] && [ "$key" != "$(first_fastest "$name" "$tool")" ] && continue
    keys+=("$key")
    list+="${list:+,}$(setting "$key")"
  done
  if [ ! -s "$tmp/$name.json" ]; then
    for key in "${keys[@]}"; do echo "not written by Keras" >"$tmp/$name-$key.err"; done
    return
  fi
  case $tool in
    cltrain)
      if "$build/cltrain" train --model "$tmp/$name.json" --data "$tmp/photos" --devices 0 \
        --batch-per-replica "$batch" --epochs "$epochs" --train-limit "$images" --checkpoint-every 0 \
        --log "$log" >"$out" 2>&1; then
        later <"$log" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median >>"$tmp/$name-cltrain.rate"
        grep -m1 -Eo '^Model .*: [0-9]+ parameters' "$out" | grep -Eo '[0-9]+ parameters' | cut -d' ' -f1 >"$tmp/$name.cparams"
      else
        fail cltrain "$name" "$out"
      fi
      return ;;
    keras) "$tf" "$here/zoo_keras.py" train "$tmp/$name.json" "$images" "$epochs" "$batch" "$threads" "$list" >"$out" 2>&1 || true ;;
    torch)
      "$torch" "$here/zoo_torch.py" "$twin" "$size" "$batch" "$images" "$epochs" "$threads" "$list" >"$out" 2>&1 || true
      sed -n '1s/^params //p' "$out" >"$tmp/$name.tparams" ;;
  esac
  for key in "${keys[@]}"; do rates "$key" "$name" "$out"; done
  return 0
}
# figure NAME KEY: "median [min-max]" images/s, or the failure.
figure() {
  local f=$tmp/$1-$2.rate
  if [ -s "$f" ]; then
    printf '%.2f [%.2f-%.2f]' "$(median <"$f")" "$(sort -g "$f" | head -n1)" "$(sort -g "$f" | tail -n1)"
  else
    echo "failed: $(cat "$tmp/$1-$2.err" 2>/dev/null)"
  fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# fastest NAME KEY...: the key of the highest median among those that ran.
fastest() {
  local name=$1 best="" k
  shift
  for k in "$@"; do
    [ -s "$tmp/$name-$k.rate" ] || continue
    if [ -z "$best" ] || [ "$(awk -v a="$(median <"$tmp/$name-$k.rate")" -v b="$(median <"$tmp/$name-$best.rate")" \
      'BEGIN { print (a > b) }')" = 1 ]; then
      best=$k
    fi
  done
  echo "$best"
}

echo "${size}x$size, batch $batch, $images images x $epochs epochs, $threads threads; images/s: median of epochs 2-$epochs," \
  "over $runs rounds [min-max]"
keras_cols=()
torch_cols=()
for key in "${cols[@]}"; do
  [[ $key == keras* ]] && keras_cols+=("$key")
  [[ $key == torch* ]] && torch_cols+=("$key")
done
rows=()
# summary NAME TWIN: the family's figures, fastest settings and ratios; appends
# its Markdown row to rows.
summary() {
  local name=$1 twin=$2 c k t kbest tbest kcell tcell ccell kp setting
  echo "$name: cltrain $(cat "$tmp/$name.cparams" 2>/dev/null || echo ?) parameters, Keras" \
    "$(cat "$tmp/$name.kparams" 2>/dev/null || echo ?)$([ "$twin" = - ] && echo ", no torchvision twin" ||
      echo ", torchvision $twin $(cat "$tmp/$name.tparams" 2>/dev/null || echo ?)")"
  for key in "${cols[@]}"; do
    [[ $key == torch* ]] && [ "$twin" = - ] && continue
    printf '  %-50s %s\n' "${label[$key]}" "$(figure "$name" "$key")"
  done
  c=""
  [ -s "$tmp/$name-cltrain.rate" ] && c=$(median <"$tmp/$name-cltrain.rate")
  kbest=$(fastest "$name" "${keras_cols[@]}")
  kcell="failed"
  if [ -n "$kbest" ]; then
    k=$(median <"$tmp/$name-$kbest.rate")
    kcell="$(printf '%.2f' "$k") (${kbest#keras}) | $([ -n "$c" ] && ratio "$c" "$k" || echo -)"
    kcell=${kcell/ ()/ (fit default)}
    kcell=${kcell/(-xla)/(XLA)}
    echo "  fastest Keras: ${label[$kbest]}$([ -n "$c" ] && echo ": cltrain/fastest Keras $(ratio "$c" "$k")")"
  else
    kcell="failed | -"
  fi
  tcell="no twin | -"
  if [ "$twin" != - ]; then
    tbest=$(fastest "$name" "${torch_cols[@]}")
    if [ -n "$tbest" ]; then
      t=$(median <"$tmp/$name-$tbest.rate")
      setting=${label[$tbest]#*(}
      tcell="$twin: $(printf '%.2f' "$t") (${setting%)}) | $([ -n "$c" ] && ratio "$c" "$t" || echo -)"
      echo "  fastest torchvision: ${label[$tbest]}$([ -n "$c" ] && echo ": cltrain/fastest torchvision $(ratio "$c" "$t")")"
    else
      tcell="$twin: failed | -"
    fi
  fi
  ccell=$([ -n "$c" ] && printf '%.2f' "$c" || echo "refused: $(cat "$tmp/$name-cltrain.err" 2>/dev/null)")
  kp=$(cat "$tmp/$name.kparams" 2>/dev/null || echo ?)
  rows+=("| $name | $(printf "%'d" "$kp" 2>/dev/null || echo "$kp") | $ccell | $kcell | $tcell |")
  echo "  row: ${rows[-1]}"
}
for fam in "${picked[@]}"; do
  name=${fam%%:*} twin=${fam#*:}
  if "$tf" "$here/zoo_keras.py" write "$name" "$size" "$tmp/$name.json" >"$tmp/$name.write" 2>"$tmp/$name.write.err"; then
    sed -n 's/^params //p' "$tmp/$name.write" >"$tmp/$name.kparams"
  else
    echo "bench_zoo.sh: Keras could not write $name: $(tail -n1 "$tmp/$name.write.err")" >&2
  fi
  for ((r = 1; r <= runs; r++)); do
    line=""
    run keras "$name" "$twin" "$r"
    run cltrain "$name" "$twin" "$r"
    [ "$twin" = - ] || run torch "$name" "$twin" "$r"
    for key in "${cols[@]}"; do
      [[ $key == torch* ]] && [ "$twin" = - ] && continue
      if [ "$(cat "$tmp/$name-$key.rate" 2>/dev/null | wc -l)" -ge "$r" ]; then
        line+="${line:+ | }$key $(printf '%.2f' "$(tail -n1 "$tmp/$name-$key.rate")")"
      elif [ -s "$tmp/$name-$key.err" ]; then
        line+="${line:+ | }$key failed"
      fi
    done
    echo "$name, round $r: $line images/s (load $(cut -d' ' -f1 /proc/loadavg))"
  done
  summary "$name" "$twin"
done
echo
cpu_kind
echo "avx512f: $(grep -c avx512f /proc/cpuinfo) of $(grep -c '^processor' /proc/cpuinfo) logical CPUs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "for docs/zoo.md (images/s, medians of $runs rounds; ratio: cltrain / that column):"
echo "| family (Keras) | parameters | cltrain | Keras/TF $kv (fastest setting) | cltrain/Keras | torchvision twin, torch $tv (fastest setting) | cltrain/torchvision |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo "command: tests/bench/bench_zoo.sh${args:+ $args}"
