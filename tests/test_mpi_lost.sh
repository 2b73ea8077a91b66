#!/usr/bin/env bash
# Every call of the cluster is bounded by its timeout (test_mpi_lost.c, 3 processes
# under mpirun on this host): rank 1 pauses itself at step 10; ranks 0 and 2 return
# within the timeout naming rank 1, its host and the step, the same in both (in
# the ring rank 0 waits on rank 2, which waits on rank 1), and their next call
# fails at once.
#   test_mpi_lost.sh TEST_MPI_LOST
set -u
PROG=$1
. "$(dirname "$0")/lib.sh"

mpi_check "" || skip_exit
T=1
host=$(hostname)

for what in sum exchange allgather bcast any barrier agree doubles; do
  out="$tmp/$what.txt"
  : >"$out" # before the polling below reads it
  "${MPI[@]}" -np 3 "$PROG" "$what" "$T" >"$out" 2>"$tmp/$what.err" &
  job=$!
  for _ in $(seq 1 100); do [ "$(grep -c "after fail" "$out")" -ge 2 ] && break; sleep 0.1; done
  # The paused process: mpirun ends it once the others have failed; if not, this does.
  pid=$(sed -n 's/^rank 1: \([0-9]*\)$/\1/p' "$out")
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  kill -9 $job 2>/dev/null
  wait $job 2>/dev/null
  re="after ([0-9.]+) s: step 10: rank 1 \(host ${host//./\\.}(, [0-9.]+)?\) stopped answering within $T s; stopping$"
  good=1
  for r in 0 2; do
    line=$(grep -E "^rank $r: $re" "$out") || { good=0; continue; }
    s=$(sed -E "s/^rank $r: after ([0-9.]+) s: .*/\1/" <<<"$line")
    awk -v s="$s" -v t=$T 'BEGIN { exit !(s <= t + 0.3) }' || good=0
    msg=${line#*s: }
    grep -qxF "rank $r: after fail 0.00 s: $msg" "$out" || good=0
  done
  if [ $good = 1 ]; then ok "$what: ranks 0 and 2 stop within ${T}s naming rank 1 and step 10; their next call fails at once"; else
    bad "$what ($(cat "$out" "$tmp/$what.err" | grep -v '^ *$' | head -12))"
  fi
done
finish
