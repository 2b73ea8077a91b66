/* Frozen layers (layer.h: clt_layer.frozen; model.h: clt_model_freeze_until).
 *
 * 1. The flat layout: trained parameters first, then the moving statistics of
 *    layers not frozen (the gradient buffer ends there), then every frozen
 *    layer's parameters; nothing frozen is the layout of old. The layers whose
 *    gradients a backward pass needs; a --freeze-until naming no layer is refused
 *    with close names.
 * 2. A network on a PoCL device with a frozen prefix and frozen layers between
 *    trainable ones (Conv2D, DepthwiseConv2D, SeparableConv2D, Dense, and
 *    BatchNormalization, one fused with an Add) against the double-precision
 *    reference interpreter, which gives frozen layers no gradient and runs a
 *    frozen BatchNormalization in inference mode: loss, every gradient and
 *    statistics slot. A frozen BatchNormalization's output in a training step is
 *    the normalisation by its moving statistics, computed here on the host. After
 *    an update the frozen parameters (moving statistics included) hold the same
 *    bits; the others moved.
 * 3. The backward pass stops below the lowest trainable layer: no kernel runs
 *    for the backward of a layer in the frozen prefix (the profile's scopes), and
 *    resnet-small frozen up to conv3_block2_add launches fewer backward kernels.
 * 4. Without BatchNormalization in the prefix, a frozen prefix changes nothing
 *    above it: the trained layers' gradients equal, bit for bit, the ones the
 *    whole network computes.
 * 5. Against Keras (the fixture of tests/models/make_freeze_fixtures.py, given as
 *    the argument): its model file frozen up to its first BatchNormalization, the
 *    same weights and batch, one step of Adam, SGD with momentum and RMSprop:
 *    every weight, moving statistics included, as Keras' train_on_batch left it.
 *
 * Prints "ok: ..." per check, "FAIL: ..." with the error, "N passed, M failed"
 * last, and exits non-zero on any failure.
 * usage: test_freeze [FIXTURE_DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "keras.h"
#include "kernels_used.h"
#include "model.h"
#include "net.h"
#include "npz.h"
#include "ref_model.h"
#include "rng.h"
#include "weights.h"

static clt_err E;
static clt_rng RNG;

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    printf("FAIL: out of host memory\n");
    exit(1);
  }
  return p;
}

static double urand(double lo, double hi) { return lo + (hi - lo) * clt_rng_uniform(&RNG); }

/* The model with frozen layers of the device test: a frozen prefix (conv2d,
 * batch_normalization), then frozen layers between trainable ones. */
static const char MIXED[] =
    "conv2d=Conv2D(8,3x3,s1,same) batch_normalization=BatchNormalization(eps0.001,m0.99,relu) "
    "conv2d_1=Conv2D(8,3x3,s1,same) depthwise=DepthwiseConv2D(3x3,s1,same,relu) "
    "separable=SeparableConv2D(8,3x3,s1,same) "
    "batch_normalization_1=BatchNormalization(eps0.001,m0.99) "
    "add=Add(relu)<batch_normalization_1,batch_normalization "
    "conv2d_2=Conv2D(8,3x3,s2,same,relu) batch_normalization_2=BatchNormalization(eps0.001,m0.9) "
    "gap=GlobalAveragePooling2D dense=Dense(6,relu) dense_1=Dense(3)";
static const char *const MIXED_FROZEN[] = {"depthwise", "separable", "batch_normalization_1",
                                           "conv2d_2", "dense"};

static int build_mixed(clt_model *m) {
  if (clt_model_parse("mixed", (clt_shape){8, 8, 3}, 3, CLT_PRE_RAW, MIXED, m, &E) ||
      clt_model_freeze_until(m, "batch_normalization", "--freeze-until", &E))
    return -1;
  for (size_t k = 0; k < sizeof MIXED_FROZEN / sizeof MIXED_FROZEN[0]; k++)
    m->layers[clt_model_find(m, MIXED_FROZEN[k])].frozen = 1;
  clt_model_layout(m);
  return 0;
}

