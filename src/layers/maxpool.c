/* MaxPooling2D, window PH x PW, strides SH x SW, 'valid' (floor) or 'same'
 * (TensorFlow's: out = ceil(in / s), padding that never wins), as Keras.
 * backward routes each window's gradient to its first maximum (TensorFlow's rule).
 * A ZeroPadding2D folded in front (l->pad, ResNet's pool1_pad, MobileNet's
 * asymmetric (0, 1)) is different from 'same': its zeros take part in the max, and
 * a window whose first maximum is padding drops its gradient. Square windows and
 * strides without any padding run the plain kernels; everything else the general
 * ones (maxpool_pad_*), leaving the plain paths as they are. */
#include <stdio.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#include "ref_resnet.h"
#endif

typedef struct pool_hp {
  int pool, stride;     /* window rows and row stride */
  int pool_w, stride_w; /* window columns and column stride */
  int same;             /* 'same' padding, else 'valid' */
} pool_hp;

static const pool_hp *hp(const clt_layer *l) { return clt_layer_hp(l, pool_hp); }

/* "2,s2", "3,s2,same", "2x3,s1x2" */
static int pool_parse(clt_layer *l, const char *args, clt_err *e) {
  pool_hp *h = clt_layer_hp(l, pool_hp);
  int used = 0, n = 0;
  memset(h, 0, sizeof *h);
  int ok = sscanf(args, "%d%n", &h->pool, &used) == 1;
  h->pool_w = h->pool;
  if (ok && sscanf(args + used, "x%d%n", &h->pool_w, &n) == 1) used += n;
  ok = ok && sscanf(args + used, ",s%d%n", &h->stride, &n) == 1;
  if (ok) used += n;
  h->stride_w = h->stride;
  if (ok && sscanf(args + used, "x%d%n", &h->stride_w, &n) == 1) used += n;
  if (ok && strcmp(args + used, ",same") == 0) {
    h->same = 1;
    used += 5;
  }
  if (!ok || args[used] != '\0') {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: MaxPooling2D(%s): expected MaxPooling2D(POOL[xPOOL_W],sSTRIDE[xSTRIDE_W]"
                    "[,same])",
                    l->name, args);
  }
  return CLT_OK;
}

static void pool_describe(const clt_layer *l, char *buf, size_t size) {
  const pool_hp *h = hp(l);
  char pool[32], stride[32];
  if (h->pool_w == h->pool) snprintf(pool, sizeof pool, "%d", h->pool);
  else snprintf(pool, sizeof pool, "%dx%d", h->pool, h->pool_w);
  if (h->stride_w == h->stride) snprintf(stride, sizeof stride, "%d", h->stride);
  else snprintf(stride, sizeof stride, "%dx%d", h->stride, h->stride_w);
  snprintf(buf, size, "MaxPooling2D(%s,s%s%s)", pool, stride, h->same ? ",same" : "");
}

/* TensorFlow's 'same' along one axis: out = ceil(in / s), the padding before. */
static void same_axis(int in, int k, int s, int *out, int *before) {
  *out = (in + s - 1) / s;
  const int total = (*out - 1) * s + k - in;
  *before = total > 0 ? total / 2 : 0;
}

static int pool_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const pool_hp *hpp = hp(l);
  const int ph = hpp->pool, pw = hpp->pool_w, sh = hpp->stride, sw = hpp->stride_w;
  const clt_pad p = l->pad;
  if (ph < 1 || pw < 1 || sh < 1 || sw < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad pool %dx%d or stride %dx%d", l->name, ph, pw, sh, sw);
  }
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0)
    return clt_fail(e, CLT_ERR_ARG, "%s: bad padding %d,%d,%d,%d", l->name, p.top, p.bottom, p.left,
                    p.right);
  if (hpp->same && clt_pad_any(p)) {
    return clt_fail(e, CLT_ERR_ARG, "%s: 'same' padding and a folded ZeroPadding2D %s", l->name,
                    l->pad_name);
  }
  l->in = in;
  l->nparams = 0;
  if (hpp->same) {
    same_axis(in.h, ph, sh, &l->out.h, &l->pad_top);
    same_axis(in.w, pw, sw, &l->out.w, &l->pad_left);
    l->out.c = in.c;
    return CLT_OK;
  }
  const int h = in.h + p.top + p.bottom, w = in.w + p.left + p.right;
  if (h < ph || w < pw) {
    return clt_fail(e, CLT_ERR_ARG, "%s: %sinput %dx%d is smaller than its %dx%d window", l->name,
                    clt_pad_any(p) ? "padded " : "", h, w, ph, pw);
  }
  l->out = (clt_shape){(h - ph) / sh + 1, (w - pw) / sw + 1, in.c};
  l->pad_top = p.top;
  l->pad_left = p.left;
  return CLT_OK;
}

