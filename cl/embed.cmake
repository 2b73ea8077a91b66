# Turns the .cl files given in SOURCES (a |-separated list) into OUTPUT, a C file with one
# byte array per file and the lookup function declared in src/base/cl_sources.h.
# Bytes, not string literals: no escaping rules and no compiler limit on
# literal length to trip over.
set(body "#include \"cl_sources.h\"\n#include <string.h>\n\n")
set(table "")
set(i 0)
string(REPLACE "|" ";" SOURCES "${SOURCES}")
foreach(src IN LISTS SOURCES)
  get_filename_component(name "${src}" NAME)
  file(READ "${src}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  string(APPEND body "static const char src_${i}[] = {\n${hex}0x00};\n")
  string(APPEND table "  {\"${name}\", src_${i}, sizeof src_${i} - 1},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "\nstatic const struct { const char *name, *text; size_t len; } sources[] = {\n${table}};\n\n")
string(APPEND body "const char *clt_cl_source(const char *name, size_t *len) {\n")
string(APPEND body "  for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {\n")
string(APPEND body "    if (strcmp(sources[i].name, name) == 0) {\n      if (len) *len = sources[i].len;\n      return sources[i].text;\n    }\n  }\n  return NULL;\n}\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
