/* Conv2D with bias and optional fused ReLU, as im2col + CLBlast GEMM.
 *
 * forward:  col = im2col(x)            [M = B*OH*OW, K = KH*KW*C]
 *           y   = col * W + bias       W is the Keras HWIO kernel seen as [K, CO]
 *           y   = relu(y)
 * backward: dy *= (y > 0), and dbias = column sums of dy, in one pass
 *           col = im2col(x) again (scratch is shared between layers)
 *           dW  = col^T * dy
 *           dx  = col2im(dy * W^T)
 * Scratch: [col: M*K floats][bias-gradient partial sums]. */
#include <stdio.h>
#include <string.h>

#include "gemm.h"
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct conv_hp {
  int filters, kernel_h, kernel_w, stride;
  int pad_same; /* TensorFlow's 'same', else 'valid' */
  int relu;     /* fused activation */
} conv_hp;

static const conv_hp *hp(const clt_layer *l) { return clt_layer_hp(l, conv_hp); }

/* "64,3x3,s1,valid,relu" */
static int conv_parse(clt_layer *l, const char *args, clt_err *e) {
  conv_hp *h = clt_layer_hp(l, conv_hp);
  char padding[8] = "";
  int used = 0;
  if (sscanf(args, "%d,%dx%d,s%d,%7[a-z]%n", &h->filters, &h->kernel_h, &h->kernel_w, &h->stride,
             padding, &used) != 5 ||
      (strcmp(padding, "same") != 0 && strcmp(padding, "valid") != 0) ||
      clt_parse_relu_tail(args + used, &h->relu) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Conv2D(%s): expected Conv2D(filters,KHxKW,sSTRIDE,same|valid[,relu])",
                    l->name, args);
  }
  h->pad_same = padding[0] == 's';
  return CLT_OK;
}

static void conv_describe(const clt_layer *l, char *buf, size_t size) {
  const conv_hp *h = hp(l);
  snprintf(buf, size, "Conv2D(%d,%dx%d,s%d,%s%s)", h->filters, h->kernel_h, h->kernel_w, h->stride,
           h->pad_same ? "same" : "valid", h->relu ? ",relu" : "");
}

static int conv_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const conv_hp *h = hp(l);
  const clt_shape in = ins[0];
  const int kh = h->kernel_h, kw = h->kernel_w, s = h->stride;
  if (kh < 1 || kw < 1 || s < 1 || h->filters < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad kernel %dx%d, stride %d or filters %d", l->name, kh,
                    kw, s, h->filters);
  }
  l->in = in;
  if (h->pad_same && l->pad) {
    return clt_fail(e, CLT_ERR_ARG, "%s: 'same' padding and an explicit padding of %d", l->name,
                    l->pad);
  }
  if (l->pad) {
    /* A ZeroPadding2D(pad) folded in front of a 'valid' convolution. */
    if (in.h + 2 * l->pad < kh || in.w + 2 * l->pad < kw) {
      return clt_fail(e, CLT_ERR_ARG, "%s: padded input %dx%d is smaller than its %dx%d kernel",
                      l->name, in.h + 2 * l->pad, in.w + 2 * l->pad, kh, kw);
    }
    l->out.h = (in.h + 2 * l->pad - kh) / s + 1;
    l->out.w = (in.w + 2 * l->pad - kw) / s + 1;
    l->pad_top = l->pad_left = l->pad;
  } else if (h->pad_same) {
    /* TensorFlow's 'same': out = ceil(in / s), extra padding at the bottom/right. */
    l->out.h = (in.h + s - 1) / s;
    l->out.w = (in.w + s - 1) / s;
    int pad_h = (l->out.h - 1) * s + kh - in.h;
    int pad_w = (l->out.w - 1) * s + kw - in.w;
    l->pad_top = pad_h > 0 ? pad_h / 2 : 0;
    l->pad_left = pad_w > 0 ? pad_w / 2 : 0;
  } else {
    if (in.h < kh || in.w < kw) {
      return clt_fail(e, CLT_ERR_ARG, "%s: input %dx%d is smaller than its %dx%d kernel", l->name,
                      in.h, in.w, kh, kw);
    }
    l->out.h = (in.h - kh) / s + 1;
    l->out.w = (in.w - kw) / s + 1;
    l->pad_top = l->pad_left = 0;
  }
  l->out.c = h->filters;
  clt_param *k = &l->params[0], *b = &l->params[1];
  *k = (clt_param){.name = "kernel",
                   .rank = 4,
                   .dims = {kh, kw, in.c, h->filters},
                   .size = (size_t)kh * kw * in.c * h->filters,
                   .glorot_fan_in = (double)kh * kw * in.c,
                   .glorot_fan_out = (double)kh * kw * h->filters};
  *b = (clt_param){.name = "bias", .rank = 1, .dims = {h->filters}, .size = (size_t)h->filters};
  l->nparams = 2;
  return CLT_OK;
}

