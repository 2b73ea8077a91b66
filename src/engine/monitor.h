/* What the flags that stand for Keras callbacks and schedules share
 * (--lr-schedule NAME:ARGS, --reduce-lr-on-plateau ARGS, --early-stopping ARGS):
 *
 *   the argument grammar   name=value,... with Keras' argument names; a list is
 *                          values joined by '/' (boundaries=100/200); a boolean
 *                          is true or false (also True, False, 1, 0); spaces
 *                          around names and values are ignored; an empty text
 *                          takes every default. Unknown, repeated or missing
 *                          arguments and values out of range are one-line
 *                          errors naming the flag and the argument.
 *   the monitor            Keras' MonitorCallback: the quantity watched (loss,
 *                          accuracy, val_loss, val_accuracy), its mode (auto:
 *                          min for a loss, max for an accuracy), min_delta and
 *                          the best value so far; an improvement is
 *                          monitor_op(current - min_delta, best) with min_delta
 *                          negated in min mode, compared in float32 as Keras'
 *                          ops.less and ops.greater compare Python floats. */
#ifndef CLT_MONITOR_H
#define CLT_MONITOR_H

#include <stddef.h>

#include "status.h"

#define CLT_KWARGS_MAX 16
#define CLT_KWARG_NAME 32
#define CLT_KWARG_VALUE 512

/* Parsed name=value pairs, and the flag they came with for messages. */
typedef struct clt_kwargs {
  char flag[96]; /* "--lr-schedule cosine", "--reduce-lr-on-plateau" */
  int n;
  char names[CLT_KWARGS_MAX][CLT_KWARG_NAME];
  char values[CLT_KWARGS_MAX][CLT_KWARG_VALUE];
  int used[CLT_KWARGS_MAX];
} clt_kwargs;

/* The numbers a value may take: lo to hi, an end included unless open; with
 * integer, whole numbers only. */
typedef struct clt_range {
  double lo, hi;
  int lo_open, hi_open, integer;
} clt_range;

/* Splits text ("a=1,b=x/y", or "" for none) into kw, whose messages name
 * `flag`. Refused: an item without '=', an empty name or value, a name given
 * twice, more than CLT_KWARGS_MAX items or an overlong one. */
int clt_kwargs_parse(const char *text, const char *flag, clt_kwargs *kw, clt_err *e);

/* Argument `name` as a number in r into *out (left as it is when absent; then
 * an error when required). *given (may be NULL) gets whether it was there. */
int clt_kwargs_number(clt_kwargs *kw, const char *name, int required, clt_range r, double *out,
                      int *given, clt_err *e);
/* Argument `name` as a boolean into *out (left as it is when absent). */
int clt_kwargs_bool(clt_kwargs *kw, const char *name, int *out, clt_err *e);
/* Argument `name` as one of choices (NULL-ended) into *index (left as it is when
 * absent). */
int clt_kwargs_choice(clt_kwargs *kw, const char *name, const char *const *choices, int *index,
                      clt_err *e);
/* Argument `name` as a '/'-separated list of 1 to max numbers, each in r, into
 * out and *count (left as they are when absent; then an error when required). */
int clt_kwargs_list(clt_kwargs *kw, const char *name, int required, clt_range r, int max,
                    double *out, int *count, clt_err *e);
/* After the lookups: an argument none of them used is unknown, named with the
 * ones the flag takes (`known`, "decay_steps, alpha, ..."). */
int clt_kwargs_done(const clt_kwargs *kw, const char *known, clt_err *e);

/* The range as text: "[1, 1e+15]", "an integer in ..." is the caller's. */
void clt_range_text(clt_range r, char *buf, size_t size);

/* v as the shortest of %.15g and %.17g that reads back as v. */
void clt_exact_number(double v, char *buf, size_t size);

/* The quantities a monitor may watch: an epoch's training and validation figures. */
typedef enum {
  CLT_Q_LOSS,
  CLT_Q_ACCURACY,
  CLT_Q_VAL_LOSS,
  CLT_Q_VAL_ACCURACY,
  CLT_Q_COUNT
} clt_cb_quantity;

typedef enum { CLT_CB_AUTO, CLT_CB_MIN, CLT_CB_MAX } clt_cb_mode;

typedef struct clt_cb_monitor {
  clt_cb_quantity quantity;
  clt_cb_mode mode; /* as given */
  double min_delta; /* as given (Keras uses its absolute value) */
  int has_best;     /* 0: no value yet, the next one is an improvement */
  double best;
} clt_cb_monitor;

/* "loss", "accuracy", "val_loss", "val_accuracy"; "auto", "min", "max". */
const char *clt_cb_quantity_name(clt_cb_quantity q);
const char *clt_cb_mode_name(clt_cb_mode m);

/* Reads monitor=, mode= and min_delta= from kw into m (its defaults are m's on
 * entry); best is reset. */
int clt_cb_monitor_parse(clt_kwargs *kw, clt_cb_monitor *m, clt_err *e);

/* Whether the monitored quantity is a validation figure. */
int clt_cb_monitor_needs_validation(const clt_cb_monitor *m);

/* Whether m's quantity improves downwards (min mode, or auto on a loss). */
int clt_cb_monitor_minimizes(const clt_cb_monitor *m);

/* Keras' _is_improvement(current, best): always with no best yet. */
int clt_cb_monitor_improves(const clt_cb_monitor *m, double current);

/* The monitored value among an epoch's figures, indexed by clt_cb_quantity. */
double clt_cb_monitor_pick(const clt_cb_monitor *m, const double figures[CLT_Q_COUNT]);

#endif
