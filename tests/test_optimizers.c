/* The optimizers' update as training runs it (clt_net_update: cl/optimizer.cl's kernels,
 * built with the replica's exact options, over a net's flat buffers) against
 * double-precision references of Keras 3's formulas, written out below from
 * keras/src/optimizers/adam.py, sgd.py, rmsprop.py and base_optimizer.py's
 * _apply_weight_decay:
 *
 * 1. Several steps of Adam, SGD and RMSprop, with and without momentum, Nesterov and
 *    weight decay, over the ~300 values of a small model with two BatchNormalizations
 *    of different momenta (whose moving statistics, after the trainable values, take
 *    the moving-average update instead, each at its own momentum), at gradient scale
 *    1 and 1e-5 (where epsilon's place matters).
 *    Parameters start within +-0.05 (scale 1) or at 0 (scale 1e-5) so that their
 *    float rounding stays far below the moves compared.
 * 2. The examples of Keras' documentation, loss var^2 / 2 (gradient = var): Adam(0.1)
 *    from 10 gives 9.9; SGD(0.1, momentum 0.9) from 1 moves 0.1, then 0.18;
 *    RMSprop(0.1) from 10 gives 9.683772.
 *
 * 3. The kinds' table: names, slot variables, the report line's text, ranges.
 *
 * CLTRAIN_KERNELS=gpu builds the programs as for a GPU. Error: max |dev - ref| /
 * max |ref| over an array (tests/harness.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "net.h"

/* A float rounding in every operation, with margin. Adam's are larger: its float
 * 1 - beta2 is off 0.001 in the fifth digit (as in TensorFlow's float32 Adam; see
 * tests/test_kernels.c). */
#define TOL 2e-6
#define TOL_ADAM 1e-4
#define STEPS 5

/* The model the cases run on: tiny, or wide (several blocks of the update kernels). */
static clt_model tiny, wide;
static const clt_model *model = &tiny;

/* Keras' update of n values with gradient g at step t (from 1), in double. s0 and s1
 * are the slot variables as optimizer.h orders them. */
static void ref_update(const clt_optimizer *o, long t, double *p, const double *g, double *s0,
                       double *s1, size_t n) {
  const double lr = o->lr, mom = o->momentum;
  for (size_t i = 0; i < n; i++) {
    p[i] -= p[i] * o->weight_decay * lr;
    if (o->kind == CLT_OPT_ADAM) {
      s0[i] = o->beta1 * s0[i] + (1 - o->beta1) * g[i];
      s1[i] = o->beta2 * s1[i] + (1 - o->beta2) * g[i] * g[i];
      const double alpha = lr * sqrt(1 - pow(o->beta2, (double)t)) / (1 - pow(o->beta1, (double)t));
      p[i] -= alpha * s0[i] / (sqrt(s1[i]) + o->epsilon);
    } else if (o->kind == CLT_OPT_SGD) {
      if (mom == 0) {
        p[i] -= g[i] * lr;
        continue;
      }
      s0[i] = s0[i] * mom - g[i] * lr;
      p[i] += o->nesterov ? s0[i] * mom - g[i] * lr : s0[i];
    } else {
      s0[i] = o->rho * s0[i] + (1 - o->rho) * g[i] * g[i];
      const double inc = lr * g[i] / sqrt(s0[i] + o->epsilon);
      if (mom > 0) {
        s1[i] = mom * s1[i] + inc;
        p[i] -= s1[i];
      } else {
        p[i] -= inc;
      }
    }
  }
}

/* A net for the model with its optimizer state zeroed (training starts so). */
static clt_net *new_net(void) {
  clt_net *net = NULL;
  if (clt_net_create(model, R, 2, 2, &net, &E)) fatal("creating a net");
  for (int k = 0; k < CLT_OPT_SLOTS; k++)
    dev_fill(net->opt_state[k], 0, model->trainable_floats, 0.0f);
  return net;
}