/* A 1x1 convolution with stride 1 reads the input as its column matrix. */
static int conv_pointwise(const clt_layer *l) {
  return hp(l)->kernel_h == 1 && hp(l)->kernel_w == 1 && hp(l)->stride == 1 && l->pad_top == 0 &&
         l->pad_left == 0;
}

static size_t conv_rows(const clt_layer *l, int batch) {
  return (size_t)batch * l->out.h * l->out.w;
}
static size_t conv_k(const clt_layer *l) {
  return (size_t)hp(l)->kernel_h * hp(l)->kernel_w * l->in.c;
}

static size_t conv_scratch(const clt_layer *l, int batch) {
  size_t rows = conv_rows(l, batch);
  size_t col = conv_pointwise(l) ? 0 : rows * conv_k(l);
  return col + clt_bias_grad_scratch((int)rows, hp(l)->filters);
}

/* The three GEMMs, for `batch` examples. */
static clt_gemm_shape fwd_shape(const clt_layer *l, int batch) {
  size_t m = conv_rows(l, batch), k = conv_k(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){0, 0, m, n, k, k, n, n};
}
static clt_gemm_shape dw_shape(const clt_layer *l, int batch) {
  size_t m = conv_rows(l, batch), k = conv_k(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){1, 0, k, n, m, k, n, n};
}
static clt_gemm_shape dcol_shape(const clt_layer *l, int batch) {
  size_t m = conv_rows(l, batch), k = conv_k(l), n = (size_t)hp(l)->filters;
  return (clt_gemm_shape){0, 1, m, k, n, n, n, k};
}

static int conv_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  static const char *const names[] = {"im2col",   "im2col_rows",       "col2im",
                                      "bias_act", "bias_grad_partial", "bias_grad_final"};
  int status = clt_layer_build_kernels(r, "conv.cl", names, 6, e);
  if (status) return status;
  clt_gemm_shape shapes[3] = {fwd_shape(l, max_batch), dw_shape(l, max_batch),
                              dcol_shape(l, max_batch)};
  for (int i = 0; i < 3 && !status; i++) status = clt_gemm_reserve(r, &shapes[i], e);
  return status;
}

/* Runs im2col or col2im (they share the argument list): a work-item per
 * position on the CPU flavor; on GPUs (cols, positions) work-items, a column per
 * contiguous float of a position (see cl/conv.cl). */
static int conv_cols(const clt_layer *l, const clt_layer_io *io, const char *kname, cl_mem from,
                     cl_mem to, size_t positions, size_t gpu_cols, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "conv.cl", "", kname, &k, e);
  if (status) return status;
  const conv_hp *h = hp(l);
  clt_karg args[] = {CLT_ARG(from),        CLT_ARG(to),          CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),     CLT_ARG(l->in.w),     CLT_ARG(l->in.c),
                     CLT_ARG(h->kernel_h), CLT_ARG(h->kernel_w), CLT_ARG(h->stride),
                     CLT_ARG(l->pad_top),  CLT_ARG(l->pad_left), CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  char label[64];
  snprintf(label, sizeof label, "%s %s", l->name, kname);
  if (io->replica->flavor == CLT_KERNELS_GPU)
    return clt_launch_rows(io->replica, k, label, args, 13, gpu_cols, positions, 1, e);
  return clt_launch1d(io->replica, k, label, args, 13, positions, e);
}

