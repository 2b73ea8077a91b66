#!/usr/bin/env bash
# Training on the test cluster (netns.sh: each host a network namespace with its
# own address and name, one rank a host pinned to its own core): 2 and 3 hosts of
# one device compute what one process computes on the whole batch (bit for bit
# what one process with as many devices computes); with each host's
# --checkpoint-dir its own (local, at another path), a checkpoint written on the
# cluster resumes on one host and one written on one host resumes on the
# cluster; SIGTERM to mpirun stops every host at the same step with one save.
#   test_cluster_hosts.sh CLTRAIN CKPT_TOOL
set -u
CLT=$1
TOOL=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

mpi_check "$CLT" || skip_exit
cluster_check || skip_exit
cluster_up 3 || { bad "cluster_up 3"; finish; exit 1; }
export POCL_DEVICES="pthread pthread pthread"
# One epoch: 6 steps of 48 examples (the last of 2).
A=(train --split equal --train-limit 242 --test-limit 100 --seed 5 --checkpoint-every 1 --global-batch 48)

# hosts NAME N EPOCHS [flags]: hosts 1..N, one rank and device each; host i's
# --checkpoint-dir is $tmp/NAME.hI.
hosts() {
  local name=$1 n=$2 epochs=$3 i
  shift 3
  local cmd=() sep=()
  for i in $(seq 1 "$n"); do
    cmd+=("${sep[@]}" -np 1 "$CL_PIN" "$CLT" "${A[@]}" --devices 0 --epochs "$epochs" "$@"
      --checkpoint-dir "$tmp/$name.h$i")
    sep=(:)
  done
  timeout 300 "${CL_MPI[@]}" "${cmd[@]}" >"$tmp/$name.txt" 2>&1 ||
    bad "$n hosts: $name ($(grep -m2 -E 'error|ORTE' "$tmp/$name.txt"))"
}
# host1 NAME DEVICES EPOCHS [flags]: one process on host 1, into $tmp/NAME.h1.
host1() {
  local name=$1 devices=$2 epochs=$3
  shift 3
  cluster_exec 1 "$CLT" "${A[@]}" --devices "$devices" --epochs "$epochs" "$@" \
    --checkpoint-dir "$tmp/$name.h1" >"$tmp/$name.txt" 2>&1 || bad "host 1: $name ($(tail -2 "$tmp/$name.txt"))"
}
same_bits() {
  local d
  d=$("$TOOL" diff "$2" "$3" | awk '{ print $2 }')
  if [ "$d" = "0.000e+00" ]; then ok "$1"; else bad "$1 (max relative difference $d)"; fi
}
# index DIR K: DIR's index names ckpt-K, as if the later ones had not been saved.
index() { printf 'model_checkpoint_path: "ckpt-%s"\n' "$2" >"$1/checkpoint"; }

# --- the cluster computes what one process computes ------------------------------------
host1 one 0 2
host1 two 0,1 2
host1 three 0,1,2 1
hosts c2 2 1 --check-replicas
hosts c3 3 1
if grep -q "^Replica 1: rank 1 on h2, device 0," "$tmp/c2.txt" && grep -q "^Replica 2: rank 2 on h3, device 0," "$tmp/c3.txt"; then
  ok "one rank on each host, named by its host"
else
  bad "one rank on each host ($(grep '^Replica' "$tmp/c2.txt" "$tmp/c3.txt"))"
fi
expect_close "2 hosts x 24 = 1 device x 48 after 6 steps" "$tmp/one.h1/ckpt-1.npz" "$tmp/c2.h1/ckpt-1.npz" 1e-4
expect_close "3 hosts x 16 = 1 device x 48 after 6 steps" "$tmp/one.h1/ckpt-1.npz" "$tmp/c3.h1/ckpt-1.npz" 1e-4
same_bits "2 hosts = 1 process with 2 devices, bit for bit" "$tmp/two.h1/ckpt-1.npz" "$tmp/c2.h1/ckpt-1.npz"
same_bits "3 hosts = 1 process with 3 devices, bit for bit" "$tmp/three.h1/ckpt-1.npz" "$tmp/c3.h1/ckpt-1.npz"
if [ ! -e "$tmp/c2.h2" ] && [ ! -e "$tmp/c3.h2" ] && [ ! -e "$tmp/c3.h3" ]; then
  ok "host 1 alone writes checkpoints; the other hosts' folders are never made"
else
  bad "host 1 alone writes checkpoints ($(ls -d "$tmp"/c*.h[23] 2>&1))"
fi

# --- checkpoints move between the cluster and one host -----------------------------------
# Written by 2 hosts (host 1's folder), resumed by one process on host 1 with 2
# devices: the straight run's bits.
host1 c2 0,1 2 --resume
same_bits "2 hosts' checkpoint resumed on one host = a straight run, bit for bit" \
  "$tmp/two.h1/ckpt-2.npz" "$tmp/c2.h1/ckpt-2.npz"
