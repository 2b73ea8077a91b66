/* The optimizer kinds' table (optimizer.h) and their updates. */
#include "optimizer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

/* Keras casts its Python-float hyper-parameters to float32 where they meet a
 * tensor; the kernels take them so, and do the same float operations in the same
 * order as Keras (cl/optimizer.cl). */

/* Launches kernel `name` of the optimizers' source, built with the exact options
 * (correctly rounded division and square root, so replicas on different devices
 * stay bit-identical), over n values. */
static int launch(clt_replica *r, const char *name, const clt_karg *args, int nargs, int n,
                  clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(r, CLT_OPTIMIZER_SOURCE, r->exact_options, name, &k, e);
  return status ? status : clt_launch1d(r, k, name, args, nargs, (size_t)n, e);
}

/* Launches update kernel `name` with args followed by the gradient check's
 * (count_n, the block, partial), a block of CLT_CHECK_BLOCK floats per work-item
 * (cpu) or work-group (gpu) over max(n, count_n). */
static int launch_counted(clt_replica *r, const char *name, const clt_karg *args, int nargs,
                          const clt_optimizer_buffers *b, clt_err *e) {
  static const int block = CLT_CHECK_BLOCK;
  const int count_n = b->count_n > b->n ? b->count_n : b->n;
  clt_karg all[16];
  if (!b->partial)
    return clt_fail(e, CLT_ERR_INTERNAL, "%s without a buffer for its gradient check", name);
  if (nargs + 3 > (int)(sizeof all / sizeof all[0]))
    return clt_fail(e, CLT_ERR_INTERNAL, "%s: %d arguments", name, nargs);
  memcpy(all, args, (size_t)nargs * sizeof *args);
  all[nargs] = CLT_ARG(count_n);
  all[nargs + 1] = CLT_ARG(block);
  all[nargs + 2] = CLT_ARG(b->partial);
  cl_kernel k;
  int status = clt_replica_kernel(r, CLT_OPTIMIZER_SOURCE, r->exact_options, name, &k, e);
  const size_t nblocks = ((size_t)count_n + block - 1) / block;
  return status ? status : clt_launch_groups(r, k, name, all, nargs + 3, nblocks, e);
}

/* Adam's decay is a kernel of its own, so adam_update is the same with and without it. */
static int adam_update(clt_replica *r, const clt_optimizer *o, long step,
                       const clt_optimizer_buffers *b, clt_err *e) {
  int n = b->n;
  float lr = (float)o->lr, wd = (float)o->weight_decay, eps = (float)o->epsilon;
  cl_mem p = b->params, g = b->grads, s0 = b->slots[0], s1 = b->slots[1];
  if (wd > 0) {
    clt_karg dargs[] = {CLT_ARG(p), CLT_ARG(n), CLT_ARG(wd), CLT_ARG(lr)};
    int status = launch(r, "weight_decay", dargs, 4, n, e);
    if (status) return status;
  }
  /* The bias corrections folded into the step size, in double on the host. */
  float b1 = (float)o->beta1, b2 = (float)o->beta2;
  float alpha = (float)(o->lr * sqrt(1.0 - pow(o->beta2, (double)step)) /
                        (1.0 - pow(o->beta1, (double)step)));
  clt_karg args[] = {CLT_ARG(p),  CLT_ARG(g),  CLT_ARG(s0),  CLT_ARG(s1),   CLT_ARG(n),
                     CLT_ARG(b1), CLT_ARG(b2), CLT_ARG(eps), CLT_ARG(alpha)};
  return launch_counted(r, "adam_update", args, 9, b, e);
}

static int sgd_update(clt_replica *r, const clt_optimizer *o, long step,
                      const clt_optimizer_buffers *b, clt_err *e) {
  (void)step;
  int n = b->n, nesterov = o->nesterov != 0;
  float lr = (float)o->lr, wd = (float)o->weight_decay, mom = (float)o->momentum;
  cl_mem p = b->params, g = b->grads, s0 = b->slots[0];
  clt_karg args[] = {CLT_ARG(p),  CLT_ARG(g),   CLT_ARG(s0),       CLT_ARG(n),
                     CLT_ARG(lr), CLT_ARG(mom), CLT_ARG(nesterov), CLT_ARG(wd)};
  return launch_counted(r, "sgd_update", args, 8, b, e);
}

/* 1 - rho is rounded once from the double, as Keras computes it on a Python float. */
static int rmsprop_update(clt_replica *r, const clt_optimizer *o, long step,
                          const clt_optimizer_buffers *b, clt_err *e) {
  (void)step;
  int n = b->n;
  float lr = (float)o->lr, wd = (float)o->weight_decay, mom = (float)o->momentum;
  float eps = (float)o->epsilon, rho = (float)o->rho, one_minus_rho = (float)(1.0 - o->rho);
  cl_mem p = b->params, g = b->grads, s0 = b->slots[0], s1 = b->slots[1];
  clt_karg args[] = {CLT_ARG(p),   CLT_ARG(g),   CLT_ARG(s0),  CLT_ARG(s1),
                     CLT_ARG(n),   CLT_ARG(lr),  CLT_ARG(rho), CLT_ARG(one_minus_rho),
                     CLT_ARG(eps), CLT_ARG(mom), CLT_ARG(wd)};
  return launch_counted(r, "rmsprop_update", args, 11, b, e);
}

