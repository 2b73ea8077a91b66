/* Dropout (Keras): in training, each value is kept with probability 1 - rate and
 * scaled by 1 / (1 - rate), else zeroed; in inference, and with rate 0, the
 * identity. No parameters, no state.
 *
 * The mask is a counter-based hash (cl/activation.cl's dropout_apply) of a key and
 * (global example index, element index within the example). The key mixes the
 * run's seed, the layer (its name and Keras seed) and the training step, so a step
 * draws the same mask whichever replica computes which examples, and the backward
 * recomputes it instead of storing it.
 *
 * Keras' noise_shape (EfficientNet's drop-connect: (None, 1, 1, 1), one draw per
 * example) shares one draw among the values along each axis whose entry is 1: the
 * hash takes the position within the noise shape instead (the batch axis's 1: global
 * example 0 for every example); an entry None (or the axis's size) draws per value.
 * Description: Dropout(0.25,s7) (rate, Keras seed, 0 for none), with a noise shape
 * Dropout(0.2,s0,noise*x1x1x1) (batch, height, width, channels; or batch and
 * channels for a flat input: noise*x1; * for None). */
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
  int nnoise;     /* noise_shape's entries: 0 (none), 2 (batch, channels) or 4 */
  int noise[4];   /* its entries, -1 for None */
} dropout_hp;

/* Bits of the axes whose values share a draw (noise_shape entry 1). */
enum { SHARE_B = 1, SHARE_H = 2, SHARE_W = 4, SHARE_C = 8 };

static const dropout_hp *hp(const clt_layer *l) { return clt_layer_hp(l, dropout_hp); }

/* Shortest text that reads back as v, so a description keeps Keras' value. */
static void format_double(char *buf, size_t size, double v) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* "*x1x1x1" or "*x1": the noise shape's entries (* None, else a positive integer);
 * the text after them, or NULL. */
static const char *parse_noise(dropout_hp *h, const char *p) {
  h->nnoise = 0;
  for (;;) {
    if (h->nnoise == 4) return NULL;
    if (*p == '*') {
      h->noise[h->nnoise++] = -1;
      p++;
    } else {
      char *end;
      const long v = strtol(p, &end, 10);
      if (end == p || v < 1 || v > 1 << 30) return NULL;
      h->noise[h->nnoise++] = (int)v;
      p = end;
    }
    if (*p != 'x') break;
    p++;
  }
  return h->nnoise == 2 || h->nnoise == 4 ? p : NULL;
}

/* "rate,sSEED" or "rate,sSEED,noiseSHAPE" */
static int dropout_parse(clt_layer *l, const char *args, clt_err *e) {
  dropout_hp *h = clt_layer_hp(l, dropout_hp);
  char *end, *end2 = NULL;
  const char *rest = NULL;
  h->nnoise = 0;
  h->rate = strtod(args, &end);
  if (end != args && strncmp(end, ",s", 2) == 0) h->seed = strtoll(end + 2, &end2, 10);
  if (end2 && end2 != end + 2) rest = *end2 == '\0' ? end2 : NULL;
  if (end2 && end2 != end + 2 && strncmp(end2, ",noise", 6) == 0) rest = parse_noise(h, end2 + 6);
  if (end == args || !rest || *rest != '\0' || !(h->rate >= 0.0) || !(h->rate < 1.0)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Dropout(%s): expected Dropout(rate,sSEED[,noiseBxHxWxC|,noiseBxC]) with 0 "
                    "<= rate < 1 (* for None)",
                    l->name, args);
  }
  return CLT_OK;
}

static void dropout_describe(const clt_layer *l, char *buf, size_t size) {
  char r[32], noise[64] = "";
  format_double(r, sizeof r, hp(l)->rate);
  for (int i = 0, used = 0; i < hp(l)->nnoise; i++) {
    const int v = hp(l)->noise[i];
    used += snprintf(noise + used, sizeof noise - (size_t)used, "%s", i ? "x" : ",noise");
    if (v < 0) used += snprintf(noise + used, sizeof noise - (size_t)used, "*");
    else used += snprintf(noise + used, sizeof noise - (size_t)used, "%d", v);
  }
  snprintf(buf, size, "Dropout(%s,s%lld%s)", r, hp(l)->seed, noise);
}

/* The axes whose values share a draw (SHARE_*): the noise shape's entries of 1. */
static int shares(const clt_layer *l) {
  const dropout_hp *h = hp(l);
  int bits = 0;
  if (h->nnoise == 0) return 0;
  if (h->noise[0] == 1) bits |= SHARE_B;
  if (h->nnoise == 2) return bits | (h->noise[1] == 1 ? SHARE_C : 0);
  if (h->noise[1] == 1) bits |= SHARE_H;
  if (h->noise[2] == 1) bits |= SHARE_W;
  if (h->noise[3] == 1) bits |= SHARE_C;
  return bits;
}

