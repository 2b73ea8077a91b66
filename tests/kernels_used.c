#include "kernels_used.h"

#include <stdio.h>
#include <stdlib.h>

struct sink {
  FILE *f;
  const char *backend;
};

static void write_name(const char *name, void *ctx) {
  const struct sink *s = ctx;
  fprintf(s->f, "%s %s\n", s->backend, name);
}

void log_kernels_used(const clt_replica *r) {
  const char *path = getenv("CLT_TEST_KERNELS_USED");
  if (!r || !path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) {
    fprintf(stderr, "cannot append to %s (CLT_TEST_KERNELS_USED)\n", path);
    return; /* the coverage check then reports the kernels as missing */
  }
  struct sink s = {f, r->variant};
  clt_replica_kernel_names(r, write_name, &s);
  fclose(f);
}
