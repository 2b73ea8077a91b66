#!/usr/bin/env bash
# libcltrain.so exports exactly the functions include/cltrain.h declares with
# CLTRAIN_API (both ways: none missing, none extra), the version script's list
# generated from the header agrees, its SONAME is libcltrain.so.<major>, and
# libcltrain.a defines every one of them too.
#   test_exports.sh LIBCLTRAIN.so LIBCLTRAIN.a cltrain.h cltrain_functions.inc SONAME
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
so=$1 archive=$2 header=$3 inc=$4 soname=$5

# The header's list, read here on its own: the first `name(` of each line that
# starts with CLTRAIN_API.
sed -nE 's/^CLTRAIN_API[ \t]+([^(]*[^A-Za-z0-9_(])?([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(.*/\2/p' \
  "$header" | sort >"$tmp/header"
n=$(wc -l <"$tmp/header")
if [ "$n" -ge 3 ] && [ "$(grep -c '^CLTRAIN_API[ \t]' "$header")" -eq "$n" ]; then
  ok "cltrain.h declares $n functions with CLTRAIN_API"
else bad "cltrain.h: $n names read from $(grep -c '^CLTRAIN_API[ \t]' "$header") CLTRAIN_API lines"; fi

sed -nE 's/^CLTRAIN_FN\((.*)\)$/\1/p' "$inc" | sort >"$tmp/generated"
if diff "$tmp/header" "$tmp/generated" >"$tmp/diff"; then
  ok "the generated list (cmake/cltrain_exports.cmake) is the header's"
else bad "the generated list differs from the header's: $(tr '\n' ' ' <"$tmp/diff")"; fi

# Every defined dynamic symbol, functions and data alike (a version suffix cut off).
nm -D --defined-only "$so" | awk '{ print $3 }' | sed 's/@.*//' | sort -u >"$tmp/exported"
missing=$(comm -23 "$tmp/header" "$tmp/exported" | tr '\n' ' ')
extra=$(comm -13 "$tmp/header" "$tmp/exported" | tr '\n' ' ')
if [ -z "$missing" ]; then ok "$(basename "$so") exports every function of the header"; else
  bad "$(basename "$so") lacks $(wc -w <<<"$missing") of the header's functions: $missing"; fi
if [ -z "$extra" ]; then ok "$(basename "$so") exports nothing else"; else
  bad "$(basename "$so") also exports: $extra"; fi
if nm -D --defined-only "$so" | awk '$2 != "T" { bad = 1 } END { exit bad }'; then
  ok "every export is a function"
else bad "exports that are not functions: $(nm -D --defined-only "$so" | awk '$2 != "T"' | tr '\n' ' ')"; fi

got=$(readelf -d "$so" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
if [ "$got" = "$soname" ]; then ok "SONAME $got"; else bad "SONAME '$got', not $soname"; fi

nm --defined-only -g "$archive" 2>/dev/null | awk '$2 == "T" { print $3 }' | sort -u >"$tmp/archive"
missing=$(comm -23 "$tmp/header" "$tmp/archive" | tr '\n' ' ')
if [ -z "$missing" ]; then ok "$(basename "$archive") defines every function of the header"; else
  bad "$(basename "$archive") lacks $(wc -w <<<"$missing") of the header's functions: $missing"; fi
finish
