#!/usr/bin/env bash
# Runs one fuzz target of tests/fuzz with its settings (input size limit,
# dictionary, per-input timeout), from its seed corpus.
#
#   tests/fuzz/run.sh [options] TARGET [SECONDS] [-- LIBFUZZER_FLAGS...]
#
#   TARGET       idx, npz, checkpoint, photos or keras
#   SECONDS      run for this long (-max_total_time); default 60
#   --runs N     run N inputs instead (what ctest does)
#   --build DIR  the CLT_FUZZ build folder (default: build-fuzz, configured and
#                built here when it does not exist: CC=clang-14 ... -DCLT_FUZZ=ON)
#   --binary F   the target's executable (default DIR/tests/fuzz/fuzz_TARGET)
#   --work DIR   the working corpus: new inputs go there, the seeds are read
#                from tests/fuzz/corpus/TARGET (default DIR/tests/fuzz/work/TARGET,
#                kept between runs so a long run goes on where the last stopped)
#   --fresh      empty the working corpus first
#
# Crashes, leaks, timeouts and out-of-memory inputs are written to
# WORK/../crashes/TARGET/ (the path is printed); replay one with `BINARY FILE`.
# The exit status is libFuzzer's: 0 when nothing was found. On failure the
# reproducer is also printed in base64 (`base64 -d` turns it back into the file),
# so CI's log keeps it. Uses one core.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

build="" binary="" work="" fresh=0 runs="" seconds=60 target=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --runs) runs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "$target" ]; then target=$1; else seconds=$1; fi; shift ;;
  esac
done

# Per target: the largest input tried (about twice the largest seed), a dictionary
# of the format's words where one helps, and tighter memory limits where the
# reader promises them. Every target: 10 s per input at most (a slower one is a
# finding), 2.5 GB of memory (libFuzzer's default is 2 GB; the readers may take
# up to 2 GiB for a real file).
dict=""
limits=()
case "$target" in
  # IDX: no allocation beyond the data (a header's claim used to be allocated whole)
  idx) max_len=4096; limits=(-malloc_limit_mb=64) ;;
  npz) max_len=16384 ;;
  checkpoint) max_len=8192; dict=$here/checkpoint.dict ;;
  photos) max_len=16384 ;;
  keras) max_len=32768; dict=$here/keras.dict ;;
  *) echo "run.sh: TARGET must be idx, npz, checkpoint, photos or keras" >&2; exit 2 ;;
esac

if [ -z "$binary" ]; then
  build=${build:-$root/build-fuzz}
  if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "run.sh: configuring $build (clang-14, CLT_FUZZ=ON)"
    CC=${CC:-clang-14} cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCLT_FUZZ=ON >/dev/null
  fi
  cmake --build "$build" --target "fuzz_$target" -j"$(nproc)" >/dev/null
  binary=$build/tests/fuzz/fuzz_$target
  work=${work:-$build/tests/fuzz/work/$target}
fi
[ -x "$binary" ] || { echo "run.sh: no executable $binary" >&2; exit 2; }
work=${work:-$(dirname "$binary")/work/$target}
crashes=$(dirname "$work")/../crashes/$target
[ $fresh -eq 0 ] || rm -rf "$work" "$crashes"
mkdir -p "$work" "$crashes"
crashes=$(cd "$crashes" && pwd)

limit=(-max_total_time="$seconds")
[ -z "$runs" ] || limit=(-runs="$runs")
flags=(-max_len="$max_len" -timeout=10 -rss_limit_mb=2560 "${limits[@]}" -print_final_stats=1
       -artifact_prefix="$crashes/" "${limit[@]}")
[ -z "$dict" ] || flags+=(-dict="$dict")
# UB is fatal already (-fno-sanitize-recover); stack traces make a report usable.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null; then
  for s in llvm-symbolizer-14 /usr/lib/llvm-14/bin/llvm-symbolizer; do
    if command -v "$s" >/dev/null; then export ASAN_SYMBOLIZER_PATH; ASAN_SYMBOLIZER_PATH=$(command -v "$s"); break; fi
  done
fi
echo "run.sh: $(basename "$binary") ${flags[*]} ${extra[*]} $work $here/corpus/$target"
start=$(mktemp)
trap 'rm -f "$start"' EXIT
# The progress lines (NEW, REDUCE, pulse...) are left out: thousands in a long run.
set +e
"$binary" "${flags[@]}" "${extra[@]}" "$work" "$here/corpus/$target" 2>&1 |
  grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|RELOAD|pulse) '
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  while IFS= read -r f; do
    echo "run.sh: reproducer $f ($(stat -c %s "$f") bytes; base64 -d restores it):"
    head -c 8192 "$f" | base64 -w 100
  done < <(find "$crashes" -type f -newer "$start")
fi
exit "$rc"
