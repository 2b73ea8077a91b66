/* Keras' learning-rate schedules and ReduceLROnPlateau (schedule.h). */
#include "schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Indexed by clt_schedule_kind: --lr-schedule's names, Keras' class names, and
 * the arguments each takes, in Keras' order. */
static const struct {
  const char *name, *class_name, *args;
} kinds[CLT_SCHED_KINDS] = {
    [CLT_SCHED_NONE] = {"none", "none", ""},
    [CLT_SCHED_COSINE] = {"cosine", "CosineDecay",
                          "decay_steps, alpha, warmup_target, warmup_steps"},
    [CLT_SCHED_EXPONENTIAL] = {"exponential", "ExponentialDecay",
                               "decay_steps, decay_rate, staircase"},
    [CLT_SCHED_PIECEWISE] = {"piecewise", "PiecewiseConstantDecay", "boundaries, values"},
    [CLT_SCHED_POLYNOMIAL] = {"polynomial", "PolynomialDecay",
                              "decay_steps, end_learning_rate, power, cycle"},
    [CLT_SCHED_INVERSE_TIME] = {"inverse_time", "InverseTimeDecay",
                                "decay_steps, decay_rate, staircase"},
};

const char *clt_schedule_name(clt_schedule_kind kind) {
  return (unsigned)kind < CLT_SCHED_KINDS ? kinds[kind].name : "unknown";
}

const char *clt_schedule_class(clt_schedule_kind kind) {
  return (unsigned)kind < CLT_SCHED_KINDS ? kinds[kind].class_name : "unknown";
}

/* Steps: whole numbers (Keras' Python ints), exact as doubles. */
static const clt_range steps_above_0 = {.lo = 0, .hi = 1e15, .lo_open = 1, .integer = 1};
static const clt_range steps = {.lo = 0, .hi = 1e15, .integer = 1};
/* Rates as --lr takes them; a rate a schedule ends at may be 0. */
static const clt_range rate = {.lo = 0, .hi = 1e6, .lo_open = 1};
static const clt_range rate_or_0 = {.lo = 0, .hi = 1e6};
static const clt_range fraction = {.lo = 0, .hi = 1};
static const clt_range exponent = {.lo = 0, .hi = 1e6};

/* The arguments of kind s->kind from kw. */
static int parse_args(clt_kwargs *kw, clt_schedule *s, clt_err *e) {
  int status = CLT_OK;
  if (s->kind != CLT_SCHED_PIECEWISE)
    status = clt_kwargs_number(kw, "decay_steps", 1, steps_above_0, &s->decay_steps, NULL, e);
  if (status) return status;
  switch (s->kind) {
    case CLT_SCHED_COSINE: {
      int steps_given = 0;
      if ((status = clt_kwargs_number(kw, "alpha", 0, fraction, &s->alpha, NULL, e)) ||
          (status = clt_kwargs_number(kw, "warmup_target", 0, rate, &s->warmup_target,
                                      &s->has_warmup_target, e)) ||
          (status = clt_kwargs_number(kw, "warmup_steps", 0, steps, &s->warmup_steps, &steps_given,
                                      e)))
        return status;
      /* Keras ignores warmup_steps without warmup_target: a mistake, not a no-op. */
      if (steps_given && s->warmup_steps > 0 && !s->has_warmup_target)
        return clt_fail(e, CLT_ERR_ARG, "%s: warmup_steps needs warmup_target (the rate to reach)",
                        kw->flag);
      return CLT_OK;
    }
    case CLT_SCHED_EXPONENTIAL:
    case CLT_SCHED_INVERSE_TIME: {
      /* An exponential decay_rate above 1 grows the rate, as Keras allows. */
      const clt_range r = s->kind == CLT_SCHED_EXPONENTIAL ? rate : rate_or_0;
      if ((status = clt_kwargs_number(kw, "decay_rate", 1, r, &s->decay_rate, NULL, e)))
        return status;
      return clt_kwargs_bool(kw, "staircase", &s->staircase, e);
    }
    case CLT_SCHED_POLYNOMIAL:
      if ((status = clt_kwargs_number(kw, "end_learning_rate", 0, rate_or_0, &s->end_learning_rate,
                                      NULL, e)) ||
          (status = clt_kwargs_number(kw, "power", 0, exponent, &s->power, NULL, e)))
        return status;
      return clt_kwargs_bool(kw, "cycle", &s->cycle, e);
    case CLT_SCHED_PIECEWISE: {
      int nvalues = 0;
      if ((status = clt_kwargs_list(kw, "boundaries", 1, steps, CLT_SCHED_MAX_BOUNDARIES,
                                    s->boundaries, &s->nboundaries, e)) ||
          (status = clt_kwargs_list(kw, "values", 1, rate, CLT_SCHED_MAX_BOUNDARIES + 1, s->values,
                                    &nvalues, e)))
        return status;
      for (int i = 1; i < s->nboundaries; i++) {
        if (!(s->boundaries[i] > s->boundaries[i - 1]))
          return clt_fail(e, CLT_ERR_ARG, "%s: boundaries must increase strictly", kw->flag);
      }
      if (nvalues != s->nboundaries + 1) {
        return clt_fail(e, CLT_ERR_ARG, "%s: %d boundar%s need %d values (one more), not %d",
                        kw->flag, s->nboundaries, s->nboundaries == 1 ? "y" : "ies",
                        s->nboundaries + 1, nvalues);
      }
      return CLT_OK;
    }
    case CLT_SCHED_NONE:
    case CLT_SCHED_KINDS:
      break;
  }
  return CLT_OK;
}