/* Whether the general kernels run: a non-square window or stride, or any padding
 * (a folded one, or 'same' reaching past an edge). */
static int pool_general(const clt_layer *l) {
  const pool_hp *h = hp(l);
  return h->pool_w != h->pool || h->stride_w != h->stride || l->pad_top || l->pad_left ||
         (l->out.h - 1) * h->stride + h->pool > l->in.h ||
         (l->out.w - 1) * h->stride_w + h->pool_w > l->in.w;
}

/* A pooling its producer can run inside its own passes (fusion.pools). */
static int pool_max_2x2(const clt_layer *l) {
  const pool_hp *h = hp(l);
  return h->pool == 2 && h->pool_w == 2 && h->stride == 2 && h->stride_w == 2 && !h->same &&
         !clt_pad_any(l->pad);
}

static int pool_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                        clt_err *e) {
  (void)max_batch;
  (void)f;
  static const char *const plain[] = {"maxpool_forward", "maxpool_backward",
                                      "maxpool_backward_tiled"};
  static const char *const general[] = {"maxpool_pad_forward", "maxpool_pad_backward"};
  if (pool_general(l)) return clt_layer_build_kernels(r, "maxpool.cl", general, 2, e);
  return clt_layer_build_kernels(r, "maxpool.cl", plain, 3, e);
}

/* The pooling kernels' launch, over positions of `channels` channels. */
static int pool_launch(const clt_layer_io *io, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, int channels, size_t positions, clt_err *e) {
  return clt_launch_positions(io->replica, k, kname, args, nargs, (size_t)channels, positions, 1,
                              e);
}

/* The general kernels (maxpool_pad_*): forward (x, y, ...) over the output's positions,
 * backward (x, dy, dx, ...) over the input's. Padding cells are zeros that take part
 * (a folded ZeroPadding2D) or never win ('same'). */
static int pool_general_run(const clt_layer *l, const clt_layer_io *io, int backward, clt_err *e) {
  const char *kname = backward ? "maxpool_pad_backward" : "maxpool_pad_forward";
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "maxpool.cl", "", kname, &k, e);
  if (status) return status;
  const pool_hp *h = hp(l);
  int zero = !h->same;
  clt_karg args[] = {CLT_ARG(io->x),       CLT_ARG(io->dy),      CLT_ARG(io->dx),
                     CLT_ARG(io->batch),   CLT_ARG(l->in.h),     CLT_ARG(l->in.w),
                     CLT_ARG(l->in.c),     CLT_ARG(h->pool),     CLT_ARG(h->pool_w),
                     CLT_ARG(h->stride),   CLT_ARG(h->stride_w), CLT_ARG(l->pad_top),
                     CLT_ARG(l->pad_left), CLT_ARG(zero),        CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  if (!backward) {
    /* forward's arguments: (x, y, ...), no dx */
    args[1] = CLT_ARG(io->y);
    memmove(&args[2], &args[3], 13 * sizeof args[0]);
  }
  const clt_shape over = backward ? l->in : l->out;
  /* The CPU variant's backward takes an input row per work-item (see maxpool.cl). */
  return clt_launch_positions(io->replica, k, kname, args, backward ? 16 : 15, (size_t)l->in.c,
                              (size_t)io->batch * over.h * over.w, backward ? (size_t)l->in.w : 1,
                              e);
}

