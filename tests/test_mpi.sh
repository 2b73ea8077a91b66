#!/usr/bin/env bash
# Training across processes under mpirun (OpenMPI, several processes on this host):
# N processes x 1 device compute what one device computes on the whole batch (and,
# bit for bit, what one process with N devices computes: the cross-process ring
# sums in the device ring's order), runs repeat to the byte, checkpoints move
# between layouts, and faults end every process with the failing rank named.
#   test_mpi.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
MAKE=$3
. "$(dirname "$0")/lib.sh"

mpi_check "$CLT" || skip_exit
export POCL_DEVICES="pthread pthread pthread"

# train NAME NP DEVICES BATCH LIMIT [flags]: one epoch (6 steps, the last of 2 examples)
# into $tmp/NAME; NP 0 runs without mpirun.
train() {
  local name=$1 np=$2 devices=$3 batch=$4 limit=$5
  shift 5
  local cmd=("$CLT" train --epochs 1 --devices "$devices" --split equal --batch-per-replica "$batch"
    --train-limit "$limit" --test-limit 200 --seed 9 --checkpoint-dir "$tmp/$name" --checkpoint-every 1
    --log "$tmp/$name.jsonl" "$@")
  if [ "$np" -gt 0 ]; then cmd=("${MPI[@]}" -np "$np" "${cmd[@]}"); fi
  "${cmd[@]}" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -3 "$tmp/$name.txt"))"
}
same_bits() {
  local d
  d=$("$TOOL" diff "$2" "$3" | awk '{ print $2 }')
  if [ "$d" = "0.000e+00" ]; then ok "$1"; else bad "$1 (max relative difference $d)"; fi
}

# --- equivalence --------------------------------------------------------------------
train one 0 0 48 242
train local2 0 0,1 24 242
train local3 0 0,1,2 16 242
train mpi2 2 0 24 242 --check-replicas
train mpi3 3 0 16 242 --check-replicas
train mpi3b 3 0 16 242
train mixed 2 "0,1;2" 16 242 --check-replicas
expect_close "2 processes x 24 = 1 device x 48 after 6 steps" "$tmp/one/ckpt-1.npz" "$tmp/mpi2/ckpt-1.npz" 1e-4
expect_close "3 processes x 16 = 1 device x 48 after 6 steps" "$tmp/one/ckpt-1.npz" "$tmp/mpi3/ckpt-1.npz" 1e-4
expect_close "2 processes of 2 + 1 devices = 1 device" "$tmp/one/ckpt-1.npz" "$tmp/mixed/ckpt-1.npz" 1e-4
same_bits "2 processes x 1 device = 1 process x 2 devices, bit for bit" "$tmp/local2/ckpt-1.npz" "$tmp/mpi2/ckpt-1.npz"
same_bits "3 processes x 1 device = 1 process x 3 devices, bit for bit" "$tmp/local3/ckpt-1.npz" "$tmp/mpi3/ckpt-1.npz"
if cmp -s "$tmp/mpi3/ckpt-1.npz" "$tmp/mpi3b/ckpt-1.npz"; then ok "the same layout and seed repeat to the byte"; else
  bad "the same layout and seed repeat to the byte"; fi
if grep -q "^Replica 2: rank 1 on .*, device 2," "$tmp/mixed.txt" && grep -q "^2 processes (MPI): 3 replicas" "$tmp/mixed.txt" &&
  grep -Eq '^  rank 1 device 2 \(.*\): share [0-9.]+%, 80 examples' "$tmp/mixed.txt"; then
  ok "'A;B' gives each rank its devices; the lines name ranks"
else
  bad "'A;B' gives each rank its devices; the lines name ranks ($(cat "$tmp/mixed.txt"))"
fi
n=$(grep -c "^Epoch 1" "$tmp/mpi3.txt")
[ "$n" = 1 ] && ok "rank 0 alone prints" || bad "rank 0 alone prints ($n epoch lines)"

# --split auto across processes: slices cover every example; the log names ranks.
train auto 2 0 32 1000 --split auto
sum=$(grep -Eo '"examples": [0-9]+' "$tmp/auto.jsonl" | awk '{ s += $2 } END { print s }')
if [ "$sum" = 1000 ] && grep -q '"processes": 2' "$tmp/auto.jsonl" && grep -q '"rank": 1, "host": ' "$tmp/auto.jsonl"; then
  ok "--split auto across processes covers every example; JSONL names ranks"
