#!/usr/bin/env bash
# The GEMM tilings a run used, recorded and restored: a run pinned to a
# non-default tiling of the weight gradient's A^T product (split K: its bits
# differ from the default's) records its tilings in the JSONL log and the
# checkpoint; --resume with an empty tuning cache (or another pinned file)
# continues it bit for bit. A record of another build, a tiling this build cannot run and a
# line that is no tiling each give one note and fall back; a checkpoint
# without the record (an older cltrain's) loads with one note; a record of the
# wrong type is one error line. The same record and restore for a tile of the
# gpu backend's own GEMM in place of CLBlast's. Under mpirun (2 processes, each pinned to its
# own file) the checkpoint records both processes' algorithms, tilings and
# replicas, a resume on the same layout continues bit for bit, and on 3
# processes the replica it has no record of takes those of a recorded replica
# of its build (device and kernels): that part alone with `mpi` (the ctest
# configuration "cluster"; skipped, 77, without mpirun or an MPI build, except
# in CI), the rest without it.
#   test_tune_record.sh CLTRAIN [mpi]
set -u
CLT=$1
mode=${2:-}
. "$(dirname "$0")/lib.sh"
if [ "$mode" = mpi ]; then mpi_check "$CLT" || skip_exit; fi
unset CLTRAIN_TUNE CLTRAIN_WINOGRAD
export XDG_CACHE_HOME="$tmp/cache" # empty: the only tilings are the pinned file's and the record's
# The float16 code whatever the CPU, so that the pinned tiling fits its registers.
export CLTRAIN_CPU_VECTOR_WIDTH=16
PY=/usr/bin/python3
small=(--train-limit 192 --test-limit 64 --seed 3 --checkpoint-every 1 --batch-per-replica 32)
pin="$tmp/pin.json"
at_key="gemm cpu tA1 tB0 m576 n80 k4096"
at_tiling="5x5 kc64 rb29 pack0 cb0"

# A pinned file: a tuning file's identity (from `cltrain tune` with a budget
# that ends before any timing: this build's, on this device), the convolution's
# three passes made the default, in place, confirmed, and one tiling for the
# A^T product of conv2d_1's weight gradient, which the default does not take,
# confirmed (a tiling runs only once a whole-step check kept it). The passes'
# keys are written here, so the file holds them however slow the host.
"$CLT" tune --model fmnist-cnn --batch 32 --tune-budget 0.001 --tune-file "$tmp/tuned.json" >"$tmp/tune.txt" 2>&1 ||
  bad "cltrain tune ($(tail -2 "$tmp/tune.txt"))"
grep -q '"ident"' "$tmp/tuned.json" || bad "cltrain tune wrote its file ($(tail -3 "$tmp/tune.txt"))"
# pinned FILE TILING: the pinned file with TILING for the A^T product.
pinned() {
  $PY - "$tmp/tuned.json" "$1" "$at_key" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
entry = {"variant": "in_place", "ms": 1.0, "default_ms": 1.0, "method": "in step",
         "decision": "confirmed", "why": "pinned by the test", "step_ms": 1.0, "default_step_ms": 1.0}
res = {"conv %s 13x13x64 k3x3 s1 p0,0 o11x11 f80 b32" % p: dict(entry) for p in ("fwd", "dw", "dx")}
res[sys.argv[3]] = {"variant": sys.argv[4], "ms": 1.0, "default_ms": 2.0, "decision": "confirmed",
                    "why": "pinned by the test", "step_ms": 1.0}
d["results"] = res
json.dump(d, open(sys.argv[2], "w"))
EOF
}
pinned "$pin" "$at_tiling"
meta() {
  $PY -c 'import json, sys, numpy as np
m = json.loads(str(np.load(sys.argv[1])["metadata"]))
print(json.dumps(m.get(sys.argv[2])))' "$1" "$2"
}
# edit CKPT PYTHON: runs PYTHON on the checkpoint's metadata `m` and saves it back.
edit() {
  $PY - "$1" "$2" <<'EOF'
import json, sys
import numpy as np
z = np.load(sys.argv[1])
members = {k: z[k] for k in z.files}
m = json.loads(str(members["metadata"]))
exec(sys.argv[2])
members["metadata"] = np.array(json.dumps(m))
np.savez(sys.argv[1], **members)
EOF
}
# resume_from NAME CKPT [flags]: a folder NAME holding CKPT as ckpt-1, resumed to 2 epochs.
resume_from() {
  local name=$1 ckpt=$2
  shift 2
  mkdir -p "$tmp/$name"
  cp "$ckpt" "$tmp/$name/ckpt-1.npz"
  printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/$name/checkpoint"
  "$CLT" train --epochs 2 --resume "${small[@]}" --verbose --checkpoint-dir "$tmp/$name" "$@" \
    >"$tmp/$name.txt" 2>&1
}
# The tiling's line in the records (replica 0).
line="0 tA1 tB0 m576 n80 k3872 $at_tiling"

