/* Keras' learning-rate schedules (keras/src/optimizers/schedules/
 * learning_rate_schedule.py) and its ReduceLROnPlateau callback.
 *
 * A schedule maps the optimizer's iterations (the steps taken before this one:
 * 0 at the first step, as Keras counts) to the step's learning rate, computed in
 * float32 with the same operations in the same order as Keras, whose tensors
 * take the dtype of initial_learning_rate (float32):
 *
 *   cosine        CosineDecay(initial_learning_rate, decay_steps, alpha=0,
 *                 warmup_target=None, warmup_steps=0)
 *   exponential   ExponentialDecay(initial_learning_rate, decay_steps, decay_rate,
 *                 staircase=False)
 *   piecewise     PiecewiseConstantDecay(boundaries, values): values[0] up to and
 *                 including step boundaries[0], ..., values[-1] after the last;
 *                 it has no initial rate of its own
 *   polynomial    PolynomialDecay(initial_learning_rate, decay_steps,
 *                 end_learning_rate=0.0001, power=1.0, cycle=False)
 *   inverse_time  InverseTimeDecay(initial_learning_rate, decay_steps, decay_rate,
 *                 staircase=False)
 *
 * --lr-schedule's text is NAME:ARGS in monitor.h's grammar (NAME also as Keras'
 * class name, CosineDecay ...), without initial_learning_rate, which is --lr. */
#ifndef CLT_SCHEDULE_H
#define CLT_SCHEDULE_H

#include <stddef.h>

#include "monitor.h"
#include "status.h"

typedef enum {
  CLT_SCHED_NONE, /* the optimizer's learning rate throughout */
  CLT_SCHED_COSINE,
  CLT_SCHED_EXPONENTIAL,
  CLT_SCHED_PIECEWISE,
  CLT_SCHED_POLYNOMIAL,
  CLT_SCHED_INVERSE_TIME,
  CLT_SCHED_KINDS
} clt_schedule_kind;

#define CLT_SCHED_MAX_BOUNDARIES 15 /* values: one more */

typedef struct clt_schedule {
  clt_schedule_kind kind;
  double decay_steps;       /* all but piecewise: above 0 */
  double alpha;             /* cosine */
  int has_warmup_target;    /* cosine: warmup_target given (Keras' None: no warm-up) */
  double warmup_target;     /* cosine */
  double warmup_steps;      /* cosine */
  double decay_rate;        /* exponential, inverse_time */
  int staircase;            /* exponential, inverse_time */
  double end_learning_rate; /* polynomial */
  double power;             /* polynomial */
  int cycle;                /* polynomial */
  int nboundaries;          /* piecewise: 1 to CLT_SCHED_MAX_BOUNDARIES */
  double boundaries[CLT_SCHED_MAX_BOUNDARIES];
  double values[CLT_SCHED_MAX_BOUNDARIES + 1];
} clt_schedule;

/* Parses "NAME:ARGS" into s; messages name `flag` ("--lr-schedule"). */
int clt_schedule_parse(const char *text, const char *flag, clt_schedule *s, clt_err *e);

/* s as the text clt_schedule_parse reads back to the same schedule: short name,
 * then every argument (defaults too) in Keras' order, numbers exact. */
void clt_schedule_format(const clt_schedule *s, char *buf, size_t size);

/* "cosine", ...; Keras' class name, "CosineDecay", ... */
const char *clt_schedule_name(clt_schedule_kind kind);
const char *clt_schedule_class(clt_schedule_kind kind);

/* The learning rate of the step taken after `iterations` steps, from initial
 * rate `initial` (unused by piecewise): Keras' schedule(iterations) in float32. */
float clt_schedule_lr(const clt_schedule *s, double initial, long long iterations);

/* ReduceLROnPlateau(monitor="val_loss", factor=0.1, patience=10, mode="auto",
 * min_delta=1e-4, cooldown=0, min_lr=0) and its state. */
typedef struct clt_plateau {
  int active;
  clt_cb_monitor monitor; /* with best, the state's best value */
  double factor;          /* (0, 1) */
  int patience, cooldown;
  double min_lr;
  int wait, cooldown_counter; /* the state */
} clt_plateau;

/* Parses --reduce-lr-on-plateau's ARGS into p (active, state reset). */
int clt_plateau_parse(const char *text, const char *flag, clt_plateau *p, clt_err *e);

/* p's arguments as the text clt_plateau_parse reads back, every one given. */
void clt_plateau_format(const clt_plateau *p, char *buf, size_t size);

/* Keras' on_epoch_end with the monitored value `current`: updates the state and,
 * after `patience` epochs without improvement outside a cooldown, multiplies
 * *lr (the optimizer's rate, a float32 variable in Keras) by factor, not below
 * min_lr, rounded to float32. Returns whether it reduced *lr. */
int clt_plateau_epoch_end(clt_plateau *p, double current, double *lr);

#endif
