#include "check.h"

#include <stdarg.h>
#include <stdio.h>

static int n_passed, n_failed;

void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(ok ? "ok: " : "FAIL: ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  if (ok) n_passed++;
  else n_failed++;
}

int check_failures(void) { return n_failed; }

int check_summary(void) {
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed != 0;
}
