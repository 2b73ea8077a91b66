/* Dropout (Keras): in training, each value is kept with probability 1 - rate and
 * scaled by 1 / (1 - rate), else zeroed; in inference, and with rate 0, the
 * identity. No parameters, no state.
 *
 * The mask is a counter-based hash (cl/activation.cl's dropout_apply) of a key and
 * (global example index, element index within the example). The key mixes the
 * run's seed, the layer (its name and Keras seed) and the training step, so a step
 * draws the same mask whichever replica computes which examples, and the backward
 * recomputes it instead of storing it. Description: Dropout(0.25,s7) (rate, Keras
 * seed, 0 for none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct dropout_hp {
  double rate;    /* [0, 1) */
  long long seed; /* Keras' seed, 0 for none */
} dropout_hp;

static const dropout_hp *hp(const clt_layer *l) { return clt_layer_hp(l, dropout_hp); }

/* Shortest text that reads back as v, so a description keeps Keras' value. */
static void format_double(char *buf, size_t size, double v) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* "rate,sSEED" */
static int dropout_parse(clt_layer *l, const char *args, clt_err *e) {
  dropout_hp *h = clt_layer_hp(l, dropout_hp);
  char *end, *end2 = NULL;
  h->rate = strtod(args, &end);
  if (end != args && strncmp(end, ",s", 2) == 0) h->seed = strtoll(end + 2, &end2, 10);
  if (end == args || !end2 || end2 == end + 2 || *end2 != '\0' || !(h->rate >= 0.0) ||
      !(h->rate < 1.0)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Dropout(%s): expected Dropout(rate,sSEED) with 0 <= rate < 1", l->name,
                    args);
  }
  return CLT_OK;
}

static void dropout_describe(const clt_layer *l, char *buf, size_t size) {
  char r[32];
  format_double(r, sizeof r, hp(l)->rate);
  snprintf(buf, size, "Dropout(%s,s%lld)", r, hp(l)->seed);
}

static int dropout_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (clt_shape_size(in[0]) > (size_t)1 << 30) {
    return clt_fail(e, CLT_ERR_ARG, "%s: input %dx%dx%d is too large", l->name, in[0].h, in[0].w,
                    in[0].c);
  }
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static int dropout_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                           clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const apply[] = {"dropout_apply"}, *const identity[] = {"scale_shift"};
  int status = clt_layer_build_kernels(r, "dropout.cl", apply, 1, e);
  return status ? status : clt_layer_build_kernels(r, "activation.cl", identity, 1, e);
}

/* splitmix64's finaliser. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* The step's key for this layer: the run's seed, the layer's name (FNV-1a) and
 * Keras seed, the step. */
static uint64_t dropout_key(const clt_layer *l, uint64_t seed, long step) {
  uint64_t name = 0xcbf29ce484222325u;
  for (const char *p = l->name; *p; p++) name = (name ^ (unsigned char)*p) * 0x100000001b3u;
  const uint64_t layer = mix64(name ^ mix64((uint64_t)hp(l)->seed));
  return mix64(mix64(seed ^ layer) + (uint64_t)step * 0x9e3779b97f4a7c15u);
}

/* Values are dropped when the hash's high 32 bits are below rate * 2^32. */
static uint32_t dropout_threshold(double rate) {
  const double t = rate * 4294967296.0;
  return t <= 0.0 ? 0u : t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

/* out = in masked and scaled (training, rate > 0), else a copy. */
static int apply(const clt_layer *l, const clt_layer_io *io, cl_mem in, cl_mem out, clt_err *e) {
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total, status;
  if (!io->train || hp(l)->rate == 0.0) {
    float one = 1.0f, zero = 0.0f;
    clt_karg args[] = {CLT_ARG(in), CLT_ARG(out), CLT_ARG(n), CLT_ARG(one), CLT_ARG(zero)};
    status = clt_replica_kernel(io->replica, "activation.cl", "", "scale_shift", &k, e);
    if (!status) status = clt_launch_elems(io->replica, k, "scale_shift", args, 5, total, e);
  } else {
    int per_example = (int)clt_shape_size(l->out);
    cl_ulong key = dropout_key(l, io->seed, io->step);
    cl_long example0 = io->example0;
    cl_uint thr = dropout_threshold(hp(l)->rate);
    float scale = (float)(1.0 / (1.0 - hp(l)->rate));
    clt_karg args[] = {CLT_ARG(in),  CLT_ARG(out),      CLT_ARG(n),   CLT_ARG(per_example),
                       CLT_ARG(key), CLT_ARG(example0), CLT_ARG(thr), CLT_ARG(scale)};
    status = clt_replica_kernel(io->replica, "dropout.cl", "", "dropout_apply", &k, e);
    if (!status) status = clt_launch_elems(io->replica, k, "dropout_apply", args, 8, total, e);
  }
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int dropout_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return apply(l, io, io->x, io->y, e);
}

/* The same mask (io carries the forward's seed, step and examples). */
static int dropout_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return io->dx ? apply(l, io, io->dy, io->dx, e) : CLT_OK;
}

static int dropout_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                              size_t size, clt_err *e) {
  dropout_hp *h = clt_layer_hp(l, dropout_hp);
  int seed = 0;
  if (size) activation[0] = '\0';
  if (!clt_kc_has(c, "rate")) return clt_kc_fail(c, e, "rate: missing");
  if (clt_kc_double(c, "rate", 0.0, &h->rate, e) || clt_kc_int(c, "seed", 0, &seed, e))
    return CLT_ERR_FORMAT;
  h->seed = seed;
  if (!(h->rate >= 0.0 && h->rate < 1.0))
    return clt_kc_fail(c, e, "rate %g is outside [0, 1)", h->rate);
  if (clt_kc_has(c, "noise_shape"))
    return clt_kc_fail(c, e, "noise_shape is not supported (only null: a mask per value)");
  return CLT_OK;
}

/* Inference: the identity. */
static int dropout_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                           const char *output, clt_err *e) {
  (void)l;
  return clt_onnx_node(g, "Identity", inputs, 1, output, NULL, 0, e);
}

#ifdef CLT_REFERENCE
static void ref_apply(const clt_layer *l, const clt_ref_io *io, const double *in, double *out) {
  const size_t n = clt_shape_size(l->out);
  if (!io->train || hp(l)->rate == 0.0) {
    memcpy(out, in, n * io->batch * sizeof *out);
  } else {
    ref_dropout(in, io->batch, n, dropout_key(l, io->seed, io->step), io->example0, hp(l)->rate,
                out);
  }
}

static void dropout_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_apply(l, io, io->x, io->y);
}

static void dropout_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) ref_apply(l, io, io->dy, io->dx);
}
#endif

static const char *const dropout_sources[] = {"dropout.cl", "activation.cl", NULL};

const clt_layer_ops clt_dropout_ops = {
    .kind = "Dropout",
    .ninputs = 1,
    .parse = dropout_parse,
    .describe = dropout_describe,
    .setup = dropout_setup,
    .prepare = dropout_prepare,
    .sources = dropout_sources,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .from_keras = dropout_from_keras,
    .to_onnx = dropout_to_onnx,
    .ref_forward = CLT_REF(dropout_ref_forward),
    .ref_backward = CLT_REF(dropout_ref_backward),
};