else
  bad "--split auto across processes ($(cat "$tmp/auto.jsonl"))"
fi

# --- checkpoints across layouts -------------------------------------------------------
# Trained by 2 processes, evaluated by one process (and by 2): the epoch line's accuracy.
acc=$(grep -Eo "Test Accuracy: [0-9.]+" "$tmp/auto.txt" | cut -d' ' -f3)
expect_ok "a 2-process checkpoint evaluates on one process to its test accuracy ($acc)" "^Accuracy: $acc$" \
  "$CLT" eval --checkpoint "$tmp/auto" --test-limit 200 --devices 0
expect_ok "... and under mpirun -np 2" "^Accuracy: $acc$" "${MPI[@]}" -np 2 "$CLT" eval --checkpoint "$tmp/auto" \
  --test-limit 200 --devices 0
# Resuming across layouts continues the same training: 2 processes x 1 device and
# 1 process x 2 devices compute the same bits, so a resumed run matches a straight one.
run2() { # NAME NP DEVICES EPOCHS [flags]
  local name=$1 np=$2 devices=$3 epochs=$4
  shift 4
  local cmd=("$CLT" train --epochs "$epochs" --devices "$devices" --split equal --batch-per-replica 24
    --train-limit 242 --test-limit 100 --seed 5 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 "$@")
  if [ "$np" -gt 0 ]; then cmd=("${MPI[@]}" -np "$np" "${cmd[@]}"); fi
  "${cmd[@]}" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -3 "$tmp/$name.txt"))"
}
run2 straight 2 0 2
run2 from_mpi 2 0 1 && run2 from_mpi 0 0,1 2 --resume
run2 from_one 0 0,1 1 && run2 from_one 2 0 2 --resume
same_bits "2 processes' checkpoint resumed by one process = a straight run" "$tmp/straight/ckpt-2.npz" "$tmp/from_mpi/ckpt-2.npz"
same_bits "one process's checkpoint resumed by 2 processes = a straight run" "$tmp/straight/ckpt-2.npz" "$tmp/from_one/ckpt-2.npz"

