#!/usr/bin/env bash
# A host that stops answering, on the test cluster (netns.sh): its link cut, its
# process paused (SIGSTOP) or killed (SIGKILL) mid-epoch. Within the timeout every
# surviving process exits non-zero with one line naming the rank and host that
# stopped answering and the step (the same in each); the last
# checkpoint and its index are intact, eval loads them, and the cut run resumes
# on the host that remains.
#   test_cluster_lost.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

mpi_check "$CLT" || skip_exit
cluster_check || skip_exit
cluster_up 3 || { bad "cluster_up 3"; finish; exit 1; }

T=5 # --allreduce-timeout
# Seconds from the fault until the survivors have ended: the timeout, a step, an exit.
LIMIT=$((T + 3))
export POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1
TRAIN=(train --epochs 100 --batch-per-replica 8 --train-limit 600 --test-limit 50 --devices 0
  --checkpoint-every 1 --allreduce-timeout "$T")
# Each rank's process id, for the fault: the wrapper writes it, then becomes cltrain.
printf '#!/bin/sh\necho $$ >"%s/pid.$OMPI_COMM_WORLD_RANK"\nexec "$@"\n' "$tmp" >"$tmp/pid"
chmod +x "$tmp/pid"

# A first run on one host compiles the kernels into PoCL's cache, so that no
# rank of the runs below spends longer than the timeout in its first step.
cluster_exec 1 "$CLT" "${TRAIN[@]}" --epochs 1 --checkpoint-every 0 >"$tmp/warm.txt" 2>&1 ||
  bad "a first run on host 1 ($(tail -3 "$tmp/warm.txt"))"

# ended PID: the process has exited (a zombie until mpirun's daemon reaps it, which
# takes seconds on a busy machine: its own exit is what counts).
ended() { ! grep -Eq '^State:\s+[^Z]' "/proc/$1/status" 2>/dev/null; }

# lose NAME NP FAULT: NP hosts train into $tmp/NAME; once two epochs are saved,
# rank 1 (host 2) meets FAULT (cut, STOP or KILL). Sets took (seconds from the
# fault until every other rank's process has ended) and rc (mpirun's status).
lose() {
  local name=$1 np=$2 fault=$3 r gone
  rm -f "$tmp"/pid.*
  "${CL_MPI[@]}" -x POCL_DEVICES -x POCL_MAX_PTHREAD_COUNT -np "$np" "$tmp/pid" "$CL_PIN" "$CLT" \
    "${TRAIN[@]}" --checkpoint-dir "$tmp/$name" >"$tmp/$name.txt" 2>&1 &
  local job=$!
  for _ in $(seq 1 300); do [ -e "$tmp/$name/ckpt-2.npz" ] && break; sleep 0.1; done
  case $fault in
    cut) cluster_cut 2 ;;
    *) kill -"$fault" "$(cat "$tmp/pid.1")" ;;
  esac
  local start
  start=$(date +%s%N)
  took=""
  while [ $((($(date +%s%N) - start) / 1000000000)) -le $((LIMIT + 15)) ]; do
    gone=1
    for r in $(seq 0 $((np - 1))); do
      [ "$r" = 1 ] && continue
      ended "$(cat "$tmp/pid.$r")" || gone=0
    done
    [ $gone = 1 ] && { took=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1f", ns / 1e9 }'); break; }
    sleep 0.1
  done
  # OpenMPI's runtime may wait on for the host it cannot reach, or on the
  # paused process: what the survivors did is what counts.
  [ "$fault" = cut ] && cluster_mend 2
  kill -9 "$(cat "$tmp/pid.1")" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 $job 2>/dev/null || break; sleep 0.2; done
  kill -9 $job 2>/dev/null
  wait $job
  rc=$?
}

within() { [ -n "$took" ] && awk -v t="$took" -v l=$LIMIT 'BEGIN { exit !(t <= l) }'; }

