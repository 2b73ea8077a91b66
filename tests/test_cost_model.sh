#!/usr/bin/env bash
# The cost model of many hosts (tests/bench/cost_model.py) on fixed inputs, against
# figures worked out by hand below: the ring, halving-doubling and tree times, the
# hierarchical all-reduce with copies, overlap (with and without CPU devices),
# buckets, --wire fp16, the fits of alpha and beta, the backward share of a trace,
# the crossover, and bad input. No timing.
#   test_cost_model.sh
set -u
. "$(dirname "$0")/lib.sh"
MODEL=(python3 "$(dirname "$0")/bench/cost_model.py")

# expect_value NAME KEY WANT CMD...: CMD prints "KEY VALUE" with VALUE within 1e-4 of WANT
# (relative). Each command runs once; later checks of its other keys read its output.
declare -A outputs
expect_value() {
  local name=$1 key=$2 want=$3 got
  shift 3
  [ -n "${outputs[$*]+set}" ] || outputs[$*]=$("$@" 2>"$tmp/err")
  got=$(awk -v k="$key" '$1 == k { print $2 }' <<<"${outputs[$*]}")
  if awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d; m = w < 0 ? -w : w
         exit !(g != "" && d <= 1e-4 * (m > 1e-12 ? m : 1e-12)) }'; then ok "$name ($key $got)"; else
    bad "$name ($key: got '$got', want $want; $(head -c 300 "$tmp/err"))"
  fi
}

# Two hosts, one device each, 250,000 floats (1e6 bytes), alpha 1 ms, beta 1e-8 s/B,
# copies 1e-9 s/B, a 1 s step of 10 images:
#   copies: download + upload 2 x 1e6 x 1e-9 = 0.002 s
#   ring: 2(P-1)(alpha + m/P beta) = 2 (0.001 + 0.005) = 0.012 s
#   step 1.014 s, 20 images / 1.014 s = 19.72387 images/s, scaling 1/1.014 = 0.986193
base=(--hosts 2 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8 --copy 1e-9)
expect_value "ring across two hosts" cross_seconds 0.012 "${MODEL[@]}" predict "${base[@]}"
expect_value "copies to and from the device" copy_seconds 0.002 "${MODEL[@]}" predict "${base[@]}"
expect_value "all-reduce: copies and ring" allreduce_seconds 0.014 "${MODEL[@]}" predict "${base[@]}"
expect_value "images/s without overlap" images_per_second 19.723866 "${MODEL[@]}" predict "${base[@]}"
expect_value "scaling" scaling 0.986193 "${MODEL[@]}" predict "${base[@]}"
expect_value "one host: no all-reduce" images_per_second 10 \
  "${MODEL[@]}" predict --hosts 1 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8

# A slow link, beta 1e-6: ring 2 (0.001 + 0.5) = 1.002 s, all-reduce 1.004 s.
#   no overlap: 1 + 1.004 = 2.004 s
#   overlap behind half a step of backward: 1 + max(0, 1.004 - 0.5) = 1.504 s
#   overlap behind the whole step: 1 + 0.004 = 1.004 s
#   the same with CPU devices, beta-cpu 1e-8: their cores copy (0.002 s) and send and receive
#   2(P-1)/P x 1e6 x 1e-8 = 0.01 s: 1 + 0.012 + max(0, 1.004 - 0.012 - 1) = 1.012 s
slow=(--hosts 2 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-6 --copy 1e-9)
expect_value "slow link without overlap" step_seconds 2.004 "${MODEL[@]}" predict "${slow[@]}" --backward 0.5
expect_value "overlap hides behind the backward pass only" step_seconds 1.504 \
  "${MODEL[@]}" predict "${slow[@]}" --backward 0.5 --overlap
expect_value "overlap behind a whole step" step_seconds 1.004 \
  "${MODEL[@]}" predict "${slow[@]}" --backward 1 --overlap
expect_value "overlap on CPU devices keeps their cores' share" step_seconds 1.012 \
  "${MODEL[@]}" predict "${slow[@]}" --backward 1 --overlap --cpu-devices --beta-cpu 1e-8
