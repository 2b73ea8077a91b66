/* SeparableConv2D: a depthwise convolution (depth multiplier M, no bias) then a
 * pointwise 1x1 convolution to `filters` channels with an optional bias and fused
 * ReLU. The depthwise part runs cl/depthwise.cl's kernels, the pointwise one a GEMM.
 *
 * forward:  t = depthwise(x)                      [rows = B*OH*OW, CM = C*M], in scratch
 *           y = t * Wp + bias, then ReLU          Wp: Keras' (1, 1, CM, F) as [CM, F]
 * backward: dy *= (y > 0), dbias = column sums of dy, in one pass (conv.cl's)
 *           t = depthwise(x) again (scratch is shared between layers)
 *           dWp = t^T dy; then dt = dy Wp^T over t (no longer needed)
 *           dWd from (x, dt) in blocks (as DepthwiseConv2D); dx gathered from dt
 * Padding: 'same', 'valid', or a ZeroPadding2D folded in front (l->pad).
 * Scratch: [t, then dt: rows*CM][depthwise kernel partials][bias partials][F sums
 * without a bias]. */
#include <stdlib.h>

#include "gemm.h"
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

enum { SEP_DEPTHWISE, SEP_POINTWISE, SEP_BIAS };

/* SeparableConv2D's options besides the common ones (see clt_conv_hp): filters,
 * depth_multiplier. */
static const clt_conv_hp sep_kind = {.has_filters = 1, .has_mult = 1};

static const clt_conv_hp *hp(const clt_layer *l) { return clt_layer_hp(l, clt_conv_hp); }

/* "32,3x3,s1,same", "64,3x3,s2,valid,m2,nobias,relu" */
static int sep_parse(clt_layer *l, const char *args, clt_err *e) {
  return clt_conv_parse(l, args, sep_kind, e);
}

static int sep_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const clt_shape in = ins[0];
  const int kh = h->kernel_h, kw = h->kernel_w, s = h->stride;
  if (kh < 1 || kw < 1 || s < 1 || h->mult < 1 || h->filters < 1) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: bad kernel %dx%d, stride %d, depth multiplier %d or filters %d", l->name,
                    kh, kw, s, h->mult, h->filters);
  }
  const int status = clt_conv_window(l, in, e);
  if (status) return status;
  const int cm = in.c * h->mult, f = h->filters;
  l->out.c = f;
  /* Keras' Glorot fans of (KH, KW, C, M) and (1, 1, CM, F) kernels. */
  l->params[SEP_DEPTHWISE] = (clt_param){.name = "depthwise_kernel",
                                         .rank = 4,
                                         .dims = {kh, kw, in.c, h->mult},
                                         .size = (size_t)kh * kw * cm,
                                         .glorot_fan_in = (double)kh * kw * in.c,
                                         .glorot_fan_out = (double)kh * kw * h->mult};
  l->params[SEP_POINTWISE] = (clt_param){.name = "pointwise_kernel",
                                         .rank = 4,
                                         .dims = {1, 1, cm, f},
                                         .size = (size_t)cm * f,
                                         .glorot_fan_in = cm,
                                         .glorot_fan_out = f};
  l->params[SEP_BIAS] = (clt_param){.name = "bias", .rank = 1, .dims = {f}, .size = (size_t)f};
  l->nparams = h->nobias ? 2 : 3;
  return CLT_OK;
}

static int sep_rows(const clt_layer *l, int batch) { return batch * l->out.h * l->out.w; }
static int sep_cm(const clt_layer *l) { return l->in.c * hp(l)->mult; }

/* The bias parameter, or NULL without one. */
static const clt_param *sep_bias(const clt_layer *l) {
  return hp(l)->nobias ? NULL : &l->params[SEP_BIAS];
}

/* The depthwise kernel, for depthwise.c's passes. */
static clt_depthwise sep_kernel(const clt_layer *l) {
  const clt_conv_hp *h = hp(l);
  return (clt_depthwise){h->kernel_h, h->kernel_w, h->stride, h->mult,
                         l->params[SEP_DEPTHWISE].offset};
}

/* Where the scratch's parts start: depthwise partials, bias partials, bias sums. */
static size_t sep_partials_at(const clt_layer *l, int batch) {
  return (size_t)sep_rows(l, batch) * sep_cm(l);
}
static size_t sep_bias_at(const clt_layer *l, int batch) {
  const clt_depthwise d = sep_kernel(l);
  return sep_partials_at(l, batch) + clt_depthwise_partials(l, &d, batch);
}

