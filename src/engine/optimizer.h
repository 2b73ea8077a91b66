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
 * SGD momentum (with momentum > 0); RMSprop velocity, momentum (with momentum > 0). */
#ifndef CLT_OPTIMIZER_H
#define CLT_OPTIMIZER_H

#include <string.h>

typedef enum { CLT_OPT_ADAM, CLT_OPT_SGD, CLT_OPT_RMSPROP } clt_optimizer_kind;

#define CLT_OPT_KINDS 3
#define CLT_OPT_SLOTS 2 /* state arrays per value, at most */

typedef struct clt_optimizer {
  clt_optimizer_kind kind;
  int nesterov; /* sgd with momentum */
  double lr;
  double momentum; /* sgd, rmsprop */
  double rho;      /* rmsprop */
  double epsilon;  /* adam, rmsprop */
  double beta1, beta2;
  double weight_decay; /* decoupled, before the update */
} clt_optimizer;

static inline const char *clt_optimizer_name(clt_optimizer_kind kind) {
  static const char *const names[CLT_OPT_KINDS] = {"adam", "sgd", "rmsprop"};
  return (unsigned)kind < CLT_OPT_KINDS ? names[kind] : "unknown";
}

/* The kind named `name`; 0 if there is none. */
static inline int clt_optimizer_find(const char *name, clt_optimizer_kind *kind) {
  for (int k = 0; k < CLT_OPT_KINDS; k++) {
    if (strcmp(name, clt_optimizer_name((clt_optimizer_kind)k)) == 0) {
      *kind = (clt_optimizer_kind)k;
      return 1;
    }
  }
  return 0;
}

/* Keras' defaults: learning rate 0.001 (SGD 0.01), Adam's betas 0.9 and 0.999,
 * RMSprop's rho 0.9, epsilon 1e-7 (not PyTorch's 1e-8), no momentum or decay. */
static inline clt_optimizer clt_optimizer_defaults(clt_optimizer_kind kind) {
  clt_optimizer o = {.kind = kind,
                     .lr = kind == CLT_OPT_SGD ? 1e-2 : 1e-3,
                     .rho = 0.9,
                     .epsilon = 1e-7,
                     .beta1 = 0.9,
                     .beta2 = 0.999};
  return o;
}

/* The name of slot variable k ("m", "v", "momentum", "velocity"), or NULL when o
 * keeps none there. */
static inline const char *clt_optimizer_slot(const clt_optimizer *o, int k) {
  switch (o->kind) {
    case CLT_OPT_ADAM:
      return k == 0 ? "m" : k == 1 ? "v" : NULL;
    case CLT_OPT_SGD:
      return k == 0 && o->momentum != 0 ? "momentum" : NULL;
    case CLT_OPT_RMSPROP:
      return k == 0 ? "velocity" : k == 1 && o->momentum > 0 ? "momentum" : NULL;
  }
  return NULL;
}

#endif
