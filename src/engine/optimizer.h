/* The optimizers, as Keras 3 defines them (keras/src/optimizers/): what a step
 * does with the all-reduced gradient g, for each trainable value p.
 *
 *   adam     m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *            p -= lr sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + eps)
 *   sgd      momentum 0: p -= g lr; else m = m momentum - g lr and
 *            p += m, or with Nesterov p += m momentum - g lr
 *   rmsprop  v = rho v + (1-rho) g^2; inc = lr g / sqrt(v + eps);
 *            momentum 0: p -= inc; else m = momentum m + inc, p -= m
 *
 * and, for all three, decoupled weight decay before the update: p -= p wd lr.
 * Each keeps up to two arrays of state per value, its slot variables: Adam m, v;
 * SGD momentum (with momentum > 0); RMSprop velocity, momentum (with momentum > 0).
 *
 * Everything that differs between the kinds is in one table (optimizer.c, one
 * clt_optimizer_ops per kind): the name, Keras' defaults, the hyper-parameters
 * the kind uses (their get_config names and valid ranges), its slot variables
 * and its update kernels. The checkpoint's metadata, the run's report line, the
 * command's checks and the update all read it. */
#ifndef CLT_OPTIMIZER_H
#define CLT_OPTIMIZER_H

#include <stddef.h>

#include "replica.h"
#include "schedule.h"

typedef enum { CLT_OPT_ADAM, CLT_OPT_SGD, CLT_OPT_RMSPROP } clt_optimizer_kind;

#define CLT_OPT_KINDS 3
#define CLT_OPT_SLOTS 2 /* state arrays per value, at most */

/* The OpenCL source of every optimizer's kernels (and of the moving averages). */
#define CLT_OPTIMIZER_SOURCE "optimizer.cl"

/* Gradient floats per partial count of the gradient check (the updates' blocks). */
#define CLT_CHECK_BLOCK 4096

typedef struct clt_optimizer {
  clt_optimizer_kind kind;
  int nesterov; /* sgd with momentum */
  double lr;
  double momentum; /* sgd, rmsprop */
  double rho;      /* rmsprop */
  double epsilon;  /* adam, rmsprop */
  double beta1, beta2;
  double weight_decay; /* decoupled, before the update */
  /* --lr-schedule: each step's rate from lr, the initial one (kind
   * CLT_SCHED_NONE: lr throughout). */
  clt_schedule schedule;
} clt_optimizer;

/* The hyper-parameters any kind may use. */
typedef enum {
  CLT_HP_LEARNING_RATE,
  CLT_HP_BETA_1,
  CLT_HP_BETA_2,
  CLT_HP_EPSILON,
  CLT_HP_MOMENTUM,
  CLT_HP_NESTEROV,
  CLT_HP_RHO,
  CLT_HP_WEIGHT_DECAY,
  CLT_HP_COUNT
} clt_hyper;

typedef struct clt_hyper_info {
  const char *key;   /* Keras get_config's name: "learning_rate", "beta_1", ... */
  const char *shown; /* in the run's report line: "learning rate", "beta_1", "Nesterov" */
  /* Valid numbers: from lo to hi, each end included unless open. */
  double lo, hi;
  int flag; /* a boolean (nesterov); else a number */
  int lo_open, hi_open;
  int shown_when_set; /* the report names it only when above 0 (a flag: when true) */
} clt_hyper_info;

extern const clt_hyper_info clt_hypers[CLT_HP_COUNT];

/* Where an update finds its buffers on a replica: the flat parameters and
 * all-reduced gradients, the slot variables (flat like params; unused ones may
 * be NULL) and n, the trainable values at the start of params. */
typedef struct clt_optimizer_buffers {
  cl_mem params, grads, slots[CLT_OPT_SLOTS];
  int n;
  /* The update also counts the non-finite values of grads[0, count_n) (count_n
   * >= n) per block of CLT_CHECK_BLOCK floats into partial (ceil(count_n /
   * CLT_CHECK_BLOCK) floats), as reduce.cl's count_final sums them. */
  int count_n;
  cl_mem partial;
} clt_optimizer_buffers;

typedef struct clt_optimizer_ops {
  const char *name;       /* --optimizer's and the metadata's: "adam" */
  clt_optimizer defaults; /* Keras' */
  int nhypers;
  clt_hyper hypers[CLT_HP_COUNT]; /* the ones it uses, in get_config's order */
  const char *slots[CLT_OPT_SLOTS];
  int slot_needs_momentum[CLT_OPT_SLOTS]; /* kept only with momentum > 0 */
  const char *kernels[2];                 /* of CLT_OPTIMIZER_SOURCE; NULL after the last */
  /* Enqueues step `step` (1-based) of the update on r's queue. */
  int (*update)(clt_replica *r, const clt_optimizer *o, long step, const clt_optimizer_buffers *b,
                clt_err *e);
} clt_optimizer_ops;

/* The table's entry of kind; NULL for a value that is no kind. */
const clt_optimizer_ops *clt_optimizer_ops_of(clt_optimizer_kind kind);

/* "adam", "sgd", "rmsprop"; "unknown" for a value that is no kind. */
const char *clt_optimizer_name(clt_optimizer_kind kind);

/* The kind named `name`; 0 if there is none. */
int clt_optimizer_find(const char *name, clt_optimizer_kind *kind);

/* Keras' defaults: learning rate 0.001 (SGD 0.01), Adam's betas 0.9 and 0.999,
 * RMSprop's rho 0.9, epsilon 1e-7 (not PyTorch's 1e-8), no momentum or decay. */
clt_optimizer clt_optimizer_defaults(clt_optimizer_kind kind);

/* The name of slot variable k ("m", "v", "momentum", "velocity"), or NULL when o
 * keeps none there. */
const char *clt_optimizer_slot(const clt_optimizer *o, int k);

/* Whether kind uses hyper-parameter h. */
int clt_optimizer_uses(clt_optimizer_kind kind, clt_hyper h);

/* Hyper-parameter h of o (a flag as 0 or 1), and setting it. */
double clt_optimizer_get(const clt_optimizer *o, clt_hyper h);
void clt_optimizer_set(clt_optimizer *o, clt_hyper h, double v);

/* Whether v is a valid value of h (a flag: 0 or 1); its range as text, "[0, 1)". */
int clt_hyper_valid(clt_hyper h, double v);
void clt_hyper_range(clt_hyper h, char *buf, size_t size);

/* The names of the kinds that use h, "sgd and rmsprop" (conj "and"); h ==
 * CLT_HP_COUNT: every kind, "adam, sgd or rmsprop" (conj "or"). */
void clt_optimizer_list(clt_hyper h, const char *conj, char *buf, size_t size);

/* What the run's report says of o: "learning rate 0.001, beta_1 0.9, ...". */
void clt_optimizer_describe(const clt_optimizer *o, char *buf, size_t size);

/* The learning rate of step `step` (1-based): the schedule's at step - 1
 * iterations, else lr. */
double clt_optimizer_rate(const clt_optimizer *o, long step);

/* Enqueues o's step `step` on r (the update kernels of its kind), at the rate
 * clt_optimizer_rate gives it. */
int clt_optimizer_update(clt_replica *r, const clt_optimizer *o, long step,
                         const clt_optimizer_buffers *b, clt_err *e);

/* Creates every kind's kernels on r, so a build failure shows at set-up. */
int clt_optimizer_kernels(clt_replica *r, clt_err *e);

#endif
