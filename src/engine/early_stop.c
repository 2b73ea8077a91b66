/* Keras 3's EarlyStopping (early_stop.h): keras/src/callbacks/early_stopping.py
 * and its base, monitor_callback.py. */
#include "early_stop.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const monitor_names[] = {"val_loss", "val_accuracy", "loss", "accuracy"};
static const char *const mode_names[] = {"auto", "min", "max"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

_Static_assert(COUNT(monitor_names) == CLT_MONITOR_COUNT, "a name per monitor");
_Static_assert(COUNT(mode_names) == CLT_ES_MODE_COUNT, "a name per mode");

const char *clt_monitor_name(clt_monitor m) { return monitor_names[m]; }

const char *clt_es_mode_name(clt_es_mode m) { return mode_names[m]; }

int clt_monitor_is_validation(clt_monitor m) {
  return m == CLT_MONITOR_VAL_LOSS || m == CLT_MONITOR_VAL_ACCURACY;
}

/* Keras' arguments, in its order. */
static const char *const keys[] = {"monitor",         "min_delta",
                                   "patience",        "mode",
                                   "baseline",        "restore_best_weights",
                                   "start_from_epoch"};
enum { K_MONITOR, K_MIN_DELTA, K_PATIENCE, K_MODE, K_BASELINE, K_RESTORE, K_START, K_COUNT };
_Static_assert(COUNT(keys) == K_COUNT, "one name per key");

/* The index of name in names[0..n), or -1. */
static int find(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

static int parse_number(const char *v, double *out) {
  char *end = NULL;
  errno = 0;
  const double d = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(d)) return 0;
  *out = d;
  return 1;
}

static int parse_count(const char *v, int *out) {
  char *end = NULL;
  errno = 0;
  const long n = strtol(v, &end, 10);
  if (!*v || *end || errno || n < 0 || n > 1000000 || *v == '+' || *v == '-') return 0;
  *out = (int)n;
  return 1;
}

/* true/false as Python or JSON spell them, and 1/0. */
static int parse_bool(const char *v, int *out) {
  if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) *out = 1;
  else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) *out = 0;
  else return 0;
  return 1;
}

/* One key=value into es; `what` says what value key takes, for the error. */
static int set_key(clt_early_stop *es, int key, const char *v, const char **what) {
  int i;
  switch (key) {
    case K_MONITOR:
      *what = "val_loss, val_accuracy, loss or accuracy";
      if ((i = find(monitor_names, COUNT(monitor_names), v)) < 0) return 0;
      es->monitor = (clt_monitor)i;
      return 1;
    case K_MIN_DELTA:
      *what = "a number";
      return parse_number(v, &es->min_delta);
    case K_PATIENCE:
      *what = "an integer in [0, 1000000]";
      return parse_count(v, &es->patience);
    case K_MODE:
      *what = "auto, min or max";
      if ((i = find(mode_names, COUNT(mode_names), v)) < 0) return 0;
      es->mode = (clt_es_mode)i;
      return 1;
    case K_BASELINE:
      *what = "a number, or none";
      es->has_baseline = strcmp(v, "none") != 0 && strcmp(v, "None") != 0;
      return !es->has_baseline || parse_number(v, &es->baseline);
    case K_RESTORE:
      *what = "true or false";
      return parse_bool(v, &es->restore_best_weights);
    default:
      *what = "an integer in [0, 1000000]";
      return parse_count(v, &es->start_from_epoch);
  }
}