/* The ranges a checkpoint's metadata may hold (the command line's flags have
 * their own, within these): a learning rate and epsilon above 0, betas and rho
 * below 1 (at 1 Adam's bias correction divides by 0 and RMSprop's average never
 * moves), momentum up to 1. */
const clt_hyper_info clt_hypers[CLT_HP_COUNT] = {
    [CLT_HP_LEARNING_RATE] = {.key = "learning_rate",
                              .shown = "learning rate",
                              .hi = 1e6,
                              .lo_open = 1},
    [CLT_HP_BETA_1] = {.key = "beta_1", .shown = "beta_1", .hi = 1, .hi_open = 1},
    [CLT_HP_BETA_2] = {.key = "beta_2", .shown = "beta_2", .hi = 1, .hi_open = 1},
    [CLT_HP_EPSILON] = {.key = "epsilon", .shown = "epsilon", .hi = 1, .lo_open = 1},
    [CLT_HP_MOMENTUM] = {.key = "momentum", .shown = "momentum", .hi = 1},
    [CLT_HP_NESTEROV] =
        {.key = "nesterov", .shown = "Nesterov", .flag = 1, .hi = 1, .shown_when_set = 1},
    [CLT_HP_RHO] = {.key = "rho", .shown = "rho", .hi = 1, .hi_open = 1},
    [CLT_HP_WEIGHT_DECAY] = {.key = "weight_decay",
                             .shown = "weight decay",
                             .hi = 1e6,
                             .shown_when_set = 1},
};

/* Keras' defaults (the fields a kind does not use keep them too). */
#define DEFAULTS(k, learning_rate) \
  { .kind = (k), .lr = (learning_rate), .rho = 0.9, .epsilon = 1e-7, .beta1 = 0.9, .beta2 = 0.999 }

/* Indexed by clt_optimizer_kind. The hyper-parameters are in Keras get_config's
 * order, which the metadata and the report line follow. */
static const clt_optimizer_ops kinds[CLT_OPT_KINDS] = {
    [CLT_OPT_ADAM] = {.name = "adam",
                      .defaults = DEFAULTS(CLT_OPT_ADAM, 1e-3),
                      .nhypers = 5,
                      .hypers = {CLT_HP_LEARNING_RATE, CLT_HP_BETA_1, CLT_HP_BETA_2, CLT_HP_EPSILON,
                                 CLT_HP_WEIGHT_DECAY},
                      .slots = {"m", "v"},
                      .kernels = {"adam_update", "weight_decay"},
                      .update = adam_update},
    [CLT_OPT_SGD] = {.name = "sgd",
                     .defaults = DEFAULTS(CLT_OPT_SGD, 1e-2),
                     .nhypers = 4,
                     .hypers = {CLT_HP_LEARNING_RATE, CLT_HP_MOMENTUM, CLT_HP_NESTEROV,
                                CLT_HP_WEIGHT_DECAY},
                     .slots = {"momentum", NULL},
                     .slot_needs_momentum = {1, 0},
                     .kernels = {"sgd_update", NULL},
                     .update = sgd_update},
    [CLT_OPT_RMSPROP] = {.name = "rmsprop",
                         .defaults = DEFAULTS(CLT_OPT_RMSPROP, 1e-3),
                         .nhypers = 5,
                         .hypers = {CLT_HP_LEARNING_RATE, CLT_HP_RHO, CLT_HP_MOMENTUM,
                                    CLT_HP_EPSILON, CLT_HP_WEIGHT_DECAY},
                         .slots = {"velocity", "momentum"},
                         .slot_needs_momentum = {0, 1},
                         .kernels = {"rmsprop_update", NULL},
                         .update = rmsprop_update},
};

const clt_optimizer_ops *clt_optimizer_ops_of(clt_optimizer_kind kind) {
  return (unsigned)kind < CLT_OPT_KINDS ? &kinds[kind] : NULL;
}

const char *clt_optimizer_name(clt_optimizer_kind kind) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(kind);
  return ops ? ops->name : "unknown";
}

int clt_optimizer_find(const char *name, clt_optimizer_kind *kind) {
  for (int k = 0; k < CLT_OPT_KINDS; k++) {
    if (strcmp(name, kinds[k].name) == 0) {
      *kind = (clt_optimizer_kind)k;
      return 1;
    }
  }
  return 0;
}

clt_optimizer clt_optimizer_defaults(clt_optimizer_kind kind) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(kind);
  if (ops) return ops->defaults;
  clt_optimizer none = {.kind = kind};
  return none;
}

const char *clt_optimizer_slot(const clt_optimizer *o, int k) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(o->kind);
  if (!ops || k < 0 || k >= CLT_OPT_SLOTS) return NULL;
  return ops->slot_needs_momentum[k] && !(o->momentum > 0) ? NULL : ops->slots[k];
}