static void describe(const clt_optimizer *o, char *buf, size_t size) {
  char hypers[200];
  clt_optimizer_describe(o, hypers, sizeof hypers);
  snprintf(buf, size, "%s: %s", clt_optimizer_name(o->kind), hypers);
}

/* The kinds' table (optimizer.c) as the metadata, the report line and the
 * command's checks read it. */
static void test_table(void) {
  set_case("the optimizers' table:");
  char got[200];
  for (int k = 0; k < CLT_OPT_KINDS; k++) {
    clt_optimizer_kind found = CLT_OPT_KINDS;
    const char *name = clt_optimizer_name((clt_optimizer_kind)k);
    expect(name,
           !clt_optimizer_find(name, &found) || found != (clt_optimizer_kind)k ||
               clt_optimizer_defaults((clt_optimizer_kind)k).kind != (clt_optimizer_kind)k,
           1);
  }
  const struct {
    clt_hyper h;
    const char *conj, *want;
  } lists[] = {{CLT_HP_COUNT, "or", "adam, sgd or rmsprop"},
               {CLT_HP_MOMENTUM, "and", "sgd and rmsprop"},
               {CLT_HP_NESTEROV, "and", "sgd"},
               {CLT_HP_BETA_1, "and", "adam"},
               {CLT_HP_EPSILON, "and", "adam and rmsprop"},
               {CLT_HP_WEIGHT_DECAY, "and", "adam, sgd and rmsprop"}};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    clt_optimizer_list(lists[i].h, lists[i].conj, got, sizeof got);
    expect(lists[i].want, strcmp(got, lists[i].want) != 0, 1);
  }
  /* Slot variables, with and without momentum. */
  const struct {
    clt_optimizer_kind kind;
    double momentum;
    const char *want[CLT_OPT_SLOTS];
  } slots[] = {{CLT_OPT_ADAM, 0, {"m", "v"}},
               {CLT_OPT_ADAM, 0.9, {"m", "v"}},
               {CLT_OPT_SGD, 0, {NULL, NULL}},
               {CLT_OPT_SGD, 0.9, {"momentum", NULL}},
               {CLT_OPT_RMSPROP, 0, {"velocity", NULL}},
               {CLT_OPT_RMSPROP, 0.5, {"velocity", "momentum"}}};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
    clt_optimizer o = clt_optimizer_defaults(slots[i].kind);
    o.momentum = slots[i].momentum;
    size_t bad = 0;
    for (int k = 0; k < CLT_OPT_SLOTS; k++) {
      const char *slot = clt_optimizer_slot(&o, k), *want = slots[i].want[k];
      bad += want ? !slot || strcmp(slot, want) != 0 : slot != NULL;
    }
    snprintf(got, sizeof got, "%s slots at momentum %g", clt_optimizer_name(o.kind), o.momentum);
    expect(got, bad, CLT_OPT_SLOTS);
  }
  /* The report line's text. */
  clt_optimizer sgd = clt_optimizer_defaults(CLT_OPT_SGD);
  sgd.momentum = 0.9;
  sgd.nesterov = 1;
  sgd.weight_decay = 0.01;
  const clt_optimizer adam = clt_optimizer_defaults(CLT_OPT_ADAM);
  const clt_optimizer rms = clt_optimizer_defaults(CLT_OPT_RMSPROP);
  const struct {
    const clt_optimizer *o;
    const char *want;
  } lines[] = {{&adam, "learning rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-07"},
               {&sgd, "learning rate 0.01, momentum 0.9, Nesterov, weight decay 0.01"},
               {&rms, "learning rate 0.001, rho 0.9, momentum 0, epsilon 1e-07"}};
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    clt_optimizer_describe(lines[i].o, got, sizeof got);
    expect(lines[i].want, strcmp(got, lines[i].want) != 0, 1);
  }
  /* Ranges: each end open or closed as Keras' meaning needs. */
  clt_hyper_range(CLT_HP_BETA_2, got, sizeof got);
  expect("beta_2 in [0, 1)",
         strcmp(got, "[0, 1)") != 0 || clt_hyper_valid(CLT_HP_BETA_2, 1) ||
             !clt_hyper_valid(CLT_HP_BETA_2, 0),
         1);
  expect("learning_rate above 0",
         clt_hyper_valid(CLT_HP_LEARNING_RATE, 0) || !clt_hyper_valid(CLT_HP_LEARNING_RATE, 1e-12),
         1);
  expect("nesterov true or false",
         !clt_hyper_valid(CLT_HP_NESTEROV, 1) || clt_hyper_valid(CLT_HP_NESTEROV, 0.5), 1);
  /* Every kind's kernels build; an unknown kind is refused. */
  expect("every kind's kernels", clt_optimizer_kernels(R, &E) != CLT_OK, 1);
  clt_optimizer unknown = {.kind = (clt_optimizer_kind)CLT_OPT_KINDS};
  const clt_optimizer_buffers none = {0};
  expect("an unknown kind", clt_optimizer_update(R, &unknown, 1, &none, &E) != CLT_ERR_INTERNAL, 1);
  case_end();
}