# named NAME NP: each survivor's one line names rank 1 on host 2 and the same step.
named() {
  local name=$1 np=$2 r steps="" line
  for r in $(seq 0 $((np - 1))); do
    [ "$r" = 1 ] && continue
    line=$(grep -E "^cltrain: error: rank $r of $np \(h$((r + 1))\): step [0-9]+: rank 1 \(host h2, ${CL_ADDR[2]//./\\.}\) stopped answering within $T s; stopping$" "$tmp/$name.txt")
    [ "$(grep -c . <<<"$line")" = 1 ] || return 1
    steps="$steps $(sed -E 's/.*: step ([0-9]+): .*/\1/' <<<"$line")"
  done
  [ "$(tr ' ' '\n' <<<"$steps" | grep . | sort -u | wc -l)" = 1 ]
}

# intact NAME: the index names a checkpoint that eval (on host 1) loads.
intact() {
  local k
  k=$(sed -nE 's/^model_checkpoint_path: "ckpt-([0-9]+)"$/\1/p' "$tmp/$1/checkpoint")
  [ -n "$k" ] && [ -s "$tmp/$1/ckpt-$k.npz" ] &&
    cluster_exec 1 "$CLT" eval --checkpoint "$tmp/$1" --devices 0 >"$tmp/$1.eval" 2>&1 &&
    grep -q "^Accuracy: " "$tmp/$1.eval"
}

check() { # check NAME NP WHAT
  local name=$1 np=$2 what=$3
  if within && [ "$rc" -ne 0 ] && named "$name" "$np"; then
    ok "$what: the other ranks stop in ${took}s (timeout ${T}s), naming rank 1 on h2 and the step"
  else
    bad "$what (took '${took}' s, rc=$rc: $(grep -v '^  ' "$tmp/$name.txt" | tail -12))"
  fi
  if intact "$name"; then ok "$what: the last checkpoint and its index load"; else
    bad "$what: the last checkpoint and its index load ($(cat "$tmp/$name/checkpoint" "$tmp/$name.eval" 2>&1 | head -5))"
  fi
}

# Host 2's cable out, 3 hosts: ranks 0 and 2 (whose ring waits through rank 1) both name it.
lose cut 3 cut
check cut 3 "host 2's link cut"
# ... and the run continues on host 1 alone from its last checkpoint.
k=$(sed -nE 's/^model_checkpoint_path: "ckpt-([0-9]+)"$/\1/p' "$tmp/cut/checkpoint")
cluster_exec 1 "$CLT" "${TRAIN[@]}" --checkpoint-dir "$tmp/cut" --resume --epochs $((k + 1)) >"$tmp/resume.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^Resuming from .*: $k epochs" "$tmp/resume.txt" && [ -s "$tmp/cut/ckpt-$((k + 1)).npz" ]; then
  ok "the cut run resumes on host 1 alone from epoch $k and finishes"
else
  bad "the cut run resumes on host 1 alone (rc=$rc: $(tail -5 "$tmp/resume.txt"))"
fi

# Rank 1's process paused, 2 hosts.
lose stop 2 STOP
check stop 2 "rank 1 paused (SIGSTOP)"

# Rank 1's process killed: OpenMPI's runtime usually ends the job itself first,
# naming it; where cltrain sees it first, its own line names it.
lose kill 2 KILL
if within && [ "$rc" -ne 0 ] &&
  { named kill 2 || grep -Eq "rank 1 with PID [0-9]+ on node ${CL_ADDR[2]//./\\.} exited on signal 9" "$tmp/kill.txt"; }; then
  ok "rank 1 killed: the other rank stops in ${took}s, non-zero, rank 1 named"
else
  bad "rank 1 killed (took '${took}' s, rc=$rc: $(grep -v '^  ' "$tmp/kill.txt" | tail -12))"
fi
if intact kill; then ok "rank 1 killed: the last checkpoint and its index load"; else
  bad "rank 1 killed: the last checkpoint and its index load"; fi

finish
