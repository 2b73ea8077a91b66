/* AveragePooling2D (Keras): window PH x PW, strides SH x SW (Keras' default: the
 * window), 'valid' (floor) or 'same' (ceil(H / SH) rows, padding split as
 * TensorFlow does, the smaller half on top). Each output is the mean over the
 * window's cells inside the image: TensorFlow leaves 'same' padding out of the
 * count. Backward spreads dy / count over those cells. No parameters.
 * Description: AveragePooling2D(2x2,s2,valid), AveragePooling2D(3x2,s2x1,same). */
#include <stdio.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct avgpool_hp {
  int ph, pw, sh, sw;
  int same;
} avgpool_hp;

static const avgpool_hp *hp(const clt_layer *l) { return clt_layer_hp(l, avgpool_hp); }

/* "PHxPW,sSH[xSW],valid|same" */
static int avgpool_parse(clt_layer *l, const char *args, clt_err *e) {
  avgpool_hp *h = clt_layer_hp(l, avgpool_hp);
  char padding[8] = "";
  int used = 0;
  if (sscanf(args, "%dx%d,s%d%n", &h->ph, &h->pw, &h->sh, &used) == 3) {
    int more = 0;
    h->sw = h->sh;
    if (sscanf(args + used, "x%d%n", &h->sw, &more) == 1) used += more;
    int tail = 0;
    if (sscanf(args + used, ",%7[a-z]%n", padding, &tail) == 1 && args[used + tail] == '\0' &&
        (strcmp(padding, "same") == 0 || strcmp(padding, "valid") == 0)) {
      h->same = padding[0] == 's';
      return CLT_OK;
    }
  }
  return clt_fail(e, CLT_ERR_FORMAT,
                  "%s: AveragePooling2D(%s): expected AveragePooling2D(PHxPW,sSH[xSW],valid|same)",
                  l->name, args);
}

static void avgpool_describe(const clt_layer *l, char *buf, size_t size) {
  const avgpool_hp *h = hp(l);
  char stride[32];
  if (h->sh == h->sw) snprintf(stride, sizeof stride, "%d", h->sh);
  else snprintf(stride, sizeof stride, "%dx%d", h->sh, h->sw);
  snprintf(buf, size, "AveragePooling2D(%dx%d,s%s,%s)", h->ph, h->pw, stride,
           h->same ? "same" : "valid");
}

/* Output size and padding before the first window along one axis (TensorFlow's). */
static void out_size(int n, int window, int stride, int same, int *out, int *pad_before) {
  if (same) {
    *out = (n + stride - 1) / stride;
    const int total = (*out - 1) * stride + window - n;
    *pad_before = total > 0 ? total / 2 : 0;
  } else {
    *out = (n - window) / stride + 1;
    *pad_before = 0;
  }
}

static int avgpool_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const avgpool_hp *h = hp(l);
  const clt_shape in = ins[0];
  if (h->ph < 1 || h->pw < 1 || h->sh < 1 || h->sw < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad window %dx%d or strides %dx%d", l->name, h->ph, h->pw,
                    h->sh, h->sw);
  }
  if (in.h < 1 || in.w < 1 || in.c < 1 || (!h->same && (in.h < h->ph || in.w < h->pw))) {
    return clt_fail(e, CLT_ERR_ARG, "%s: input %dx%dx%d is smaller than its %dx%d window", l->name,
                    in.h, in.w, in.c, h->ph, h->pw);
  }
  l->in = in;
  l->out.c = in.c;
  out_size(in.h, h->ph, h->sh, h->same, &l->out.h, &l->pad_top);
  out_size(in.w, h->pw, h->sw, h->same, &l->out.w, &l->pad_left);
  l->nparams = 0;
  return CLT_OK;
}

static int avgpool_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                           clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"avgpool_forward", "avgpool_backward"};
  return clt_layer_build_kernels(r, "avgpool.cl", names, 2, e);
}

/* in -> out over `positions` (output positions forward, input positions backward):
 * a work-item per position on CPUs, per (channel, position) on GPUs. */
static int avgpool_run(const clt_layer *l, const clt_layer_io *io, const char *name, cl_mem in,
                       cl_mem out, size_t positions, clt_err *e) {
  const avgpool_hp *h = hp(l);
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "avgpool.cl", "", name, &k, e);
  if (status) return clt_wrap(e, "%s", l->name);
  clt_karg args[] = {CLT_ARG(in),       CLT_ARG(out),     CLT_ARG(io->batch),  CLT_ARG(l->in.h),
                     CLT_ARG(l->in.w),  CLT_ARG(l->in.c), CLT_ARG(h->ph),      CLT_ARG(h->pw),
                     CLT_ARG(h->sh),    CLT_ARG(h->sw),   CLT_ARG(l->pad_top), CLT_ARG(l->pad_left),
                     CLT_ARG(l->out.h), CLT_ARG(l->out.w)};
  status = clt_launch_positions(io->replica, k, name, args, 14, (size_t)l->in.c, positions, 1, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int avgpool_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return avgpool_run(l, io, "avgpool_forward", io->x, io->y,
                     (size_t)io->batch * l->out.h * l->out.w, e);
}