/* The momentum of the moving statistic at flat index i: that of the last one starting
 * at or before it (alignment gaps take their run's, as the device's kernel does). */
static double stat_momentum(size_t i) {
  double m = 0;
  size_t best = 0;
  for (int l = 0; l < model->nlayers; l++) {
    for (int k = 0; k < model->layers[l].nparams; k++) {
      const clt_param *q = &model->layers[l].params[k];
      if (q->non_trainable && q->offset <= i && q->offset >= best) {
        best = q->offset;
        m = q->moving_momentum;
      }
    }
  }
  return m;
}

/* STEPS updates by o on the device and in the reference, from the same values. */
static void test_steps(const clt_optimizer *o, double scale) {
  char name[256];
  describe(o, name, sizeof name);
  set_case("%s, gradients x%g:", name, scale);
  const size_t n = model->flat_floats, nt = model->trainable_floats;
  double *p = dnew(n), *p0 = dnew(n), *g = dnew(n), *s0 = dnew(n), *s1 = dnew(n);
  double *got = dnew(n), *move = dnew(n), *move_ref = dnew(n);
  clt_net *net = new_net();
  rand_fill(p, nt, scale < 1 ? 0 : -0.05, scale < 1 ? 0 : 0.05);
  rand_fill(p + nt, n - nt, 0.5, 1.5); /* moving means and variances */
  memcpy(p0, p, n * sizeof *p);
  upload(net->params, 0, p, n);
  for (long t = 1; t <= STEPS; t++) {
    for (size_t i = 0; i < nt; i++) { /* every magnitude down to 1e-3 x scale, and zeros */
      g[i] = irand(10) == 0 ? 0.0 : (float)(urand(-1, 1) * scale * pow(10.0, -irand(4)));
    }
    rand_fill(g + nt, n - nt, 0, 2); /* the averaged batch statistics */
    upload(net->grads, 0, g, n);
    if (api_failed(clt_net_update(net, o, t, &E), "clt_net_update")) goto done;
    ref_update(o, t, p, g, s0, s1, nt);
    for (size_t i = nt; i < n; i++) p[i] -= (p[i] - g[i]) * (1 - stat_momentum(i));
  }
  const double tol = o->kind == CLT_OPT_ADAM ? TOL_ADAM : TOL;
  download(net->params, 0, got, n);
  for (size_t i = 0; i < nt; i++) {
    move[i] = got[i] - p0[i];
    move_ref[i] = p[i] - p0[i];
  }
  check("trainable values' moves", move, move_ref, nt, tol);
  check("moving statistics", got + nt, p + nt, n - nt, 1e-6);
  for (int k = 0; k < CLT_OPT_SLOTS; k++) {
    const char *slot = clt_optimizer_slot(o, k);
    if (!slot) continue;
    char what[64];
    snprintf(what, sizeof what, "slot %s", slot);
    download(net->opt_state[k], 0, got, nt);
    check(what, got, k ? s1 : s0, nt, tol);
  }
done:
  clt_net_destroy(net);
  case_end();
}

