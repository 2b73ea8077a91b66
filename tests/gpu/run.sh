#!/usr/bin/env bash
# A ready-to-run check of cltrain on a machine with an NVIDIA GPU (NVIDIA's OpenCL
# driver), in under 8 minutes, with nothing to install: it cannot reach a network.
# On a machine without a GPU (PoCL's CPU device only) it runs its CPU part.
#
#   bash tests/gpu/run.sh          (from anywhere; it works in the repository root)
#
# 1. environment and prerequisites (exit 2, naming the first one missing)
# 2. build into build-gpu-check/ (Release)
# 3. `cltrain devices`: the GPU indices
# 4. test_kernels, test_layers2, test_layer_kinds, test_gemm_batched (CLBlast's GEMM
#    and each tile of cltrain's own) on every GPU
#    (no GPU: on device 0, as is and with CLTRAIN_KERNELS=gpu)
# 5. `cltrain tune` of the reference CNN on the first GPU (each layer's choice, and how
#    many GEMM shapes took cltrain's tiles over CLBlast), then
#    one epoch of Fashion-MNIST: the first GPU alone with those choices, then all devices
#    (no GPU: device 0 on 2048 images, as is and with CLTRAIN_KERNELS=gpu)
# 6. PyTorch on the same GPU, where torch with CUDA imports: images/s and the ratio,
#    with TensorFloat-32 on (PyTorch's default for convolutions) and off
# 7. a summary table; exit 0 only if every check that ran passed (1 otherwise)
#
# Environment: DATA (Fashion-MNIST folder, default /usr/share/datasets/fashion-mnist),
# TORCH_PYTHON (a python with torch+CUDA), TORCH_DEVICE (cuda; cpu to try the
# comparison without a GPU), GPU_CHECK_AS_GPU (indices such as 0: take these devices
# for GPUs, to try the GPU branch of this script on a CPU), BUDGET_S (seconds for
# the whole run, default 450: every step's timeout is cut to what is left), OUT (if
# set, the logs are copied to $OUT/gpu-check-logs at the end). See tests/gpu/README.md.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
BUILD=build-gpu-check
BIN=$BUILD/cltrain
LOGS=$BUILD/gpu-check-logs
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
BUDGET_S=${BUDGET_S:-450}
NPROC=$(nproc 2>/dev/null || echo 2)
DEADLINE=$((SECONDS + BUDGET_S))
TESTS="test_kernels test_layers2 test_layer_kinds test_gemm_batched"

# ---------------------------------------------------------------- helpers

ROW_NAME=()
ROW_STATUS=()
ROW_DETAIL=()
# record NAME PASS|FAIL|SKIP DETAIL: one row of the summary table.
record() {
  ROW_NAME+=("$1")
  ROW_STATUS+=("$2")
  ROW_DETAIL+=("$3")
  printf '>> %-4s %s: %s\n' "$2" "$1" "$3"
}

section() {
  printf '\n==================== %s ====================\n' "$*"
}

