#!/usr/bin/env bash
# The cost model of many hosts (cost_model.py, docs/hosts.md "A model of many hosts")
# against the test cluster (tests/netns.sh: network namespaces, one rank of one core
# each, POCL_MAX_PTHREAD_COUNT=1). Measures its inputs, then predicts and measures
# images/s of every configuration:
#   - the copy between a device and host memory (build/tests/bench_allreduce on one
#     device in host 1: its copy bandwidth at two sizes, fitted to a latency and a
#     cost per byte);
#   - each link's alpha and beta: `cltrain bench allreduce` under mpirun across 2
#     hosts at several sizes, less the copies, fitted to the ring's 2(P-1)(alpha +
#     (n/P) beta); the unshaped link's beta is the host's CPU cost per byte;
#   - each workload's step time on one rank alone (epochs 2-3), and the backward
#     pass's share of device time (a --trace run);
#   - then, in rounds, each workload on 1 host and on 2 hosts at each link in each
#     configuration: images/s and all-reduce seconds a step (epochs 2-3), medians
#     over the rounds.
# Prints the inputs and one table row per configuration: measured and predicted
# images/s, their share of ideal (2 x one host) and all-reduce a step, and the error.
#
#   tests/bench/bench_cost_model.sh [--runs N] [--links "1gbit:0.5ms 10gbit:0.1ms"]
#       [--workloads "resnet50 cnn"] [--repeat N] [--overlap-env "VAR=VALUE ..."]
#       [--bucket-floats N] [--fp16-args "ARGS"] [CONFIG ...]
#
# CONFIG: plain (the default), overlap, fp16 or overlap+fp16. overlap runs cltrain
# with --overlap-env's variables (default CLTRAIN_ALLREDUCE_BUCKETS=262144) and the
# model with --overlap and --bucket-floats (default 262144), the others with
# CLTRAIN_ALLREDUCE_BUCKETS=0 (no overlap); fp16 runs cltrain with
# --fp16-args (default "--wire fp16") and the model with --wire fp16, converting a
# float at the cost of copying its 4 bytes. Needs root (namespaces), mpirun and an
# MPI build; takes about 10 minutes with the defaults.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
cltrain=$build/cltrain
runs=3
links="1gbit:0.5ms 10gbit:0.1ms"
workloads="resnet50 cnn"
repeat=7
overlap_env="CLTRAIN_ALLREDUCE_BUCKETS=262144"
bucket_floats=262144
fp16_args="--wire fp16"
configs=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --overlap-env) overlap_env=$2; shift 2 ;;
    --bucket-floats) bucket_floats=$2; shift 2 ;;
    --fp16-args) fp16_args=$2; shift 2 ;;
    plain | overlap | fp16 | overlap+fp16) configs+=("$1"); shift ;;
    *) echo "bench_cost_model.sh: unknown option or configuration $1" >&2; exit 2 ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(plain)
for w in $workloads; do
  case $w in resnet50 | cnn) ;; *) echo "bench_cost_model.sh: workload $w: resnet50 or cnn" >&2; exit 2 ;; esac
done
[ -x "$cltrain" ] || { echo "bench_cost_model.sh: $cltrain not built" >&2; exit 1; }
"$cltrain" --version | grep -q "with MPI" || { echo "bench_cost_model.sh: $cltrain is built without MPI" >&2; exit 1; }
# fp16's flags must be ones this cltrain has, before minutes of measuring.
if [[ " ${configs[*]} " == *fp16* ]]; then
  for f in $fp16_args; do
    [[ $f == --* ]] || continue
    "$cltrain" train --help | grep -q -- "${f%%=*}" ||
      { echo "bench_cost_model.sh: $cltrain train has no ${f%%=*} (the fp16 configurations' --fp16-args)" >&2; exit 2; }
  done
fi
. "$here/../lib.sh"
. "$here/../netns.sh"
. "$here/common.sh"
model=(python3 "$here/cost_model.py")
cluster_check || exit 1
cpu_kind
echo "cores with avx512f: $(grep -c avx512f /proc/cpuinfo); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
cluster_up 2 || { echo "bench_cost_model.sh: cluster_up 2 failed" >&2; exit 1; }
[ "$CL_NETEM" = 1 ] || echo "note: no netem on this kernel: the links are shaped to their rate only, without the delay"
env1=(-x POCL_DEVICES=pthread -x POCL_MAX_PTHREAD_COUNT=1)

# Workloads: batch a replica, steps an epoch, train flags.
"$build/tests/make_photos" "$tmp/photos" 3 48 1 >/dev/null
batch_of() { case $1 in resnet50) echo 16 ;; cnn) echo 64 ;; esac; }
steps_of() { case $1 in resnet50) echo 4 ;; cnn) echo 20 ;; esac; }
flags_of() {
  case $1 in
    resnet50) echo "--model resnet50 --data $tmp/photos --image-size 96" ;;
    cnn) echo "--test-limit 64" ;;
  esac
}

