#!/usr/bin/env bash
# Fault injection (CLTRAIN_FAULT, src/base/fault.h): a kernel launch, a read, a map
# or an allocation failing on a chosen replica, and an all-reduce that stalls, with
# 1 and 3 replicas. Each run must stop in bounded time with a non-zero exit and one
# error line naming the device and the call, leave no temp file, and leave the
# index naming the last checkpoint saved before the fault, which must load.
#   test_faults.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"
export POCL_DEVICES="pthread pthread pthread"
unset CLTRAIN_FAULT
LIMIT=60 # seconds any faulty run may take (they take 2-6 s)
# Equal slices of whole batches: PoCL 3.1 aborts now and then ("pocl_release_dlhandle_cache:
# Assertion `found->ref_count > 0'") when identical devices run one kernel on slices of
# different sizes at once (its kernel cache releases by kernel and work-group size only).
common=(--train-limit 576 --test-limit 96 --checkpoint-every 1)
one=(--devices 0)                   # 9 steps per epoch: epoch 3 is steps 19-27
three=(--devices all --split equal) # global batch 192, 3 steps per epoch: epoch 3 is steps 7-9
DEV='\(pthread.*\)'   # a device's name in messages

# check NAME DIR RC SECONDS REGEX [INDEX]: the run failed in time, its stderr is one
# line matching REGEX, no temp file is left in DIR, whose index names INDEX
# (default ckpt-2), and `cltrain eval` loads it.
check() {
  local name=$1 dir=$2 rc=$3 took=$4 re=$5 want=${6:-ckpt-2} lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le "$LIMIT" ] && [ "$lines" -eq 1 ] &&
    grep -Eq -- "^cltrain: error: $re\$" "$tmp/err"; then
    ok "$name: exit $rc after ${took}s, one line naming the device and the call"
  else
    bad "$name (rc=$rc, ${took}s, $lines stderr lines: $(head -c 500 "$tmp/err"))"
  fi
  local left
  left=$(find "$dir" -name '*.tmp*')
  if [ -z "$left" ]; then ok "$name: no temp file left"; else bad "$name: temp files left: $left"; fi
  if [ "$(head -1 "$dir/checkpoint" 2>/dev/null)" = "model_checkpoint_path: \"$want\"" ]; then
    ok "$name: the index names $want"
  else
    bad "$name: the index names $want ($(head -1 "$dir/checkpoint" 2>&1))"
  fi
  expect_ok "$name: eval loads $want" "^Accuracy: " "$CLT" eval --checkpoint "$dir" --test-limit 96 --devices 0
}

# fault NAME SPEC ARGS...: trains with CLTRAIN_FAULT=SPEC into $tmp/NAME (fresh, or a copy
# of a base run when ARGS has --resume); sets rc and took.
fault() {
  local name=$1 spec=$2
  shift 2
  local t0
  t0=$(date +%s)
  CLTRAIN_FAULT=$spec timeout "$LIMIT" "$CLT" train "${common[@]}" --checkpoint-dir "$tmp/$name" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  took=$(($(date +%s) - t0))
}

# Clean runs of 2 epochs: the starting point of the set-up faults (alloc and map happen
# only at set-up, so those resume them), and a warm kernel cache for the stalls' short
# timeout (PoCL compiles at first launch, which a cold cache makes slow).
for n in 1 3; do
  if [ $n = 1 ]; then devs=("${one[@]}"); else devs=("${three[@]}"); fi
  "$CLT" train "${common[@]}" "${devs[@]}" --epochs 2 --checkpoint-dir "$tmp/base$n" >"$tmp/out" 2>&1 ||
    bad "base run with $n replicas ($(tail -3 "$tmp/out"))"
done

# --- during training: enqueue, read, stall ----------------------------------------
fault enqueue1 "replica=0,step=22,call=enqueue" "${one[@]}" --epochs 4
check "enqueue, 1 replica" "$tmp/enqueue1" $rc $took \
  "device 0 $DEV: launching kernel [a-z_]+: CL_OUT_OF_RESOURCES \(injected by CLTRAIN_FAULT\)"
fault enqueue3 "replica=1,step=8,call=enqueue" "${three[@]}" --epochs 4
check "enqueue, 3 replicas" "$tmp/enqueue3" $rc $took \
  "device 1 $DEV: launching kernel [a-z_]+: CL_OUT_OF_RESOURCES \(injected by CLTRAIN_FAULT\)"
# One replica reads nothing during a step: its first read after step 22 is the epoch's metrics.
fault read1 "replica=0,step=22,call=read" "${one[@]}" --epochs 4
check "read, 1 replica" "$tmp/read1" $rc $took \
  "device 0 $DEV: reading metrics: CL_OUT_OF_RESOURCES \(injected by CLTRAIN_FAULT\)"
