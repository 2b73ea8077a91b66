/* The tuner: for each pass of each convolution of a model on a replica, the
 * algorithms that fit its geometry (gemm.h's clt_conv_candidates) are each
 * checked against a double-precision convolution on a slice of the first
 * examples, then timed with the device's profiling events (the median of a few
 * runs at the layer's batch); the fastest that passed is chosen for the layer
 * on the replica (clt_conv_choose) and kept in the tuning cache (tune.h), so a
 * shape is tuned once per device. A candidate whose result is wrong never wins.
 * The choices are made before the layers' kernels and scratch are reserved
 * (clt_net_create), which reserves the chosen algorithm. */
#ifndef CLT_TUNER_H
#define CLT_TUNER_H

#include <stdio.h>

#include "gemm.h"
#include "model.h"
#include "tune.h"

/* One pass of one layer, as the tuner left it. */
typedef struct clt_tune_line {
  char layer[64];
  int pass;              /* CLT_CONV_PASS_* */
  int algo;              /* chosen (CLT_CONV_*) */
  int default_algo;      /* the backend's default */
  double ms, default_ms; /* median times; 0 when not timed */
  int cached;            /* taken from the cache, not timed now */
  int tuned;             /* timed now */
  int rejected;          /* candidates that failed the check */
  int candidates;
} clt_tune_line;

typedef struct clt_tuner_opts {
  int batch;             /* the layers' batch, timed at */
  int tune;              /* 0: take what the cache holds and time nothing */
  double budget_s;       /* seconds for timing (<= 0: no limit); what remains untuned keeps
                            its default and is not cached */
  int runs;              /* timed runs per candidate, their median (0: 3) */
  clt_tune_cache *cache; /* NULL: nothing read or kept */
  /* Test-only: called after candidate `algo` of pass `pass` ran on the check
   * slice, with the floats it wrote (`out` from `offset`); may change them (a
   * test makes a candidate wrong and sees it rejected). NULL in the product. */
  void (*after_check)(void *ctx, clt_replica *r, const clt_layer *l, int pass, int algo, cl_mem out,
                      size_t offset, size_t floats);
  void *hook_ctx;
} clt_tuner_opts;

/* Tunes (or, with tune 0, applies the cache to) every convolution pass of m
 * that runs on r with a choice of algorithm, choosing each on r. Lines go to
 * lines[0 .. *nlines), at most max_lines. */
int clt_tune_model(const clt_model *m, clt_replica *r, const clt_tuner_opts *o,
                   clt_tune_line *lines, int max_lines, int *nlines, clt_err *e);

/* The worst difference of n floats from the reference, relative to the
 * reference's largest magnitude: the check's measure. */
double clt_tune_rel_error(const float *got, const double *ref, size_t n);

/* The error a candidate may have and still pass the check. */
#define CLT_TUNE_TOL 1e-3

#endif
