#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interrupt.h"

static int parse_value(const char *command, const clt_flag *f, const char *v, clt_err *e) {
  char *end = NULL;
  errno = 0;
  switch (f->type) {
    case CLT_FLAG_STRING:
      if (!*v) return clt_fail(e, CLT_ERR_ARG, "%s: --%s: empty value", command, f->name);
      *(const char **)f->target = v;
      return CLT_OK;
    case CLT_FLAG_DOUBLE: {
      double d = strtod(v, &end);
      if (!*v || *end || errno || !isfinite(d) || d < f->min || d > f->max) {
        return clt_fail(e, CLT_ERR_ARG, "%s: --%s: expected a number in [%g, %g], got '%s'",
                        command, f->name, f->min, f->max, v);
      }
      *(double *)f->target = d;
      return CLT_OK;
    }
    default: {
      if (*v == '-' && f->min >= 0) goto bad_int; /* strtoull would wrap "-1" */
      long long x = f->type == CLT_FLAG_U64 ? (long long)strtoull(v, &end, 10)
                                            : strtoll(v, &end, 10);
      if (!*v || *end || errno) goto bad_int;
      if (f->type != CLT_FLAG_U64 && ((double)x < f->min || (double)x > f->max)) goto bad_int;
      if (f->type == CLT_FLAG_INT) *(int *)f->target = (int)x;
      else if (f->type == CLT_FLAG_LONG) *(long *)f->target = (long)x;
      else *(uint64_t *)f->target = strtoull(v, NULL, 10);
      return CLT_OK;
    }
  }
bad_int:
  if (f->type == CLT_FLAG_U64) {
    return clt_fail(e, CLT_ERR_ARG, "%s: --%s: expected a non-negative integer, got '%s'", command,
                    f->name, v);
  }
  return clt_fail(e, CLT_ERR_ARG, "%s: --%s: expected an integer in [%.0f, %.0f], got '%s'",
                  command, f->name, f->min, f->max, v);
}

int clt_cli_parse(const char *command, int argc, char **argv, const clt_flag *flags, int nflags,
                  int *help, clt_err *e) {
  *help = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      *help = 1;
      continue;
    }
    if (strncmp(arg, "--", 2) != 0) {
      return clt_fail(e, CLT_ERR_ARG, "%s: unexpected argument '%s' (see %s --help)", command, arg,
                      command);
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const clt_flag *f = NULL;
    for (int j = 0; j < nflags; j++) {
      if (strlen(flags[j].name) == len && strncmp(flags[j].name, name, len) == 0) f = &flags[j];
    }
    if (!f) {
      return clt_fail(e, CLT_ERR_ARG, "%s: unknown option --%.*s (see %s --help)", command,
                      (int)len, name, command);
    }
    if (f->type == CLT_FLAG_BOOL) {
      if (eq) return clt_fail(e, CLT_ERR_ARG, "%s: --%s takes no value", command, f->name);
      *(int *)f->target = 1;
      if (f->seen) *f->seen = 1;
      continue;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value) {
      if (i + 1 >= argc)
        return clt_fail(e, CLT_ERR_ARG, "%s: --%s needs a value", command, f->name);
      value = argv[++i];
    }
    int status = parse_value(command, f, value, e);
    if (status) return status;
    if (f->seen) *f->seen = 1;
  }
  return CLT_OK;
}

int clt_cli_finish(clt_cluster *c, int status, const clt_err *e) {
  if (status == CLT_ERR_STOPPED) {
    /* Every process stopped at the same step (agreed) and process 0 saved: a
     * clean end, with the shell's code for the signal (130 for SIGINT). */
    if (clt_cluster_rank(c) == 0) fprintf(stderr, "cltrain: %s\n", e->msg);
    fflush(stderr);
    clt_cluster_leave(c, 0);
    return 128 + (clt_interrupt_signal() ? clt_interrupt_signal() : SIGINT);
  }
  if (status && clt_cluster_size(c) > 1) {
    fprintf(stderr, "cltrain: error: rank %d of %d (%s): %s\n", clt_cluster_rank(c),
            clt_cluster_size(c), clt_cluster_host(c), e->msg);
  } else if (status) {
    fprintf(stderr, "cltrain: error: %s\n", e->msg);
  }
  fflush(stderr);
  clt_cluster_leave(c, status != 0);
  return status ? 1 : 0;
}

int clt_cli_join(clt_cluster **c, clt_err *e) {
  int status = clt_cluster_join(c, e);
  if (status) {
    fprintf(stderr, "cltrain: error: %s\n", e->msg);
    return status;
  }
  if (*clt_cluster_note(*c)) fprintf(stderr, "cltrain: note: %s\n", clt_cluster_note(*c));
  return CLT_OK;
}
