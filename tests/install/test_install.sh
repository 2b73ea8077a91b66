#!/usr/bin/env bash
# `cmake --install` into a temporary prefix: the command, both libraries, the
# header, the pkg-config file, the CMake package, the man page and the docs. Then
# every examples/*.c built against that prefix four ways: pkg-config and
# find_package(cltrain), each with libcltrain.so and with libcltrain.a; the ones
# on libcltrain.so run (pkg-config's with LD_LIBRARY_PATH, CMake's through their
# RPATH). An example runs with no arguments, or with those of a line
# `test-args: ARGS` in its leading comment, and must exit 0.
#   test_install.sh BUILD_DIR SOURCE_DIR CC
# The environment gives the install's folders: LIBDIR BINDIR INCLUDEDIR MANDIR
# DOCDIR (GNUInstallDirs' relative ones) and VERSION (the project's).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
# has PATTERN...: grep -q that reads all its input (under pipefail, grep -q's
# early exit can fail the command writing into it with SIGPIPE).
has() { grep "$@" >/dev/null; }
build=$1 src=$2 cc=$3
p=$tmp/prefix
lib=$p/$LIBDIR

if cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1; then ok "cmake --install"; else
  bad "cmake --install: $(tail -n 5 "$tmp/install.log")"
  finish
  exit
fi
missing=""
for f in "$BINDIR/cltrain" "$LIBDIR/libcltrain.so" "$LIBDIR/libcltrain.so.0" \
  "$LIBDIR/libcltrain.so.$VERSION" "$LIBDIR/libcltrain.a" "$INCLUDEDIR/cltrain.h" \
  "$LIBDIR/pkgconfig/cltrain.pc" "$LIBDIR/cmake/cltrain/cltrainConfig.cmake" \
  "$LIBDIR/cmake/cltrain/cltrainConfigVersion.cmake" "$LIBDIR/cmake/cltrain/cltrainTargets.cmake" \
  "$LIBDIR/cmake/cltrain/cltrainStaticTargets.cmake" "$MANDIR/man1/cltrain.1" "$DOCDIR/README.md"; do
  [ -s "$p/$f" ] || missing+=" $f"
done
for f in "$src"/docs/*.md; do
  cmp -s "$f" "$p/$DOCDIR/docs/$(basename "$f")" || missing+=" $DOCDIR/docs/$(basename "$f")"
done
if [ -z "$missing" ]; then ok "the prefix holds bin, lib, include, pkgconfig, cmake, man, doc"; else
  bad "missing from the prefix:$missing"; fi
if cmp -s "$src/include/cltrain.h" "$p/$INCLUDEDIR/cltrain.h"; then ok "the header installed"; else
  bad "the installed header differs from include/cltrain.h"; fi
if grep -q "^\.TH CLTRAIN 1 .*cltrain $VERSION" "$p/$MANDIR/man1/cltrain.1"; then
  ok "the man page cltrain.1 of $VERSION"
else bad "the man page: $(head -c 200 "$p/$MANDIR/man1/cltrain.1")"; fi
expect_ok "the installed cltrain --version" "^cltrain $VERSION " "$p/$BINDIR/cltrain" --version
# Nothing installed may point into the build folder.
if ! readelf -d "$p/$BINDIR/cltrain" "$lib/libcltrain.so" | grep -E 'R(UN)?PATH' | has -F "$build"
then ok "no RPATH into the build folder"; else bad "an installed file's RPATH names $build"; fi

mapfile -t examples < <(find "$src/examples" -maxdepth 1 -name '*.c' | sort)
if [ ${#examples[@]} -ge 1 ]; then ok "${#examples[@]} examples: $(cd "$src/examples" && echo *.c)"
else bad "no examples/*.c"; fi

# run_example NAME PROGRAM [ENV...]: PROGRAM runs with its example's test-args in a
# folder of its own and exits 0; devices lists what `cltrain devices` lists.
run_example() {
  local what=$1 prog=$2 name args out rc
  shift 2
  name=$(basename "$prog")
  args=$(sed -nE 's/^[ /*]*test-args:(.*)$/\1/p' "$src/examples/$name.c" | head -n 1 |
    sed -E 's@[[:space:]]*\*/[[:space:]]*$@@')
  read -ra args <<<"$args"
  mkdir -p "$tmp/run-$what-$name"
  out=$(cd "$tmp/run-$what-$name" && env "$@" timeout 240 "$prog" "${args[@]}" 2>"$tmp/err")
  rc=$?
  if [ $rc -ne 0 ]; then
    bad "$what: $name${args[*]:+ ${args[*]}} (rc=$rc: $(tail -n 3 "$tmp/err" | tr '\n' ' '))"
  elif [ "$name" = devices ] &&
    [ "$(grep -cE '^[0-9]+  ' <<<"$out")" -ne "$("$p/$BINDIR/cltrain" devices | grep -cE '^[0-9]+ ')" ]
  then
    bad "$what: devices lists other devices than cltrain devices: $out"
  else ok "$what: $name${args[*]:+ ${args[*]}} ran"; fi
}