int clt_schedule_parse(const char *text, const char *flag, clt_schedule *s, clt_err *e) {
  memset(s, 0, sizeof *s);
  const char *colon = strchr(text, ':');
  const size_t len = colon ? (size_t)(colon - text) : strlen(text);
  for (int k = CLT_SCHED_COSINE; k < CLT_SCHED_KINDS; k++) {
    if ((strlen(kinds[k].name) != len || strncmp(text, kinds[k].name, len) != 0) &&
        (strlen(kinds[k].class_name) != len || strncmp(text, kinds[k].class_name, len) != 0))
      continue;
    /* Keras' defaults. */
    s->kind = (clt_schedule_kind)k;
    s->end_learning_rate = 0.0001;
    s->power = 1.0;
    char label[96];
    snprintf(label, sizeof label, "%s %s", flag, kinds[k].name);
    clt_kwargs kw;
    int status = clt_kwargs_parse(colon ? colon + 1 : "", label, &kw, e);
    if (!status) status = parse_args(&kw, s, e);
    if (!status) status = clt_kwargs_done(&kw, kinds[k].args, e);
    return status;
  }
  char shown[48];
  snprintf(shown, sizeof shown, "%.*s", len < 40 ? (int)len : 40, text);
  return clt_fail(e, CLT_ERR_ARG,
                  "%s: unknown schedule '%s' (expected cosine, exponential, piecewise, polynomial "
                  "or inverse_time, or Keras' CosineDecay, ExponentialDecay, "
                  "PiecewiseConstantDecay, PolynomialDecay or InverseTimeDecay)",
                  flag, shown);
}

/* Appends ",name=v" (or ":name=v" first) to buf, v exact. */
static void put(char *buf, size_t size, const char *name, double v) {
  char num[40];
  clt_exact_number(v, num, sizeof num);
  const size_t len = strlen(buf);
  snprintf(buf + len, size - len, "%s%s=%s", strchr(buf, ':') ? "," : ":", name, num);
}

static void put_bool(char *buf, size_t size, const char *name, int v) {
  const size_t len = strlen(buf);
  snprintf(buf + len, size - len, ",%s=%s", name, v ? "true" : "false");
}

static void put_list(char *buf, size_t size, const char *name, const double *v, int n) {
  size_t len = strlen(buf);
  snprintf(buf + len, size - len, "%s%s=", strchr(buf, ':') ? "," : ":", name);
  for (int i = 0; i < n; i++) {
    char num[40];
    clt_exact_number(v[i], num, sizeof num);
    len = strlen(buf);
    snprintf(buf + len, size - len, "%s%s", i ? "/" : "", num);
  }
}