# Written on host 1 by one process of 2 devices, resumed by 2 hosts whose host 2
# has an empty folder of its own: process 0 sends it.
mkdir -p "$tmp/o.h1" "$tmp/o.h2"
cp "$tmp/two.h1/ckpt-1.npz" "$tmp/o.h1/" && index "$tmp/o.h1" 1
hosts o 2 2 --resume
same_bits "one host's checkpoint resumed by 2 hosts (host 2's folder empty) = a straight run, bit for bit" \
  "$tmp/two.h1/ckpt-2.npz" "$tmp/o.h1/ckpt-2.npz"
if grep -q "^Global batch 48 (24 per replica)" "$tmp/o.txt" && [ -z "$(ls -A "$tmp/o.h2")" ]; then
  ok "... its global batch kept; nothing written on host 2"
else
  bad "... ($(grep '^Global' "$tmp/o.txt"); $(ls -A "$tmp/o.h2"))"
fi
# One device on one host -> 3 hosts: the global batch of 48 as 16 each.
mkdir -p "$tmp/o3.h1"
cp "$tmp/one.h1/ckpt-1.npz" "$tmp/o3.h1/" && index "$tmp/o3.h1" 1
hosts o3 3 2 --resume
expect_close "1 device's checkpoint resumed by 3 hosts = the straight run, up to rounding" \
  "$tmp/one.h1/ckpt-2.npz" "$tmp/o3.h1/ckpt-2.npz" 1e-3

# --- SIGTERM to mpirun ----------------------------------------------------------------
# mpirun's daemons pass it to every rank (after odls_base_sigkill_timeout, 1 s by
# default, and kill them as long again later): every host stops at the same step
# and host 1 saves once; the checkpoint resumes on one host.
L=(train --split equal --train-limit 4096 --test-limit 100 --seed 5 --checkpoint-every 1 --devices 0
  --global-batch 32 --epochs 50)
"${CL_MPI[@]}" -np 1 "$CL_PIN" "$CLT" "${L[@]}" --checkpoint-dir "$tmp/mp.h1" : -np 1 "$CL_PIN" "$CLT" "${L[@]}" \
  --checkpoint-dir "$tmp/mp.h2" >"$tmp/mp.txt" 2>&1 &
job=$!
for _ in $(seq 1 240); do grep -q '^Set-up' "$tmp/mp.txt" && break; sleep 0.25; done
sleep 1
kill -TERM $job
(
  sleep 60
  kill -9 $job 2>/dev/null
) &
guard=$!
wait $job
rc=$?
kill $guard 2>/dev/null
line=$(grep "^cltrain: stopped by SIGTERM" "$tmp/mp.txt")
# Mid-epoch nearly always; at an epoch's end if the signal came during its evaluation.
mid="at epoch ([0-9]+), step ([0-9]+) of 128; saved $tmp/mp.h1/ckpt-[0-9]+.npz"
end="at the end of epoch ([0-9]+); saved $tmp/mp.h1/ckpt-[0-9]+.npz"
epochs=""
if [[ $line =~ $mid ]]; then
  epochs=${BASH_REMATCH[1]}
  done="$((epochs - 1)) epochs\? and $(((epochs - 1) * 128 + BASH_REMATCH[2])) steps done"
elif [[ $line =~ $end ]]; then
  epochs=$((BASH_REMATCH[1] + 1))
  done="$((epochs - 1)) epochs\? and $(((epochs - 1) * 128)) steps done"
fi
if [ $rc -ne 0 ] && [ "$(grep -c "stopped by" "$tmp/mp.txt")" -eq 1 ] && [ -n "$epochs" ] && [ ! -e "$tmp/mp.h2" ]; then
  ok "SIGTERM to mpirun: every host stops at the same step, host 1 saves once (${line%%: continue*})"
  cluster_exec 1 "$CLT" train --resume --checkpoint-dir "$tmp/mp.h1" --devices 0 --epochs "$epochs" \
    >"$tmp/mp2.txt" 2>&1
  if grep -q "^Resuming from $tmp/mp.h1/ckpt-[0-9]*.npz: $done" "$tmp/mp2.txt" &&
    grep -q "^Epoch $epochs, Loss" "$tmp/mp2.txt"; then
    ok "... and the checkpoint resumes on one host"
  else
    bad "... and the checkpoint resumes on one host ($(grep -E 'Resuming|error' "$tmp/mp2.txt"))"
  fi
else
  bad "SIGTERM to mpirun (rc=$rc: $(grep -E 'stopped|error|Epoch' "$tmp/mp.txt" | head -5))"
fi
finish