/* ---- 1. layout ------------------------------------------------------------------ */

static void test_layout(void) {
  static clt_model plain, m;
  if (clt_model_build("resnet-small", (clt_shape){32, 32, 3}, 4, &plain, &E) ||
      clt_model_build("resnet-small", (clt_shape){32, 32, 3}, 4, &m, &E)) {
    check(0, "resnet-small builds: %s", E.msg);
    return;
  }
  check(plain.grad_floats == plain.flat_floats,
        "nothing frozen: the gradient buffer is the whole flat buffer (%zu floats)",
        plain.flat_floats);
  const int until = clt_model_find(&m, "conv3_block2_add");
  if (until < 0 || clt_model_freeze_until(&m, "conv3_block2_add", "--freeze-until", &E)) {
    check(0, "--freeze-until conv3_block2_add: %s", E.msg);
    return;
  }
  int order_ok = 1, frozen_ok = 1;
  for (int i = 0; i < m.nlayers; i++) {
    frozen_ok &= m.layers[i].frozen == (i <= until);
    for (int p = 0; p < m.layers[i].nparams; p++) {
      const clt_param *q = &m.layers[i].params[p];
      const size_t end = q->offset + q->size;
      if (m.layers[i].frozen) order_ok &= q->offset >= m.grad_floats && end <= m.flat_floats;
      else if (q->non_trainable)
        order_ok &= q->offset >= m.trainable_floats && end <= m.grad_floats;
      else order_ok &= end <= m.trainable_floats;
    }
  }
  check(frozen_ok, "--freeze-until conv3_block2_add freezes layers 0 to %d", until);
  check(order_ok && m.param_count == plain.param_count && m.flat_floats == plain.flat_floats,
        "frozen: trained parameters, then the others' moving statistics, then every frozen "
        "parameter (%zu, %zu, %zu floats)",
        m.trainable_floats, m.grad_floats, m.flat_floats);
  check(m.trainable_floats < plain.trainable_floats && m.grad_floats < plain.grad_floats,
        "frozen weights leave the gradient buffer and the optimizer (%zu of %zu floats)",
        m.grad_floats, plain.grad_floats);
  unsigned char needed[256]; /* more than the models here have layers */
  clt_model_grads_needed(&m, needed);
  int stops = 1;
  for (int i = 0; i < m.nlayers; i++) stops &= needed[i] == (i > until);
  check(stops, "no layer up to the frozen prefix's last needs its output's gradient");

  static clt_model mixed;
  if (build_mixed(&mixed)) {
    check(0, "the mixed model builds: %s", E.msg);
    return;
  }
  clt_model_grads_needed(&mixed, needed);
  check(!needed[0] && !needed[1] && needed[clt_model_find(&mixed, "depthwise")] &&
            needed[clt_model_find(&mixed, "add")] && needed[clt_model_find(&mixed, "dense")],
        "frozen layers between trainable ones pass their input's gradient on");

  const int status = clt_model_freeze_until(&plain, "conv3_block2", "--freeze-until", &E);
  check(status == CLT_ERR_ARG &&
            strstr(E.msg, "--freeze-until conv3_block2: model resnet-small has no layer") &&
            strstr(E.msg, "(close: conv3_block2_add, ") && !plain.layers[0].frozen,
        "a name that is no layer is refused, with close names (%s)", E.msg);
}

/* ---- 2. a network with frozen layers against the reference ---------------------- */

static int write_batch(clt_net *net, const float *x, const int *labels, int B, clt_err *e) {
  cl_command_queue q = net->replica->queue;
  const size_t n = (size_t)B * clt_shape_size(net->model->input);
  cl_int rc = clEnqueueWriteBuffer(q, net->input, CL_TRUE, 0, n * sizeof *x, x, 0, NULL, NULL);
  if (!rc)
    rc = clEnqueueWriteBuffer(q, net->labels, CL_TRUE, 0, (size_t)B * sizeof *labels, labels, 0,
                              NULL, NULL);
  return rc ? clt_replica_fail(net->replica, e, rc, "writing the batch") : CLT_OK;
}

