#!/usr/bin/env bash
# The flag reference and the man page that the build writes from the flag tables
# (src/app/flags.c, by cltrain_flags_doc): docs/flags.md as committed equals the
# build's, every command's --help lists the flags the reference and the man page
# list, and cltrain.1 renders without a groff warning (skipped, 77, where groff is
# missing, except in CI).
#   test_flags_doc.sh CLTRAIN BUILD_DIR SOURCE_DIR
set -u
CLT=$1
BUILD=$2
SRC=$3
. "$(dirname "$0")/lib.sh"
built=$BUILD/flags.md
man=$BUILD/cltrain.1
committed=$SRC/docs/flags.md

if cmp -s "$committed" "$built"; then ok "docs/flags.md is the one the build writes"; else
  diff -u "$committed" "$built" | head -n 40
  bad "docs/flags.md differs from the flag tables (diff above): regenerate it with\
 'cmake --build $BUILD --target update_flags_doc' (or cp $built $committed) and commit it"
fi

# The commands the reference describes, each with the flags its --help prints.
mapfile -t commands < <(sed -n 's/^## cltrain //p' "$built")
[ ${#commands[@]} -ge 6 ] && ok "the reference describes ${#commands[@]} commands" ||
  bad "the reference describes ${#commands[@]} commands, not 6 or more"
for cmd in "${commands[@]}"; do
  # shellcheck disable=SC2086 # "bench allreduce" is two words
  help=$("$CLT" $cmd --help | sed -nE 's/^  (-[a-z], )?--([a-z-]+).*/\2/p' | tr '\n' ' ')
  doc=$(awk -v h="## cltrain $cmd" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$built" |
    sed -nE 's/^\| `(-[a-z]`, `)?--([a-z-]+).*/\2/p' | tr '\n' ' ')
  if [ "$help" = "$doc" ]; then ok "$cmd: --help and the reference list the same flags"; else
    bad "$cmd: --help lists '$help', the reference '$doc'"
  fi
  missing=""
  for flag in $help; do grep -qF "\\fB\\-\\-$flag\\fR" "$man" || missing="$missing --$flag"; done
  [ -z "$missing" ] && ok "$cmd: the man page lists its flags" ||
    bad "$cmd: the man page lacks$missing"
  "$CLT" --help | grep -q "^  ${cmd%% *} " && ok "$cmd: cltrain --help lists it" ||
    bad "$cmd: cltrain --help does not list it"
done

skipped=0
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$man" 2>&1)
  [ -z "$warnings" ] && ok "cltrain.1 renders without warnings" ||
    bad "groff -man -ww: $(head -c 400 <<<"$warnings")"
  for section in NAME SYNOPSIS DESCRIPTION COMMANDS ENVIRONMENT '"EXIT STATUS"' '"SEE ALSO"'; do
    grep -qx "\.SH $section" "$man" || bad "cltrain.1 has no section $section"
  done
elif [ "${CI:-}" = true ]; then
  bad "groff not found (.ci/setup installs groff-base)"
else
  echo "skip: groff not found: cltrain.1 not rendered (.ci/setup installs groff-base)"
  skipped=1
fi
finish || exit 1
[ $skipped -eq 0 ] || exit 77
