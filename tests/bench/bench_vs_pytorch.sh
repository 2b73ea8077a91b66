#!/usr/bin/env bash
# cltrain on one PoCL device against PyTorch (2 threads) training the same CNN on
# the same images with the same batch, back to back in one run: images/s of each
# (median over runs of the median of epochs 2-3) and the ratio; start-up (launch
# to the end of the first training step) with a cold and a warm PoCL kernel
# cache (PoCL compiles a kernel at its first launch); peak host
# memory (RSS; PoCL's device memory is host memory, so it is included) and
# cltrain's device buffers; and two replicas on the same CPU, as two PoCL devices
# (POCL_DEVICES="pthread pthread", sharing one thread pool) and as two
# sub-devices of one (--devices 0/2, one core each), against one device.
#
#   tests/bench/bench_vs_pytorch.sh [--runs N] [--images N] [--no-replicas]
#
# PyTorch runs with glibc's trimming off: on these machines the first touch of
# fresh memory is slow, and with default trimming PyTorch re-faults its
# temporaries every step (~270 images/s instead of its real ~1,700+).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build
data=/usr/share/datasets/fashion-mnist
runs=3
images=6400
replicas=1
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --no-replicas) replicas=0; shift ;;
    *) echo "bench_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench_vs_pytorch.sh: PyTorch is not installed (apt-get install python3-torch)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/common.sh"
rate() { sed -n '2,3p' "$1" | grep -Eo '"images_per_second": [0-9.]+' | cut -d' ' -f2 | median; }
launch() { grep -Eo 'start-up [0-9.]+s' "$1" | grep -Eo '[0-9.]+'; }

# Start-up, cold (an empty PoCL cache) then warm.
for kind in cold warm; do
  POCL_CACHE_DIR=$tmp/pocl-cache "$build/cltrain" train --devices 0 --epochs 1 --train-limit 64 \
    --test-limit 64 --checkpoint-every 0 >"$tmp/start-$kind.txt"
done
echo "cltrain start-up (launch to the end of the first step): cold kernel cache $(launch "$tmp/start-cold.txt") s," \
  "warm $(launch "$tmp/start-warm.txt") s"

for ((r = 1; r <= runs; r++)); do
  /usr/bin/time -f %M -o "$tmp/rss-c" "$build/cltrain" train --devices 0 --epochs 3 --train-limit "$images" \
    --test-limit 64 --checkpoint-every 0 --log "$tmp/c$r.jsonl" >"$tmp/c$r.txt"
  c=$(rate "$tmp/c$r.jsonl")
  MALLOC_MMAP_THRESHOLD_=17179869184 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824 \
    /usr/bin/time -f %M -o "$tmp/rss-p" /usr/bin/python3 "$here/pytorch_fmnist.py" "$data" "$images" 3 2 \
    >"$tmp/p$r.txt"
  p=$(grep '^epoch' "$tmp/p$r.txt" | sed -n '2,3p' | awk '{ print $4 }' | median)
  echo "run $r: cltrain $c images/s, PyTorch $p images/s"
  echo "$c" >>"$tmp/c"
  echo "$p" >>"$tmp/p"
  echo $(($(cat "$tmp/rss-c") / 1024)) >>"$tmp/rssc"
  echo $(($(cat "$tmp/rss-p") / 1024)) >>"$tmp/rssp"
done
c=$(median <"$tmp/c")
p=$(median <"$tmp/p")
printf 'median over %d runs: cltrain %s images/s, PyTorch %s images/s, ratio %.2f\n' "$runs" "$c" "$p" \
  "$(echo "$c / $p" | bc -l)"
echo "PyTorch start-up (launch to the end of the first step, importing torch): $(grep -Eo 'startup_seconds [0-9.]+' "$tmp/p1.txt" | cut -d' ' -f2) s"
echo "peak host memory (RSS): cltrain $(median <"$tmp/rssc") MiB (device buffers" \
  "$(grep -Eo 'device memory per replica: [0-9]+ MiB' "$tmp/c1.txt" | grep -Eo '[0-9]+ MiB') of it)," \
  "PyTorch $(median <"$tmp/rssp") MiB"

[ "$replicas" -eq 1 ] || exit 0
for cfg in "pthread pthread|0,1|two PoCL devices" "pthread|0/2|two sub-devices of one (--devices 0/2)"; do
  IFS='|' read -r pocl sel what <<<"$cfg"
  rm -f "$tmp/two"
  for ((r = 1; r <= runs; r++)); do
    POCL_DEVICES=$pocl "$build/cltrain" train --devices "$sel" --epochs 3 --train-limit "$images" \
      --test-limit 64 --checkpoint-every 0 --log "$tmp/two$r.jsonl" >/dev/null
    rate "$tmp/two$r.jsonl" >>"$tmp/two"
  done
  t=$(median <"$tmp/two")
  printf '2 replicas, %s, 64 per replica: %s images/s, %.2f of one device (%s)\n' "$what" "$t" \
    "$(echo "$t / $c" | bc -l)" "$c"
done