/* Random weights, BatchNormalization's statistics and gammas away from their
 * initial 0 and 1 so that a misplaced one shows. */
static void random_params(const clt_model *m, float *f) {
  clt_model_init_params(m, 7, f);
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *q = &m->layers[i].params[p];
      for (size_t j = 0; j < q->size && q->glorot_fan_in == 0; j++) {
        const char *n = q->name;
        f[q->offset + j] = (float)(strcmp(n, "gamma") == 0             ? urand(0.5, 1.5)
                                   : strcmp(n, "moving_variance") == 0 ? urand(0.5, 2.0)
                                                                       : urand(-0.2, 0.2));
      }
    }
}

/* Device time per name of r's profile whose name contains `what`: the calls. */
static long calls_matching(const clt_replica *r, const char *what) {
  long n = 0;
  for (int i = 0; i < r->profile->nnames; i++)
    if (strstr(r->profile->names[i], what)) n += r->profile->calls[i];
  return n;
}

static void reset_profile(clt_replica *r) {
  for (int i = 0; i < r->profile->nnames; i++) r->profile->calls[i] = 0;
}

static void test_mixed(clt_replica *r) {
  static clt_model m;
  if (build_mixed(&m)) {
    check(0, "the mixed model builds: %s", E.msg);
    return;
  }
  enum { B = 4 };
  const size_t nf = m.flat_floats, pixels = clt_shape_size(m.input);
  float *params = xcalloc(nf, sizeof *params), *grads = xcalloc(nf, sizeof *grads);
  float *after = xcalloc(nf, sizeof *after), *x = xcalloc(B * pixels, sizeof *x);
  double *dflat = xcalloc(nf, sizeof *dflat), *dgrad = xcalloc(nf, sizeof *dgrad);
  double *dx = xcalloc(B * pixels, sizeof *dx);
  int labels[B] = {0, 2, 1, 2};
  random_params(&m, params);
  for (size_t i = 0; i < nf; i++) dflat[i] = params[i];
  for (size_t i = 0; i < B * pixels; i++) dx[i] = x[i] = (float)urand(-1, 1);
  const double scale = 1.0 / B;
  int correct = 0;
  const double loss = ref_model_loss_grad(&m, dflat, dx, labels, B, scale, 1, 1.0, dgrad, &correct);
  clt_net *net = NULL;
  float metrics[2];
  clt_replica_scope(r, NULL, NULL);
  if (clt_net_create(&m, r, B, 1, &net, &E) || clt_net_write_params(net, params, &E) ||
      write_batch(net, x, labels, B, &E) ||
      clt_net_forward_backward(net, B, (float)scale, 0, 1, &E) ||
      clt_net_read_grads(net, grads, &E) || clt_net_read_metrics(net, metrics, 1, &E) ||
      clt_replica_profile_collect(r, &E)) {
    check(0, "the mixed model on the device: %s", E.msg);
    goto done;
  }
  check(fabs(metrics[0] * scale - loss) <= 1e-5 * fabs(loss) && metrics[1] == correct,
        "frozen layers: loss %.7f vs reference %.7f", metrics[0] * scale, loss);
  int bad = 0, tensors = 0;
  for (int i = 0; i < m.nlayers; i++)
    for (int p = 0; p < m.layers[i].nparams && !m.layers[i].frozen; p++) {
      const clt_param *q = &m.layers[i].params[p];
      double err = 0, big = 0;
      for (size_t j = 0; j < q->size; j++) {
        err = fmax(err, fabs(grads[q->offset + j] - dgrad[q->offset + j]));
        big = fmax(big, fabs(dgrad[q->offset + j]));
      }
      tensors++;
      if (!(err <= 1e-4 * big + 1e-7)) {
        bad++;
        printf("  %s/%s: error %.3e of %.3e\n", m.layers[i].name, q->name, err, big);
      }
    }
  check(bad == 0 && tensors == 8,
        "the %d gradient and statistics tensors of the trained layers match the reference",
        tensors);
  check(net->model->grad_floats < nf, "frozen layers have no gradient slots (%zu of %zu floats)",
        m.grad_floats, nf);
  check(calls_matching(r, "conv2d backward") == 0 &&
            calls_matching(r, "batch_normalization backward") == 0 &&
            calls_matching(r, "conv2d_1 backward") > 0 &&
            calls_matching(r, "batch_normalization_1 backward") > 0,
        "no kernel runs for the frozen prefix's backward; frozen layers above it pass gradients");

  /* The frozen prefix's BatchNormalization in a training step: ReLU of the moving
   * statistics' normalisation of the frozen convolution's output. */
  const int conv = clt_model_find(&m, "conv2d"), bn = clt_model_find(&m, "batch_normalization");
  const size_t n = (size_t)B * clt_shape_size(m.layers[bn].out);
  float *cx = xcalloc(n, sizeof *cx), *cy = xcalloc(n, sizeof *cy);
  cl_int rc = clEnqueueReadBuffer(r->queue, net->act[conv], CL_TRUE, 0, n * sizeof *cx, cx, 0, NULL,
                                  NULL);
  if (!rc)
    rc = clEnqueueReadBuffer(r->queue, net->act[bn], CL_TRUE, 0, n * sizeof *cy, cy, 0, NULL, NULL);
  double worst = rc ? INFINITY : 0;
  const clt_layer *l = &m.layers[bn];
  for (size_t j = 0; j < n && !rc; j++) {
    const int c = (int)(j % (size_t)l->out.c);
    const double gamma = params[l->params[0].offset + c], beta = params[l->params[1].offset + c];
    const double mean = params[l->params[2].offset + c], var = params[l->params[3].offset + c];
    const double want = fmax(0.0, gamma * (cx[j] - mean) / sqrt(var + 0.001) + beta);
    worst = fmax(worst, fabs(cy[j] - want));
  }
  check(worst < 1e-5,
        "a frozen BatchNormalization normalises with its moving statistics in "
        "training (worst difference %.2e)",
        worst);
  free(cx);
  free(cy);

  const clt_optimizer opt = clt_optimizer_defaults(CLT_OPT_ADAM);
  if (clt_net_update(net, &opt, 1, &E) || clt_net_read_params(net, after, &E)) {
    check(0, "the update: %s", E.msg);
    goto done;
  }
  int frozen_same = memcmp(params + m.grad_floats, after + m.grad_floats,
                           (nf - m.grad_floats) * sizeof *after) == 0;
  int trained_moved = 1;
  for (int i = 0; i < m.nlayers; i++)
    for (int p = 0; p < m.layers[i].nparams && !m.layers[i].frozen; p++) {
      const clt_param *q = &m.layers[i].params[p];
      trained_moved &= memcmp(params + q->offset, after + q->offset, q->size * sizeof *after) != 0;
    }
  check(frozen_same, "after the update every frozen parameter holds the same bits (moving "
                     "statistics of frozen BatchNormalization included)");
  check(trained_moved, "after the update every trained parameter and moving statistic moved");
done:
  clt_net_destroy(net);
  free(params);
  free(grads);
  free(after);
  free(x);
  free(dflat);
  free(dgrad);
  free(dx);
}

