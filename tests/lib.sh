# Shared by the shell tests: counters, a temp folder removed on exit, checks.
# Each test sources it, runs its checks, and ends with `finish`.
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

# field FILE LINE NAME: a number from line LINE of a JSONL file.
field() { sed -n "$2p" "$1" | grep -Eo "\"$3\": [-0-9.eE+]+" | cut -d' ' -f2; }

# expect_ok NAME REGEX CMD...: exit 0 and stdout matches REGEX.
expect_ok() {
  local name=$1 re=$2
  shift 2
  local out rc
  out=$("$@" 2>"$tmp/err")
  rc=$?
  if [ $rc -eq 0 ] && grep -Eq -- "$re" <<<"$out"; then ok "$name"; else
    bad "$name (rc=$rc, stdout: $(head -c 300 <<<"$out"), stderr: $(head -c 300 "$tmp/err"))"
  fi
}

# expect_fail NAME REGEX CMD...: non-zero exit, and stderr is one line matching REGEX.
expect_fail() {
  local name=$1 re=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -Eq -- "$re" "$tmp/err"; then ok "$name"; else
    bad "$name (rc=$rc, $lines stderr lines: $(head -c 400 "$tmp/err"))"
  fi
}

# max_rel_diff A.npz B.npz: the parameters' largest difference relative to the largest weight.
max_rel_diff() { "$TOOL" diff "$1" "$2" | awk '{ print $2 }'; }

# expect_close NAME A.npz B.npz LIMIT: parameters of A and B within LIMIT of the largest weight.
expect_close() {
  local d
  d=$(max_rel_diff "$2" "$3")
  if awk -v d="$d" -v l="$4" 'BEGIN { exit !(d != "" && d <= l) }'; then ok "$1 ($d <= $4)"; else bad "$1 ($d > $4)"; fi
}

# same_state A.npz B.npz [KEY...]: every member of two checkpoints equal (values
# and strings), save_counter aside; with KEYs, the metadata's JSON equal apart
# from those keys. Prints "same" or the members that differ. Needs numpy.
same_state() {
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
skip = set(sys.argv[3:])
members = set(a.files) | set(b.files)
members.discard("save_counter")
def meta(z):
    return {k: v for k, v in json.loads(str(z["metadata"])).items() if k not in skip}
def same(m):
    if m not in a.files or m not in b.files:
        return False
    if m == "metadata" and skip:
        return meta(a) == meta(b)
    return a[m].dtype == b[m].dtype and a[m].shape == b[m].shape and a[m].tobytes() == b[m].tobytes()
diff = [m for m in sorted(members) if not same(m)]
print(" ".join(diff) if diff else "same")
sys.exit(1 if diff else 0)
EOF
}

# same_arrays A.npz B.npz: same_state without the metadata (which records the
# layout that ran: processes, hosts, replicas); prints "same" or what differs.
same_arrays() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
members = (set(a.files) | set(b.files)) - {"save_counter", "metadata"}
diff = [m for m in sorted(members)
        if m not in a.files or m not in b.files or a[m].dtype != b[m].dtype
        or a[m].shape != b[m].shape or a[m].tobytes() != b[m].tobytes()]
print(" ".join(diff) if diff else "same")
sys.exit(1 if diff else 0)
EOF
}

# mpi_check CLTRAIN: 0 when mpirun and an MPI build of CLTRAIN are here (MPI is
# then mpirun's command for processes on this host); else a skip's line and 1,
# or a failure under CI, which installs OpenMPI (.ci/setup). CLTRAIN "": mpirun
# alone.
mpi_check() {
  if ! command -v mpirun >/dev/null || { [ -n "$1" ] && ! "$1" --version | grep -q "with MPI"; }; then
    if [ -n "${CI:-}" ]; then bad "cltrain built with MPI and mpirun installed"; else
      echo "skipped: mpirun or an MPI build of cltrain missing (apt-get install libopenmpi-dev openmpi-bin)"
    fi
    return 1
  fi
  MPI=(mpirun --oversubscribe --bind-to none)
  [ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
  return 0
}
# The exit of a test that cannot run: 1 under CI, else 77 (a skip).
skip_exit() {
  finish
  [ -n "${CI:-}" ] && exit 1
  exit 77
}

finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
