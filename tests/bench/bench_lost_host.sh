#!/usr/bin/env bash
# A host that stops answering, caught how often and how fast: on the test cluster
# (tests/netns.sh: network namespaces, one rank a host pinned to its own core),
# the reference CNN trains under mpirun; once its second checkpoint is saved, host
# 2's link is cut or its process paused (SIGSTOP), alternately, try after try.
# A try is caught when every other rank's process has ended with the one line
# naming rank 1 on host h2, within the timeout and a margin (a step in progress
# when the fault hit; the half second a process waits after its line before it
# exits). Times run from the fault to the last of those lines reaching mpirun's
# output, and to the last of those processes ending.
#
#   tests/bench/bench_lost_host.sh [--tries N] [--hosts N] [--timeout S] [--margin S]
#
# Defaults: 10 tries, 2 hosts, --allreduce-timeout 5 s, 1 s margin. Needs root
# (namespaces), mpirun and an MPI build. Prints one line per try and a summary.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
cltrain=$build/cltrain
tries=10 hosts=2 T=5 margin=1
while [ $# -gt 0 ]; do
  case $1 in
    --tries) tries=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --timeout) T=$2; shift 2 ;;
    --margin) margin=$2; shift 2 ;;
    *) echo "bench_lost_host.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. "$here/common.sh"
. "$here/../lib.sh"
. "$here/../netns.sh"
"$cltrain" --version | grep -q "with MPI" || { echo "bench_lost_host.sh: $cltrain is not an MPI build" >&2; exit 1; }
cluster_check || exit 1
cpu_kind
cluster_up "$hosts" || { echo "bench_lost_host.sh: cluster_up failed" >&2; exit 1; }
export POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1
TRAIN=(train --epochs 1000 --batch-per-replica 8 --train-limit 600 --test-limit 50 --devices 0
  --checkpoint-every 1 --allreduce-timeout "$T")
printf '#!/bin/sh\necho $$ >"%s/pid.$OMPI_COMM_WORLD_RANK"\nexec "$@"\n' "$tmp" >"$tmp/pid"
chmod +x "$tmp/pid"
# PoCL's cache filled first, so that no first step outlasts the timeout.
cluster_exec 1 "$cltrain" "${TRAIN[@]}" --epochs 1 --checkpoint-every 0 >/dev/null 2>&1

ended() { ! grep -Eq '^State:\s+[^Z]' "/proc/$1/status" 2>/dev/null; }
now() { date +%s%N; }
addr=${CL_ADDR[2]//./\\.}
caught=0
: >"$tmp/times"
: >"$tmp/said"
for ((i = 1; i <= tries; i++)); do
  fault=$([ $((i % 2)) = 1 ] && echo cut || echo STOP)
  rm -rf "$tmp"/pid.* "$tmp/ck"
  # Each line of output stamped with the time it arrived (nanoseconds).
  "${CL_MPI[@]}" -x POCL_DEVICES -x POCL_MAX_PTHREAD_COUNT -np "$hosts" "$tmp/pid" "$CL_PIN" \
    "$cltrain" "${TRAIN[@]}" --checkpoint-dir "$tmp/ck" \
    > >(while IFS= read -r l; do echo "$(now) $l"; done >"$tmp/out") 2>&1 &
  job=$!
  for _ in $(seq 1 600); do [ -e "$tmp/ck/ckpt-2.npz" ] && break; sleep 0.1; done
  # A random instant of the third epoch.
  sleep "0.$((RANDOM % 10))"
  if [ $fault = cut ]; then cluster_cut 2; else kill -STOP "$(cat "$tmp/pid.1")"; fi
  start=$(now)
  took=""
  while [ $((($(now) - start) / 1000000000)) -le $((T * 3 + 10)) ]; do
    gone=1
    for ((r = 0; r < hosts; r++)); do
      [ $r = 1 ] || ended "$(cat "$tmp/pid.$r")" || gone=0
    done
    [ $gone = 1 ] && { took=$(awk -v ns=$(($(now) - start)) 'BEGIN { printf "%.2f", ns / 1e9 }'); break; }
    sleep 0.05
  done
  [ $fault = cut ] && cluster_mend 2
  kill -9 "$(cat "$tmp/pid.1")" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 $job 2>/dev/null || break; sleep 0.2; done
  kill -9 $job 2>/dev/null
  wait $job 2>/dev/null
  sleep 0.2 # the last lines through the pipe
  grep -E "^[0-9]+ cltrain: error: rank [0-9]+ of $hosts \(h[0-9]+\): step [0-9]+: rank 1 \(host h2, $addr\) stopped answering within $T s; stopping$" "$tmp/out" >"$tmp/named"
  named=$(grep -c . "$tmp/named")
  said=$(awk -v s="$start" '{ if ($1 > m) m = $1 } END { if (NR) printf "%.2f", (m - s) / 1e9 }' "$tmp/named")
  verdict="missed"
  if [ -n "$took" ] && [ "$named" -eq $((hosts - 1)) ] &&
    awk -v t="$took" -v l="$(echo "$T + $margin" | bc -l)" 'BEGIN { exit !(t <= l) }'; then
    verdict="caught"
    caught=$((caught + 1))
  fi
  [ -n "$took" ] && echo "$took" >>"$tmp/times"
  [ -n "$said" ] && echo "$said" >>"$tmp/said"
  printf 'try %2d: %-4s  %d of %d survivors named rank 1 on h2 after %5s s and ended after %5s s: %s\n' \
    "$i" "$fault" "$named" $((hosts - 1)) "${said:-never}" "${took:-never}" "$verdict"
done
echo "caught $caught of $tries within the timeout ($T s) + $margin s ($hosts hosts): the survivors' lines after" \
  "median $(median <"$tmp/said") s, max $(sort -g "$tmp/said" | tail -1) s; ended after median $(median <"$tmp/times") s," \
  "max $(sort -g "$tmp/times" | tail -1) s"

