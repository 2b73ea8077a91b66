# The public functions of include/cltrain.h: every declaration written
# `CLTRAIN_API <type> name(` at the start of a line. Run as a script at build time:
#   cmake -DHEADER=cltrain.h -DVERSION_SCRIPT=out.map -DFUNCTIONS=out.inc -P cltrain_exports.cmake
# VERSION_SCRIPT: the linker version script of libcltrain.so, exporting those and
# nothing else (internal names may start with cltrain_ too, so no prefix pattern).
# FUNCTIONS: one `CLTRAIN_FN(name)` line per function, for the tests.
cmake_minimum_required(VERSION 3.18)
if(NOT HEADER OR NOT VERSION_SCRIPT OR NOT FUNCTIONS)
  message(FATAL_ERROR "cltrain_exports.cmake: HEADER, VERSION_SCRIPT and FUNCTIONS are needed")
endif()
file(STRINGS "${HEADER}" lines REGEX "^CLTRAIN_API[ \t]")
set(names "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^CLTRAIN_API[ \t]+([^(]*[^A-Za-z0-9_(])?([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\(")
    message(FATAL_ERROR "${HEADER}: no function name in: ${line}")
  endif()
  set(name "${CMAKE_MATCH_2}")
  if(name IN_LIST names)
    message(FATAL_ERROR "${HEADER}: ${name} is declared twice with CLTRAIN_API")
  endif()
  list(APPEND names "${name}")
endforeach()
if(NOT names)
  message(FATAL_ERROR "${HEADER}: no CLTRAIN_API declarations")
endif()

set(map "/* Generated from ${HEADER} by cmake/cltrain_exports.cmake. */\n")
string(APPEND map "{\n  global:\n")
set(inc "/* Generated from ${HEADER} by cmake/cltrain_exports.cmake. */\n")
foreach(name IN LISTS names)
  string(APPEND map "    ${name};\n")
  string(APPEND inc "CLTRAIN_FN(${name})\n")
endforeach()
string(APPEND map "  local:\n    *;\n};\n")

file(WRITE "${VERSION_SCRIPT}" "${map}")
file(WRITE "${FUNCTIONS}" "${inc}")
