#!/usr/bin/env bash
# Every kernel of cl/ under Oclgrind, the OpenCL simulator that reports what
# PoCL's CPU device forgives: data races, out-of-bounds accesses, uninitialised
# values, barrier divergence, API misuse.
#
#   tests/oclgrind.sh cpu|gpu TESTS_DIR SOURCE_DIR
#
# Runs the device tests in small mode (CLT_TEST_SMALL=1: every code path on
# shapes the simulator runs in seconds), one per core at a time, each checking
# the kernels' outputs against the C references, with CLTRAIN_KERNELS set to
# the backend, under
#   oclgrind --check-api --data-races --uninitialized
# Fails when a test fails, when Oclgrind reports anything at all, or when a
# kernel of cl/ that the backend uses did not run (each test logs the kernels it
# created: CLT_TEST_KERNELS_USED).
#
# Limits of Oclgrind 21.10 (Debian 12), measured, and what this does about them:
# - --uninitialized aborts on LLVM's `freeze`, emitted at -O1 and up, so
#   programs are built with -cl-opt-disable.
# - --uninitialized ignores the offset of clEnqueueWriteBuffer, does not count
#   clEnqueueFillBuffer as a write, and, once a replica has run other cases,
#   reports a case's valid inputs: the tests' harness writes from offset 0, the
#   product zeroes with a kernel, and small mode gives each case a fresh replica.
# - --uninitialized segfaults inside cl/gemm.cl's float16 GEMM (cltrain's own,
#   every GEMM of the cpu backend; so does a version without arrays of pointers)
#   once a row stride is not a multiple of 16 floats (a 27-column input
#   gradient of a 3x3x3 convolution), and in resnet_models (a whole residual
#   network on its own replica) reports stores of the constant 0.0f of the first
#   convolution's zero padding as uninitialised. Those runs go without
#   --uninitialized, races, bounds and API still checked: kernels_vs_reference
#   and layer_kinds on cpu, resnet_models on both. The layer kernels get every
#   check in resnet_layers (both backends) and layer_kinds (gpu backend); gemm.cl's
#   kernels, the cpu variants of the kernels only layer_kinds runs (activation,
#   depthwise, pad, average pooling), of loss.cl, optimizer.cl, data.cl and
#   count_final, and add_into and moving_average on both
#   backends, get races, bounds and API only.
set -u
backend=${1:?usage: oclgrind.sh cpu|gpu TESTS_DIR SOURCE_DIR}
bin=${2:?TESTS_DIR}
src=${3:?SOURCE_DIR}
case "$backend" in cpu | gpu) ;; *) echo "backend must be cpu or gpu, not $backend" >&2; exit 2 ;; esac
if ! command -v oclgrind > /dev/null; then
  echo "FAIL: oclgrind is not installed (Debian package oclgrind; .ci/setup installs it)"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
used="$work/kernels_used"
failed=0
# Oclgrind runs a kernel on one thread when its checks are on, so the runs go
# side by side, as many at a time as there are cores (CLT_OCLGRIND_JOBS
# overrides), each with its own logs; their results print in the order below.
jobs=${CLT_OCLGRIND_JOBS:-$(nproc)}
names=()

# check NAME UNINITIALIZED(0|1) TEST [ARGS...]: one test under Oclgrind; prints
# its result line (and what failed), exits non-zero when it failed.
check() {
  local name=$1 uninit=$2
  shift 2
  local log="$work/$name.oclgrind" out="$work/$name.out" checks=(--check-api --data-races)
  [ "$uninit" = 1 ] && checks+=(--uninitialized)
  local start=$SECONDS
  CLT_TEST_SMALL=1 CLTRAIN_KERNELS=$backend CLT_TEST_KERNELS_USED="$work/$name.used" \
    oclgrind "${checks[@]}" --max-errors 100 --build-options -cl-opt-disable --log "$log" \
    "$@" > "$out" 2>&1
  local rc=$? secs=$((SECONDS - start))
  local summary
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  if [ $rc -ne 0 ] || [ -s "$log" ]; then
    echo "FAIL: $name ($backend kernels, ${checks[*]}): exit $rc, ${summary:-no summary}, ${secs}s"
    if [ -s "$log" ]; then
      echo "  Oclgrind reports ($(grep -c . "$log") lines), first ones:"
      head -40 "$log" | sed 's/^/  | /'
    fi
    grep -E '^FAIL' "$out" | head -20 | sed 's/^/  /'
    [ $rc -ne 0 ] && tail -5 "$out" | sed 's/^/  > /'
    return 1
  fi
  echo "ok: $name ($backend kernels, ${checks[*]}): $summary, no report, ${secs}s"
}

# run NAME UNINITIALIZED TEST [ARGS...]: starts check in the background once a
# slot is free; its result goes to NAME.result and NAME.rc.
run() {
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  names+=("$1")
  { check "$@" > "$work/$1.result"; echo $? > "$work/$1.rc"; } &
}

# cltrain's float16 GEMM (see above) runs in test_kernels and test_layer_kinds on cpu.
gemm_uninit=1
[ "$backend" = cpu ] && gemm_uninit=0
# The longest first (as measured alone on the gpu backend), so the slots finish
# together.
run winograd_f4 "$gemm_uninit" env CLT_TEST_TILE=4 "$bin/test_winograd"
run layer_kinds "$gemm_uninit" "$bin/test_layer_kinds"
run kernels_vs_reference "$gemm_uninit" "$bin/test_kernels"
run winograd_f2 "$gemm_uninit" env CLT_TEST_TILE=2 "$bin/test_winograd"
# The GEMM tuner's tilings: each candidate register tile and blocking (a build
# of gemm.cl per define set) on the tiny model's products. The gpu backend's
# tiles (gemm_tiled.cl) run in gemm_batched below, each on a case of its own.
[ "$backend" = cpu ] && run gemm_tilings 0 "$bin/test_gemm_tuner"
run resnet_layers 1 "$bin/test_layers2"
run resnet_models 0 "$bin/test_models"
run optimizers 1 "$bin/test_optimizers"
run gemm_batched "$gemm_uninit" "$bin/test_gemm_batched"
run batch_sources 1 "$bin/test_source" "$bin/make_photos"
wait
for name in "${names[@]}"; do
  cat "$work/$name.result"
  [ "$(cat "$work/$name.rc" 2>/dev/null)" = 0 ] || failed=1
done
cat "$work"/*.used > "$used" 2>/dev/null

# Coverage: every __kernel of cl/ must have run; on the gpu backend all but
# gemm.cl's (GPUs multiply with CLBlast, whose kernels ran above too, or
# gemm_tiled.cl), on the cpu backend all but gemm_tiled.cl's.
missing=()
for file in "$src"/cl/*.cl; do
  [ "$backend" = gpu ] && [ "$(basename "$file")" = gemm.cl ] && continue
  [ "$backend" = cpu ] && [ "$(basename "$file")" = gemm_tiled.cl ] && continue
  for k in $(grep -o '__kernel void [A-Za-z0-9_]*' "$file" | awk '{print $3}'); do
    grep -qx "$backend $k" "$used" || missing+=("$(basename "$file"):$k")
  done
done
ran=$(sort -u "$used" | grep -c "^$backend ")
if [ ${#missing[@]} -gt 0 ]; then
  failed=1
  echo "FAIL: kernels of cl/ that no test ran on the $backend backend: ${missing[*]}"
else
  echo "ok: every kernel of cl/ the $backend backend uses ran ($ran kernels)"
fi
[ $failed -eq 0 ] && echo "oclgrind ($backend kernels): all clean" || echo "oclgrind ($backend kernels): FAILED"
exit $failed