static int avgpool_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  return avgpool_run(l, io, "avgpool_backward", io->dy, io->dx,
                     (size_t)io->batch * l->in.h * l->in.w, e);
}

static int avgpool_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                              size_t size, clt_err *e) {
  avgpool_hp *h = clt_layer_hp(l, avgpool_hp);
  char padding[16], format[32];
  int pool[2], strides[2];
  if (size) activation[0] = '\0';
  if (clt_kc_ints(c, "pool_size", 2, 2, pool, e)) return CLT_ERR_FORMAT;
  const int has_strides = clt_kc_has(c, "strides"); /* null or absent: the window */
  if (clt_kc_ints(c, "strides", 2, 1, strides, e) ||
      clt_kc_string(c, "padding", "valid", padding, sizeof padding, e) ||
      clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e))
    return CLT_ERR_FORMAT;
  if (!has_strides) strides[0] = pool[0], strides[1] = pool[1];
  if (strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  if (strcmp(padding, "valid") != 0 && strcmp(padding, "same") != 0)
    return clt_kc_fail(c, e, "padding %s is not supported (only valid or same)", padding);
  if (pool[0] < 1 || pool[1] < 1 || strides[0] < 1 || strides[1] < 1) {
    return clt_kc_fail(c, e, "pool_size %dx%d or strides %dx%d are not positive", pool[0], pool[1],
                       strides[0], strides[1]);
  }
  h->ph = pool[0], h->pw = pool[1], h->sh = strides[0], h->sw = strides[1];
  h->same = padding[0] == 's';
  return CLT_OK;
}

/* AveragePool without counting padding; 'same' padding given explicitly, as
 * TensorFlow splits it (the smaller half first). */
static int avgpool_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                           const char *output, clt_err *e) {
  const avgpool_hp *h = hp(l);
  if (clt_onnx_rank(g, inputs[0]) != 4)
    return clt_fail(e, CLT_ERR_ARG, "%s: ONNX export needs an image input", l->name);
  int bottom = 0, right = 0;
  if (h->same) {
    bottom = (l->out.h - 1) * h->sh + h->ph - l->in.h - l->pad_top;
    right = (l->out.w - 1) * h->sw + h->pw - l->in.w - l->pad_left;
    if (bottom < 0) bottom = 0;
    if (right < 0) right = 0;
  }
  const clt_onnx_attr attrs[] = {
      CLT_ONNX_INTS("kernel_shape", 2, h->ph, h->pw),
      CLT_ONNX_INTS("strides", 2, h->sh, h->sw),
      CLT_ONNX_INTS("pads", 4, l->pad_top, l->pad_left, bottom, right),
      CLT_ONNX_INT("count_include_pad", 0),
  };
  return clt_onnx_node(g, "AveragePool", inputs, 1, output, attrs, 4, e);
}

#ifdef CLT_REFERENCE
static void avgpool_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const avgpool_hp *h = hp(l);
  ref_avgpool_forward(io->x, io->batch, l->in.h, l->in.w, l->in.c, h->ph, h->pw, h->sh, h->sw,
                      l->pad_top, l->pad_left, l->out.h, l->out.w, io->y);
}

static void avgpool_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const avgpool_hp *h = hp(l);
  if (!io->dx) return;
  ref_avgpool_backward(io->dy, io->batch, l->in.h, l->in.w, l->in.c, h->ph, h->pw, h->sh, h->sw,
                       l->pad_top, l->pad_left, l->out.h, l->out.w, io->dx);
}
#endif

static const char *const avgpool_sources[] = {"avgpool.cl", NULL};

const clt_layer_ops clt_avgpool_ops = {
    .kind = "AveragePooling2D",
    .ninputs = 1,
    .parse = avgpool_parse,
    .describe = avgpool_describe,
    .setup = avgpool_setup,
    .prepare = avgpool_prepare,
    .sources = avgpool_sources,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .from_keras = avgpool_from_keras,
    .to_onnx = avgpool_to_onnx,
    .ref_forward = CLT_REF(avgpool_ref_forward),
    .ref_backward = CLT_REF(avgpool_ref_backward),
};