int clt_early_stop_parse(const char *flag, const char *text, clt_early_stop *es, clt_err *e) {
  memset(es, 0, sizeof *es);
  es->enabled = 1; /* the rest at Keras' defaults: monitor val_loss, mode auto, all else 0 */
  int seen[K_COUNT] = {0};
  const char *at = text;
  for (;;) {
    char item[256], *eq;
    const size_t len = strcspn(at, ",");
    if (len == 0 || len >= sizeof item) {
      return clt_fail(e, CLT_ERR_ARG, "%s %s: expected KEY=VALUE items separated by commas", flag,
                      text);
    }
    memcpy(item, at, len);
    item[len] = '\0';
    if (!(eq = strchr(item, '='))) {
      return clt_fail(e, CLT_ERR_ARG, "%s %s: '%s' is not KEY=VALUE", flag, text, item);
    }
    *eq = '\0';
    const int key = find(keys, K_COUNT, item);
    if (key < 0) {
      return clt_fail(e, CLT_ERR_ARG,
                      "%s: unknown key '%s' (Keras' EarlyStopping arguments: monitor, min_delta, "
                      "patience, mode, baseline, restore_best_weights, start_from_epoch)",
                      flag, item);
    }
    if (seen[key]++) return clt_fail(e, CLT_ERR_ARG, "%s: %s given twice", flag, item);
    const char *what = "";
    if (!set_key(es, key, eq + 1, &what)) {
      return clt_fail(e, CLT_ERR_ARG, "%s: %s=%s: expected %s", flag, item, eq + 1, what);
    }
    if (!at[len]) break;
    at += len + 1;
  }
  return CLT_OK;
}

/* v as the shortest of %.15g and %.17g that reads back as v. */
static void show(double v, char *buf, size_t size) {
  snprintf(buf, size, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, size, "%.17g", v);
}

void clt_early_stop_describe(const clt_early_stop *es, char *buf, size_t size) {
  char delta[40], base[40] = "none";
  show(es->min_delta, delta, sizeof delta);
  if (es->has_baseline) show(es->baseline, base, sizeof base);
  snprintf(buf, size,
           "monitor=%s,min_delta=%s,patience=%d,mode=%s,baseline=%s,restore_best_weights=%s,"
           "start_from_epoch=%d",
           monitor_names[es->monitor], delta, es->patience, mode_names[es->mode], base,
           es->restore_best_weights ? "true" : "false", es->start_from_epoch);
}

int clt_early_stop_same_args(const clt_early_stop *a, const clt_early_stop *b) {
  return a->enabled == b->enabled && a->monitor == b->monitor && a->min_delta == b->min_delta &&
         a->patience == b->patience && a->mode == b->mode && a->has_baseline == b->has_baseline &&
         (!a->has_baseline || a->baseline == b->baseline) &&
         a->restore_best_weights == b->restore_best_weights &&
         a->start_from_epoch == b->start_from_epoch;
}

/* Mode auto: a loss falls; accuracy, which Keras' metric marks "up", rises. */
int clt_early_stop_minimizes(const clt_early_stop *es) {
  if (es->mode != CLT_ES_AUTO) return es->mode == CLT_ES_MIN;
  return es->monitor == CLT_MONITOR_VAL_LOSS || es->monitor == CLT_MONITOR_LOSS;
}

/* Keras' _is_improvement: monitor_op(value - min_delta, reference), min_delta's
 * sign flipped for a falling quantity; the difference is taken in double (Python
 * floats) and compared as float32 tensors. */
static int is_improvement(const clt_early_stop *es, double value, double reference) {
  const int down = clt_early_stop_minimizes(es);
  const double delta = down ? -fabs(es->min_delta) : fabs(es->min_delta);
  const float a = (float)(value - delta), b = (float)reference;
  return down ? a < b : a > b;
}

int clt_early_stop_update(clt_early_stop *es, int epoch, double current, int *improved) {
  *improved = 0;
  if (epoch < es->start_from_epoch) return 0; /* still warming up */
  es->wait++;
  if (!es->has_best || is_improvement(es, current, es->best)) {
    es->has_best = 1;
    es->best = current;
    es->best_epoch = epoch;
    *improved = 1;
    /* The wait restarts only on beating the baseline as well as the best. */
    if (!es->has_baseline || is_improvement(es, current, es->baseline)) es->wait = 0;
    return 0;
  }
  if (es->wait >= es->patience && epoch > 0) {
    es->stopped_epoch = epoch;
    return 1;
  }
  return 0;
}
