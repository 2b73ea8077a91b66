/* The GEMM tuner: for each product a model's net runs on a replica whose
 * backend has GEMM tilings (backend.h's clt_gemm_tilings: the cpu backend's
 * register tiles and blockings of cl/gemm.cl, the gpu backend's local-memory
 * tiles of cl/gemm_tiled.cl against CLBlast), the product's shape as the
 * backend runs it (its convolutions' products as their chosen algorithms run
 * them, Dense layers'), a few tilings around the default are each built
 * through the replica's kernel cache, checked against a double-precision
 * product on a slice of C's rows, then timed with profiling events (the
 * fastest of a few rounds, on plain matrices of the shape); the fastest that
 * passed is taken for the shape and kept in the tuning cache under a "gemm
 * ..." key, so a device measures a shape once. A tiling whose result is wrong
 * never wins. */
#ifndef CLT_GEMM_TUNER_H
#define CLT_GEMM_TUNER_H

#include <stdio.h>

#include "backend.h"
#include "net.h"
#include "tune.h"
#include "tuner.h"

/* One product shape, as the tuner left it. */
typedef struct clt_gemm_tune_line {
  clt_gemm_shape shape;              /* as the backend's kernels compute it */
  char chosen[CLT_GEMM_TILING_NAME]; /* "default" or a tiling's name */
  double ms, default_ms;             /* fastest rounds' times; 0 when not timed */
  int cached, tuned, rejected, candidates;
  int instep;                      /* judged by whole steps now (clt_gemm_tuner_opts.step) */
  int confirmed;                   /* ... and kept (else the default stays) */
  double step_ms, default_step_ms; /* the confirmation's median steps */
  char why[192];                   /* the verdict, in words (clt_tune_verdict's) */
} clt_gemm_tune_line;

typedef struct clt_gemm_tuner_opts {
  int tune;              /* 0: take what the cache holds and time nothing */
  double budget_s;       /* seconds for timing (<= 0: no limit) */
  int runs;              /* timed rounds, each candidate once a round, the check's run
                            the first (0: 3, more for short products) */
  clt_tune_cache *cache; /* NULL: nothing read or kept */
  /* Whole-step confirmation (tuner.h's clt_tune_confirm, on the batch the net
   * holds): once every product is timed, the tilings picked run against the
   * defaults in alternating probe steps, and are kept only when the step is
   * faster; the verdict goes to the cache ("decision"), and a cached tiling
   * without one runs only once confirmed. NULL: each fastest kept as timed. */
  const clt_step_opts *step;
  /* clt_gemm_tune_model: loads a batch into the net it builds (NULL: none). */
  int (*load)(clt_net *net, int batch, clt_err *e);
  /* clt_gemm_tune_model: a net of the model at its batch, a batch loaded,
   * to tune on rather than building one (NULL: built when needed). */
  clt_net *net;
  /* With step: a change under the tilings, not yet judged (cltrain tune:
   * the convolution algorithms its probes picked), judged in the same whole
   * steps (clt_tune_confirm_stacked): below(below_ctx, on) puts it off or
   * on. The products timed are those it runs (on); its verdict goes to
   * *below_verdict (over: none), and when it is not kept the tilings are not
   * judged. With no tiling to judge it is confirmed alone. NULL: none. */
  int (*below)(void *ctx, int on, clt_err *e);
  void *below_ctx;
  clt_tune_verdict *below_verdict;
  /* Test-only: called after tiling t (NULL: the default) ran on shape s, with
   * C's `floats` floats; may change them (a test makes one tiling wrong and
   * sees it rejected). NULL in the product. */
  void (*after_check)(void *ctx, clt_replica *r, const clt_gemm_shape *s, const char *t, cl_mem c,
                      size_t floats);
  /* Test-only: called before candidate t is built for shape s; a non-zero
   * status (its message in e) stands for a build or launch that fails on the
   * device (a test sees that candidate rejected and the tuning go on). NULL
   * in the product. */
  int (*before_check)(void *ctx, clt_replica *r, const clt_gemm_shape *s, const char *t,
                      clt_err *e);
  void *hook_ctx;
} clt_gemm_tuner_opts;

/* The cache key of shape s on r: "gemm cpu tA0 tB0 m8192 n80 k576", the
 * batch's dimension (M, or K for A^T) bucketed. */
void clt_gemm_tune_key(const clt_replica *r, const clt_gemm_shape *s, char *out, size_t size);

/* Tunes (or, with tune 0, applies the cache to) every product the net runs:
 * its shapes reserved afresh, tuned, and the net prepared again so the chosen
 * tilings' kernels are built before the next step. Lines go to lines[0 ..
 * *nlines) when lines is not NULL, at most max_lines. */
int clt_gemm_tune_net(clt_net *net, const clt_gemm_tuner_opts *o, clt_gemm_tune_line *lines,
                      int max_lines, int *nlines, clt_err *e);

/* Tunes (or applies the cache to) the products m's net runs on r at `batch`
 * examples with the convolution algorithms r holds now. The cache records
 * which products those are, keyed by the model (its description, input,
 * classes and frozen layers), the batch and the algorithms: with that record
 * and every product's result cached, the lines come from the cache and no net
 * runs (*built 0); otherwise o->net, or a net built now, runs (*built 1), its
 * products tuned (clt_gemm_tune_net) and the record kept. Lines as
 * clt_gemm_tune_net's. */
int clt_gemm_tune_model(const clt_model *m, clt_replica *r, int batch, const clt_gemm_tuner_opts *o,
                        clt_gemm_tune_line *lines, int max_lines, int *nlines, int *built,
                        clt_err *e);

/* clt_gemm_tune_net for the trainer: r's cache opened from `file` (--tune-file;
 * NULL: the folder), notes to stderr; step as the options'; what tuning did
 * goes to verbose (NULL: nowhere). */
int clt_gemm_tune_trainer_net(clt_net *net, const char *file, int tune, double budget_s,
                              const clt_step_opts *step, FILE *verbose, clt_err *e);

#endif
