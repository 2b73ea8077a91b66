// cltrain.h in a C++ program: the header compiles as C++ (pedantic, warnings as
// errors), the functions link with C names, and every function it declares is in
// libcltrain.so: the table below takes each one's address (the generated
// cltrain_functions.inc), so a missing one fails the link. The calls check the
// statuses and messages of the functions every build has.
#include "cltrain.h"

#include <cstdio>
#include <cstring>

typedef void (*any_function)();
// External linkage, so the table and its relocations are kept.
extern const any_function cltrain_functions[];
#define CLTRAIN_FN(name) reinterpret_cast<any_function>(&name),
const any_function cltrain_functions[] = {
#include "cltrain_functions.inc"
};
#undef CLTRAIN_FN
#define CLTRAIN_FN(name) #name,
static const char *const function_names[] = {
#include "cltrain_functions.inc"
};
#undef CLTRAIN_FN

static int failed = 0;

static void check(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failed++;
}

static bool same(const char *a, const char *b) { return a && b && std::strcmp(a, b) == 0; }

int main() {
  check(same(cltrain_version(), CLTRAIN_VERSION), "cltrain_version() is the header's version");
  check(CLTRAIN_VERSION_NUMBER ==
            CLTRAIN_VERSION_MAJOR * 10000 + CLTRAIN_VERSION_MINOR * 100 + CLTRAIN_VERSION_PATCH,
        "CLTRAIN_VERSION_NUMBER agrees with MAJOR, MINOR, PATCH");
  check(same(cltrain_errmsg(NULL), ""), "no message before a failed call");
  check(same(cltrain_status_name(CLTRAIN_OK), "CLTRAIN_OK"), "status name of CLTRAIN_OK");
  check(same(cltrain_status_name(CLTRAIN_ERR_ARG), "CLTRAIN_ERR_ARG"),
        "status name of CLTRAIN_ERR_ARG");
  check(same(cltrain_status_name(CLTRAIN_ERR_INTERNAL), "CLTRAIN_ERR_INTERNAL"),
        "status name of the last status");
  check(same(cltrain_status_name(-1), "CLTRAIN_ERR_UNKNOWN"), "status name of -1");
  check(same(cltrain_status_name(CLTRAIN_ERR_INTERNAL + 1), "CLTRAIN_ERR_UNKNOWN"),
        "status name past the last status");
  static const unsigned char not_a_handle[2048] = {0};
  check(std::strstr(cltrain_errmsg(not_a_handle), "not a live cltrain handle") != NULL,
        "cltrain_errmsg refuses memory that is no handle");

  const size_t n = sizeof cltrain_functions / sizeof cltrain_functions[0];
  size_t linked = 0;
  for (size_t i = 0; i < n; i++) {
    if (cltrain_functions[i]) {
      linked++;
    } else {
      std::printf("FAIL: %s has no address\n", function_names[i]);
    }
  }
  char what[96];
  std::snprintf(what, sizeof what, "%zu of the header's %zu functions linked", linked, n);
  check(linked == n && n > 3, what);
  return failed ? 1 : 0;
}