# config_run CONFIG: cltrain's extra environment (mpirun -x) and flags for it.
# plain and fp16 turn the overlap off whatever the default (--wire fp16 overlaps
# by default on CPU devices with two processes).
config_env() {
  case $1 in
    overlap*) for v in $overlap_env; do printf -- '-x %s ' "$v"; done ;;
    *) printf -- '-x CLTRAIN_ALLREDUCE_BUCKETS=0 ' ;;
  esac
}
config_flags() { case $1 in *fp16) echo "$fp16_args" ;; esac; }
config_model() {
  case $1 in
    overlap) echo "--overlap --bucket-floats $bucket_floats" ;;
    fp16) echo "--wire fp16" ;;
    overlap+fp16) echo "--overlap --bucket-floats $bucket_floats --wire fp16" ;;
  esac
}

# train NP WORKLOAD CONFIG NAME [flags]: 3 epochs into $tmp/NAME.jsonl; prints the median
# images/s and all-reduce seconds a step of epochs 2-3.
train() {
  local np=$1 w=$2 config=$3 name=$4
  shift 4
  local b s
  b=$(batch_of "$w")
  s=$(steps_of "$w")
  # shellcheck disable=SC2046 # the flags are words
  timeout 600 "${CL_MPI[@]}" "${env1[@]}" $(config_env "$config") -np "$np" "$CL_PIN" "$cltrain" train \
    $(flags_of "$w") $(config_flags "$config") --epochs 3 --batch-per-replica "$b" \
    --train-limit $((np * b * s)) --split equal --checkpoint-every 0 --log "$tmp/$name.jsonl" "$@" \
    >"$tmp/$name.txt" 2>&1 || { echo "bench_cost_model.sh: $name failed: $(tail -2 "$tmp/$name.txt")" >&2; return 1; }
  local ips ar comp line
  ips=$(sed -n '2,3p' "$tmp/$name.jsonl" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median)
  ar=$(sed -n '2,3p' "$tmp/$name.jsonl" | grep -Eo '"allreduce_seconds": [0-9.]+' | cut -d' ' -f2 |
    awk -v s="$s" '{ print $1 / s }' | median)
  # The slowest replica's compute a step: what the step waited for in that run.
  comp=$(sed -n '2,3p' "$tmp/$name.jsonl" | while read -r line; do
    grep -Eo '"compute_seconds": [0-9.]+' <<<"$line" | cut -d' ' -f2 | sort -g | tail -1
  done | awk -v s="$s" '{ print $1 / s }' | median)
  echo "$ips $ar $comp"
}

# The copy: bench_allreduce's copy bandwidth (bytes / the mean of a download and an
# upload) at two sizes, as FLOATS:SECONDS of a download and an upload.
copy_points=()
for f in 65536 8388608; do
  bw=$(cluster_exec 1 env POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1 taskset -c 0 \
    "$build/tests/bench_allreduce" --floats "$f" --repeats "$repeat" | sed -nE 's/.*copy bandwidth ([0-9.]+) GB\/s.*/\1/p')
  [ -n "$bw" ] || { echo "bench_cost_model.sh: bench_allreduce gave no copy bandwidth" >&2; exit 1; }
  copy_points+=("$f:$(awk -v f="$f" -v bw="$bw" 'BEGIN { printf "%.9g", 2 * f * 4 / (bw * 1e9) }')")
done
read -r copy_alpha copy < <("${model[@]}" fit --kind copy "${copy_points[@]}" |
  awk '{ v[$1] = $2 } END { print v["alpha"], v["beta"] }')
echo "copy between a device and the host: ${copy_points[*]} (FLOATS:SECONDS down and up) -> $copy_alpha s a copy + $copy s a byte"

# Step time alone, the backward share, the gradient's floats.
declare -A floats backward
for w in $workloads; do
  train 1 "$w" plain "trace-$w" --trace "$tmp/$w-trace.json" --trace-steps 4 >/dev/null || exit 1
  backward[$w]=$("${model[@]}" backward "$tmp/$w-trace.json" | awk '{ print $2 }')
  floats[$w]=$(grep -Eo 'Model [^:]+: [0-9]+ parameters' "$tmp/trace-$w.txt" | grep -Eo '[0-9]+ parameters' | cut -d' ' -f1)
  echo "$w: ${floats[$w]} parameters, batch $(batch_of "$w") a replica, backward ${backward[$w]} of device time"
done