static int pool_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (pool_general(l)) return pool_general_run(l, io, 0, e);
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "maxpool.cl", "", "maxpool_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),       CLT_ARG(io->y),         CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),     CLT_ARG(l->in.w),       CLT_ARG(l->in.c),
                     CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride), CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  return pool_launch(io, k, "maxpool_forward", args, 10, l->in.c,
                     (size_t)io->batch * l->out.h * l->out.w, e);
}

/* Tiled windows pass back each window's maximum's gradient alone: the ReLU mask
 * of a fused producer (fusion.masks_input_relu) is then "the maximum is > 0". */
static unsigned pool_fusions(const clt_layer *l) {
  return (!pool_general(l) && hp(l)->stride == hp(l)->pool ? CLT_FUSE_MASK_INPUT_RELU : 0u) |
         (pool_max_2x2(l) ? CLT_FUSE_MAX_POOL_2X2 : 0u);
}

static const char *const pool_sources[] = {"maxpool.cl", NULL};

static int pool_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  if (pool_general(l)) return pool_general_run(l, io, 1, e);
  cl_kernel k;
  int status;
  if (hp(l)->stride == hp(l)->pool) {
    /* Non-overlapping windows: one work-item per window writes all its inputs;
     * rows and columns past the last window get zero first. */
    if (l->out.h * hp(l)->pool != l->in.h || l->out.w * hp(l)->pool != l->in.w) {
      /* A fill kernel, not clEnqueueFillBuffer: Oclgrind counts only kernels'
       * and transfers' writes as initialising. */
      status = clt_replica_fill(io->replica, io->dx, 0, (size_t)io->batch * clt_shape_size(l->in),
                                0.0f, "a pooling gradient", e);
      if (status) return status;
    }
    status = clt_replica_kernel(io->replica, "maxpool.cl", "", "maxpool_backward_tiled", &k, e);
    if (status) return status;
    clt_karg args[] = {CLT_ARG(io->x),
                       CLT_ARG(io->dy),
                       CLT_ARG(io->dx),
                       CLT_ARG(io->batch),
                       CLT_ARG(l->in.h),
                       CLT_ARG(l->in.w),
                       CLT_ARG(l->in.c),
                       CLT_ARG(hp(l)->pool),
                       CLT_ARG(l->out.h),
                       CLT_ARG(l->out.w),
                       CLT_ARG(io->fusion.masks_input_relu)};
    return pool_launch(io, k, "maxpool_backward_tiled", args, 11, l->in.c,
                       (size_t)io->batch * l->out.h * l->out.w, e);
  }
  status = clt_replica_kernel(io->replica, "maxpool.cl", "", "maxpool_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->dy),      CLT_ARG(io->dx),
                     CLT_ARG(io->batch), CLT_ARG(l->in.h),     CLT_ARG(l->in.w),
                     CLT_ARG(l->in.c),   CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride),
                     CLT_ARG(l->out.h),  CLT_ARG(l->out.w)};
  /* A work-item per (channel, position) in both variants (see maxpool.cl). */
  return clt_launch_elements(io->replica, k, "maxpool_backward", args, 11, (size_t)l->in.c,
                             (size_t)io->batch * l->in.h * l->in.w, e);
}

#ifdef CLT_REFERENCE
static void pool_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  const pool_hp *h = hp(l);
  if (pool_general(l)) {
    ref_maxpool2d_forward(io->x, io->batch, s.h, s.w, s.c, h->pool, h->pool_w, h->stride,
                          h->stride_w, l->pad_top, l->pad_left, !h->same, o.h, o.w, io->y);
  } else {
    ref_maxpool_forward(io->x, io->batch, s.h, s.w, s.c, h->pool, h->stride, o.h, o.w, io->y);
  }
}