/* The gradient check the update kernels do as they read the gradient: 0 over a
 * finite gradient, then every planted NaN, -inf and +inf counted (block edges, an
 * eight-float group, the last trainable value, and the moving statistics' slots
 * after it, which the optimizer does not update), into the slot asked for and
 * none other; the trainable values move as clt_net_update moves them. */
static void test_counts(const clt_optimizer *o) {
  char name[256];
  describe(o, name, sizeof name);
  set_case("%s, gradient check (%zu values):", name, model->grad_floats);
  const size_t n = model->flat_floats, nt = model->trainable_floats, ng = model->grad_floats;
  double *p = dnew(n), *g = dnew(n), *got = dnew(n), *want = dnew(n);
  clt_net *net = new_net(), *plain = new_net();
  rand_fill(p, n, -0.05, 0.05);
  rand_fill(g, n, -1, 1);
  const float zero[2] = {0, 0};
  upload_bytes(net->grad_checks, 0, zero, sizeof zero);
  for (int k = 0; k < 2; k++) {
    clt_net *x = k ? plain : net;
    upload(x->params, 0, p, n);
    upload(x->grads, 0, g, n);
  }
  if (api_failed(clt_net_update_checked(net, o, 1, 0, &E), "clt_net_update_checked") ||
      api_failed(clt_net_update(plain, o, 1, &E), "clt_net_update"))
    goto done;
  download(net->params, 0, got, nt);
  download(plain->params, 0, want, nt);
  size_t differ = 0;
  for (size_t i = 0; i < nt; i++) differ += got[i] != want[i];
  expect("the same update with and without a check slot", differ, nt);
  const size_t at[] = {0, 5, 4095, 4096, 4101, 8195, nt - 1, nt, ng - 1};
  const float bad[3] = {NAN, -INFINITY, INFINITY};
  size_t planted = 0, last = 0;
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    if (at[i] >= ng || (planted && at[i] <= last)) continue; /* past a small model's end */
    upload_bytes(net->grads, at[i] * sizeof(float), &bad[i % 3], sizeof(float));
    last = at[i];
    planted++;
  }
  if (api_failed(clt_net_update_checked(net, o, 2, 1, &E), "clt_net_update_checked")) goto done;
  float counts[2];
  if (api_failed(clt_net_read_grad_checks(net, counts, 2, &E), "clt_net_read_grad_checks"))
    goto done;
  char what[96];
  snprintf(what, sizeof what, "0 over a finite gradient, then the %zu planted", planted);
  expect(what, (counts[0] != 0.0f) + (counts[1] != (float)planted), 2);
done:
  clt_net_destroy(net);
  clt_net_destroy(plain);
  case_end();
}