/* ---- 3. the backward pass stops ---------------------------------------------------- */

static void test_stops(clt_replica *r) {
  static clt_model plain, m;
  enum { B = 2 };
  if (clt_model_build("resnet-small", (clt_shape){32, 32, 3}, 4, &plain, &E) ||
      clt_model_build("resnet-small", (clt_shape){32, 32, 3}, 4, &m, &E) ||
      clt_model_freeze_until(&m, "conv3_block2_add", "--freeze-until", &E)) {
    check(0, "resnet-small builds: %s", E.msg);
    return;
  }
  long launches[2] = {0, 0}, prefix_launches = 0;
  for (int k = 0; k < 2; k++) {
    const clt_model *mk = k ? &m : &plain;
    const size_t pixels = clt_shape_size(mk->input);
    float *params = xcalloc(mk->flat_floats, sizeof *params), *x = xcalloc(B * pixels, sizeof *x);
    const int labels[B] = {1, 3};
    clt_model_init_params(mk, 3, params);
    for (size_t i = 0; i < B * pixels; i++) x[i] = (float)urand(-100, 100);
    clt_net *net = NULL;
    clt_replica_scope(r, NULL, NULL); /* the set-up's launches (zero fills) are nobody's */
    if (clt_net_create(mk, r, B, 1, &net, &E) || clt_net_write_params(net, params, &E) ||
        write_batch(net, x, labels, B, &E) || clt_replica_profile_collect(r, &E) ||
        (reset_profile(r), clt_net_forward_backward(net, B, 0.5f, 0, 1, &E)) ||
        clt_replica_profile_collect(r, &E)) {
      check(0, "resnet-small on the device: %s", E.msg);
    }
    launches[k] = calls_matching(r, " backward: ");
    for (int i = 0; k && i < m.nlayers && m.layers[i].frozen; i++) {
      char scope[64];
      snprintf(scope, sizeof scope, "%s backward: ", m.layers[i].name);
      prefix_launches += calls_matching(r, scope);
    }
    clt_net_destroy(net);
    free(params);
    free(x);
  }
  check(prefix_launches == 0 && launches[1] > 0 && launches[1] * 2 < launches[0],
        "resnet-small frozen up to conv3_block2_add: %ld backward launches instead of %ld, none "
        "in the frozen layers",
        launches[1], launches[0]);
}