# --- under mpirun --------------------------------------------------------------------------------
if [ "$mode" = mpi ]; then
  export POCL_DEVICES="pthread pthread pthread"
  # Rank 1 pinned to Winograd's F(2x2) forward and the default tilings, rank 0 to the file above.
  $PY - "$pin" "$tmp/pin1.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["results"] = {k: dict(r, variant="winograd2" if " fwd " in k else r["variant"])
                for k, r in d["results"].items() if k.startswith("conv ")}
json.dump(d, open(sys.argv[2], "w"))
EOF
  mpi=(--devices 0 --split equal --global-batch 64 --train-limit 192 --test-limit 64 --seed 3 --checkpoint-every 1)
  # mpi_run NAME NP EPOCHS [flags]: NP processes, rank 0 pinned to $pin, the others to pin1.json.
  mpi_run() {
    local name=$1 np=$2 epochs=$3 r
    shift 3
    local all=("${MPI[@]}" -np 1 "$CLT" train "${mpi[@]}" --epochs "$epochs" --tune-file "$pin" \
      --tune-budget 0 --checkpoint-dir "$tmp/$name" "$@")
    for r in $(seq 1 $((np - 1))); do
      all+=(: -np 1 "$CLT" train "${mpi[@]}" --epochs "$epochs" --tune-file "$tmp/pin1.json" \
        --tune-budget 0 --checkpoint-dir "$tmp/$name.r$r" "$@")
    done
    "${all[@]}" >"$tmp/$name.txt" 2>&1 || bad "mpirun $name ($(grep -m2 error "$tmp/$name.txt"))"
  }
  mpi_run mpi 2 2
  got=$($PY - "$tmp/mpi/ckpt-1.npz" "$line" <<'EOF'
import json, re, sys
import numpy as np
m = json.loads(str(np.load(sys.argv[1])["metadata"]))
conv = sorted(m.get("conv_algorithms", []))
reps = m.get("replicas", [])
good = (conv == ["0 conv2d_1 in_place in_place in_place", "1 conv2d_1 winograd2 in_place in_place"]
        and m.get("gemm_tilings") == [sys.argv[2]]
        and len(reps) == 2 and all(re.match(r"%d %d \S+ [0-9a-f]{16} pthread-" % (i, i), reps[i])
                                   for i in range(2)))
print("yes" if good else "no: %s %s %s" % (conv, m.get("gemm_tilings"), reps))
EOF
)
  if [ "$got" = yes ]; then
    ok "mpirun: the checkpoint records both processes' algorithms, tilings and replicas"
  else
    bad "mpirun: the checkpoint records both processes' choices ($got)"
  fi
  # The same layout, every rank --tune off: each process restores its own, bit for bit.
  for d in mpi_res mpi_three; do
    mkdir -p "$tmp/$d"
    cp "$tmp/mpi/ckpt-1.npz" "$tmp/$d/"
    printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/$d/checkpoint"
  done
  mpi_run mpi_res 2 2 --resume --tune off --verbose
  if cmp -s "$tmp/mpi/ckpt-2.npz" "$tmp/mpi_res/ckpt-2.npz" && ! grep -q note "$tmp/mpi_res.txt" &&
    grep -q "^Replica 1: conv2d_1: forward winograd2" "$tmp/mpi_res.txt" &&
    grep -q "^Replica 0: GEMM tA1 tB0 m576 n80 k3872 $at_tiling$" "$tmp/mpi_res.txt"; then
    ok "mpirun: resumed on the same layout (--tune off), each process its own choices, bit for bit"
  else
    bad "mpirun: resumed on the same layout ($(grep -E 'note|error|Replica .: (conv|GEMM)' "$tmp/mpi_res.txt"))"
  fi
  # 3 processes: replicas 0 and 1 restored, replica 2 (not recorded) takes the
  # choices of the first recorded replica of its build, replica 0's.
  mpi_run mpi_three 3 2 --resume --tune off --verbose
  if ! grep -q note "$tmp/mpi_three.txt" &&
    grep -q "^Replica 1: conv2d_1: forward winograd2" "$tmp/mpi_three.txt" &&
    grep -q "^Replica 2: conv2d_1: forward in_place" "$tmp/mpi_three.txt" &&
    grep -q "^Replica 2: GEMM tA1 tB0 m576 n80 k3872 $at_tiling$" "$tmp/mpi_three.txt"; then
    ok "mpirun: on 3 processes replica 2 takes the choices of the recorded replica of its build"
  else
    bad "mpirun: on 3 processes ($(grep -E 'note|error|Replica .: (conv|GEMM)' "$tmp/mpi_three.txt"))"
  fi
  finish
  exit
fi

