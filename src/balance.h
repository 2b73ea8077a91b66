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
 * the step); one example every 64 steps re-times it, so it comes back if it
 * speeds up. Integer slices come from largest remainders and a local repair.
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

/* 1 if auto mode, with replica i timed, gave it nothing in the latest split. */
int clt_balancer_excluded(const clt_balancer *b, int replica);

#endif
