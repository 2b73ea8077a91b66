#!/usr/bin/env bash
# The cltrain command's devices, train, eval, predict and export are built on the
# public API alone: every file of src/cli/ includes only "cltrain.h", the
# folder's "commands.h" and system headers <...>, except the files of the parts
# left on cltrain's internals (src/cli/commands.h says why), listed here. A new
# file in src/cli/ follows the rule unless it is added to the list.
#   test_cli_headers.sh SOURCE_DIR
set -u
src=$1
. "$(dirname "$0")/lib.sh"
internals=(bench.c internals.c internals.h plot.c plot.h plot_impl.h plot_log.c tune.c)

# foreign FILE: the quoted includes of FILE other than "cltrain.h" and "commands.h".
foreign() {
  grep -E '^[[:space:]]*#[[:space:]]*include' "$1" | grep -vE '^[[:space:]]*#[[:space:]]*include[[:space:]]*(<[^>]+>|"cltrain\.h"|"commands\.h")[[:space:]]*(/[*/].*)?$'
}

# The check itself: a file including an internal header is caught.
printf '#include <stdio.h>\n#include "cltrain.h"\n#include "trainer.h"\n' >"$tmp/probe.c"
if [ "$(foreign "$tmp/probe.c")" = '#include "trainer.h"' ]; then ok "the check finds an internal header"
else bad "the check finds an internal header"; fi

files=0
for f in "$src"/src/cli/*.[ch]; do
  name=$(basename "$f")
  if printf '%s\n' "${internals[@]}" | grep -qx "$name"; then continue; fi
  files=$((files + 1))
  found=$(foreign "$f")
  if [ -z "$found" ]; then ok "src/cli/$name includes only cltrain.h, commands.h and system headers"
  else bad "src/cli/$name includes internal headers: $(tr '\n' ' ' <<<"$found")"; fi
done
grep -q '"cltrain.h"' "$src/src/cli/main.c" && ok "main.c is on cltrain.h" || bad "main.c is on cltrain.h"
[ "$files" -ge 2 ] && ok "$files files checked" || bad "src/cli/main.c and commands.h checked ($files files)"
for name in "${internals[@]}"; do
  [ -e "$src/src/cli/$name" ] || bad "src/cli/$name, listed as on the internals, exists"
done
finish
