/* The callbacks' argument grammar and Keras' MonitorCallback (monitor.h). */
#include "monitor.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the argument grammar ---- */

/* text[0..len) without the spaces around it, into dst (size bytes); 0 if too long. */
static int trimmed(const char *text, size_t len, char *dst, size_t size) {
  while (len && isspace((unsigned char)text[0])) {
    text++;
    len--;
  }
  while (len && isspace((unsigned char)text[len - 1])) len--;
  if (len >= size) return 0;
  memcpy(dst, text, len);
  dst[len] = '\0';
  return 1;
}

/* Up to the first 40 characters of s, control characters as '?', for messages. */
static void shown(const char *s, char *buf, size_t size) {
  size_t n = 0;
  for (; s[n] && n + 1 < size && n < 40; n++) buf[n] = iscntrl((unsigned char)s[n]) ? '?' : s[n];
  buf[n] = '\0';
}

int clt_kwargs_parse(const char *text, const char *flag, clt_kwargs *kw, clt_err *e) {
  memset(kw, 0, sizeof *kw);
  snprintf(kw->flag, sizeof kw->flag, "%s", flag);
  const char *p = text;
  while (*p && isspace((unsigned char)*p)) p++;
  if (!*p) return CLT_OK;
  for (;;) {
    const char *end = strchr(p, ','), *eq;
    const size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[CLT_KWARG_NAME + CLT_KWARG_VALUE + 2], show[48];
    if (!trimmed(p, len, item, sizeof item)) {
      shown(p, show, sizeof show);
      return clt_fail(e, CLT_ERR_ARG, "%s: argument '%s...' is too long", flag, show);
    }
    if (kw->n == CLT_KWARGS_MAX)
      return clt_fail(e, CLT_ERR_ARG, "%s: more than %d arguments", flag, CLT_KWARGS_MAX);
    shown(item, show, sizeof show);
    eq = strchr(item, '=');
    char *name = kw->names[kw->n], *value = kw->values[kw->n];
    if (!eq || !trimmed(item, (size_t)(eq - item), name, CLT_KWARG_NAME) ||
        !trimmed(eq + 1, strlen(eq + 1), value, CLT_KWARG_VALUE) || !name[0] || !value[0]) {
      return clt_fail(e, CLT_ERR_ARG, "%s: '%s' is not name=value (arguments are name=value,...)",
                      flag, show);
    }
    for (int i = 0; i < kw->n; i++) {
      if (strcmp(kw->names[i], name) == 0)
        return clt_fail(e, CLT_ERR_ARG, "%s: %s is given twice", flag, name);
    }
    kw->n++;
    if (!end) return CLT_OK;
    p = end + 1;
  }
}

/* The index of argument name, marked used; -1 when absent. */
static int find(clt_kwargs *kw, const char *name) {
  for (int i = 0; i < kw->n; i++) {
    if (strcmp(kw->names[i], name) == 0) {
      kw->used[i] = 1;
      return i;
    }
  }
  return -1;
}

void clt_range_text(clt_range r, char *buf, size_t size) {
  snprintf(buf, size, "%c%g, %g%c", r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']');
}

void clt_exact_number(double v, char *buf, size_t size) {
  snprintf(buf, size, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, size, "%.17g", v);
}

static int in_range(clt_range r, double v) {
  return isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi) &&
         (!r.integer || v == floor(v));
}

/* text as a number of r into *out; else the error for argument `what` (its value
 * being `value`). */
static int number_of(const clt_kwargs *kw, const char *what, const char *value, const char *text,
                     clt_range r, double *out, clt_err *e) {
  char *end;
  const double v = strtod(text, &end);
  if (end != text && *end == '\0' && in_range(r, v)) {
    *out = v;
    return CLT_OK;
  }
  char range[64], show[48];
  clt_range_text(r, range, sizeof range);
  shown(value, show, sizeof show);
  return clt_fail(e, CLT_ERR_ARG, "%s: %s=%s: expected %s in %s", kw->flag, what, show,
                  r.integer ? "an integer" : "a number", range);
}

int clt_kwargs_number(clt_kwargs *kw, const char *name, int required, clt_range r, double *out,
                      int *given, clt_err *e) {
  const int i = find(kw, name);
  if (given) *given = i >= 0;
  if (i < 0) {
    return required ? clt_fail(e, CLT_ERR_ARG, "%s: %s is required", kw->flag, name) : CLT_OK;
  }
  return number_of(kw, name, kw->values[i], kw->values[i], r, out, e);
}

int clt_kwargs_bool(clt_kwargs *kw, const char *name, int *out, clt_err *e) {
  static const char *const yes[] = {"true", "True", "1"}, *const no[] = {"false", "False", "0"};
  const int i = find(kw, name);
  if (i < 0) return CLT_OK;
  for (int k = 0; k < 3; k++) {
    if (strcmp(kw->values[i], yes[k]) == 0 || strcmp(kw->values[i], no[k]) == 0) {
      *out = strcmp(kw->values[i], yes[k]) == 0;
      return CLT_OK;
    }
  }
  char show[48];
  shown(kw->values[i], show, sizeof show);
  return clt_fail(e, CLT_ERR_ARG, "%s: %s=%s: expected true or false", kw->flag, name, show);
}