static size_t sep_scratch(const clt_layer *l, int batch) {
  return sep_bias_at(l, batch) + clt_bias_relu_scratch(sep_rows(l, batch), hp(l)->filters,
                                                       clt_layer_trained(l, sep_bias(l)));
}

/* The pointwise GEMMs (t, dt at scratch offset 0). */
static clt_gemm_shape fwd_shape(const clt_layer *l, int batch) {
  size_t m = (size_t)sep_rows(l, batch), k = (size_t)sep_cm(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){0, 0, m, n, k, k, n, n};
}
static clt_gemm_shape dw_shape(const clt_layer *l, int batch) {
  size_t m = (size_t)sep_rows(l, batch), k = (size_t)sep_cm(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){1, 0, k, n, m, k, n, n};
}
static clt_gemm_shape dt_shape(const clt_layer *l, int batch) {
  size_t m = (size_t)sep_rows(l, batch), k = (size_t)sep_cm(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){0, 1, m, k, n, n, n, k};
}

static int sep_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  static const char *const names[] = {"depthwise_forward", "depthwise_backward_input",
                                      "depthwise_backward_filter"};
  static const char *const conv[] = {"bias_act", "bias_grad_partial", "bias_grad_final"};
  int status = clt_layer_build_kernels(r, "depthwise.cl", names, 3, e);
  if (!status) status = clt_layer_build_kernels(r, "bias.cl", conv, 3, e);
  clt_gemm_shape shapes[3] = {fwd_shape(l, max_batch), dw_shape(l, max_batch),
                              dt_shape(l, max_batch)};
  for (int i = 0; i < 3 && !status; i++) status = clt_gemm_reserve(r, &shapes[i], e);
  return status;
}

/* t = depthwise(x), no bias, into scratch at offset 0. */
static int sep_depthwise(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_depthwise d = sep_kernel(l);
  return clt_depthwise_forward(l, io, &d, -1, 0, io->scratch, e);
}

static int sep_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_gemm_shape fwd = fwd_shape(l, io->batch);
  int status = sep_depthwise(l, io, e);
  if (status) return status;
  return clt_gemm_bias_relu(io, &fwd, io->scratch, &l->params[SEP_POINTWISE], sep_bias(l),
                            hp(l)->relu, e);
}

static int sep_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const int rows = sep_rows(l, io->batch), f = h->filters;
  const size_t bias_at = sep_bias_at(l, io->batch);
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass; a
   * frozen layer computes no weight gradient (nor t, which only dWp reads). */
  int status = clt_bias_relu_grad(io, h->relu, clt_layer_trained(l, sep_bias(l)), bias_at, rows, f,
                                  e);
  if (!status && !l->frozen) status = sep_depthwise(l, io, e);
  if (!status && !l->frozen) {
    const clt_gemm_shape dwp = dw_shape(l, io->batch);
    status = clt_gemm(io->replica, &dwp, 1.0f, io->scratch, 0, io->dy, 0, 0.0f, io->grads,
                      l->params[SEP_POINTWISE].offset, e);
  }
  if (!status) {
    /* The in-order queue runs this after dWp has read t: dt overwrites it. */
    const clt_gemm_shape dt = dt_shape(l, io->batch);
    status = clt_gemm(io->replica, &dt, 1.0f, io->dy, 0, io->params,
                      l->params[SEP_POINTWISE].offset, 0.0f, io->scratch, 0, e);
  }
  /* The depthwise kernel's gradient from (x, dt), its partial sums after dt; dx from dt. */
  const clt_depthwise d = sep_kernel(l);
  if (!status && !l->frozen) {
    status = clt_depthwise_kernel_grad(l, io, &d, io->scratch, (int)sep_partials_at(l, io->batch),
                                       e);
  }
  if (!status && io->dx) status = clt_depthwise_input_grad(l, io, &d, io->scratch, e);
  return status;
}