expect_value "CPU devices without overlap: the same all-reduce" step_seconds 2.004 \
  "${MODEL[@]}" predict "${slow[@]}" --backward 1 --cpu-devices --beta-cpu 1e-8

# Buckets of 62,500 floats with overlap: 4 rings of 2.5e5 bytes,
#   4 x 2 (0.001 + 1.25e5 x 1e-8) = 0.018 s (one buffer: 0.012 s).
expect_value "buckets pay the latency each" cross_seconds 0.018 \
  "${MODEL[@]}" predict "${base[@]}" --overlap --bucket-floats 62500
expect_value "buckets only with overlap" cross_seconds 0.012 \
  "${MODEL[@]}" predict "${base[@]}" --bucket-floats 62500

# Four hosts of two devices, fp16 on the wire, copies 1e-9 s/B plus 1e-4 s each, conversion
# 1e-9 s a float:
#   device ring: 2(G-1)(1e-4 + 2 x 1e6/2 x 1e-9) = 2 x 0.0011 = 0.0022 s
#   download + upload: 2 x (1e-4 + 1e6 x 1e-9) = 0.0022 s
#   ring of 5e5 bytes: 2 x 3 (0.001 + 1.25e5 x 1e-8) = 0.0135 s
#   conversions: 2 x 2(P-1)/P x 250,000 x 1e-9 = 0.00075 s
#   all-reduce 0.01865 s; 80 images / 1.01865 s = 78.535316 images/s
fp16=(--hosts 4 --devices 2 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8 --copy 1e-9
  --copy-alpha 1e-4 --conv 1e-9 --wire fp16)
expect_value "device ring within a host" local_seconds 0.0022 "${MODEL[@]}" predict "${fp16[@]}"
expect_value "fp16: half the bytes" cross_seconds 0.0135 "${MODEL[@]}" predict "${fp16[@]}"
expect_value "fp16: conversions" convert_seconds 0.00075 "${MODEL[@]}" predict "${fp16[@]}"
expect_value "hierarchical all-reduce" allreduce_seconds 0.01865 "${MODEL[@]}" predict "${fp16[@]}"
expect_value "hierarchical images/s" images_per_second 78.535316 "${MODEL[@]}" predict "${fp16[@]}"

# Eight hosts, 1e6 bytes, alpha 1 ms, beta 1e-8:
#   ring 14 (0.001 + 1.25e-3) = 0.0315 s
#   halving-doubling 6 x 0.001 + 2 x 7/8 x 0.01 = 0.0235 s
#   tree 2 (sqrt(2 x 0.001) + sqrt(0.01))^2 = 0.04188854 s
# Six hosts: ring 10 (0.001 + 1e6/6 x 1e-8) = 0.0266667 s; halving-doubling on 4
#   (0.004 + 0.015) plus 2 (0.001 + 0.01) for the two beyond = 0.041 s
eight=(--hosts 8 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8)
expect_value "ring over 8" cross_seconds 0.0315 "${MODEL[@]}" predict "${eight[@]}"
expect_value "halving-doubling over 8" cross_seconds 0.0235 "${MODEL[@]}" predict "${eight[@]}" --algorithm hd
expect_value "pipelined tree over 8" cross_seconds 0.04188854 "${MODEL[@]}" predict "${eight[@]}" --algorithm tree
six=(--hosts 6 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8)
expect_value "ring over 6" cross_seconds 0.0266667 "${MODEL[@]}" predict "${six[@]}"
expect_value "halving-doubling over 6" cross_seconds 0.041 "${MODEL[@]}" predict "${six[@]}" --algorithm hd

# Crossover at a 10% margin: at 4 hosts halving-doubling takes 0.019 s against the ring's
# 0.021 s (under 10% less), at 8 0.0235 s against 0.0315 s.
out=$("${MODEL[@]}" project --hosts 8 --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8 2>&1)
if grep -q "crossover (one buffer): from 8 hosts hd all-reduces across hosts in 23.5 ms against the ring's 31.5 ms" <<<"$out"; then
  ok "crossover at 8 hosts"
