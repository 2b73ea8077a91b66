#!/usr/bin/env bash
# Training across two hosts of the test cluster (tests/netns.sh: network
# namespaces, each rank pinned to a core of its own with one PoCL thread),
# against one rank alone: ResNet50 at 96 px, batch 16 a replica, on shaped
# links (1 Gbit/s with 0.5 ms one way, 10 Gbit/s with 0.1 ms), with the
# cross-process sum overlapping the backward pass in buckets of 4 MiB (the
# default with two processes: on CPU devices, with --wire fp16 only) and without
# it (CLTRAIN_ALLREDUCE_BUCKETS=1048576 and 0), with --wire fp32 and fp16; beside one
# rank alone, and two training alone at once (pair: the two ranks' compute
# without any exchange, which the cores' and caches' sharing slows). Rounds
# alternate the configurations (the machines drift); each run's figure is the
# median images/s of its epochs after the first. Prints per configuration the
# median images/s, the step time, and the median over rounds of the share of
# ideal scaling (ideal: 2 x that round's rank alone, whose step is the
# compute-only step) and of the pair's. Needs root (namespaces).
# CLTRAIN_BUILD: the build folder (default: build).
#
#   tests/bench/bench_hosts.sh [--rounds N] [--steps N] [--epochs N] [--model M]
#                              [--image-size N] [--batch N] [--only REGEX]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${CLTRAIN_BUILD:-$here/../../build}
. "$here/../lib.sh"
. "$here/../netns.sh"
. "$here/common.sh"

rounds=3 steps=6 epochs=3 model=resnet50 size=96 batch=16 only=.
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --image-size) size=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 2 ] || { echo "$(basename "$0"): --epochs must be 2 or more (the first is left out)" >&2; exit 2; }
cluster_check || exit 77
cpu_kind
cltrain=$build/cltrain
"$build/tests/make_photos" "$tmp/photos" 5 $((2 * batch * steps / 5 + 1)) >/dev/null || exit 1
cluster_up 2 || { echo "cluster_up failed" >&2; exit 1; }
[ "$CL_NETEM" = 1 ] || echo "note: no netem here: links are shaped by rate alone, without the delays"

# The configurations: NAME LINK DELAY OVERLAP WIRE (alone: one rank on host 1;
# pair: one on each host at once, each training alone: two ranks' compute with no
# exchange, the ceiling of the others on this machine).
configs="alone - - - fp32
pair - - - fp32
1g 1gbit 0.5ms off fp32
1g-overlap 1gbit 0.5ms on fp32
1g-fp16 1gbit 0.5ms off fp16
1g-overlap-fp16 1gbit 0.5ms on fp16
10g 10gbit 0.1ms off fp32
10g-overlap 10gbit 0.1ms on fp32"
configs=$(grep -E -- "^(alone|pair) |$only" <<<"$configs")

# rate LOG: the images/s of each epoch after the first of a --log, one a line.
rate() {
  local line
  for ((line = 2; line <= epochs; line++)); do
    echo "$(field "$1" $line train_examples) $(field "$1" $line train_seconds)"
  done 2>/dev/null | awk 'NF == 2 && $2 > 0 { printf "%.3f\n", $1 / $2 }'
}

