/* The tuner: for each pass of each convolution of a model on a replica, the
 * algorithms that fit its geometry (gemm.h's clt_conv_candidates) are each
 * checked against a double-precision convolution on a slice of the first
 * examples; a candidate whose result is wrong never runs again.
 *
 * clt_tune_net chooses among those that passed inside the step: probe steps
 * (forward and backward of a net on its loaded batch, no update) run with many
 * layers trying a candidate at once, the layers of one shape and pass sharing
 * its candidates out (three layers try four in two steps), each layer's
 * passes timed in place from markers at its scopes (clt_scope_marks); per
 * shape and pass the fastest in the step (its mean over the layers that ran
 * it) is picked. Whole probe steps of the picked assignment and of the
 * current one (defaults or cached), alternating, then confirm it: it is kept
 * only when it won 4 of every 5 pairs and the median pair by 2% (the pairs
 * stop once those timed settle that; a median under that bar with too few
 * wins gets as many pairs more, once), else the current one stays. Either
 * verdict goes to the tuning cache (tune.h) with the step times, so a shape
 * is tuned once per device.
 *
 * clt_tune_model alone times each candidate on a copy of its layer (the
 * median of a few runs): the older method, kept for tests of the check. */
#ifndef CLT_TUNER_H
#define CLT_TUNER_H

#include <stdio.h>

#include "gemm.h"
#include "model.h"
#include "net.h"
#include "tune.h"

/* One pass of one layer, as the tuner left it. */
typedef struct clt_tune_line {
  char layer[64];
  double ms, default_ms; /* median times (in the step: a layer's, the mean over the layers
                            of its shape that ran it); 0 when not timed */
  int pass;              /* CLT_CONV_PASS_* */
  int algo;              /* chosen (CLT_CONV_*) */
  int default_algo;      /* the backend's default */
  int cached;            /* taken from the cache, not timed now */
  int tuned;             /* timed now */
  int rejected;          /* candidates that failed the check */
  int candidates;
  /* In-step tuning (clt_tune_net): */
  int checked; /* its candidates were checked now */
  int nok;     /* those that passed, in candidate order */
  int ok[CLT_CONV_MAX_CANDIDATES];
  int instep;                      /* chosen in the step now (confirmed or kept) */
  int picked;                      /* what the probes picked, before the confirmation */
  int confirmed;                   /* the step confirmed it (else the current one was kept) */
  double step_ms, default_step_ms; /* cached: the confirmation's medians (0: none) */
  clt_conv_geom geom;              /* at the batch */
  int filters;
  char key[192]; /* its tuning cache key */
} clt_tune_line;