else bad "crossover at 8 hosts ($out)"; fi
if grep -Eq '^\| 8 \| 8 \| ring \| off \| fp32 \| 31.5 \| 1031.5 \| 78 \| 97% \|$' <<<"$out"; then
  ok "projection table row"
else bad "projection table row ($(head -c 600 <<<"$out"))"; fi

# Fits: times made from alpha 2e-4, beta 5e-9 over two processes (t = 2 alpha + bytes beta),
# and a copy of alpha 1e-5, 1e-10 s/B (t = 2 alpha + 2 bytes c).
expect_value "fit ring: alpha" alpha 2e-4 "${MODEL[@]}" fit --kind ring --procs 2 1000:4.2e-4 1000000:0.0204 10000000:0.2004
expect_value "fit ring: beta" beta 5e-9 "${MODEL[@]}" fit --kind ring --procs 2 1000:4.2e-4 1000000:0.0204 10000000:0.2004
# A large size 5% slow: beta is the larger half's slope, (0.21 - 0.0204) / 3.6e7 = 5.266667e-9, and
# alpha what the smallest size leaves: (4.2e-4 - 4000 x 5.266667e-9) / 2 = 1.994667e-4.
noisy=(1000:4.2e-4 100000:0.0024 1000000:0.0204 10000000:0.21)
expect_value "fit ring: beta from the large sizes" beta 5.266667e-9 "${MODEL[@]}" fit --kind ring --procs 2 "${noisy[@]}"
expect_value "fit ring: alpha from the smallest" alpha 1.994667e-4 "${MODEL[@]}" fit --kind ring --procs 2 "${noisy[@]}"
expect_value "fit copy: alpha" alpha 1e-5 "${MODEL[@]}" fit --kind copy 1000:2.08e-5 1000000:8.2e-4
expect_value "fit copy: cost per byte" beta 1e-10 "${MODEL[@]}" fit --kind copy 1000:2.08e-5 1000000:8.2e-4

# The backward share of a trace's device layers (another track's spans do not count):
# 300 of 400 us.
cat >"$tmp/trace.json" <<'EOF'
{"traceEvents": [
 {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "device: layers"}},
 {"ph": "M", "pid": 1, "tid": 4, "name": "thread_name", "args": {"name": "device: kernels and copies"}},
 {"ph": "X", "pid": 1, "tid": 3, "ts": 0, "dur": 100, "name": "dense forward"},
 {"ph": "X", "pid": 1, "tid": 3, "ts": 100, "dur": 300, "name": "dense backward"},
 {"ph": "X", "pid": 1, "tid": 4, "ts": 100, "dur": 1000, "name": "gemm backward"}]}
EOF
expect_value "backward share of a trace" backward 0.75 "${MODEL[@]}" backward "$tmp/trace.json"

expect_fail "fit needs two sizes" "at least two sizes" "${MODEL[@]}" fit --kind copy 1000:1e-3
expect_fail "fit refuses a malformed pair" "expected FLOATS:SECONDS" "${MODEL[@]}" fit --kind copy 1000 2000:1
expect_fail "fit refuses sizes that do not take longer" "no cost per byte" \
  "${MODEL[@]}" fit --kind ring 1000:1e-3 2000:1e-3
expect_fail "a backward share above 1 is refused" "--backward: 1.5: must be in \[0, 1\]" \
  "${MODEL[@]}" predict "${base[@]}" --backward 1.5
expect_fail "project refuses a bad host list" "expected host counts like 8,64,512" \
  "${MODEL[@]}" project --hosts 8,x --batch 10 --step 1 --floats 250000 --alpha 1e-3 --beta 1e-8
expect_fail "backward of a missing trace" "nothing.json" "${MODEL[@]}" backward "$tmp/nothing.json"
expect_fail "backward of a trace without layers" "no 'device: layers' spans" \
  "${MODEL[@]}" backward <(echo '{"traceEvents": []}')
finish