# --- recorded -------------------------------------------------------------------------------
"$CLT" train --epochs 2 "${small[@]}" --tune-file "$pin" --tune-budget 0 --verbose \
  --checkpoint-dir "$tmp/straight" --log "$tmp/straight.jsonl" >"$tmp/straight.txt" 2>&1 ||
  bad "training pinned ($(tail -2 "$tmp/straight.txt"))"
if grep -q "^Replica 0: GEMM tA1 tB0 m576 n80 k3872 $at_tiling$" "$tmp/straight.txt"; then
  ok "--verbose names the pinned tiling"
else
  bad "--verbose names the pinned tiling ($(grep GEMM "$tmp/straight.txt"))"
fi
if [ "$(grep -c "\"gemm_tilings\": \[\"$line\"\]" "$tmp/straight.jsonl")" = 2 ]; then
  ok "the log records each epoch's tilings"
else
  bad "the log records each epoch's tilings ($(grep -o '"gemm_tilings[^]]*]' "$tmp/straight.jsonl"))"
fi
host=$($PY -c 'import json, sys; print(json.loads(sys.argv[1])[0].split()[2])' "$(meta "$tmp/straight/ckpt-1.npz" replicas)")
if [ "$(meta "$tmp/straight/ckpt-1.npz" gemm_tilings)" = "[\"$line\"]" ] &&
  meta "$tmp/straight/ckpt-1.npz" replicas | grep -Eq "^\[\"0 0 [^ ]+ [0-9a-f]{16} pthread-[^\"]*\"\]$"; then
  ok "the checkpoint records the tilings and who ran the replica (host $host)"
else
  bad "the checkpoint records the tilings ($(meta "$tmp/straight/ckpt-1.npz" gemm_tilings); $(meta "$tmp/straight/ckpt-1.npz" replicas))"
fi
"$CLT" train --epochs 2 "${small[@]}" --tune off --checkpoint-dir "$tmp/off" >/dev/null 2>&1
if cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/off/ckpt-2.npz"; then
  bad "the pinned tiling changes the run's bits (it equals --tune off's)"
else
  ok "the pinned tiling changes the run's bits (split K), so the checks below can fail"
fi

# --- restored ---------------------------------------------------------------------------------
if resume_from resumed "$tmp/straight/ckpt-1.npz" && cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/resumed/ckpt-2.npz" &&
  grep -q "^Replica 0: GEMM tA1 tB0 m576 n80 k3872 $at_tiling$" "$tmp/resumed.txt" && ! grep -q note "$tmp/resumed.txt"; then
  ok "resume with an empty tuning cache: the recorded tilings, bit for bit"
else
  bad "resume with an empty tuning cache: the recorded tilings, bit for bit ($(grep -E 'GEMM|note|error' "$tmp/resumed.txt"))"
fi
# Another pinned file (the default for the product): the record wins.
pinned "$tmp/other.json" default
if resume_from resumed_other "$tmp/straight/ckpt-1.npz" --tune-file "$tmp/other.json" &&
  cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/resumed_other/ckpt-2.npz"; then
  ok "resume with another pinned file: the recorded tilings, bit for bit"
else
  bad "resume with another pinned file ($(grep -E 'GEMM|note|error' "$tmp/resumed_other.txt"))"
fi

# --- records that cannot be restored ------------------------------------------------------------
# what NAME PYTHON NOTE: the record edited by PYTHON; one NOTE, the run completes on
# the defaults (the cache is empty): the bits of the older checkpoint's resume, the first.
what() {
  cp "$tmp/straight/ckpt-1.npz" "$tmp/$1.npz"
  edit "$tmp/$1.npz" "$2"
  if resume_from "$1" "$tmp/$1.npz" && [ "$(grep -c "note" "$tmp/$1.txt")" = 1 ] &&
    grep -Eq "^cltrain: note: $3" "$tmp/$1.txt" && cmp -s "$tmp/older/ckpt-2.npz" "$tmp/$1/ckpt-2.npz" &&
    ! cmp -s "$tmp/straight/ckpt-2.npz" "$tmp/$1/ckpt-2.npz" && ! grep -q "GEMM tA1" "$tmp/$1.txt"; then
    ok "$1: one note, the default tilings run"
  else
    bad "$1: one note, the default tilings run ($(grep -E 'note|error|GEMM' "$tmp/$1.txt"))"
  fi
}
what older 'del m["replicas"], m["gemm_tilings"]' \
  "$tmp/older/ckpt-1.npz records no GEMM tilings \(an older cltrain's checkpoint\): the replicas' are the tuning cache's \(else the defaults\); the run may differ"
what foreign 'm["replicas"] = [" ".join(l.split()[:3] + ["0123456789abcdef"] + l.split()[4:]) for l in m["replicas"]]' \
  "replica 0: the checkpoint's GEMM tilings were chosen for another device or build \(pthread-.* of rank 0 on host .*, build 0123456789abcdef; here pthread-.*, build [0-9a-f]{16}\): its GEMM tilings are the tuning cache's \(else the defaults\)$"