static int dropout_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (clt_shape_size(in[0]) > (size_t)1 << 30) {
    return clt_fail(e, CLT_ERR_ARG, "%s: input %dx%dx%d is too large", l->name, in[0].h, in[0].w,
                    in[0].c);
  }
  const dropout_hp *h = hp(l);
  const int dims[4] = {0, in[0].h, in[0].w, in[0].c};
  if (h->nnoise == 2 && (in[0].h != 1 || in[0].w != 1)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: noise_shape of 2 entries on a %dx%dx%d input (it needs 4: batch, "
                    "height, width, channels)",
                    l->name, in[0].h, in[0].w, in[0].c);
  }
  for (int i = 0; i < h->nnoise; i++) {
    /* Entry i's axis: batch, then height, width, channels (channels alone for 2). */
    const int axis = h->nnoise == 2 && i == 1 ? 3 : i, v = h->noise[i];
    if (v < 0 || v == 1 || (axis > 0 && v == dims[axis])) continue;
    if (axis == 0)
      return clt_fail(e, CLT_ERR_ARG,
                      "%s: noise_shape's batch entry %d is not supported (only None or 1)", l->name,
                      v);
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: noise_shape entry %d is %d: only None, 1 or the input's %d are supported",
                    l->name, i, v, dims[axis]);
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
  static const char *const apply[] = {"dropout_apply", "dropout_shared"};
  static const char *const identity[] = {"scale_shift"};
  int status = clt_layer_build_kernels(r, "dropout.cl", apply, 2, e);
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
    const int share = shares(l), W = l->out.w, C = l->out.c;
    if (share) {
      clt_karg sargs[] = {CLT_ARG(in),  CLT_ARG(out),      CLT_ARG(n),    CLT_ARG(per_example),
                          CLT_ARG(key), CLT_ARG(example0), CLT_ARG(thr),  CLT_ARG(scale),
                          CLT_ARG(W),   CLT_ARG(C),        CLT_ARG(share)};
      status = clt_replica_kernel(io->replica, "dropout.cl", "", "dropout_shared", &k, e);
      if (!status) status = clt_launch_elems(io->replica, k, "dropout_shared", sargs, 11, total, e);
    } else {
      status = clt_replica_kernel(io->replica, "dropout.cl", "", "dropout_apply", &k, e);
      if (!status) status = clt_launch_elems(io->replica, k, "dropout_apply", args, 8, total, e);
    }
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

/* noise_shape: null, or 2 or 4 entries each null or a positive integer (which of
 * those setup takes: None, 1 or the axis's size). */
static int noise_from_keras(dropout_hp *h, const clt_keras_config *c, clt_err *e) {
  if (clt_kc_shape(c, "noise_shape", 4, h->noise, &h->nnoise, e)) return CLT_ERR_FORMAT;
  if (h->nnoise != 0 && h->nnoise != 2 && h->nnoise != 4)
    return clt_kc_fail(c, e, "noise_shape of %d entries (only 2 or 4)", h->nnoise);
  return CLT_OK;
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
  return noise_from_keras(h, c, e);
}

/* Inference: the identity. */
static int dropout_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                           const char *output, clt_err *e) {
  (void)l;
  return clt_onnx_node(g, "Identity", inputs, 1, output, NULL, 0, e);
}

#ifdef CLT_REFERENCE
/* The masks with shared draws: value (b, h, w, c) draws at its noise-shape position. */
static void ref_shared(const clt_layer *l, const clt_ref_io *io, const double *in, double *out) {
  const int share = shares(l), H = l->out.h, W = l->out.w, C = l->out.c;
  const int NW = share & SHARE_W ? 1 : W, NC = share & SHARE_C ? 1 : C;
  const uint64_t key = dropout_key(l, io->seed, io->step);
  const uint32_t thr = ref_dropout_threshold(hp(l)->rate);
  size_t at = 0;
  for (int b = 0; b < io->batch; b++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        for (int c = 0; c < C; c++, at++) {
          const long ex = share & SHARE_B ? 0 : io->example0 + b;
          const size_t r = ((size_t)(share & SHARE_H ? 0 : y) * NW + (share & SHARE_W ? 0 : x)) *
                               NC +
                           (share & SHARE_C ? 0 : c);
          const uint64_t h = ref_dropout_hash(key, (uint64_t)ex, r);
          out[at] = (uint32_t)(h >> 32) >= thr ? in[at] / (1.0 - hp(l)->rate) : 0.0;
        }
}

static void ref_apply(const clt_layer *l, const clt_ref_io *io, const double *in, double *out) {
  const size_t n = clt_shape_size(l->out);
  if (!io->train || hp(l)->rate == 0.0) {
    memcpy(out, in, n * io->batch * sizeof *out);
  } else if (shares(l)) {
    ref_shared(l, io, in, out);
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