void clt_schedule_format(const clt_schedule *s, char *buf, size_t size) {
  snprintf(buf, size, "%s", clt_schedule_name(s->kind));
  switch (s->kind) {
    case CLT_SCHED_COSINE:
      put(buf, size, "decay_steps", s->decay_steps);
      put(buf, size, "alpha", s->alpha);
      if (s->has_warmup_target) put(buf, size, "warmup_target", s->warmup_target);
      put(buf, size, "warmup_steps", s->warmup_steps);
      break;
    case CLT_SCHED_EXPONENTIAL:
    case CLT_SCHED_INVERSE_TIME:
      put(buf, size, "decay_steps", s->decay_steps);
      put(buf, size, "decay_rate", s->decay_rate);
      put_bool(buf, size, "staircase", s->staircase);
      break;
    case CLT_SCHED_POLYNOMIAL:
      put(buf, size, "decay_steps", s->decay_steps);
      put(buf, size, "end_learning_rate", s->end_learning_rate);
      put(buf, size, "power", s->power);
      put_bool(buf, size, "cycle", s->cycle);
      break;
    case CLT_SCHED_PIECEWISE:
      put_list(buf, size, "boundaries", s->boundaries, s->nboundaries);
      put_list(buf, size, "values", s->values, s->nboundaries + 1);
      break;
    case CLT_SCHED_NONE:
    case CLT_SCHED_KINDS:
      break;
  }
}

/* ---- the schedules, as Keras computes them ----
 *
 * Keras converts initial_learning_rate to a float32 tensor and casts the step and
 * every argument it meets to that dtype; a Python float meeting a tensor becomes
 * float32 too ((1 - alpha) rounds once from the double). Each line below is one
 * Keras operation, rounded to float32 (C evaluates float operations in float:
 * FLT_EVAL_METHOD 0 on x86-64). */

/* CosineDecay._decay_function. */
static float cosine_decay(const clt_schedule *s, float step, float decay_steps, float from) {
  const float completed = step / decay_steps;
  const float pi = (float)3.14159265358979323846; /* math.pi as a float32 array */
  const float cosine = 0.5f * (1.0f + cosf(pi * completed));
  const float decayed = (float)(1.0 - s->alpha) * cosine + (float)s->alpha;
  return from * decayed;
}

static float cosine(const clt_schedule *s, float initial, float step) {
  const float decay_steps = (float)s->decay_steps;
  if (!s->has_warmup_target) return cosine_decay(s, fminf(step, decay_steps), decay_steps, initial);
  const float target = (float)s->warmup_target, warmup_steps = (float)s->warmup_steps;
  step = fminf(step, decay_steps + warmup_steps);
  if (step < warmup_steps) {
    const float completed = step / warmup_steps;
    const float delta = target - initial;
    return delta * completed + initial;
  }
  return cosine_decay(s, step - warmup_steps, decay_steps, target);
}

static float exponential(const clt_schedule *s, float initial, float step) {
  float p = step / (float)s->decay_steps;
  if (s->staircase) p = floorf(p);
  return initial * powf((float)s->decay_rate, p);
}

static float inverse_time(const clt_schedule *s, float initial, float step) {
  float p = step / (float)s->decay_steps;
  if (s->staircase) p = floorf(p);
  const float denom = 1.0f + (float)s->decay_rate * p;
  return initial / denom;
}

static float polynomial(const clt_schedule *s, float initial, float step) {
  const float end = (float)s->end_learning_rate, power = (float)s->power;
  float decay_steps = (float)s->decay_steps;
  if (s->cycle) {
    /* The first multiple of decay_steps beyond the step (1 at step 0). */
    const float multiplier = step == 0.0f ? 1.0f : ceilf(step / decay_steps);
    decay_steps = decay_steps * multiplier;
  } else {
    step = fminf(step, decay_steps);
  }
  const float p = step / decay_steps;
  return (initial - end) * powf(1.0f - p, power) + end;
}

/* The step is compared as an integer (Keras casts the boundaries to the step's int64). */
static float piecewise(const clt_schedule *s, long long step) {
  int i = 0;
  while (i < s->nboundaries && step > (long long)s->boundaries[i]) i++;
  return (float)s->values[i];
}