# budget_timeout DEFAULT: DEFAULT seconds, or less when the budget is nearly spent;
# fails (prints nothing) when under 20 s are left.
budget_timeout() {
  local left=$((DEADLINE - SECONDS - 5))
  [ "$left" -ge 20 ] || return 1
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# missing WHAT: the one line naming a missing prerequisite, then exit 2.
missing() {
  echo "MISSING PREREQUISITE: $* (this check cannot install anything; install it and rerun)"
  exit 2
}

# slug TEXT: TEXT as a file name (letters, digits, single dashes).
slug() { tr -cs 'A-Za-z0-9_\n' '-' <<<"$1" | sed 's/-$//'; }

# now_s: seconds since the epoch with a decimal, for durations.
now_s() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# ------------------------------------------------ 1. environment, prerequisites

CC_BIN=""
INC_DIRS=()
LIB_DIRS=()

show_environment() {
  section "1. Environment"
  echo "repository:  $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  echo "host:        $(uname -srm), $NPROC cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "cpu:         $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "data:        $DATA"
  echo "budget:      $BUDGET_S s"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "--- nvidia-smi -L"
    timeout 30 nvidia-smi -L 2>&1
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  else
    echo "--- nvidia-smi: not present"
  fi
  echo "--- OpenCL ICDs (/etc/OpenCL/vendors):"
  ls /etc/OpenCL/vendors 2>/dev/null | sed 's/^/  /' || echo "  (none)"
  if command -v clinfo >/dev/null 2>&1; then
    echo "--- clinfo -l"
    timeout 60 clinfo -l 2>&1
  else
    echo "--- clinfo: not present"
  fi
  echo "--- tools"
  for t in gcc cc clang cmake; do
    command -v "$t" >/dev/null 2>&1 && echo "$t: $("$t" --version 2>&1 | head -1)"
  done
}

# Compiles a test program: try_compile "FLAGS" 'SOURCE' (with the candidate -I/-L dirs).
try_compile() {
  local flags=$1 src=$2 incs=() libs=() d
  for d in ${INC_DIRS[@]+"${INC_DIRS[@]}"}; do incs+=("-I$d"); done
  for d in ${LIB_DIRS[@]+"${LIB_DIRS[@]}"}; do libs+=("-L$d"); done
  # shellcheck disable=SC2086 # flags are words
  printf '%s\n' "$src" | "$CC_BIN" -x c - -o /dev/null -DCL_TARGET_OPENCL_VERSION=120 \
    ${incs[@]+"${incs[@]}"} ${libs[@]+"${libs[@]}"} $flags >/dev/null 2>&1
}

check_prerequisites() {
  section "1b. Prerequisites"
  local d v
  command -v timeout >/dev/null 2>&1 || missing "timeout (coreutils)"
  command -v cmake >/dev/null 2>&1 || missing "cmake (3.18 or newer)"
  v=$(cmake --version | head -1 | grep -Eo '[0-9]+\.[0-9]+' | head -1)
  awk -v v="$v" 'BEGIN { split(v, p, "."); exit !(p[1] > 3 || (p[1] == 3 && p[2] >= 18)) }' ||
    missing "cmake 3.18 or newer (found $v)"
  for c in "${CC:-}" cc gcc clang; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then CC_BIN=$c; break; fi
  done
  [ -n "$CC_BIN" ] || missing "a C compiler (cc, gcc or clang)"
  command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing "make"
  # Where CMake's FindOpenCL also looks (NVIDIA's CUDA toolkit ships CL/cl.h).
  for d in ${CUDA_PATH:-} /usr/local/cuda /opt/cuda; do
    [ -d "$d/include" ] && INC_DIRS+=("$d/include")
    [ -d "$d/lib64" ] && LIB_DIRS+=("$d/lib64")
  done
  try_compile "-c" 'int main(void) { return 0; }' || missing "a working C compiler ($CC_BIN)"
  try_compile "-c" '#include <CL/cl.h>
int main(void) { return 0; }' || missing "OpenCL headers: CL/cl.h (opencl-headers)"
  try_compile "-lOpenCL" '#include <CL/cl.h>
int main(void) { cl_uint n; return (int)clGetPlatformIDs(0, 0, &n); }' ||
    missing "OpenCL ICD loader library: libOpenCL.so (ocl-icd-opencl-dev)"
  try_compile "-c" '#include <clblast_c.h>
int main(void) { return 0; }' || missing "CLBlast headers: clblast_c.h (libclblast-dev)"
  try_compile "-lclblast -lOpenCL" '#include <clblast_c.h>
int main(void) { return (int)CLBlastClearCache(); }' || missing "CLBlast library: libclblast.so (libclblast-dev)"
  try_compile "-lz" '#include <zlib.h>
int main(void) { return zlibVersion() == 0; }' || missing "zlib: zlib.h, libz (zlib1g-dev)"
  try_compile "-c" '#include <stdio.h>
#include <jpeglib.h>
int main(void) { return 0; }' || missing "libjpeg headers: jpeglib.h (libjpeg62-turbo-dev)"
  try_compile "-c" '#include <png.h>
int main(void) { return 0; }' || missing "libpng headers: png.h (libpng-dev)"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -e "$DATA/$f" ] || [ -e "$DATA/$f.gz" ] || missing "Fashion-MNIST: $DATA/$f(.gz) (set DATA=folder)"
  done
  echo "all present: cmake $v, $CC_BIN, OpenCL headers + libOpenCL, CLBlast, zlib, libjpeg, libpng, Fashion-MNIST"
  record "prerequisites" PASS "cmake $v, $CC_BIN, OpenCL, CLBlast, data in $DATA"
}

# ------------------------------------------------------------------ 2. build

build() {
  section "2. Build ($BUILD, Release, -j$NPROC)"
  local t0 t rc
  mkdir -p "$LOGS"
  t0=$(now_s)
  if ! t=$(budget_timeout 300); then
    record "build" FAIL "not run: time budget spent"
    return 1
  fi
  timeout "$t" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$LOGS/cmake-configure.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    tail -30 "$LOGS/cmake-configure.log"
    # A package CMake could not find is a missing prerequisite, not a failure.
    local pkg
    pkg=$(grep -Eo 'Could NOT find [A-Za-z0-9_]+|"[A-Za-z0-9_]+Config\.cmake"' "$LOGS/cmake-configure.log" | head -1)
    [ -n "$pkg" ] && missing "CMake: $pkg (see $LOGS/cmake-configure.log)"
    record "build" FAIL "cmake configure failed (rc=$rc), see $LOGS/cmake-configure.log"
    return 1
  fi
  # Only what this check runs (the whole tree builds more tests and benchmarks).
  t=$(budget_timeout 300) || t=20
  # shellcheck disable=SC2086 # TESTS is a word list
  timeout "$t" cmake --build "$BUILD" -j "$NPROC" --target cltrain $TESTS >"$LOGS/build.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    grep -E 'error|Error' "$LOGS/build.log" | head -30
    tail -10 "$LOGS/build.log"
    record "build" FAIL "cmake --build failed (rc=$rc$([ $rc -eq 124 ] && echo ', timeout')), see $LOGS/build.log"
    return 1
  fi
  echo "compiler warnings: $(grep -ci 'warning' "$LOGS/build.log")"
  record "build" PASS "$(elapsed "$t0") s"
}

# ---------------------------------------------------------------- 3. devices

GPUS=()
NVIDIA_GPUS=0

list_devices() {
  section "3. OpenCL devices (cltrain devices)"
  local rc
  timeout 120 "$BIN" devices >"$LOGS/devices.txt" 2>&1
  rc=$?
  cat "$LOGS/devices.txt"
  if [ $rc -ne 0 ] || ! grep -Eq '^[0-9]+ ' "$LOGS/devices.txt"; then
    record "device list" FAIL "cltrain devices: rc=$rc, no device listed"
    return 1
  fi
  mapfile -t GPUS < <(awk '$1 ~ /^[0-9]+$/ && $2 == "GPU" { print $1 }' "$LOGS/devices.txt")
  local n
  n=$(grep -Ec '^[0-9]+ ' "$LOGS/devices.txt")
  if command -v nvidia-smi >/dev/null 2>&1; then
    NVIDIA_GPUS=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  fi
  if [ -n "${GPU_CHECK_AS_GPU:-}" ]; then
    IFS=, read -ra GPUS <<<"$GPU_CHECK_AS_GPU"
    echo "GPU_CHECK_AS_GPU=$GPU_CHECK_AS_GPU: taking device(s) ${GPUS[*]} for GPUs (a test of this script)"
  fi
  record "device list" PASS "$n device(s), GPU indices: ${GPUS[*]:-none}"
  if [ "$NVIDIA_GPUS" -gt 0 ] && [ ${#GPUS[@]} -eq 0 ]; then
    # The driver sees a GPU but OpenCL does not: NVIDIA's ICD is missing or broken.
    record "OpenCL sees the NVIDIA GPU" FAIL \
      "nvidia-smi lists $NVIDIA_GPUS GPU(s), OpenCL none (/etc/OpenCL/vendors/nvidia.icd? libnvidia-opencl?)"
  fi
}

# --------------------------------------------------------- 4. correctness tests

# run_test NAME DEVICE LABEL [VAR=VALUE...]: one test binary on one device.
run_test() {
  local name=$1 dev=$2 label=$3
  shift 3
  local log t t0 rc last failed
  log="$LOGS/$name-$(slug "$label").log"
  if ! t=$(budget_timeout 300); then
    record "$name ($label)" FAIL "not run: time budget spent"
    return
  fi
  echo "--- $name on device $dev ($label), timeout ${t}s"
  t0=$(now_s)
  env CLT_TEST_DEVICE="$dev" "$@" timeout "$t" "$BUILD/tests/$name" >"$log" 2>&1
  rc=$?
  grep -E '^FAIL' "$log" | head -15
  tail -3 "$log"
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$last")
  local secs
  secs=$(elapsed "$t0")
  if [ $rc -eq 0 ] && [ -n "$last" ] && [ "${failed:-1}" -eq 0 ]; then
    record "$name ($label)" PASS "$last, ${secs}s"
  elif [ $rc -eq 124 ]; then
    record "$name ($label)" FAIL "timeout after ${t}s${last:+ ($last)}, see $log"
  else
    record "$name ($label)" FAIL "rc=$rc, ${last:-no summary line: $(tail -1 "$log" | head -c 120)}, see $log"
  fi
}

run_tests() {
  section "4. Correctness tests"
  local g name
  if [ ${#GPUS[@]} -gt 0 ]; then
    for g in "${GPUS[@]}"; do
      for name in $TESTS; do run_test "$name" "$g" "GPU $g"; done
    done
  else
    echo "no GPU found: running the CPU part only"
    for name in $TESTS; do run_test "$name" 0 "device 0"; done
    for name in $TESTS; do run_test "$name" 0 "device 0, CLTRAIN_KERNELS=gpu" CLTRAIN_KERNELS=gpu; done
  fi
}

# ------------------------------------------------------------------ 5. training

GPU_RATE=""

# run_train LABEL MIN_ACCURACY [VAR=VALUE...] -- CLTRAIN-TRAIN-ARGS...: one epoch.
# MIN_ACCURACY empty: only a finite loss and a printed accuracy are required.
run_train() {
  local label=$1 min_acc=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log jsonl t rc line rate acc loss tloss flavors
  log="$LOGS/train-$(slug "$label").log"
  jsonl="$LOGS/train-$(slug "$label").jsonl"
  rm -f "$jsonl"
  if ! t=$(budget_timeout 240); then
    record "train: $label" FAIL "not run: time budget spent"
    return
  fi
  echo "--- ${envs[*]:+${envs[*]} }cltrain train $* --epochs 1 --checkpoint-every 0 --log $jsonl (timeout ${t}s)"
  env ${envs[@]+"${envs[@]}"} timeout "$t" "$BIN" train --data "$DATA" "$@" --epochs 1 \
    --checkpoint-every 0 --log "$jsonl" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^Epoch 1,' "$log" | tail -1)
  rate=$(grep -Eo '[0-9.]+ images/s training' "$log" | tail -1 | cut -d' ' -f1)
  acc=$(grep -Eo 'Test Accuracy: [-0-9.a-z]+' <<<"$line" | awk '{ print $3 }')
  loss=$(grep -Eo '^Epoch 1, Loss: [-0-9.a-z]+' <<<"$line" | awk '{ print $4 }')
  tloss=$(grep -Eo 'Test Loss: [-0-9.a-z]+' <<<"$line" | awk '{ print $3 }')
  # Which kernels each replica got ("; gpu kernels (...)" on its Replica line).
  flavors=$(grep -E '^Replica ' "$log" | grep -Eo '; [a-z]+ kernels' | cut -d' ' -f2 | paste -sd, -)
  local detail="${rate:-?} images/s, test accuracy ${acc:-?}%, loss ${loss:-?}, test loss ${tloss:-?}"
  detail+=", $(grep -c '^Replica ' "$log") replica(s)${flavors:+, $flavors kernels}"
  if [ $rc -ne 0 ]; then
    record "train: $label" FAIL "rc=$rc$([ "$rc" -eq 124 ] && echo ' (timeout)'), $detail, see $log"
    return
  fi
  if [ -z "$line" ] || [ -z "$rate" ] || [ -z "$acc" ]; then
    record "train: $label" FAIL "no epoch line / images/s / test accuracy in the output, see $log"
    return
  fi
  # Finite losses: numbers (nan and inf fail the pattern).
  if ! grep -Eq '^[0-9]+(\.[0-9]+)?$' <<<"$loss" || ! grep -Eq '^[0-9]+(\.[0-9]+)?$' <<<"$tloss"; then
    record "train: $label" FAIL "loss not finite: $detail"
    return
  fi
  if [ -n "$min_acc" ] && ! awk -v a="$acc" -v m="$min_acc" 'BEGIN { exit !(a > m) }'; then
    record "train: $label" FAIL "test accuracy ${acc}% not above ${min_acc}%: $detail"
    return
  fi
  record "train: $label" PASS "$detail"
  LAST_RATE=$rate
}

# run_tune DEVICE FILE: `cltrain tune` of the reference CNN on DEVICE at the
# training runs' batch into FILE, printing each layer's chosen algorithm and
# the GEMM tilings' count and verdict.
run_tune() {
  local dev=$1 file=$2 log t rc choices gemms
  log="$LOGS/tune-$dev.log"
  if ! t=$(budget_timeout 120); then
    record "tune: device $dev" FAIL "not run: time budget spent"
    return
  fi
  rm -f "$file"
  echo "--- cltrain tune --model fmnist-cnn --devices $dev --batch 64 --tune-file $file (timeout ${t}s)"
  timeout "$t" "$BIN" tune --model fmnist-cnn --devices "$dev" --batch 64 --tune-file "$file" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # "conv2d_1 dw winograd4 9.7 in_place 12.5 1.28x ...": layer, pass, choice, speed-up.
  choices=$(awk '$2 ~ /^(fwd|dw|dx)$/ { printf "%s%s %s %s %s", n++ ? ", " : "", $1, $2, $3, $7 }' "$log")
  if [ $rc -ne 0 ] || [ -z "$choices" ]; then
    record "tune: device $dev" FAIL "rc=$rc, no choices printed, see $log"
    return
  fi
  # "576x80x64 tiled 64x64 k16 4x4 0.21 0.35 1.67x ...": shapes whose chosen tiling
  # is not the default, of all; then the tilings' whole-step verdict.
  gemms=$(awk '/^  [0-9]+x[0-9]+x[0-9]+/ { n++; if ($0 !~ /^  [^ ]+( At| Bt)? +default /) t++ }
    END { if (n) printf "; GEMM: %d of %d shapes on cltrain tiles", t, n }' "$log")
  gemms+=$(sed -n "s/^  tilings' step: .*: \(confirmed\|kept default\).*/, \1/p" "$log" | head -1)
  record "tune: device $dev" PASS "$choices$gemms"
}

run_training() {
  section "5. Tuning, then training throughput: 1 epoch of Fashion-MNIST"
  LAST_RATE=""
  if [ ${#GPUS[@]} -gt 0 ]; then
    local g=${GPUS[0]}
    run_tune "$g" "$LOGS/tune-$g.json"
    run_train "GPU $g alone" 80 -- --devices "$g" --split auto --tune-file "$LOGS/tune-$g.json"
    GPU_RATE=$LAST_RATE
    run_train "all devices (--devices all)" 80 -- --devices all --split auto
  else
    echo "no GPU found: device 0 on 2048 training and 1000 test images"
    run_tune 0 "$LOGS/tune-0.json"
    run_train "device 0, 2048 images" "" -- --devices 0 --split auto --train-limit 2048 --test-limit 1000 \
      --tune-file "$LOGS/tune-0.json"
    run_train "device 0, 2048 images, CLTRAIN_KERNELS=gpu" "" CLTRAIN_KERNELS=gpu -- \
      --devices 0 --split auto --train-limit 2048 --test-limit 1000
  fi
}

# ----------------------------------------------------------------- 6. PyTorch

TORCH_RATE=""
TORCH_DEVICE=${TORCH_DEVICE:-cuda}

find_torch_python() {
  local py cands=()
  [ -n "${TORCH_PYTHON:-}" ] && cands+=("$TORCH_PYTHON")
  cands+=(python3 /usr/bin/python3)
  for py in "$ROOT"/venv*/bin/python "$ROOT"/.venv*/bin/python; do [ -x "$py" ] && cands+=("$py"); done
  for py in "${cands[@]}"; do
    command -v "$py" >/dev/null 2>&1 || continue
    if timeout 120 "$py" -c "import torch; assert '$TORCH_DEVICE' == 'cpu' or torch.cuda.is_available()" \
      >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
    echo "  $py: no torch with $TORCH_DEVICE" >&2
  done
  return 1
}

run_pytorch() {
  section "6. PyTorch comparison (same network, same GPU, 1 epoch)"
  if [ ${#GPUS[@]} -eq 0 ]; then
    echo "no GPU found: no comparison"
    record "PyTorch comparison" SKIP "no GPU"
    return
  fi
  local py t rc log tf32 label ratio
  if ! py=$(find_torch_python); then
    echo "PyTorch with CUDA not importable: no comparison"
    record "PyTorch comparison" SKIP "PyTorch with CUDA not importable ($TORCH_DEVICE)"
    return
  fi
  # TF32 on is PyTorch's default for convolutions; off computes in float32 as cltrain does.
  for tf32 in 1 0; do
    label="PyTorch comparison, TF32 $([ $tf32 = 1 ] && echo on || echo off)"
    log="$LOGS/pytorch-$TORCH_DEVICE-tf32-$tf32.log"
    if ! t=$(budget_timeout 240); then
      record "$label" FAIL "not run: time budget spent"
      continue
    fi
    echo "--- CLT_TORCH_TF32=$tf32 $py tests/bench/pytorch_fmnist.py $DATA 60000 1 $NPROC $TORCH_DEVICE (timeout ${t}s)"
    CLT_TORCH_TF32=$tf32 timeout "$t" "$py" tests/bench/pytorch_fmnist.py "$DATA" 60000 1 "$NPROC" \
      "$TORCH_DEVICE" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    TORCH_RATE=$(grep -E '^epoch 1 images_per_second' "$log" | awk '{ print $4 }')
    if [ $rc -ne 0 ] || [ -z "$TORCH_RATE" ]; then
      record "$label" FAIL "rc=$rc, no images/s, see $log"
      continue
    fi
    ratio="n/a (cltrain GPU run failed)"
    [ -n "$GPU_RATE" ] && ratio=$(awk -v c="$GPU_RATE" -v p="$TORCH_RATE" 'BEGIN { printf "%.2f", c / p }')
    echo "cltrain ${GPU_RATE:-?} images/s, PyTorch (TF32 $tf32) $TORCH_RATE images/s: cltrain/PyTorch $ratio"
    record "$label" PASS \
      "PyTorch $TORCH_RATE images/s ($TORCH_DEVICE), cltrain ${GPU_RATE:-?}: ratio $ratio"
  done
}

# ----------------------------------------------------------------- 7. summary

summary() {
  section "7. Summary"
  local i fails=0 n=${#ROW_NAME[@]}
  printf '%-52s %-6s %s\n' "check" "result" "figures"
  printf '%-52s %-6s %s\n' "-----" "------" "-------"
  for ((i = 0; i < n; i++)); do
    printf '%-52s %-6s %s\n' "${ROW_NAME[$i]}" "${ROW_STATUS[$i]}" "${ROW_DETAIL[$i]}"
    [ "${ROW_STATUS[$i]}" = FAIL ] && fails=$((fails + 1))
  done
  echo
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $NPROC cores;" \
    "flags: avx512f on $(grep -c avx512f /proc/cpuinfo) of $(grep -c ^processor /proc/cpuinfo) cpus," \
    "avx2 on $(grep -c avx2 /proc/cpuinfo)"
  [ ${#GPUS[@]} -gt 0 ] || echo "gpu: none found by OpenCL (CPU part only)"
  echo "logs: $ROOT/$LOGS"
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && [ -d "$LOGS" ]; then
    cp -r "$LOGS" "$OUT/" && echo "logs copied to $OUT/gpu-check-logs"
  fi
  echo "total: $SECONDS s"
  if [ $fails -eq 0 ]; then
    echo "RESULT: PASS ($n checks, none failed)"
    return 0
  fi
  echo "RESULT: FAIL ($fails of $n checks failed)"
  return 1
}

main() {
  show_environment
  check_prerequisites
  mkdir -p "$LOGS"
  if build && list_devices; then
    run_tests
    run_training
    run_pytorch
  fi
  summary
}

main
exit $?