# pkg-config, with the shared library and (Libs.private) the static one.
command -v pkg-config >/dev/null || bad "pkg-config not found (bash .ci/setup installs it)"
export PKG_CONFIG_PATH=$lib/pkgconfig
if [ "$(pkg-config --modversion cltrain 2>&1)" = "$VERSION" ]; then ok "pkg-config finds cltrain $VERSION"
else bad "pkg-config --modversion cltrain: $(pkg-config --modversion cltrain 2>&1)"; fi
read -ra cflags <<<"$(pkg-config --cflags cltrain)"
read -ra libs <<<"$(pkg-config --libs cltrain)"
read -ra static_libs <<<"$(pkg-config --libs --static cltrain | sed -E 's/-lcltrain( |$)/-l:libcltrain.a /')"
mkdir -p "$tmp/pc" "$tmp/pc-static"
for ex in "${examples[@]}"; do
  name=$(basename "$ex" .c)
  if "$cc" -Wall -Wextra -Werror "${cflags[@]}" "$ex" -o "$tmp/pc/$name" "${libs[@]}" -lm \
    2>"$tmp/err"; then
    ok "pkg-config: $name built on libcltrain.so"
    if readelf -d "$tmp/pc/$name" | has 'NEEDED.*\[libcltrain\.so\.0\]' &&
      LD_LIBRARY_PATH=$lib ldd "$tmp/pc/$name" | has -F "libcltrain.so.0 => $lib/"; then
      ok "pkg-config: $name loads the installed libcltrain.so.0"
    else bad "pkg-config: $name does not load $lib/libcltrain.so.0"; fi
    run_example pkg-config "$tmp/pc/$name" LD_LIBRARY_PATH="$lib"
  else bad "pkg-config: $name does not build: $(grep -E 'error|undefined' "$tmp/err" | head -n 5)"; fi
  if "$cc" -Wall -Wextra -Werror "${cflags[@]}" "$ex" -o "$tmp/pc-static/$name" \
    "${static_libs[@]}" -lm 2>"$tmp/err" && ! readelf -d "$tmp/pc-static/$name" | has libcltrain
  then ok "pkg-config --static: $name built on libcltrain.a"
  else bad "pkg-config --static: $name: $(grep -E 'error|undefined' "$tmp/err" | head -n 5)"; fi
done

# find_package(cltrain) in examples/CMakeLists.txt, shared (run) and static.
for kind in shared static; do
  flag=OFF
  [ $kind = static ] && flag=ON
  if cmake -S "$src/examples" -B "$tmp/cmake-$kind" -DCMAKE_PREFIX_PATH="$p" -DCLTRAIN_STATIC=$flag \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS=-Werror >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/cmake-$kind" -j 2 >>"$tmp/cmake.log" 2>&1; then
    ok "find_package: the examples built on the $kind library"
  else
    bad "find_package ($kind): $(grep -E -A3 'rror|undefined' "$tmp/cmake.log" | head -n 8)"
    continue
  fi
  for ex in "${examples[@]}"; do
    name=$(basename "$ex" .c)
    if [ $kind = static ]; then
      if readelf -d "$tmp/cmake-$kind/$name" | has libcltrain; then
        bad "find_package (static): $name needs libcltrain.so"
      else ok "find_package (static): $name holds libcltrain.a's code"; fi
    else
      if env -u LD_LIBRARY_PATH ldd "$tmp/cmake-$kind/$name" | has -F "libcltrain.so.0 => $lib/"
      then ok "find_package: $name finds the installed libcltrain.so.0 through its RPATH"
      else bad "find_package: $name does not find $lib/libcltrain.so.0 by itself"; fi
      run_example find_package "$tmp/cmake-$kind/$name" -u LD_LIBRARY_PATH
    fi
  done
done
finish