/* im2col of io->x into scratch: a work-item per kernel tap copies C channels;
 * with few channels, a work-item per output row (OW positions) copies all taps
 * (on GPUs: a work-item per channel of a tap, or per float of the row). */
static int conv_im2col(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const size_t rows = conv_rows(l, io->batch);
  if (l->in.c < 4) {
    return conv_cols(l, io, "im2col_rows", io->x, io->scratch, (size_t)io->batch * l->out.h,
                     (size_t)l->out.w * conv_k(l), e);
  }
  return conv_cols(l, io, "im2col", io->x, io->scratch, rows * hp(l)->kernel_h * hp(l)->kernel_w,
                   (size_t)l->in.c, e);
}

static int conv_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_gemm_shape fwd = fwd_shape(l, io->batch);
  const int pointwise = conv_pointwise(l);
  int status = pointwise ? CLT_OK : conv_im2col(l, io, e);
  if (!status) {
    status = clt_gemm_bias_act(io->replica, &fwd, pointwise ? io->x : io->scratch, 0, io->params,
                               l->params[0].offset, io->y, 0, io->params, l->params[1].offset,
                               hp(l)->relu, e);
  }
  return status;
}

static int conv_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const size_t rows = conv_rows(l, io->batch);
  const int pointwise = conv_pointwise(l);
  const size_t col_floats = pointwise ? 0 : rows * conv_k(l);
  cl_mem col = pointwise ? io->x : io->scratch;
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass. */
  int status = clt_bias_grad(io, io->dy, hp(l)->relu ? io->y : NULL, io->scratch, col_floats,
                             (int)rows, hp(l)->filters, l->params[1].offset, e);
  if (!status && !pointwise) status = conv_im2col(l, io, e);
  if (!status) {
    const clt_gemm_shape dw = dw_shape(l, io->batch);
    status = clt_gemm(io->replica, &dw, 1.0f, col, 0, io->dy, 0, 0.0f, io->grads,
                      l->params[0].offset, e);
  }
  if (!status && io->dx) {
    /* The in-order queue runs this after dW has consumed col, so col is reused;
     * a pointwise convolution's column gradient is the input gradient itself. */
    const clt_gemm_shape dcol = dcol_shape(l, io->batch);
    status = clt_gemm(io->replica, &dcol, 1.0f, io->dy, 0, io->params, l->params[0].offset, 0.0f,
                      pointwise ? io->dx : io->scratch, 0, e);
    if (!status && !pointwise) {
      status = conv_cols(l, io, "col2im", io->scratch, io->dx,
                         (size_t)io->batch * l->in.h * l->in.w, (size_t)l->in.c, e);
    }
  }
  return status;
}

#ifdef CLT_REFERENCE
static void conv_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  ref_conv2d_forward(io->x, io->batch, s.h, s.w, s.c, io->params + l->params[0].offset,
                     io->params + l->params[1].offset, h->kernel_h, h->kernel_w, h->filters,
                     h->stride, l->pad_top, l->pad_left, o.h, o.w, io->y);
  if (h->relu) ref_relu_forward(io->y, clt_shape_size(o) * io->batch, io->y);
}

static void conv_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  if (h->relu) ref_relu_backward(io->y, io->dy, clt_shape_size(o) * io->batch, io->dy);
  ref_conv2d_backward(io->x, io->batch, s.h, s.w, s.c, io->params + l->params[0].offset,
                      h->kernel_h, h->kernel_w, h->filters, h->stride, l->pad_top, l->pad_left, o.h,
                      o.w, io->dy, io->dx, io->grads + l->params[0].offset,
                      io->grads + l->params[1].offset);
}
#endif

const clt_layer_ops clt_conv2d_ops = {
    .kind = "Conv2D",
    .ninputs = 1,
    .folds_padding = 1,
    .parse = conv_parse,
    .describe = conv_describe,
    .setup = conv_setup,
    .scratch_floats = conv_scratch,
    .prepare = conv_prepare,
    .forward = conv_forward,
    .backward = conv_backward,
    .ref_forward = CLT_REF(conv_ref_forward),
    .ref_backward = CLT_REF(conv_ref_backward),
};
