/* MaxPooling2D, window pool x pool, stride pool_stride, 'valid' (floor), as Keras.
 * backward routes each window's gradient to its first maximum (TensorFlow's rule).
 * With l->pad > 0 a ZeroPadding2D(pad) is folded in front (ResNet's pool1_pad):
 * padded positions hold 0 and take part in the max, a window whose first maximum is
 * padding drops its gradient, and separate kernels run it (maxpool_pad_*), leaving
 * the unpadded paths as they are. */
#include <stdio.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#include "ref_resnet.h"
#endif

typedef struct pool_hp {
  int pool, stride; /* a pool x pool window */
} pool_hp;

static const pool_hp *hp(const clt_layer *l) { return clt_layer_hp(l, pool_hp); }

/* "2,s2" */
static int pool_parse(clt_layer *l, const char *args, clt_err *e) {
  pool_hp *h = clt_layer_hp(l, pool_hp);
  int used = 0;
  if (sscanf(args, "%d,s%d%n", &h->pool, &h->stride, &used) != 2 || args[used] != '\0') {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: MaxPooling2D(%s): expected MaxPooling2D(pool,sSTRIDE)",
                    l->name, args);
  }
  return CLT_OK;
}

static void pool_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "MaxPooling2D(%d,s%d)", hp(l)->pool, hp(l)->stride);
}

static int pool_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const int pool = hp(l)->pool, stride = hp(l)->stride;
  if (pool < 1 || stride < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad pool %d or stride %d", l->name, pool, stride);
  }
  if (l->pad < 0) return clt_fail(e, CLT_ERR_ARG, "%s: bad padding %d", l->name, l->pad);
  const int h = in.h + 2 * l->pad, w = in.w + 2 * l->pad;
  if (h < pool || w < pool) {
    return clt_fail(e, CLT_ERR_ARG, "%s: %sinput %dx%d is smaller than its %dx%d window", l->name,
                    l->pad ? "padded " : "", h, w, pool, pool);
  }
  l->in = in;
  l->out = (clt_shape){(h - pool) / stride + 1, (w - pool) / stride + 1, in.c};
  l->pad_top = l->pad_left = l->pad;
  l->nparams = 0;
  return CLT_OK;
}

static int pool_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)max_batch;
  static const char *const names[] = {"maxpool_forward", "maxpool_backward",
                                      "maxpool_backward_tiled", "maxpool_pad_forward",
                                      "maxpool_pad_backward"};
  return clt_layer_build_kernels(r, "pool.cl", names, l->pad ? 5 : 3, e); /* padded: 2 more */
}

/* The pooling kernels' launch: a work-item per position on the CPU flavor (it
 * loops over the channels), per (channel, position) on GPUs (coalesced). */
static int pool_launch(const clt_layer_io *io, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, int channels, size_t positions, clt_err *e) {
  if (io->replica->flavor == CLT_KERNELS_GPU)
    return clt_launch_rows(io->replica, k, kname, args, nargs, (size_t)channels, positions, 1, e);
  return clt_launch1d(io->replica, k, kname, args, nargs, positions, e);
}

/* Padded forward: one work-item per output position. */
static int pool_pad_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "pool.cl", "", "maxpool_pad_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),       CLT_ARG(io->y),         CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),     CLT_ARG(l->in.w),       CLT_ARG(l->in.c),
                     CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride), CLT_ARG(l->pad),
                     CLT_ARG(l->out.h),    CLT_ARG(l->out.w)};
  return pool_launch(io, k, "maxpool_pad_forward", args, 11, l->in.c,
                     (size_t)io->batch * l->out.h * l->out.w, e);
}

/* Padded backward: one work-item per input position gathers from its windows, so
 * overlapping windows add without atomics and every dx entry is written. */
static int pool_pad_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "pool.cl", "", "maxpool_pad_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->dy),      CLT_ARG(io->dx),
                     CLT_ARG(io->batch), CLT_ARG(l->in.h),     CLT_ARG(l->in.w),
                     CLT_ARG(l->in.c),   CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride),
                     CLT_ARG(l->pad),    CLT_ARG(l->out.h),    CLT_ARG(l->out.w)};
  return pool_launch(io, k, "maxpool_pad_backward", args, 12, l->in.c,
                     (size_t)io->batch * l->in.h * l->in.w, e);
}

static int pool_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (l->pad) return pool_pad_forward(l, io, e);
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "pool.cl", "", "maxpool_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),       CLT_ARG(io->y),         CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),     CLT_ARG(l->in.w),       CLT_ARG(l->in.c),
                     CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride), CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  return pool_launch(io, k, "maxpool_forward", args, 10, l->in.c,
                     (size_t)io->batch * l->out.h * l->out.w, e);
}

static int pool_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  if (l->pad) return pool_pad_backward(l, io, e);
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
    status = clt_replica_kernel(io->replica, "pool.cl", "", "maxpool_backward_tiled", &k, e);
    if (status) return status;
    clt_karg args[] = {CLT_ARG(io->x),    CLT_ARG(io->dy),  CLT_ARG(io->dx),  CLT_ARG(io->batch),
                       CLT_ARG(l->in.h),  CLT_ARG(l->in.w), CLT_ARG(l->in.c), CLT_ARG(hp(l)->pool),
                       CLT_ARG(l->out.h), CLT_ARG(l->out.w)};
    return pool_launch(io, k, "maxpool_backward_tiled", args, 10, l->in.c,
                       (size_t)io->batch * l->out.h * l->out.w, e);
  }
  status = clt_replica_kernel(io->replica, "pool.cl", "", "maxpool_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->dy),      CLT_ARG(io->dx),
                     CLT_ARG(io->batch), CLT_ARG(l->in.h),     CLT_ARG(l->in.w),
                     CLT_ARG(l->in.c),   CLT_ARG(hp(l)->pool), CLT_ARG(hp(l)->stride),
                     CLT_ARG(l->out.h),  CLT_ARG(l->out.w)};
  /* Range (C, B*H*W) on both flavors (see pool.cl); on GPUs in coalesced groups. */
  if (io->replica->flavor == CLT_KERNELS_GPU) {
    return clt_launch_rows(io->replica, k, "maxpool_backward", args, 11, (size_t)l->in.c,
                           (size_t)io->batch * l->in.h * l->in.w, 1, e);
  }
  return clt_launch2d(io->replica, k, "maxpool_backward", args, 11, (size_t)l->in.c,
                      (size_t)io->batch * l->in.h * l->in.w, e);
}

#ifdef CLT_REFERENCE
static void pool_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  if (l->pad) {
    ref_maxpool_pad_forward(io->x, io->batch, s.h, s.w, s.c, hp(l)->pool, hp(l)->stride, l->pad,
                            o.h, o.w, io->y);
  } else {
    ref_maxpool_forward(io->x, io->batch, s.h, s.w, s.c, hp(l)->pool, hp(l)->stride, o.h, o.w,
                        io->y);
  }
}

static void pool_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  if (!io->dx) return;
  if (l->pad) {
    ref_maxpool_pad_backward(io->x, io->batch, s.h, s.w, s.c, hp(l)->pool, hp(l)->stride, l->pad,
                             o.h, o.w, io->dy, io->dx);
  } else {
    ref_maxpool_backward(io->x, io->batch, s.h, s.w, s.c, hp(l)->pool, hp(l)->stride, o.h, o.w,
                         io->dy, io->dx);
  }
}
#endif

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
    .ref_forward = CLT_REF(pool_ref_forward),
    .ref_backward = CLT_REF(pool_ref_backward),
};