/* ---- 4. a frozen prefix changes nothing above it --------------------------------- */

static void test_same_above(clt_replica *r) {
  static const char desc[] =
      "conv2d=Conv2D(8,3x3,s1,valid,relu) max_pooling2d=MaxPooling2D(2,s2) "
      "conv2d_1=Conv2D(12,3x3,s1,valid,relu) max_pooling2d_1=MaxPooling2D(2,s2) "
      "flatten=Flatten dense=Dense(16,relu) dense_1=Dense(5)";
  static clt_model plain, m;
  enum { B = 3 };
  const clt_shape in = {16, 16, 1};
  if (clt_model_parse("cnn", in, 5, CLT_PRE_UNIT, desc, &plain, &E) ||
      clt_model_parse("cnn", in, 5, CLT_PRE_UNIT, desc, &m, &E) ||
      clt_model_freeze_until(&m, "max_pooling2d_1", "--freeze-until", &E)) {
    check(0, "the CNN builds: %s", E.msg);
    return;
  }
  float *p0 = xcalloc(plain.flat_floats, sizeof *p0), *p1 = xcalloc(m.flat_floats, sizeof *p1);
  float *g0 = xcalloc(plain.grad_floats, sizeof *g0), *g1 = xcalloc(m.grad_floats, sizeof *g1);
  float *x = xcalloc(B * clt_shape_size(in), sizeof *x);
  const int labels[B] = {4, 0, 2};
  /* The same draws whatever the layout: the initialiser walks the layers. */
  clt_model_init_params(&plain, 11, p0);
  clt_model_init_params(&m, 11, p1);
  for (size_t i = 0; i < B * clt_shape_size(in); i++) x[i] = (float)urand(0, 1);
  clt_net *a = NULL, *b = NULL;
  if (clt_net_create(&plain, r, B, 1, &a, &E) || clt_net_create(&m, r, B, 1, &b, &E) ||
      clt_net_write_params(a, p0, &E) || clt_net_write_params(b, p1, &E) ||
      write_batch(a, x, labels, B, &E) || write_batch(b, x, labels, B, &E) ||
      clt_net_forward_backward(a, B, 1.0f / B, 0, 1, &E) ||
      clt_net_forward_backward(b, B, 1.0f / B, 0, 1, &E) || clt_net_read_grads(a, g0, &E) ||
      clt_net_read_grads(b, g1, &E)) {
    check(0, "the CNN on the device: %s", E.msg);
  } else {
    int same = 1, compared = 0;
    for (int i = 0; i < m.nlayers; i++)
      for (int p = 0; p < m.layers[i].nparams && !m.layers[i].frozen; p++) {
        const clt_param *q = &m.layers[i].params[p], *q0 = &plain.layers[i].params[p];
        same &= memcmp(g1 + q->offset, g0 + q0->offset, q->size * sizeof *g1) == 0;
        compared++;
      }
    check(same && compared == 4,
          "the dense layers above a frozen prefix get the whole network's gradients, bit for "
          "bit (%d tensors)",
          compared);
  }
  clt_net_destroy(a);
  clt_net_destroy(b);
  free(p0);
  free(p1);
  free(g0);
  free(g1);
  free(x);
}

