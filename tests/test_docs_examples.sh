#!/usr/bin/env bash
# The examples of README.md and docs/*.md, run as a reader would run them, so that a
# renamed flag, a changed default or a moved file fails here rather than for the
# reader. Each page runs in a folder of its own, its examples in page order (so a
# page's train, eval and export chain as they do for the reader), on small data.
# docs/testing.md ("Examples in the docs") describes the markers and the small-data
# rule.
#   test_docs_examples.sh CLTRAIN BUILD_DIR SOURCE_DIR [PAGE.md ...]
# Without pages: README.md and every docs/*.md but the generated flags.md.
#
# Markers, HTML comments on the line before a fenced block (GitHub shows neither):
#   <!-- example -->            run the block's commands; each must exit 0
#   <!-- example exit=N -->     the same, but the block's last command must exit N
#   <!-- example skip: WHY -->  do not run it, for the reason given (mpirun, GPUs, ...)
# In a block whose lines start with "$ " (a transcript), those lines are the
# commands and the rest is output; otherwise every line is a command ("\" joins
# lines). Every block that shows a cltrain command must carry a marker.
set -u
CLT=$(realpath "$1")
BUILD=$(realpath "$2")
SRC=$(realpath "$3")
shift 3
PYTHON=${PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/lib.sh"

# The sizes an example runs at unless it gives its own: a train runs --epochs 2 on
# the first 16 training and 16 test (or validation) examples. Nothing else is
# changed: eval, export and plot run as shown.
bin=$tmp/bin
mkdir -p "$bin"
cat >"$bin/cltrain" <<EOF
#!/usr/bin/env bash
# cltrain for the docs' examples: small sizes for train where the example gives none;
# a --resume keeps the data its checkpoint records, as the docs say it does.
if [ "\${1:-}" = train ]; then
  given() { local a; for a in "\${@:2}"; do [[ \$a == "\$1" || \$a == "\$1="* ]] && return 0; done; return 1; }
  more=()
  given --epochs "\$@" || more+=(--epochs 2)
  if ! given --resume "\$@"; then
    given --train-limit "\$@" || more+=(--train-limit 16)
    given --test-limit "\$@" || more+=(--test-limit 16)
  fi
  exec "$CLT" "\$@" "\${more[@]}"
fi
exec "$CLT" "\$@"
EOF
# TensorBoard serves until stopped: instead, check that the folder it is given holds
# event files.
cat >"$bin/tensorboard" <<'EOF'
#!/usr/bin/env bash
# tensorboard --logdir DIR: DIR must hold event files (the real one would serve them).
[ "${1:-}" = --logdir ] && [ -n "$(find "${2:-/nonexistent}" -name 'events.out.tfevents.*' 2>/dev/null)" ] && exit 0
echo "tensorboard (docs_examples): no event files under --logdir ${2:-}" >&2
exit 1
EOF
ln -s "$PYTHON" "$bin/python3"
chmod +x "$bin/cltrain" "$bin/tensorboard"
python_ok=1
"$PYTHON" -c 'import numpy, onnx, onnxruntime' 2>/dev/null || python_ok=0

# examples PAGE: the page's commands as "LINE<tab>EXIT<tab>COMMAND" (EXIT: the
# status expected, "skip: WHY" for a skipped block), and on stderr each block that
# shows a cltrain command without a marker.
examples() {
  awk -v page="$1" '
    function flush(   i, n, cmd, status) {
      n = 0
      for (i = 1; i <= nlines; i++) {
        if (transcript && lines[i] !~ /^\$ /) continue
        cmd = transcript ? substr(lines[i], 3) : lines[i]
        if (cmd ~ /^[ \t]*(#.*)?$/) continue
        at_line = start + i
        while (cmd ~ /\\$/ && i < nlines) { cmd = substr(cmd, 1, length(cmd) - 1) " " lines[++i] }
        n++; cmds[n] = cmd; at[n] = at_line
      }
      if (n == 0) print page ":" start ": a marked block holds no command" > "/dev/stderr"
      for (i = 1; i <= n; i++) {
        status = skip != "" ? skip : (i == n ? want : 0)
        print at[i] "\t" status "\t" cmds[i]
      }
    }
    inblock && /^```/ {
      inblock = 0
      if (marked) flush()
      else if (shows) print page ":" start ": a block that shows a cltrain command has no <!-- example --> marker" > "/dev/stderr"
      next
    }
    inblock {
      lines[++nlines] = $0
      if (nlines == 1) transcript = $0 ~ /^\$ /
      if ($0 ~ /^(\$ )?([A-Za-z_]+=("[^"]*"|[^ ]*) +)*(mpirun [^|;&]* )?(\.\/)?(build\/)?cltrain [a-z]/) shows = 1
      next
    }
    /^```/ {
      inblock = 1; start = NR; nlines = 0; shows = 0; transcript = 0
      marked = pending; pending = 0; want = pwant; skip = pskip
      next
    }
    /^<!-- example( .*)? -->$/ {
      pending = 1; pwant = 0; pskip = ""
      if (match($0, /exit=[0-9]+/)) pwant = substr($0, RSTART + 5, RLENGTH - 5)
      if (match($0, /skip: .+ -->$/)) pskip = "skip: " substr($0, RSTART + 6, RLENGTH - 10)
      else if ($0 ~ /skip/) print page ":" NR ": a skip without a reason (<!-- example skip: WHY -->)" > "/dev/stderr"
      next
    }
    pending { print page ":" NR - 1 ": a marker not on the line before a fenced block" > "/dev/stderr"; pending = 0 }
    END { if (inblock) print page ": a fenced block is not closed" > "/dev/stderr" }
  ' "$2"
}

# run_page NAME FILE: the page's examples in order, in a folder of their own that
# has the source's tests/ and a build/ whose cltrain is the small-size one.
run_page() {
  local name=$1 file=$2 dir=$tmp/run/$1 line want cmd rc t0 t1 n=0
  mkdir -p "$dir/build"
  ln -s "$SRC/tests" "$dir/tests"
  ln -s "$BUILD/tests" "$dir/build/tests"
  cp "$bin/cltrain" "$dir/build/cltrain"
  examples "$name" "$file" >"$tmp/$name.cmds" 2>"$tmp/$name.unmarked"
  if [ -s "$tmp/$name.unmarked" ]; then
    while IFS= read -r msg; do bad "$msg"; done <"$tmp/$name.unmarked"
  fi
  while IFS=$'\t' read -r line want cmd; do
    n=$((n + 1))
    if [[ $want == skip:* ]]; then
      echo "skip: $name:$line: $cmd (${want#skip: })"
      continue
    fi
    if [[ $cmd == python3\ * ]] && [ $python_ok -eq 0 ]; then
      if [ "${CI:-}" = true ]; then bad "$name:$line: $cmd: $PYTHON lacks numpy, onnx or onnxruntime"; else
        echo "skip: $name:$line: $cmd ($PYTHON lacks numpy, onnx or onnxruntime)"
      fi
      continue
    fi
    t0=$(date +%s.%N)
    (cd "$dir" && PATH="$bin:$PATH" bash -c "$cmd") >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    t1=$(date +%s.%N)
    if [ "$rc" -eq "$want" ]; then
      ok "$name:$line: $cmd (exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1fs", b - a }'))"
    else
      bad "$name:$line: $cmd: exit $rc, not $want; stderr: $(tail -c 400 "$tmp/err") stdout: $(tail -c 300 "$tmp/out")"
    fi
  done <"$tmp/$name.cmds"
  [ $n -gt 0 ] || echo "note: $name has no marked example"
}

# The runner itself, on a page of its own: a misspelt flag fails an example, an
# example marked with the status it exits with passes, and a block that shows a
# cltrain command without a marker, or a marker apart from its block, is reported.
cat >"$tmp/self.md" <<'EOF'
<!-- example -->
```sh
cltrain train --epochz 1
```
<!-- example exit=1 -->
```sh
cltrain train --epochz 1
```
```
$ cltrain devices
```
<!-- example -->

```sh
```
EOF
got=$(run_page self "$tmp/self.md")
if grep -q "^FAIL: self:3: cltrain train --epochz 1: exit 1, not 0" <<<"$got" &&
  grep -q "^ok: self:7: cltrain train --epochz 1 (exit 1" <<<"$got" &&
  grep -q "^FAIL: self:9: a block that shows a cltrain command has no" <<<"$got" &&
  grep -q "^FAIL: self:12: a marker not on the line before a fenced block" <<<"$got" &&
  [ "$(grep -c '^FAIL' <<<"$got")" -eq 3 ]; then
  ok "the runner: a misspelt flag fails, exit=N is honoured, an unmarked command and a stray marker are found"
else
  bad "the runner on a test page: $got"
fi

if [ $# -eq 0 ]; then
  set -- "$SRC/README.md"
  for f in "$SRC"/docs/*.md; do [ "$(basename "$f")" = flags.md ] || set -- "$@" "$f"; done
fi
start=$(date +%s)
for f in "$@"; do run_page "$(basename "$f" .md)" "$f"; done
echo "the examples took $(($(date +%s) - start)) s"
finish