fault read3 "replica=1,step=8,call=read" "${three[@]}" --epochs 4
check "read, 3 replicas" "$tmp/read3" $rc $took \
  "device 1 $DEV: all-reduce download: CL_OUT_OF_RESOURCES \(injected by CLTRAIN_FAULT\)"
# A stalled replica's thread never returns: the watchdog stops the run without it.
fault stall1 "replica=0,step=22,call=stall" "${one[@]}" --epochs 4 --allreduce-timeout 3
check "stall, 1 replica" "$tmp/stall1" $rc $took \
  "all-reduce step 22: replica 0 \(device 0, pthread.*\) made no progress in it for 3 s; stopping"
fault stall3 "replica=1,step=8,call=stall" "${three[@]}" --epochs 4 --allreduce-timeout 3
check "stall, 3 replicas" "$tmp/stall3" $rc $took \
  "all-reduce step 8: replica 1 \(device 1, pthread.*\) made no progress in it for 3 s; stopping"

# --- at set-up: alloc, map (resuming the base runs: a failed resume keeps them) ---
for n in 1 3; do
  if [ $n = 1 ]; then devs=("${one[@]}") r=0; else devs=("${three[@]}") r=1; fi
  cp -r "$tmp/base$n" "$tmp/alloc$n"
  fault alloc$n "replica=$r,call=alloc" "${devs[@]}" --epochs 4 --resume
  check "alloc, $n replica(s)" "$tmp/alloc$n" $rc $took \
    ".*device $r $DEV: allocating .*: CL_MEM_OBJECT_ALLOCATION_FAILURE \(injected by CLTRAIN_FAULT\)"
done
cp -r "$tmp/base3" "$tmp/map3"
fault map3 "replica=1,call=map" "${three[@]}" --epochs 4 --resume
check "map, 3 replicas" "$tmp/map3" $rc $took \
  "device 1 $DEV: mapping all-reduce staging memory: CL_MAP_FAILURE \(injected by CLTRAIN_FAULT\)"
# One replica in one process maps nothing: the run completes, and says nothing was injected.
cp -r "$tmp/base1" "$tmp/map1"
fault map1 "replica=0,call=map" "${one[@]}" --epochs 3 --resume
if [ $rc -eq 0 ] && grep -q "^cltrain: note: CLTRAIN_FAULT: nothing injected: replica 0 made no map call" "$tmp/err" &&
  [ "$(head -1 "$tmp/map1/checkpoint")" = 'model_checkpoint_path: "ckpt-3"' ]; then
  ok "map, 1 replica in 1 process: nothing to fail, and the run says so"
else
  bad "map, 1 replica in 1 process (rc=$rc: $(head -c 400 "$tmp/err"))"
fi
# ... but a process of an MPI run, one replica each, maps the cross-process buffer.
if command -v mpirun >/dev/null && "$CLT" --version | grep -q "with MPI"; then
  MPI=(mpirun --oversubscribe --bind-to none -x CLTRAIN_FAULT -x POCL_DEVICES)
  [ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
  t0=$(date +%s)
  CLTRAIN_FAULT="replica=0,call=map" timeout "$LIMIT" "${MPI[@]}" -np 2 "$CLT" train "${common[@]}" \
    --devices "0;1" --epochs 1 --checkpoint-dir "$tmp/mapmpi" >"$tmp/out" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
    grep -Eq "rank 0 of 2 .*device 0 $DEV: mapping the cross-process buffer: CL_MAP_FAILURE \(injected by CLTRAIN_FAULT\)" "$tmp/out" &&
    [ ! -e "$tmp/mapmpi/checkpoint" ]; then
    ok "map, 1 replica in each of 2 processes: every process stops after ${took}s, naming it"
  else
    bad "map, 1 replica in each of 2 processes (rc=$rc, ${took}s: $(head -c 600 "$tmp/out"))"
  fi
else
  echo "note: mpirun or an MPI build missing: map with 1 replica per process skipped"
fi

# --- the variable itself --------------------------------------------------------------
CLTRAIN_FAULT="replica=0,call=crash" expect_fail "a malformed CLTRAIN_FAULT is refused" \
  "^cltrain: error: CLTRAIN_FAULT=replica=0,call=crash: expected replica=R,step=S,call=enqueue\|read\|map\|alloc\|stall" \
  "$CLT" train "${common[@]}" "${one[@]}" --epochs 1 --checkpoint-dir "$tmp/bad"
CLTRAIN_FAULT="call=alloc,step=3" expect_fail "alloc at a step is refused: it happens at set-up" \
  "alloc happens only at set-up" "$CLT" train "${common[@]}" "${one[@]}" --epochs 1 --checkpoint-dir "$tmp/bad"
finish