#ifdef CLT_REFERENCE
/* t = depthwise(x) for the references (malloc'd; NULL when out of memory). */
static double *sep_ref_depthwise(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  double *t = malloc((size_t)sep_rows(l, io->batch) * sep_cm(l) * sizeof *t);
  if (t) {
    ref_depthwise_forward(io->x, io->batch, l->in.h, l->in.w, l->in.c, h->mult,
                          io->params + l->params[SEP_DEPTHWISE].offset, NULL, h->kernel_h,
                          h->kernel_w, h->stride, l->pad_top, l->pad_left, l->out.h, l->out.w, t);
  }
  return t;
}

static void sep_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape o = l->out;
  double *t = sep_ref_depthwise(l, io), *zeros = calloc((size_t)h->filters, sizeof *zeros);
  if (t && zeros) {
    ref_conv2d_forward(t, io->batch, o.h, o.w, sep_cm(l),
                       io->params + l->params[SEP_POINTWISE].offset,
                       h->nobias ? zeros : io->params + l->params[SEP_BIAS].offset, 1, 1,
                       h->filters, 1, 0, 0, o.h, o.w, io->y);
    if (h->relu) ref_relu_forward(io->y, clt_shape_size(o) * io->batch, io->y);
  }
  free(zeros);
  free(t);
}

static void sep_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape o = l->out;
  const size_t nt = (size_t)sep_rows(l, io->batch) * sep_cm(l);
  double *t = sep_ref_depthwise(l, io), *dt = malloc(nt * sizeof *dt);
  double *dbias = malloc((size_t)h->filters * sizeof *dbias);
  if (t && dt && dbias) {
    if (h->relu) ref_relu_backward(io->y, io->dy, clt_shape_size(o) * io->batch, io->dy);
    ref_conv2d_backward(t, io->batch, o.h, o.w, sep_cm(l),
                        io->params + l->params[SEP_POINTWISE].offset, 1, 1, h->filters, 1, 0, 0,
                        o.h, o.w, io->dy, dt, io->grads + l->params[SEP_POINTWISE].offset, dbias);
    for (int c = 0; c < h->filters && !h->nobias; c++)
      io->grads[l->params[SEP_BIAS].offset + c] = dbias[c];
    ref_depthwise_backward(io->x, io->batch, l->in.h, l->in.w, l->in.c, h->mult,
                           io->params + l->params[SEP_DEPTHWISE].offset, h->kernel_h, h->kernel_w,
                           h->stride, l->pad_top, l->pad_left, o.h, o.w, dt, io->dx,
                           io->grads + l->params[SEP_DEPTHWISE].offset, NULL);
  }
  free(dbias);
  free(dt);
  free(t);
}
#endif

/* Keras SeparableConv2D (Keras 3 and tf.keras 2.x): filters, depth_multiplier and the
 * convolutions' options. */
static int sep_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                          clt_err *e) {
  return clt_conv_from_keras(l, c, sep_kind, activation, size, e);
}

/* ONNX: a grouped Conv (group = C, kernel (CM, 1, KH, KW)), a 1x1 Conv (kernel
 * (F, CM, 1, 1)) with the bias, then Relu when fused. */
static int sep_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const int64_t ddims[4] = {sep_cm(l), 1, h->kernel_h, h->kernel_w};
  const int64_t pdims[4] = {h->filters, sep_cm(l), 1, 1};
  const char *t = clt_onnx_name(g, l, "depthwise");
  int status = clt_onnx_conv(l, g, inputs[0], SEP_DEPTHWISE, "depthwise_kernel", ddims, -1,
                             h->stride, l->in.c, 0, t, e);
  if (!status) {
    status = clt_onnx_conv(l, g, t, SEP_POINTWISE, "pointwise_kernel", pdims,
                           h->nobias ? -1 : SEP_BIAS, 0, 1, h->relu, output, e);
  }
  return status;
}

static const char *const sep_sources[] = {"depthwise.cl", "bias.cl", NULL};

const clt_layer_ops clt_separable_ops = {
    .kind = "SeparableConv2D",
    .ninputs = 1,
    .folds_padding = 1,
    .parse = sep_parse,
    .describe = clt_conv_describe,
    .setup = sep_setup,
    .scratch_floats = sep_scratch,
    .prepare = sep_prepare,
    .sources = sep_sources,
    .forward = sep_forward,
    .backward = sep_backward,
    .from_keras = sep_from_keras,
    .to_onnx = sep_to_onnx,
    .ref_forward = CLT_REF(sep_ref_forward),
    .ref_backward = CLT_REF(sep_ref_backward),
};