int clt_kwargs_choice(clt_kwargs *kw, const char *name, const char *const *choices, int *index,
                      clt_err *e) {
  const int i = find(kw, name);
  if (i < 0) return CLT_OK;
  char list[256] = "", show[48];
  for (int k = 0; choices[k]; k++) {
    if (strcmp(kw->values[i], choices[k]) == 0) {
      *index = k;
      return CLT_OK;
    }
    const size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%s",
             k == 0           ? ""
             : choices[k + 1] ? ", "
                              : " or ",
             choices[k]);
  }
  shown(kw->values[i], show, sizeof show);
  return clt_fail(e, CLT_ERR_ARG, "%s: %s=%s: expected %s", kw->flag, name, show, list);
}

int clt_kwargs_list(clt_kwargs *kw, const char *name, int required, clt_range r, int max,
                    double *out, int *count, clt_err *e) {
  const int i = find(kw, name);
  if (i < 0) {
    return required ? clt_fail(e, CLT_ERR_ARG, "%s: %s is required", kw->flag, name) : CLT_OK;
  }
  const char *p = kw->values[i];
  int n = 0;
  for (;;) {
    const char *end = strchr(p, '/');
    char item[64];
    const size_t len = end ? (size_t)(end - p) : strlen(p);
    if (n == max) {
      return clt_fail(e, CLT_ERR_ARG, "%s: %s holds more than %d values", kw->flag, name, max);
    }
    if (!trimmed(p, len, item, sizeof item)) item[0] = 'x', item[1] = '\0'; /* refused below */
    int status = number_of(kw, name, kw->values[i], item, r, &out[n], e);
    if (status) return status;
    n++;
    if (!end) break;
    p = end + 1;
  }
  *count = n;
  return CLT_OK;
}

int clt_kwargs_done(const clt_kwargs *kw, const char *known, clt_err *e) {
  for (int i = 0; i < kw->n; i++) {
    if (kw->used[i]) continue;
    char show[48];
    shown(kw->names[i], show, sizeof show);
    return clt_fail(e, CLT_ERR_ARG, "%s: unknown argument '%s' (it takes %s)", kw->flag, show,
                    known);
  }
  return CLT_OK;
}

/* ---- the monitor ---- */

static const char *const quantity_names[] = {"loss", "accuracy", "val_loss", "val_accuracy", NULL};
static const char *const mode_names[] = {"auto", "min", "max", NULL};

const char *clt_cb_quantity_name(clt_cb_quantity q) {
  return (unsigned)q < CLT_Q_COUNT ? quantity_names[q] : "unknown";
}

const char *clt_cb_mode_name(clt_cb_mode m) {
  return (unsigned)m <= CLT_CB_MAX ? mode_names[m] : "unknown";
}

int clt_cb_monitor_parse(clt_kwargs *kw, clt_cb_monitor *m, clt_err *e) {
  int q = (int)m->quantity, mode = (int)m->mode, status;
  const clt_range delta = {.lo = -1e6, .hi = 1e6};
  if ((status = clt_kwargs_choice(kw, "monitor", quantity_names, &q, e)) ||
      (status = clt_kwargs_choice(kw, "mode", mode_names, &mode, e)) ||
      (status = clt_kwargs_number(kw, "min_delta", 0, delta, &m->min_delta, NULL, e)))
    return status;
  m->quantity = (clt_cb_quantity)q;
  m->mode = (clt_cb_mode)mode;
  m->has_best = 0;
  m->best = 0;
  return CLT_OK;
}

int clt_cb_monitor_needs_validation(const clt_cb_monitor *m) {
  return m->quantity == CLT_Q_VAL_LOSS || m->quantity == CLT_Q_VAL_ACCURACY;
}

/* Keras' auto mode: a loss is minimised; an accuracy metric's direction is up. */
int clt_cb_monitor_minimizes(const clt_cb_monitor *m) {
  if (m->mode != CLT_CB_AUTO) return m->mode == CLT_CB_MIN;
  return m->quantity == CLT_Q_LOSS || m->quantity == CLT_Q_VAL_LOSS;
}

int clt_cb_monitor_improves(const clt_cb_monitor *m, double current) {
  if (!m->has_best) return 1;
  const double delta = clt_cb_monitor_minimizes(m) ? -fabs(m->min_delta) : fabs(m->min_delta);
  /* current - min_delta in Python's double, then both sides as float32 tensors. */
  const float a = (float)(current - delta), b = (float)m->best;
  return clt_cb_monitor_minimizes(m) ? a < b : a > b;
}

double clt_cb_monitor_pick(const clt_cb_monitor *m, const double figures[CLT_Q_COUNT]) {
  return (unsigned)m->quantity < CLT_Q_COUNT ? figures[m->quantity] : NAN;
}