# run NAME LINK DELAY OVERLAP WIRE: one run's images/s (median of epochs 2..) into $tmp/NAME,
# after the round's number.
run() {
  local name=$1 link=$2 delay=$3 overlap=$4 wire=$5 log=$tmp/$1.jsonl np=2
  [ "$name" = alone ] || [ "$name" = pair ] && np=1
  local args=(train --model "$model" --data "$tmp/photos" --image-size "$size" --batch-per-replica "$batch"
    --train-limit $((np * batch * steps)) --epochs "$epochs" --split equal --checkpoint-every 0 --wire "$wire")
  local env=(POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1)
  rm -f "$log" "$tmp/pair2.jsonl"
  if [ "$name" = pair ]; then
    cluster_shape off
    cluster_exec 1 env "${env[@]}" taskset -c 0 "$cltrain" "${args[@]}" --log "$log" </dev/null >"$tmp/$name.txt" 2>&1 &
    cluster_exec 2 env "${env[@]}" taskset -c $((1 % $(nproc))) "$cltrain" "${args[@]}" --log "$tmp/pair2.jsonl" \
      </dev/null >"$tmp/$name.2.txt" 2>&1
    wait
    local a b
    a=$(rate "$log" | median) b=$(rate "$tmp/pair2.jsonl" | median)
    if [ -n "$a" ] && [ -n "$b" ]; then echo "$round $(echo "$a + $b" | bc -l)" >>"$tmp/$name"; else
      echo "$name: failed ($(tail -3 "$tmp/$name.txt" "$tmp/$name.2.txt" | tr '\n' ' '))" >&2
    fi
    return
  elif [ "$np" = 1 ]; then
    cluster_shape off
    cluster_exec 1 env "${env[@]}" taskset -c 0 "$cltrain" "${args[@]}" --log "$log" </dev/null >"$tmp/$name.txt" 2>&1
  else
    cluster_shape "$link" "$delay" 2>/dev/null
    local buckets=1048576
    [ "$overlap" = off ] && buckets=0
    env "${env[@]}" CLTRAIN_ALLREDUCE_BUCKETS=$buckets "${CL_MPI[@]}" -np 2 -x POCL_DEVICES \
      -x POCL_MAX_PTHREAD_COUNT -x CLTRAIN_ALLREDUCE_BUCKETS "$CL_PIN" "$cltrain" "${args[@]}" --log "$log" \
      </dev/null >"$tmp/$name.txt" 2>&1
  fi
  local rates
  rates=$(rate "$log")
  if [ -z "$rates" ]; then
    echo "$name: failed ($(tail -3 "$tmp/$name.txt" | tr '\n' ' '))" >&2
    return
  fi
  echo "$round $(median <<<"$rates")" >>"$tmp/$name"
}

for ((round = 1; round <= rounds; round++)); do
  while read -r name link delay overlap wire; do run "$name" "$link" "$delay" "$overlap" "$wire"; done <<<"$configs"
done
cluster_shape off

# The share of ideal is taken round by round (against that round's run alone, the
# nearest in time), then its median.
echo "$model at ${size}x$size, batch $batch a replica, ranks pinned to one core each (POCL_MAX_PTHREAD_COUNT=1);"
echo "$rounds rounds, each run the median of epochs 2-$epochs of $steps steps; ideal = 2 x one rank alone;"
echo "pair = two ranks training alone at once (no exchange); shares are medians of each round's ratio"
printf '%-16s %-8s %-6s %-8s %-5s %10s %9s %9s %9s  %s\n' configuration link delay overlap wire images/s "step s" \
  "% ideal" "% pair" "runs (images/s)"
while read -r name link delay overlap wire; do
  [ -s "$tmp/$name" ] || { printf '%-16s (no run succeeded)\n' "$name"; continue; }
  m=$(cut -d' ' -f2 "$tmp/$name" | median)
  n=2 share=- ceiling=-
  [ "$name" = alone ] && n=1
  if [ "$name" != alone ] && [ "$name" != pair ] && [ -s "$tmp/pair" ]; then
    ceiling=$(awk 'NR == FNR { pair[$1] = $2; next } ($1 in pair) { print 100 * $2 / pair[$1] }' \
      "$tmp/pair" "$tmp/$name" | median)
    [ -n "$ceiling" ] && ceiling=$(printf '%.0f%%' "$ceiling")
  fi
  if [ "$name" != alone ] && [ -s "$tmp/alone" ]; then
    share=$(awk 'NR == FNR { alone[$1] = $2; next } ($1 in alone) { print 100 * $2 / (2 * alone[$1]) }' \
      "$tmp/alone" "$tmp/$name" | median)
    [ -n "$share" ] && share=$(printf '%.0f%%' "$share")
  fi
  printf '%-16s %-8s %-6s %-8s %-5s %10.2f %9.3f %9s %9s  %s\n' "$name" "$link" "$delay" "$overlap" "$wire" \
    "$m" "$(echo "$n * $batch / $m" | bc -l)" "$share" "$ceiling" "$(cut -d' ' -f2 "$tmp/$name" | tr '\n' ' ')"
done <<<"$configs"
