# Shared by the benchmark scripts.

# median: the median of the numbers on standard input, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# rounds_images DEFAULT_ROUNDS "$@": sets rounds and images (6,400) from --rounds N
# and --images N, refusing anything else; names the CPU kind (cpu, and a line).
rounds_images() {
  rounds=$1
  images=6400
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --rounds) rounds=$2; shift 2 ;;
      --images) images=$2; shift 2 ;;
      *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
    esac
  done
  cpu_kind
}

# cpu_kind: prints "CPU: <model name>, N cores, AVX-512" (or "AVX2 only" when the
# CPU lacks avx512f) and sets cpu to that last part.
cpu_kind() {
  grep -q avx512f /proc/cpuinfo && cpu="AVX-512" || cpu="AVX2 only"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $cpu"
}

# torch_venv: prints the python of a virtual environment holding the current
# PyTorch from PyPI (torch, torchvision, numpy), kept outside the repository in
# ${CLTRAIN_TORCH_VENV:-$HOME/.cache/cltrain/venv-torch}. The first call creates it
# (python3 -m venv, then pip install: about 5 GB, several minutes); later calls
# reuse it as long as its python imports torch and torchvision. For the benchmark
# scripts only: neither CI nor ctest calls it.
torch_venv() {
  local dir=${CLTRAIN_TORCH_VENV:-$HOME/.cache/cltrain/venv-torch}
  if ! "$dir/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
    echo "$(basename "$0"): installing the current PyTorch from PyPI (torch, torchvision, numpy) into $dir:" \
      "about 5 GB, several minutes, once (set CLTRAIN_TORCH_VENV to use another folder)" >&2
    mkdir -p "$(dirname "$dir")"
    if ! { python3 -m venv "$dir" && "$dir/bin/pip" install torch torchvision numpy; } >&2 ||
      ! "$dir/bin/python" -c 'import torch, torchvision' >&2; then
      echo "$(basename "$0"): could not set up PyTorch in $dir" >&2
      return 1
    fi
  fi
  echo "$dir/bin/python"
}

# fma_peak BUILD: prints the CPU's FMA peak in GFLOP/s as BUILD/tests/bench_gemm
# --peak measures it (its line "FMA peak: <number> GFLOP/s"), or nothing when that
# binary or option is missing or fails.
fma_peak() {
  { timeout 300 "$1/tests/bench_gemm" --peak 2>/dev/null || true; } |
    sed -nE 's/.*FMA peak: *([0-9.]+) *GFLOP\/s.*/\1/p' | head -n1
}