/* ---- 5. one step against Keras ------------------------------------------------------ */

/* float32 member `name` of z with n values into out; 0 when it is not so. */
static int get_floats(const clt_npz *z, const char *name, size_t n, float *out) {
  const clt_npz_array *a = clt_npz_find(z, name);
  if (!a || strcmp(a->dtype, "<f4") != 0 || a->bytes != n * sizeof *out) return 0;
  memcpy(out, a->data, a->bytes); /* the archive's data need not be aligned */
  return 1;
}

static void test_keras_step(clt_replica *r, const char *dir) {
  /* make_freeze_fixtures.py's OPTIMIZERS: Keras' defaults but these. */
  struct {
    const char *name;
    clt_optimizer_kind kind;
    double lr, momentum;
  } const opts[] = {{"adam", CLT_OPT_ADAM, 0.01, 0},
                    {"sgd", CLT_OPT_SGD, 0.1, 0.9},
                    {"rmsprop", CLT_OPT_RMSPROP, 0.01, 0}};
  char path[1024];
  clt_npz *z = NULL;
  static clt_model m;
  snprintf(path, sizeof path, "%s/step.npz", dir);
  if (clt_npz_read(path, &z, &E)) {
    check(0, "the Keras fixture: %s", E.msg);
    return;
  }
  const clt_npz_array *y = clt_npz_find(z, "y");
  const clt_keras_opts ko = {.data = {8, 8, 3},
                             .classes = 3,
                             .preprocess = CLT_PRE_RAW,
                             .weights_given = 1};
  enum { B = 4 };
  float x[B * 8 * 8 * 3];
  int labels[B];
  snprintf(path, sizeof path, "%s/model.json", dir);
  if (!y || strcmp(y->dtype, "<i8") != 0 || y->bytes != B * sizeof(int64_t) ||
      !get_floats(z, "x", sizeof x / sizeof x[0], x)) {
    check(0, "the Keras fixture holds x (4, 8, 8, 3) and y (4,)");
    clt_npz_free(z);
    return;
  }
  for (int b = 0; b < B; b++) {
    int64_t v;
    memcpy(&v, (const char *)y->data + b * sizeof v, sizeof v);
    labels[b] = (int)v;
  }
  if (clt_keras_load(path, &ko, &m, NULL, &E) ||
      clt_model_freeze_until(&m, "batch_normalization", "--freeze-until", &E)) {
    check(0, "the Keras fixture's model: %s", E.msg);
    clt_npz_free(z);
    return;
  }
  float *start = xcalloc(m.flat_floats, sizeof *start),
        *after = xcalloc(m.flat_floats, sizeof *after);
  float *want = xcalloc(m.flat_floats, sizeof *want);
  snprintf(path, sizeof path, "%s/weights.npz", dir);
  int status = clt_weights_load(&m, path, start, &E);
  if (status) check(0, "the Keras fixture's weights: %s", E.msg);
  for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !status; k++) {
    clt_optimizer opt = clt_optimizer_defaults(opts[k].kind);
    opt.lr = opts[k].lr;
    opt.momentum = opts[k].momentum;
    clt_net *net = NULL;
    status = clt_net_create(&m, r, B, 1, &net, &E) || clt_net_write_params(net, start, &E) ||
             write_batch(net, x, labels, B, &E) ||
             clt_net_forward_backward(net, B, 1.0f / B, 0, 1, &E) ||
             clt_net_update(net, &opt, 1, &E) || clt_net_read_params(net, after, &E);
    if (status) {
      check(0, "%s step on the Keras fixture: %s", opts[k].name, E.msg);
      clt_net_destroy(net);
      break;
    }
    clt_net_destroy(net);
    /* Each weight against Keras', relative to the tensor's largest value (Adam's
     * and RMSprop's first step, lr * g / |g|, turns a gradient's rounding near 0
     * into up to 1e-3 of the step); the moving statistics apart: cltrain updates
     * the moving variance with the batch's unbiased variance (docs/photos.md),
     * Keras 3 with the biased one, (1 - momentum) / (rows - 1) = 1.6e-4 of the
     * batch's variance here. */
    double worst[2] = {0, 0};
    int compared = 0, frozen_same = 1;
    char worst_at[2][96] = {"", ""};
    for (int i = 0; i < m.nlayers; i++)
      for (int p = 0; p < m.layers[i].nparams; p++) {
        const clt_param *q = &m.layers[i].params[p];
        char name[128];
        snprintf(name, sizeof name, "%s/%s/%s", opts[k].name, m.layers[i].name, q->name);
        if (!get_floats(z, name, q->size, want + q->offset)) continue;
        compared++;
        double big = 0, err = 0;
        for (size_t j = 0; j < q->size; j++) big = fmax(big, fabs(want[q->offset + j]));
        for (size_t j = 0; j < q->size; j++)
          err = fmax(err, fabs((double)after[q->offset + j] - want[q->offset + j]) / big);
        if (m.layers[i].frozen)
          frozen_same &= memcmp(after + q->offset, start + q->offset, q->size * sizeof *after) == 0;
        const int stat = q->non_trainable != 0;
        if (err > worst[stat]) {
          worst[stat] = err;
          snprintf(worst_at[stat], sizeof worst_at[stat], " at %s/%s", m.layers[i].name, q->name);
        }
      }
    check(compared == 14 && worst[0] < 2e-5 && worst[1] < 5e-5 && frozen_same,
          "%s, one step with the first layers frozen: the 14 weights as Keras' (worst relative "
          "difference %.1e%s; moving statistics %.1e%s), the frozen ones unchanged",
          opts[k].name, worst[0], worst_at[0], worst[1], worst_at[1]);
  }
  free(start);
  free(after);
  free(want);
  clt_npz_free(z);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  clt_rng_seed(&RNG, 4321, 0);
  test_layout();
  clt_device_list list;
  clt_replica *r = NULL;
  if (clt_devices_enumerate(&list, &E) || list.count == 0 ||
      clt_backend_create_replica(&list.devices[0], &r, &E) || clt_replica_enable_profiling(r, &E)) {
    check(0, "an OpenCL device to test on: %s", list.count ? E.msg : "none found");
  } else {
    test_mixed(r);
    test_stops(r);
    test_same_above(r);
    if (argc > 1) test_keras_step(r, argv[1]);
  }
  if (r) {
    log_kernels_used(r);
    clt_backend_destroy_replica(r);
  }
  clt_devices_free(&list);
  return check_summary();
}