/* Keras' documented examples: loss var^2 / 2 from var = start, `steps` steps. */
static void test_keras_example(const char *what, const clt_optimizer *o, double start, int steps,
                               const double *want) {
  set_case("Keras' example, %s:", what);
  const size_t n = model->flat_floats, nt = model->trainable_floats;
  double *p = dnew(n), worst = 0;
  clt_net *net = new_net();
  for (size_t i = 0; i < n; i++) p[i] = i < nt ? start : 1.0;
  upload(net->params, 0, p, n);
  for (int t = 1; t <= steps; t++) {
    upload(net->grads, 0, p, n); /* the gradient of var^2 / 2 */
    if (api_failed(clt_net_update(net, o, t, &E), "clt_net_update")) goto done;
    download(net->params, 0, p, n);
    for (size_t i = 0; i < nt; i++) {
      const double err = fabs(p[i] - want[t - 1]) / fabs(want[t - 1]);
      if (!(err <= worst)) worst = err;
    }
  }
  char detail[64];
  snprintf(detail, sizeof detail, "want %.7g after %d steps, got %.7g", want[steps - 1], steps,
           p[0]);
  report("every value as Keras documents", worst, 2e-7, detail);
done:
  clt_net_destroy(net);
  case_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rng_seed(0x0971);
  replica_open();
  /* ~300 values: a convolution, two BatchNormalizations with different momenta (their
   * moving statistics after the trainable values, each with its own), pooling and a
   * dense classifier. */
  const char *desc = "c=Conv2D(8,3x3,s1,same) bn=BatchNormalization(eps0.001,m0.99,relu) "
                     "bn2=BatchNormalization(eps0.001,m0.9) gap=GlobalAveragePooling2D d=Dense(3)";
  if (clt_model_parse("tiny", (clt_shape){4, 4, 3}, 3, CLT_PRE_UNIT, desc, &tiny, &E)) {
    fatal("building the model");
  }
  printf("model: %zu trainable of %zu values\n", tiny.trainable_floats, tiny.flat_floats);
  /* ~30000 values: the update kernels' blocks of 4096, the last one partial. */
  const char *wide_desc = "c=Conv2D(96,3x3,s1,same) bn=BatchNormalization(eps0.001,m0.99,relu) "
                          "c2=Conv2D(32,3x3,s1,same) bn2=BatchNormalization(eps0.001,m0.9) "
                          "gap=GlobalAveragePooling2D d=Dense(3)";
  if (clt_model_parse("wide", (clt_shape){4, 4, 3}, 3, CLT_PRE_UNIT, wide_desc, &wide, &E)) {
    fatal("building the wide model");
  }
  printf("wide model: %zu trainable of %zu values\n", wide.trainable_floats, wide.flat_floats);
  test_table();

  /* Keras' defaults but for what a row sets (0: the default). */
  const struct {
    clt_optimizer_kind kind;
    int nesterov;
    double lr, momentum, rho, weight_decay;
  } cases[] = {
      {CLT_OPT_ADAM, 0, 0, 0, 0, 0},
      {CLT_OPT_ADAM, 0, 0.01, 0, 0, 0.004}, /* AdamW's decay */
      {CLT_OPT_SGD, 0, 0, 0, 0, 0},
      {CLT_OPT_SGD, 0, 0, 0, 0, 0.1},
      {CLT_OPT_SGD, 0, 0, 0.9, 0, 0},
      {CLT_OPT_SGD, 1, 0, 0.9, 0, 0},
      {CLT_OPT_SGD, 1, 0.05, 0.5, 0, 0.01},
      {CLT_OPT_RMSPROP, 0, 0, 0, 0, 0},
      {CLT_OPT_RMSPROP, 0, 0, 0.9, 0, 0},
      {CLT_OPT_RMSPROP, 0, 0, 0.5, 0.8, 0.01},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clt_optimizer o = clt_optimizer_defaults(cases[i].kind);
    if (cases[i].lr > 0) o.lr = cases[i].lr;
    if (cases[i].rho > 0) o.rho = cases[i].rho;
    o.momentum = cases[i].momentum;
    o.nesterov = cases[i].nesterov;
    o.weight_decay = cases[i].weight_decay;
    model = &tiny;
    test_steps(&o, 1.0);
    test_steps(&o, 1e-5);
    test_counts(&o);
    /* Under Oclgrind the wide model's counts only, and only where the case
     * decays its weights: every update kernel and the decay's over several
     * blocks, the counts' code being the same in a kernel's other cases. */
    model = &wide;
    if (!small_mode()) test_steps(&o, 1.0);
    if (!small_mode() || o.weight_decay > 0) test_counts(&o);
  }
  model = &tiny;

  clt_optimizer o = clt_optimizer_defaults(CLT_OPT_ADAM);
  o.lr = 0.1;
  test_keras_example("Adam(0.1) from 10", &o, 10, 1, (const double[]){9.9});
  o = clt_optimizer_defaults(CLT_OPT_SGD);
  o.lr = 0.1;
  o.momentum = 0.9;
  test_keras_example("SGD(0.1, momentum=0.9) from 1", &o, 1, 2, (const double[]){0.9, 0.72});
  o = clt_optimizer_defaults(CLT_OPT_RMSPROP);
  o.lr = 0.1;
  test_keras_example("RMSprop(0.1) from 10", &o, 10, 1, (const double[]){9.683772});

  replica_close();
  return summary();
}
