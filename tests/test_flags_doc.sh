#!/usr/bin/env bash
# The flag reference and the man page that the build writes from the flag tables
# (src/app/flags.c, by cltrain_flags_doc): docs/flags.md as committed equals the
# build's, every command's --help lists the flags the reference and the man page
# list, each option's --help text is whole and its own (the reference's text and
# default, on the option's line and the lines under it), and cltrain.1 renders without a groff warning (skipped, 77, where groff is
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

# help_texts: a --help's options as lines "OPTION<tab>TEXT", each option's text
# joined from its line and the lines under it (indented to column 26); a line of
# the options part that is neither goes to stderr.
help_texts() {
  awk 'function out() { if (key != "") { gsub(/  +/, " ", text); print key "\t" text } }
    /^options:$/ { on = 1; next }
    !on || $0 == "" { next }
    /^                          [^ ]/ { if (key == "") print > "/dev/stderr"; sub(/^ +/, ""); text = text " " $0; next }
    /^  -/ { out(); s = substr($0, 3); i = index(s, "  "); key = i ? substr(s, 1, i - 1) : s
      text = i ? substr(s, i) : ""; sub(/^ +/, "", text); next }
    { print > "/dev/stderr" }
    END { out() }'
}
# table_texts: a command's section of the reference as the lines help_texts writes:
# the option, then its description (Markdown escapes undone, without the range the
# reference adds) and its default in brackets.
table_texts() {
  awk '/^\| `/ {
      line = $0; gsub(/\\\|/, "\002", line); n = split(line, cell, "|")
      for (i = 1; i <= n; i++) { gsub(/\002/, "|", cell[i]); sub(/^ /, "", cell[i]); sub(/ $/, "", cell[i]) }
      key = cell[2]; gsub(/`/, "", key)
      def = cell[3]; if (def == "required") def = ""; if (def ~ /^`.*`$/) def = substr(def, 2, length(def) - 2)
      text = cell[4]; sub(/\. Takes (an integer|a number|a non-negative integer).*$/, "", text)
      text = text (def != "" ? " [" def "]" : "")
      gsub(/\\/, "", text); gsub(/&lt;/, "<", text); gsub(/&gt;/, ">", text)
      gsub(/  +/, " ", text); print key "\t" text }'
}

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
  # Each option's text in --help is its table text with the default in brackets, on
  # its own lines: an option line, then lines indented to the text column.
  "$CLT" $cmd --help | help_texts >"$tmp/help" 2>"$tmp/stray"
  awk -v h="## cltrain $cmd" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$built" |
    table_texts >"$tmp/table"
  if [ -s "$tmp/stray" ]; then bad "$cmd --help: lines outside any option's text: $(head -c 300 "$tmp/stray")"
  elif cmp -s "$tmp/help" "$tmp/table"; then ok "$cmd: each option's --help text is its own, whole, as in the reference"
  else bad "$cmd: --help's option texts differ from the reference's: $(diff "$tmp/table" "$tmp/help" | head -c 600)"
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