# --- faults ---------------------------------------------------------------------------
# expect_stop NAME SECONDS REGEX... : the last run failed, within SECONDS, its output matching each REGEX.
expect_stop() {
  local name=$1 limit=$2 rc=$3
  shift 3
  local re missing=""
  for re in "$@"; do grep -Eq -- "$re" "$tmp/fault.txt" || missing="$missing [$re]"; done
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ -z "$missing" ]; then ok "$name"; else
    bad "$name (rc=$rc, missing$missing: $(head -c 600 "$tmp/fault.txt"))"
  fi
}
mpmd() { # mpmd SECONDS ARGS0 -- ARGS1: rank 0 and rank 1 with their own flags
  local limit=$1
  shift
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  timeout "$limit" "${MPI[@]}" -np 1 "$CLT" "${a[@]}" : -np 1 "$CLT" "${b[@]}" >"$tmp/fault.txt" 2>&1
}
mkdir -p "$tmp/bad"
cp /usr/share/datasets/fashion-mnist/* "$tmp/bad/"
head -c 1000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz >"$tmp/bad/train-images-idx3-ubyte.gz"
T=(train --epochs 1 --train-limit 256 --test-limit 100 --devices 0 --checkpoint-dir "$tmp/fck")
mpmd 60 "${T[@]}" -- "${T[@]}" --data "$tmp/bad"
expect_stop "bad data on rank 1: every rank stops, naming it" 60 $? \
  "rank 1 of 2 .*bad/train-images-idx3-ubyte.gz: truncated" "rank 0 of 2 .*stopping because rank 1 failed: .*truncated"
mpmd 60 "${T[@]}" -- "${T[@]}" --seed 7
expect_stop "another --seed on rank 1 is refused" 60 $? "rank 0 of 2 .*rank 1 differs from rank 0 in --seed \(7 vs 42\)"
mpmd 60 "${T[@]}" -- "${T[@]}" --model "$(dirname "$0")/models/examples/fmnist_cnn.json"
expect_stop "another model on rank 1 is refused" 60 $? "rank 1 differs from rank 0 in the model \(.* vs fmnist-cnn\)"
mpmd 60 "${T[@]}" -- "${T[@]}" --train-limit 128
expect_stop "other data on rank 1 is refused" 60 $? "rank 1 differs from rank 0 in the data \(128 training"
timeout 60 "${MPI[@]}" -np 2 "$CLT" "${T[@]}" --devices "0;1;2" >"$tmp/fault.txt" 2>&1
expect_stop "--devices with 3 selections for 2 processes" 60 $? "--devices 0;1;2: 3 selections \(one per process\), but the run has 2 processes"
if [ ! -e "$tmp/fck/checkpoint" ]; then ok "no checkpoint from runs that failed at set-up"; else bad "no checkpoint from runs that failed at set-up"; fi

# A rank killed mid-run: mpirun ends the others within seconds; the checkpoints saved load.
"${MPI[@]}" -np 2 "$CLT" train --epochs 100 --train-limit 512 --test-limit 50 --devices 0 --checkpoint-every 1 \
  --checkpoint-dir "$tmp/kill" >"$tmp/kill.txt" 2>&1 &
job=$!
for _ in $(seq 1 120); do [ -e "$tmp/kill/checkpoint" ] && break; sleep 0.5; done
victim=""
for p in $(pgrep -f "checkpoint-dir $tmp/kill"); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi
done
start=$SECONDS
[ -n "$victim" ] && kill -9 "$victim"
( sleep 60; kill -9 $job 2>/dev/null ) & watchdog=$!
wait $job
rc=$?
kill $watchdog 2>/dev/null
took=$((SECONDS - start))
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $took -le 30 ] && grep -q "rank 1 .*exited on signal 9" "$tmp/kill.txt"; then
  ok "rank 1 killed: the run ends in ${took}s, non-zero, naming it"
else
  bad "rank 1 killed (victim '$victim', rc=$rc, ${took}s: $(tail -5 "$tmp/kill.txt"))"
fi
expect_ok "the checkpoints of the killed run load" "^Accuracy: " "$CLT" eval --checkpoint "$tmp/kill" --test-limit 50 --devices 0

# A decoding error mid-epoch on rank 1 only (its copies of a class's JPEGs are
# truncated; it decodes only its own slices, so some of them): it aborts the job.
# --split equal: under auto a rank timed slow at start-up (a busy host) leaves
# the step, decodes nothing, and the run ends well.
# (mpirun's own "MPI_ABORT was invoked on rank 1" banner is not checked: OpenMPI
# 4.1 sometimes fails to print it, "ORTE_ERROR_LOG ... show_help.c".)
"$MAKE" "$tmp/ph" 3 24 5 >/dev/null || bad "make_photos"
cp -r "$tmp/ph" "$tmp/ph1"
for f in "$tmp"/ph1/class_1/*.jpg; do
  head -c $(($(stat -c %s "$f") / 2)) "$f" >"$tmp/half.jpg" && mv "$tmp/half.jpg" "$f"
done
P=(train --model resnet-small --image-size 32 --epochs 2 --batch-per-replica 4 --devices 0 --split equal
  --checkpoint-dir "$tmp/pk")
mpmd 90 "${P[@]}" --data "$tmp/ph" -- "${P[@]}" --data "$tmp/ph1"
expect_stop "a photo failing to decode on rank 1 mid-epoch ends every rank" 90 $? \
  "rank 1 of 2 .*ph1/class_1/.*cannot decode"
if [ ! -e "$tmp/pk/checkpoint" ]; then ok "no checkpoint from the aborted run"; else bad "no checkpoint from the aborted run"; fi

# A lone process pinned to one core by mpirun's default binding is told so.
if POCL_DEVICES=pthread mpirun --bind-to core $([ "$(id -u)" -eq 0 ] && echo --allow-run-as-root) -np 1 \
  "$CLT" train --epochs 1 --train-limit 64 --test-limit 10 --checkpoint-every 0 2>&1 | grep -q "^cltrain: note: rank 0 may use 1 of this host's [0-9]* cores (1 process here): with one process per host, add --bind-to none"; then
  ok "a process pinned to fewer cores than its share gets a note"
elif [ "$(nproc)" -lt 2 ]; then ok "one core: no binding note to check"
else bad "a process pinned to fewer cores than its share gets a note"; fi

# --- the all-reduce benchmark ---------------------------------------------------------
expect_ok "cltrain bench allreduce under mpirun -np 2 (sums checked)" \
  "^ +100000 +0\.38 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" \
  "${MPI[@]}" -np 2 "$CLT" bench allreduce --devices "0,1;2" --floats 1000,100000 --repeat 3 --warmup 1

finish