float clt_schedule_lr(const clt_schedule *s, double initial, long long iterations) {
  const float lr = (float)initial, step = (float)iterations;
  switch (s->kind) {
    case CLT_SCHED_COSINE:
      return cosine(s, lr, step);
    case CLT_SCHED_EXPONENTIAL:
      return exponential(s, lr, step);
    case CLT_SCHED_PIECEWISE:
      return piecewise(s, iterations);
    case CLT_SCHED_POLYNOMIAL:
      return polynomial(s, lr, step);
    case CLT_SCHED_INVERSE_TIME:
      return inverse_time(s, lr, step);
    case CLT_SCHED_NONE:
    case CLT_SCHED_KINDS:
      break;
  }
  return lr;
}

/* ---- ReduceLROnPlateau ---- */

#define PLATEAU_ARGS "monitor, factor, patience, mode, min_delta, cooldown, min_lr"

int clt_plateau_parse(const char *text, const char *flag, clt_plateau *p, clt_err *e) {
  static const clt_range factor = {.lo = 0, .hi = 1, .lo_open = 1, .hi_open = 1};
  static const clt_range count = {.lo = 0, .hi = 1e9, .integer = 1};
  memset(p, 0, sizeof *p);
  /* Keras' defaults. */
  p->monitor.quantity = CLT_Q_VAL_LOSS;
  p->monitor.mode = CLT_CB_AUTO;
  p->monitor.min_delta = 1e-4;
  p->factor = 0.1;
  double patience = 10, cooldown = 0;
  clt_kwargs kw;
  int status = clt_kwargs_parse(text, flag, &kw, e);
  if (status || (status = clt_cb_monitor_parse(&kw, &p->monitor, e)) ||
      (status = clt_kwargs_number(&kw, "factor", 0, factor, &p->factor, NULL, e)) ||
      (status = clt_kwargs_number(&kw, "patience", 0, count, &patience, NULL, e)) ||
      (status = clt_kwargs_number(&kw, "cooldown", 0, count, &cooldown, NULL, e)) ||
      (status = clt_kwargs_number(&kw, "min_lr", 0, rate_or_0, &p->min_lr, NULL, e)) ||
      (status = clt_kwargs_done(&kw, PLATEAU_ARGS, e)))
    return status;
  p->patience = (int)patience;
  p->cooldown = (int)cooldown;
  p->active = 1;
  return CLT_OK;
}

void clt_plateau_format(const clt_plateau *p, char *buf, size_t size) {
  char factor[40], delta[40], min_lr[40];
  clt_exact_number(p->factor, factor, sizeof factor);
  clt_exact_number(p->monitor.min_delta, delta, sizeof delta);
  clt_exact_number(p->min_lr, min_lr, sizeof min_lr);
  snprintf(buf, size, "monitor=%s,factor=%s,patience=%d,mode=%s,min_delta=%s,cooldown=%d,min_lr=%s",
           clt_cb_quantity_name(p->monitor.quantity), factor, p->patience,
           clt_cb_mode_name(p->monitor.mode), delta, p->cooldown, min_lr);
}

/* Keras' _reduce_optimizer_lr: old_lr is the float32 variable's value as a Python
 * float; the product and max(new_lr, min_lr) are doubles, assigned back to the
 * float32 variable. A rate that would round to 0 is left as it is (cltrain's
 * rates are above 0). */
static int reduce(const clt_plateau *p, double *lr) {
  const double old = (double)(float)*lr;
  if (!(old > (double)(float)p->min_lr)) return 0;
  double next = old * p->factor;
  if (next < p->min_lr) next = p->min_lr;
  const float assigned = (float)next;
  if (!(assigned > 0.0f)) return 0;
  *lr = (double)assigned;
  return 1;
}

int clt_plateau_epoch_end(clt_plateau *p, double current, double *lr) {
  if (p->cooldown_counter > 0) {
    p->cooldown_counter--;
    p->wait = 0;
  }
  if (clt_cb_monitor_improves(&p->monitor, current)) {
    p->monitor.best = current;
    p->monitor.has_best = 1;
    p->wait = 0;
    return 0;
  }
  if (p->cooldown_counter > 0) return 0;
  if (++p->wait < p->patience) return 0;
  if (!reduce(p, lr)) return 0;
  p->cooldown_counter = p->cooldown;
  p->wait = 0;
  return 1;
}
