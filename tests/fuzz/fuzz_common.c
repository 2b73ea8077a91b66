#define _POSIX_C_SOURCE 200809L /* mkdtemp, nftw */
#define _XOPEN_SOURCE 700       /* nftw */

#include "fuzz_common.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* Only the process that made the folder removes it: libFuzzer's -fork and -jobs
 * children each make their own. */
static pid_t owner;
static void cleanup(void) {
  if (dir[0] && getpid() == owner) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_dir(void) {
  if (dir[0]) return dir;
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(dir, sizeof dir, "%s/cltrain-fuzz-XXXXXX", base);
  if (!mkdtemp(dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  owner = getpid();
  atexit(cleanup);
  return dir;
}

void fuzz_path(char *buf, size_t size, const char *name) {
  int n = snprintf(buf, size, "%s/%s", fuzz_dir(), name);
  if (n < 0 || (size_t)n >= size) fuzz_fail("fuzz: path %s/%s too long", fuzz_dir(), name);
}

void fuzz_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0)
    fuzz_fail("fuzz: cannot write %s", path);
}

/* Not static, so the sum is observable and the reads stay. */
volatile unsigned fuzz_sink;

void fuzz_touch(const void *p, size_t n) {
  const volatile unsigned char *b = p;
  unsigned sum = 0;
  for (size_t i = 0; i < n; i++) sum += b[i];
  fuzz_sink = sum;
}

void fuzz_note(const char *what, int status, const char *msg) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("CLT_FUZZ_VERBOSE") != NULL;
  if (verbose) fprintf(stderr, "%s: %d %s\n", what, status, status ? msg : "ok");
}

void fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  abort();
}

void fuzz_put16(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

void fuzz_put32(unsigned char *p, uint32_t v) {
  fuzz_put16(p, v);
  fuzz_put16(p + 2, v >> 16);
}
