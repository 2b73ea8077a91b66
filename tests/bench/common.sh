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
# CPU lacks avx512f, or "AVX2 code on AVX-512" under isa_env avx2) and sets cpu
# to that last part.
cpu_kind() {
  grep -q avx512f /proc/cpuinfo && cpu="AVX-512" || cpu="AVX2 only"
  [ "${isa:-}" = avx2 ] && [ "$cpu" = AVX-512 ] && cpu="AVX2 code on AVX-512"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $cpu"
}

# isa_env ISA: --isa of the benchmarks. "native" (the default) changes nothing.
# "avx2" runs every column with AVX2 code only, to measure the AVX2 kind's code
# paths on an AVX-512 host, side by side: PoCL compiles for haswell with its
# AVX2 kernel library (POCL_LLVM_CPU_NAME, POCL_KERNELLIB_NAME; it still reports
# the host's vector width, so CLTRAIN_CPU_VECTOR_WIDTH=8 gives cltrain AVX2's
# tiles), and PyTorch's ATen and oneDNN (TensorFlow's oneDNN too) stop at AVX2
# (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA). The cores, caches and memory stay
# the AVX-512 host's, so this stands in for an AVX2-only CPU, not for its figures.
isa_env() {
  isa=$1
  case $isa in
    native) ;;
    avx2)
      export POCL_LLVM_CPU_NAME=haswell POCL_KERNELLIB_NAME=avx2 CLTRAIN_CPU_VECTOR_WIDTH=8 \
        ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ;;
    *) echo "$(basename "$0"): --isa must be native or avx2, not $isa" >&2; exit 2 ;;
  esac
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

# torch_compiles PYTHON: whether torch.compile compiles and runs a function there
# (TorchInductor needs a C++ compiler); notes it on stderr when not.
torch_compiles() {
  "$1" -c 'import torch; f = torch.compile(lambda x: x * 2 + 1); assert float(f(torch.ones(4)).sum()) == 12' \
    >/dev/null 2>&1 && return 0
  echo "note: torch.compile fails here (TorchInductor needs a C++ compiler: apt-get install g++):" \
    "no torch.compile columns" >&2
  return 1
}

# fma_peak BUILD: prints the CPU's FMA peak in GFLOP/s as BUILD/tests/bench_gemm
# --peak measures it (its line "FMA peak: <number> GFLOP/s"), or nothing when that
# binary or option is missing or fails.
fma_peak() {
  { timeout 300 "$1/tests/bench_gemm" --peak 2>/dev/null || true; } |
    sed -nE 's/.*FMA peak: *([0-9.]+) *GFLOP\/s.*/\1/p' | head -n1
}