static void pool_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  const pool_hp *h = hp(l);
  if (!io->dx) return;
  if (pool_general(l)) {
    ref_maxpool2d_backward(io->x, io->batch, s.h, s.w, s.c, h->pool, h->pool_w, h->stride,
                           h->stride_w, l->pad_top, l->pad_left, !h->same, o.h, o.w, io->dy,
                           io->dx);
  } else {
    ref_maxpool_backward(io->x, io->batch, s.h, s.w, s.c, h->pool, h->stride, o.h, o.w, io->dy,
                         io->dx);
  }
}
#endif

/* Keras MaxPooling2D: pool_size, strides (none: the pool size), padding, data_format. */
static int pool_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                           clt_err *e) {
  pool_hp *h = clt_layer_hp(l, pool_hp);
  int pool[2] = {2, 2}, stride[2];
  char padding[16], format[32];
  (void)size;
  activation[0] = '\0';
  memset(h, 0, sizeof *h);
  int status = clt_kc_ints(c, "pool_size", 2, 2, pool, e);
  if (!status) status = clt_kc_ints(c, "strides", 2, 0, stride, e);
  if (!status) status = clt_kc_string(c, "padding", "valid", padding, sizeof padding, e);
  if (!status) status = clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e);
  if (status) return status;
  if (stride[0] == 0 && stride[1] == 0) stride[0] = pool[0], stride[1] = pool[1];
  if (pool[0] < 1 || pool[1] < 1 || stride[0] < 1 || stride[1] < 1) {
    return clt_kc_fail(c, e, "pool_size (%d, %d) or strides (%d, %d) not positive", pool[0],
                       pool[1], stride[0], stride[1]);
  }
  if (strcmp(padding, "same") != 0 && strcmp(padding, "valid") != 0)
    return clt_kc_fail(c, e, "padding '%s' is not supported (only same, valid)", padding);
  if (strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  *h = (pool_hp){.pool = pool[0],
                 .pool_w = pool[1],
                 .stride = stride[0],
                 .stride_w = stride[1],
                 .same = padding[0] == 's'};
  return CLT_OK;
}

/* ONNX's end padding for 'same' (rows a window reaches past the input). */
static int end_pad(int in, int out, int k, int s, int begin) {
  const int end = (out - 1) * s + k - in - begin;
  return end > 0 ? end : 0;
}

/* ONNX MaxPool: 'same' as its pads (never winning, as ONNX pads); a folded zero
 * padding, whose zeros take part, as an explicit Pad node first. */
static int pool_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                        const char *output, clt_err *e) {
  const pool_hp *h = hp(l);
  const char *in = inputs[0];
  int status = CLT_OK;
  if (clt_pad_any(l->pad)) {
    in = clt_onnx_name(g, l, "padded");
    status = clt_pad_to_onnx(l, g, l->pad, inputs[0], in, e);
  }
  int pads[4] = {0, 0, 0, 0};
  if (h->same) {
    pads[0] = l->pad_top;
    pads[1] = l->pad_left;
    pads[2] = end_pad(l->in.h, l->out.h, h->pool, h->stride, l->pad_top);
    pads[3] = end_pad(l->in.w, l->out.w, h->pool_w, h->stride_w, l->pad_left);
  }
  const clt_onnx_attr attrs[3] = {CLT_ONNX_INTS("kernel_shape", 2, h->pool, h->pool_w),
                                  CLT_ONNX_INTS("strides", 2, h->stride, h->stride_w),
                                  CLT_ONNX_INTS("pads", 4, pads[0], pads[1], pads[2], pads[3])};
  if (!status) status = clt_onnx_node(g, "MaxPool", &in, 1, output, attrs, 3, e);
  return status;
}

const clt_layer_ops clt_maxpool_ops = {
    .kind = "MaxPooling2D",
    .ninputs = 1,
    .folds_padding = 1,
    .parse = pool_parse,
    .describe = pool_describe,
    .setup = pool_setup,
    .prepare = pool_prepare,
    .forward = pool_forward,
    .backward = pool_backward,
    .fusions = pool_fusions,
    .sources = pool_sources,
    .from_keras = pool_from_keras,
    .to_onnx = pool_to_onnx,
    .ref_forward = CLT_REF(pool_ref_forward),
    .ref_backward = CLT_REF(pool_ref_backward),
};