# Each link: cltrain bench allreduce across the 2 hosts, less the copies, fitted.
sizes="16,4096,65536,1048576,4194304"
for w in $workloads; do sizes="$sizes,${floats[$w]}"; done
declare -A alpha beta
for link in off $links; do
  rate=${link%%:*}
  delay=${link#*:}
  [ "$delay" = "$link" ] && delay=""
  # shellcheck disable=SC2086 # delay may be empty
  cluster_shape "$rate" $delay 2>/dev/null || { echo "bench_cost_model.sh: cluster_shape $link failed" >&2; exit 1; }
  timeout 600 "${CL_MPI[@]}" "${env1[@]}" -np 2 "$CL_PIN" "$cltrain" bench allreduce --devices 0 \
    --floats "$sizes" --repeat "$repeat" >"$tmp/ar-$rate.txt" 2>&1 ||
    { echo "bench_cost_model.sh: bench allreduce on $link failed: $(tail -2 "$tmp/ar-$rate.txt")" >&2; exit 1; }
  mapfile -t pts < <(awk -v a="$copy_alpha" -v c="$copy" '$1 ~ /^[0-9]+$/ && NF >= 4 {
      t = $3 / 1e3 - 2 * (a + 4 * $1 * c); if (t > 0) printf "%s:%.9g\n", $1, t }' "$tmp/ar-$rate.txt")
  read -r "alpha[$link]" "beta[$link]" < <("${model[@]}" fit --kind ring --procs 2 "${pts[@]}" |
    awk '{ v[$1] = $2 } END { print v["alpha"], v["beta"] }')
  echo "link $link: all-reduce less copies ${pts[*]} (FLOATS:SECONDS) -> alpha ${alpha[$link]} s, beta ${beta[$link]} s/B ($(awk -v b="${beta[$link]}" 'BEGIN { printf "%.2f", 8e-9 / b }') Gbit/s)"
done
beta_cpu=${beta[off]}

# Rounds: each workload alone, then on 2 hosts at each link in each configuration.
declare -A got_ips got_ar got_comp
for ((r = 1; r <= runs; r++)); do
  for w in $workloads; do
    read -r ips ar comp < <(train 1 "$w" plain "one-$w-$r") || exit 1
    got_ips[$w,one]+="$ips "
    got_comp[$w,one]+="$comp "
  done
  for link in $links; do
    rate=${link%%:*}
    delay=${link#*:}
    [ "$delay" = "$link" ] && delay=""
    # shellcheck disable=SC2086
    cluster_shape "$rate" $delay 2>/dev/null
    for w in $workloads; do
      for c in "${configs[@]}"; do
        read -r ips ar comp < <(train 2 "$w" "$c" "two-$w-$rate-$c-$r") || exit 1
        got_ips[$w,$link,$c]+="$ips "
        got_ar[$w,$link,$c]+="$ar "
        got_comp[$w,$link,$c]+="$comp "
      done
    done
  done
  echo "round $r of $runs done (load average $(cut -d' ' -f1 /proc/loadavg))"
done
cluster_shape off

med() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | median; }

# predict WORKLOAD LINK CONFIG STEP: the model's "images/s all-reduce" for 2 hosts.
predict() {
  local w=$1 link=$2 c=$3 t=$4
  # shellcheck disable=SC2046 # the model's flags are words
  "${model[@]}" predict --hosts 2 --devices 1 --batch "$(batch_of "$w")" --step "$t" \
    --backward "${backward[$w]}" --floats "${floats[$w]}" --alpha "${alpha[$link]}" \
    --beta "${beta[$link]}" --beta-cpu "$beta_cpu" --copy "$copy" --copy-alpha "$copy_alpha" \
    --conv "$(awk -v c="$copy" 'BEGIN { print 4 * c }')" --cpu-devices $(config_model "$c") |
    awk '{ v[$1] = $2 } END { print v["images_per_second"], v["allreduce_seconds"] }'
}

echo
echo "Predicted against measured: medians of $runs rounds, epochs 2-3 each; hosts of one core each."
echo "The prediction takes a device's step time from the runs on 1 host; the last two columns take"
echo "it from the same run's slowest replica instead (its compute a step), which leaves out what"
echo "other load on the machine does to the compute, to check the all-reduce's part of the model."
echo "Of ideal: images/s over 2 x one host's (the issue's goals), measured / predicted."
echo "| workload | link | config | hosts | measured images/s | predicted | error | of ideal | all-reduce s/step measured | predicted | run's compute s/step | predicted from it | error |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for w in $workloads; do
  b=$(batch_of "$w")
  one=$(med "${got_ips[$w,one]}")
  t=$(awk -v b="$b" -v i="$one" 'BEGIN { printf "%.6g", b / i }')
  awk -v w="$w" -v m="$one" -v t="$t" -v c="$(med "${got_comp[$w,one]}")" 'BEGIN {
    printf "| %s | - | - | 1 | %.1f | (input: a step of %.4f s) | | | | | %.4f | | |\n", w, m, t, c }'
  for link in $links; do
    for c in "${configs[@]}"; do
      read -r p_ips p_ar < <(predict "$w" "$link" "$c" "$t")
      comp=$(med "${got_comp[$w,$link,$c]}")
      read -r q_ips _ < <(predict "$w" "$link" "$c" "$comp")
      awk -v w="$w" -v l="$link" -v c="$c" -v mi="$(med "${got_ips[$w,$link,$c]}")" -v pi="$p_ips" \
        -v ma="$(med "${got_ar[$w,$link,$c]}")" -v pa="$p_ar" -v t="$comp" -v qi="$q_ips" -v one="$one" 'BEGIN {
        printf "| %s | %s | %s | 2 | %.1f | %.1f | %+.0f%% | %.0f%% / %.0f%% | %.3f | %.3f | %.4f | %.1f | %+.0f%% |\n",
          w, l, c, mi, pi, 100 * (pi - mi) / mi, 50 * mi / one, 50 * pi / one, ma, pa, t, qi, 100 * (qi - mi) / mi }'
    done
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
