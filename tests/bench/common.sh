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
  grep -q avx512f /proc/cpuinfo && cpu="AVX-512" || cpu="AVX2 only"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $cpu"
}
