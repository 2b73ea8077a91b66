#!/usr/bin/env bash
# cltrain.h from C++: builds header_cxx.cpp against the build's libcltrain.so with
# the C++ compiler CMake found, and runs it. Skipped (77) without a C++ compiler,
# except in CI (.ci/setup installs g++).
#   test_header_cxx.sh CXX INCLUDE_DIR GENERATED_DIR LIB_DIR
set -uo pipefail
cxx=$1 include=$2 generated=$3 libdir=$4
here=$(dirname "$0")
if [ -z "$cxx" ] || [ "${cxx%NOTFOUND}" != "$cxx" ]; then
  echo "no C++ compiler (install g++)"
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for std in c++11 c++17; do
  if ! "$cxx" -std=$std -Wall -Wextra -pedantic -Werror -I"$include" -I"$generated" \
    "$here/header_cxx.cpp" -o "$tmp/header_cxx" -L"$libdir" -lcltrain -Wl,-rpath,"$libdir" \
    2>"$tmp/err"; then
    echo "FAIL: header_cxx.cpp does not build as $std against $libdir/libcltrain.so:"
    grep -oE "undefined reference to \`[A-Za-z0-9_]+'" "$tmp/err" | sort -u | head -100
    grep -v 'undefined reference' "$tmp/err" | head -30
    exit 1
  fi
  echo "ok: header_cxx.cpp builds as $std"
done
"$tmp/header_cxx"