typedef struct clt_tuner_opts {
  int batch;             /* the layers' batch, timed at */
  int tune;              /* 0: take what the cache holds and time nothing */
  double budget_s;       /* seconds for timing (<= 0: no limit); what remains untuned keeps
                            its default and is not cached */
  int runs;              /* timed runs per candidate, their median (0: 3) */
  int check_only;        /* candidates checked (ok[]), none timed, chosen or cached; only
                            cache entries chosen in the step count (clt_tune_net) */
  clt_tune_cache *cache; /* NULL: nothing read or kept */
  /* clt_tune_net only: where work the budget cut short is kept for the next
   * call (clt_tune_progress_new), or NULL: all in one call, nothing kept. */
  struct clt_tune_progress *progress;
  /* clt_tune_net without progress: an assignment the probes pick is not
   * confirmed there but left for the caller's whole steps (lines' picked,
   * the verdict's deferred; the replica stays on the current one, nothing is
   * cached) and its verdict given to clt_tune_settle. */
  int defer;
  /* clt_tune_model with check_only: passes an earlier call checked (n of
   * them), whose verdicts hold for the same key; NULL: none. */
  const clt_tune_line *checked_before;
  int nchecked_before;
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

/* In-step tuning of a training net (clt_tune_net). */
typedef struct clt_step_opts {
  int count;        /* examples of the net's loaded batch the probe steps run */
  float loss_scale; /* as the step's (1 / global batch) */
  int metric_slot;  /* the probes' metrics go there (not read) */
  int rounds;       /* probe steps per assignment, their fastest taken (0: 2) */
  int confirm;      /* pairs of whole steps, one of each side, in the confirmation (0: 5,
                       more for short steps, fewer for long ones); doubled once when its
                       verdict is in doubt (see clt_tune_net) */
  double long_ms;   /* with confirm 0: a side's steps past this many ms get fewer pairs,
                       down to 3 (0: 6000) */
  /* Test-only: called inside every probe step as each layer's pass begins
   * (what, pass: clt_replica_scope's), phase 0 while probing, 1 in a
   * confirmation step of the current assignment, 2 of the picked one (3 of
   * the second change in clt_tune_confirm_stacked); a test
   * sleeps there to make a candidate slower in the step alone. */
  void (*in_step)(void *ctx, clt_replica *r, const char *what, const char *pass, int phase);
  void *hook_ctx;
} clt_step_opts;

typedef struct clt_tune_verdict {
  int probed;                  /* probe steps ran and picked an assignment */
  int differs;                 /* ... unlike the current one (then confirmed or not) */
  int confirmed;               /* the picked assignment was kept */
  int over;                    /* the budget ended it first: nothing changed or cached */
  int pending;                 /* ... and the progress keeps what was done */
  int resumed;                 /* this call went on from the progress's work */
  int deferred;                /* picked, its confirmation left to the caller (defer) */
  double default_ms, tuned_ms; /* the confirmation's median steps (0: not run) */
  double ratio;                /* the median pair's tuned / default step */
  int wins, pairs;             /* pairs whose tuned step was the faster, of all */
  int probe_steps;             /* steps run, confirmation included */
  int all_steps, calls;        /* over the calls this tuning took so far */
  char why[192];               /* the verdict, in words */
} clt_tune_verdict;

/* Tunes net's convolutions in the step (the net's loaded batch; its
 * parameters, optimizer state and data are not changed) within o->budget_s:
 * lines as clt_tune_model's, the cache read and written as described above;
 * the replica is left on the confirmed assignment, or the one it had.
 *
 * With o->progress, tuning that does not fit the budget goes on at the next
 * call (the trainer calls once between epochs): the checks' lines, the probe
 * times and the confirmation steps measured so far are kept there, and the
 * next call (on the same net, its batch perhaps another) starts where this
 * one stopped; a call starts a probe step only when it ends within the
 * budget at the latest step's pace (its first step always runs, so every
 * call makes progress). Until the confirmation's verdict the replica runs
 * what it ran before: nothing unconfirmed runs in a real step. Without it, a
 * budget too short for what is left after the second round's first step (at
 * the first round's slowest step's pace, or twice that step's where less:
 * the first round builds the kernels) stops the probes at once, and nothing
 * is kept. */
int clt_tune_net(clt_net *net, const clt_tuner_opts *o, const clt_step_opts *s,
                 clt_tune_line *lines, int max_lines, int *nlines, clt_tune_verdict *res,
                 clt_err *e);

/* Confirms an assignment by whole steps as clt_tune_net does: probe steps
 * of net (s's batch) alternate between the current assignment and the picked
 * one, which set(ctx, side) puts in place (0: the current, 1: the picked; s's
 * hook sees phases 1 and 2), s->confirm pairs of steps (0: 5, more for
 * short steps, as few as 3 for long ones; as many again once when the median
 * pair meets the bar but the wins do not); res gets the verdict (confirmed:
 * the picked one faster in 4 of every 5 pairs, all of 3 or 4, and by 2% or
 * more in the median pair), or over when the deadline (0: none) came first.
 * gain_ms (0: unknown) is what the picked side's kernels saved a step timed
 * alone: under 2% of the first pair's faster step, the bar's margin, more
 * pairs are not worth their steps, and the verdict (not confirmed) comes
 * after that pair. The verdict's side is left in place (the current one
 * unless confirmed) and the net prepared for it. */
int clt_tune_confirm(clt_net *net, const clt_step_opts *s,
                     int (*set)(void *ctx, int side, clt_err *e), void *ctx, double gain_ms,
                     double deadline, clt_tune_verdict *res, clt_err *e);

/* Two changes confirmed in the same steps, one on top of the other:
 * set(ctx, side) puts side 0 (neither), 1 (the first) or 2 (both) in place,
 * and each round steps on the three in turn (s's hook sees phases 1 to 3);
 * res[0] is the first change's verdict (sides 0 and 1), res[1] the second's
 * (sides 1 and 2, gain_ms its gain timed alone), each judged as
 * clt_tune_confirm's. Once one is judged its lone side is left out; when the
 * first is not kept the second is not judged (res[1].probed 0). Three steps
 * judge both where two pairs, one after the other, take four. Left in place:
 * side 0, 1 or 2, as far up as the verdicts kept. */
int clt_tune_confirm_stacked(clt_net *net, const clt_step_opts *s,
                             int (*set)(void *ctx, int side, clt_err *e), void *ctx, double gain_ms,
                             double deadline, clt_tune_verdict res[2], clt_err *e);

/* Puts the lines' algorithms in place on net's replica: with picked, those
 * the probes picked for the passes they varied (a deferred verdict's
 * assignment); else those the lines hold. The net is not prepared. */
int clt_tune_put_side(clt_net *net, const clt_tune_line *lines, int n, int picked, clt_err *e);

/* Ends a deferred tuning (clt_tuner_opts.defer) with the whole step's
 * verdict v on the lines' picks: the lines and the cache get it as
 * clt_tune_net gives its own (nothing when v is over or not judged), and the
 * replica runs what it kept, the net prepared. */
int clt_tune_settle(clt_net *net, const clt_tuner_opts *o, clt_tune_line *lines, int n,
                    const clt_tune_verdict *v, clt_err *e);

/* The work in-step tuning carries between calls (clt_tuner_opts.progress). */
typedef struct clt_tune_progress clt_tune_progress;
clt_tune_progress *clt_tune_progress_new(void); /* NULL out of memory */
void clt_tune_progress_free(clt_tune_progress *p);
/* Whether a tuning is under way: the next clt_tune_net call goes on with it. */
int clt_tune_progress_pending(const clt_tune_progress *p);

/* The worst difference of n floats from the reference, relative to the
 * reference's largest magnitude: the check's measure. */
double clt_tune_rel_error(const float *got, const double *ref, size_t n);

/* The error a candidate may have and still pass the check. */
#define CLT_TUNE_TOL 1e-3

#endif