what unfit 'm["gemm_tilings"] = ["0 tA1 tB0 m576 n80 k3872 9x9 kc64 rb29 pack0 cb0"]' \
  "replica 0: the checkpoint's GEMM tiling \"0 tA1 tB0 m576 n80 k3872 9x9 kc64 rb29 pack0 cb0\" is a tiling this build cannot run there: its GEMM tilings are the tuning cache's \(else the defaults\)$"
what garbled 'm["gemm_tilings"] = ["0 tA1 garbage"]' \
  "replica 0: the checkpoint's GEMM tiling \"0 tA1 garbage\" is not a tiling record: its GEMM tilings are"
what unnamed 'm["replicas"] = []' \
  "replica 0 \(rank 0, device 0: pthread-.*\): the checkpoint records no choices for it or its device and build \(its run had 0 replicas\): its algorithms and GEMM tilings are"
# --- the gpu backend's tiles (CLTRAIN_KERNELS=gpu: cl/gemm_tiled.cl for a product) ---------------
# A file pinned to one tiling of cltrain's own GEMM for the weight gradient's
# A^T product in place of CLBlast's: recorded, and restored bit for bit.
g_tiling="tiled 32x64 k16 2x4"
g_line="0 tA1 tB0 m576 n80 k3872 $g_tiling"
CLTRAIN_KERNELS=gpu "$CLT" tune --model fmnist-cnn --batch 32 --tune-budget 0.001 \
  --tune-file "$tmp/g_tuned.json" >"$tmp/g_tune.txt" 2>&1 || bad "cltrain tune, gpu ($(tail -2 "$tmp/g_tune.txt"))"
$PY - "$tmp/g_tuned.json" "$tmp/g_pin.json" "$g_tiling" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["results"] = {"gemm gpu tA1 tB0 m576 n80 k4096": {
    "variant": sys.argv[3], "ms": 1.0, "default_ms": 2.0, "decision": "confirmed",
    "why": "pinned by the test", "step_ms": 1.0}}
json.dump(d, open(sys.argv[2], "w"))
EOF
CLTRAIN_KERNELS=gpu "$CLT" train --epochs 2 "${small[@]}" --tune-file "$tmp/g_pin.json" --tune-budget 0 \
  --verbose --checkpoint-dir "$tmp/g_straight" >"$tmp/g_straight.txt" 2>&1 ||
  bad "training pinned, gpu ($(tail -2 "$tmp/g_straight.txt"))"
CLTRAIN_KERNELS=gpu "$CLT" train --epochs 2 "${small[@]}" --tune off --checkpoint-dir "$tmp/g_off" >/dev/null 2>&1
if grep -q "^Replica 0: GEMM ${g_line#0 }$" "$tmp/g_straight.txt" &&
  [ "$(meta "$tmp/g_straight/ckpt-1.npz" gemm_tilings)" = "[\"$g_line\"]" ] &&
  ! cmp -s "$tmp/g_straight/ckpt-2.npz" "$tmp/g_off/ckpt-2.npz"; then
  ok "gpu: the pinned tile of cltrain's GEMM runs, changes the bits and is recorded"
else
  bad "gpu: the pinned tile runs and is recorded ($(grep GEMM "$tmp/g_straight.txt"); $(meta "$tmp/g_straight/ckpt-1.npz" gemm_tilings))"
fi
if CLTRAIN_KERNELS=gpu resume_from g_resumed "$tmp/g_straight/ckpt-1.npz" &&
  cmp -s "$tmp/g_straight/ckpt-2.npz" "$tmp/g_resumed/ckpt-2.npz" &&
  grep -q "^Replica 0: GEMM ${g_line#0 }$" "$tmp/g_resumed.txt" && ! grep -q note "$tmp/g_resumed.txt"; then
  ok "gpu: resume with an empty tuning cache: the recorded tile, bit for bit"
else
  bad "gpu: resume with an empty tuning cache ($(grep -E 'GEMM|note|error' "$tmp/g_resumed.txt"))"
fi

cp "$tmp/straight/ckpt-1.npz" "$tmp/typed.npz"
edit "$tmp/typed.npz" 'm["gemm_tilings"] = 5'
mkdir -p "$tmp/typed"
mv "$tmp/typed.npz" "$tmp/typed/ckpt-1.npz"
printf 'model_checkpoint_path: "ckpt-1"\n' >"$tmp/typed/checkpoint"
expect_fail "a record of the wrong type: one error naming the key" \
  "ckpt-1.npz: metadata key gemm_tilings" \
  "$CLT" train --epochs 2 --resume "${small[@]}" --checkpoint-dir "$tmp/typed"

finish