int clt_optimizer_uses(clt_optimizer_kind kind, clt_hyper h) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(kind);
  for (int i = 0; ops && i < ops->nhypers; i++)
    if (ops->hypers[i] == h) return 1;
  return 0;
}

/* The field of o that holds h (nesterov, an int, is handled apart). */
static double *field(clt_optimizer *o, clt_hyper h) {
  switch (h) {
    case CLT_HP_LEARNING_RATE:
      return &o->lr;
    case CLT_HP_BETA_1:
      return &o->beta1;
    case CLT_HP_BETA_2:
      return &o->beta2;
    case CLT_HP_EPSILON:
      return &o->epsilon;
    case CLT_HP_MOMENTUM:
      return &o->momentum;
    case CLT_HP_RHO:
      return &o->rho;
    case CLT_HP_WEIGHT_DECAY:
      return &o->weight_decay;
    case CLT_HP_NESTEROV:
    case CLT_HP_COUNT:
      break;
  }
  return NULL;
}

double clt_optimizer_get(const clt_optimizer *o, clt_hyper h) {
  if (h == CLT_HP_NESTEROV) return o->nesterov ? 1 : 0;
  clt_optimizer copy = *o;
  const double *v = field(&copy, h);
  return v ? *v : 0;
}

void clt_optimizer_set(clt_optimizer *o, clt_hyper h, double v) {
  double *dst = field(o, h);
  if (h == CLT_HP_NESTEROV) o->nesterov = v != 0;
  else if (dst) *dst = v;
}

int clt_hyper_valid(clt_hyper h, double v) {
  if ((unsigned)h >= CLT_HP_COUNT) return 0;
  const clt_hyper_info *i = &clt_hypers[h];
  if (i->flag) return v == 0 || v == 1;
  return (i->lo_open ? v > i->lo : v >= i->lo) && (i->hi_open ? v < i->hi : v <= i->hi);
}

void clt_hyper_range(clt_hyper h, char *buf, size_t size) {
  const clt_hyper_info *i = &clt_hypers[(unsigned)h < CLT_HP_COUNT ? h : 0];
  if (i->flag) snprintf(buf, size, "true or false");
  else
    snprintf(buf, size, "%c%g, %g%c", i->lo_open ? '(' : '[', i->lo, i->hi, i->hi_open ? ')' : ']');
}

void clt_optimizer_list(clt_hyper h, const char *conj, char *buf, size_t size) {
  int total = 0;
  for (int k = 0; k < CLT_OPT_KINDS; k++) total += h == CLT_HP_COUNT || clt_optimizer_uses(k, h);
  buf[0] = '\0';
  for (int k = 0, n = 0; k < CLT_OPT_KINDS; k++) {
    if (h != CLT_HP_COUNT && !clt_optimizer_uses(k, h)) continue;
    const size_t len = strlen(buf);
    if (n == 0) snprintf(buf + len, size - len, "%s", kinds[k].name);
    else if (n + 1 < total) snprintf(buf + len, size - len, ", %s", kinds[k].name);
    else snprintf(buf + len, size - len, " %s %s", conj, kinds[k].name);
    n++;
  }
}

void clt_optimizer_describe(const clt_optimizer *o, char *buf, size_t size) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(o->kind);
  buf[0] = '\0';
  for (int i = 0; ops && i < ops->nhypers; i++) {
    const clt_hyper_info *h = &clt_hypers[ops->hypers[i]];
    const double v = clt_optimizer_get(o, ops->hypers[i]);
    const size_t len = strlen(buf);
    if (h->shown_when_set && !(v > 0)) continue;
    if (h->flag) snprintf(buf + len, size - len, "%s%s", len ? ", " : "", h->shown);
    else snprintf(buf + len, size - len, "%s%s %g", len ? ", " : "", h->shown, v);
  }
}

double clt_optimizer_rate(const clt_optimizer *o, long step) {
  if (o->schedule.kind == CLT_SCHED_NONE) return o->lr;
  return (double)clt_schedule_lr(&o->schedule, o->lr, (long long)step - 1);
}

int clt_optimizer_update(clt_replica *r, const clt_optimizer *o, long step,
                         const clt_optimizer_buffers *b, clt_err *e) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(o->kind);
  if (!ops) return clt_fail(e, CLT_ERR_INTERNAL, "unknown optimizer kind %d", (int)o->kind);
  if (o->schedule.kind == CLT_SCHED_NONE) return ops->update(r, o, step, b, e);
  /* The step's rate is a kernel argument: a copy with it, nothing allocated. */
  clt_optimizer at = *o;
  at.lr = clt_optimizer_rate(o, step);
  return ops->update(r, &at, step, b, e);
}

int clt_optimizer_kernels(clt_replica *r, clt_err *e) {
  for (int k = 0; k < CLT_OPT_KINDS; k++) {
    for (int i = 0; i < 2 && kinds[k].kernels[i]; i++) {
      cl_kernel kernel;
      int status = clt_replica_kernel(r, CLT_OPTIMIZER_SOURCE, r->exact_options,
                                      kinds[k].kernels[i], &kernel, e);
      if (status) return status;
    }
  }
  return CLT_OK;
}
