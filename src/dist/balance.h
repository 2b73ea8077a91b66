/* Splitting each global batch across replicas of different speeds.
 *
 * Each replica's compute time for a slice of n examples is modelled as
 *   t_i(n) = overhead_i + n * cost_i        (n > 0; t_i(0) = 0)
 * with overhead and per-example cost estimated from the measured time of every
 * step (a least-squares line over recent steps, exponentially forgotten; a lone
 * step far off the estimate is ignored, so one slow step cannot swing it). The
 * split minimising the slowest replica's time fills every replica up to a
 * common finishing time T ("water filling"): n_i = (T - overhead_i) / cost_i,
 * and a replica whose overhead alone reaches T gets nothing (it would lengthen
 * the step). Integer slices come from largest remainders and a local repair.
 *
 * Such a replica is re-timed so that it comes back if it speeds up. By default
 * (a trainer driven a step at a time) it stays in the step with an empty slice
 * and gets one example every 64 steps. With leaving on (clt_balancer_leave) it
 * leaves the step instead (no all-reduce, no update: the trainer re-forms the
 * ring over the members) and is re-timed off the critical path by probes the
 * trainer runs on it between steps (clt_balancer_probe_due, clt_balancer_probed);
 * clt_balancer_regroup re-admits it once a probe shows it would shorten the step.
 *
 * Modes: auto (the above, re-estimated every step), equal (MirroredStrategy's
 * even slices) and fixed weights. The slices always sum to the global batch;
 * the maths of a step does not depend on them. */
#ifndef CLT_BALANCE_H
#define CLT_BALANCE_H

#include "status.h"

#define CLT_BALANCE_MAX 64

typedef enum { CLT_SPLIT_AUTO, CLT_SPLIT_EQUAL, CLT_SPLIT_WEIGHTS } clt_split_mode;

typedef struct clt_balancer {
  int n;
  clt_split_mode mode;
  double weights[CLT_BALANCE_MAX]; /* CLT_SPLIT_WEIGHTS */
  int cap[CLT_BALANCE_MAX];        /* largest slice each replica can hold */
  /* Exponentially weighted sums for the least-squares line t = a + c n. */
  double sw[CLT_BALANCE_MAX], sn[CLT_BALANCE_MAX], st[CLT_BALANCE_MAX];
  double snn[CLT_BALANCE_MAX], snt[CLT_BALANCE_MAX];
  double overhead[CLT_BALANCE_MAX], cost[CLT_BALANCE_MAX]; /* current estimates */
  int observed[CLT_BALANCE_MAX];                           /* steps with n > 0 seen */
  int outliers[CLT_BALANCE_MAX]; /* consecutive observations far off the estimate */
  int warmed[CLT_BALANCE_MAX];   /* the first (warm-up) step was seen and ignored */
  int idle[CLT_BALANCE_MAX];     /* consecutive splits that left a timed replica out */
  int last[CLT_BALANCE_MAX];     /* slices of the previous split */
  /* Leaving (clt_balancer_leave): */
  int leave;                          /* a replica given nothing leaves the step */
  int member[CLT_BALANCE_MAX];        /* takes part in the steps (always, unless leave) */
  int fresh[CLT_BALANCE_MAX];         /* out, with a probe not yet weighed for re-admission */
  int since[CLT_BALANCE_MAX];         /* out: full batches since it left or was last probed */
  double probe_took[CLT_BALANCE_MAX]; /* out: seconds its last probe took (or would take) */
  double probe_end[CLT_BALANCE_MAX];  /* out: when that probe ended, or when it left */
} clt_balancer;

/* Parses --split: "auto", "equal" or n comma-separated non-negative weights
 * with a positive sum. */
int clt_split_parse(const char *spec, int n, clt_split_mode *mode, double *weights, clt_err *e);

/* caps: largest slice per replica (NULL: no limit). */
void clt_balancer_init(clt_balancer *b, int n, clt_split_mode mode, const double *weights,
                       const int *caps);

/* Slices of a global batch of `global` examples (they sum to it, each within its
 * cap), remembered as the latest split. */
void clt_balancer_split(clt_balancer *b, int global, int *slices);

/* Feeds back one step: the slices used and each replica's compute seconds. */
void clt_balancer_observe(clt_balancer *b, const int *slices, const double *seconds);

/* Predicted step time (slowest replica) of given slices under the current estimates. */
double clt_balancer_predict(const clt_balancer *b, const int *slices);

/* 1 if auto mode, with replica i timed, gave it nothing in the latest split
 * (with leaving on: if it is out of the step). */
int clt_balancer_excluded(const clt_balancer *b, int replica);

/* Turns leaving on (auto mode): splits then go to members only, and replicas
 * given nothing leave the step at the next clt_balancer_regroup. */
void clt_balancer_leave(clt_balancer *b);

/* Whether replica i takes part in the steps. */
int clt_balancer_member(const clt_balancer *b, int i);

/* With leaving on, before a step of a full global batch of `global` examples:
 * members whose share of it would be zero leave; else one replica out whose
 * latest probe predicts a step shorter by over 3% with it rejoins. A change
 * of either kind per call, and at least one member always stays. Returns 1 if
 * the members changed. now: clt_now_seconds(), for the probes' pacing. */
int clt_balancer_regroup(clt_balancer *b, int global, double now);

/* Whether replica i, out, is due to be re-timed: at least 16 full batches since
 * it left or was last probed, and 20 times its last probe's duration since that
 * probe ended, so probing a slow device costs it at most 5% of its time (and
 * a host CPU it shares with the others as little). */
int clt_balancer_probe_due(const clt_balancer *b, int i, double now);

/* A probe of replica i outside the step: `points` timings, seconds[k] for n[k]
 * examples, that took `took` seconds in all and ended at `now`. They replace
 * its estimates (the device may have changed since it was last timed); the
 * probe's warm-up already ran, so its next step is not taken for one. */
void clt_balancer_probed(clt_balancer *b, int i, int points, const int *n, const double *seconds,
                         double took, double now);

/* Estimated seconds of replica i for n examples (0 if never timed). */
double clt_balancer_time(const clt_balancer *b, int i, int n);

#endif
