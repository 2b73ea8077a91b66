/* ZeroPadding2D as a layer of its own, and the padding syntax every folded one shares.
 *
 * A ZeroPadding2D in front of a layer that folds padding (Conv2D, DepthwiseConv2D,
 * MaxPooling2D) becomes that layer's l->pad; this kind is for padding that cannot
 * fold: its output feeds a layer that takes no padding, or several layers. In
 * descriptions it always names its input ("p=ZeroPadding2D(1)<x"), which is what
 * tells it from a folded one. forward: y = x inside zeros (cl/zeropad.cl); backward
 * crops dy. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* Positions per work-item of the CPU kernels (8 channels each). */
#define PAD_ROWS_PER_ITEM 4

typedef struct pad_hp {
  clt_pad pad;
} pad_hp;

static const pad_hp *hp(const clt_layer *l) { return clt_layer_hp(l, pad_hp); }

/* A padding in [0, CLT_MODEL_MAX_SIDE] at *s, which moves past it (strtol, not
 * sscanf: a number out of int's range must be refused, not wrapped). */
static int pad_value(const char **s, int *v) {
  char *end = NULL;
  if (!isdigit((unsigned char)**s)) return -1;
  errno = 0;
  const long x = strtol(*s, &end, 10);
  if (errno || x > CLT_MODEL_MAX_SIDE) return -1;
  *v = (int)x;
  *s = end;
  return 0;
}

int clt_pad_parse(const char *args, clt_pad *p) {
  int v[4];
  int n = 0;
  const char *s = args;
  while (n < 4 && pad_value(&s, &v[n]) == 0) {
    n++;
    if (*s != ',') break;
    s++;
  }
  if (*s != '\0') return -1; /* not a number, or text after the last */
  if (n == 1) *p = (clt_pad){v[0], v[0], v[0], v[0]};
  else if (n == 4) *p = (clt_pad){v[0], v[1], v[2], v[3]};
  else return -1;
  return 0;
}

void clt_pad_describe(clt_pad p, char *buf, size_t size) {
  if (p.top == p.bottom && p.top == p.left && p.top == p.right) snprintf(buf, size, "%d", p.top);
  else snprintf(buf, size, "%d,%d,%d,%d", p.top, p.bottom, p.left, p.right);
}

int clt_pad_to_onnx(const clt_layer *l, clt_onnx *g, clt_pad p, const char *input,
                    const char *output, clt_err *e) {
  /* Opset 13's Pad: pads as an int64 input, (begins, ends) over N, C, H, W. The
   * constant is -0.0, equal to 0 in every sum and max: ONNX Runtime's PadFusion
   * folds a Pad of +0.0 into a MaxPool or AveragePool after it, whose padding
   * never wins or is not counted, so Keras' zeros would drop out. */
  const int64_t pads[8] = {0, 0, p.top, p.left, 0, 0, p.bottom, p.right}, dims[1] = {8};
  const float zero = -0.0f;
  const char *name = clt_onnx_name(g, l, "pads"), *value = clt_onnx_name(g, l, "pad_value");
  int status = clt_onnx_tensor_i64(g, name, 1, dims, pads, e);
  if (!status) status = clt_onnx_tensor(g, value, 0, NULL, &zero, e);
  const char *const in[3] = {input, name, value};
  const clt_onnx_attr mode = CLT_ONNX_STRING("mode", "constant");
  if (!status) status = clt_onnx_node(g, "Pad", in, 3, output, &mode, 1, e);
  return status;
}

/* "1" or "0,1,0,1" */
static int pad_parse(clt_layer *l, const char *args, clt_err *e) {
  if (clt_pad_parse(args, &clt_layer_hp(l, pad_hp)->pad) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: ZeroPadding2D(%s): expected ZeroPadding2D(p) or "
                    "ZeroPadding2D(top,bottom,left,right), none negative",
                    l->name, args);
  }
  return CLT_OK;
}

static void pad_describe(const clt_layer *l, char *buf, size_t size) {
  char args[64];
  clt_pad_describe(hp(l)->pad, args, sizeof args);
  snprintf(buf, size, "ZeroPadding2D(%s)", args);
}

static int pad_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_pad p = hp(l)->pad;
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0) {
    return clt_fail(e, CLT_ERR_ARG, "%s: negative padding", l->name);
  }
  l->in = ins[0];
  l->out = (clt_shape){ins[0].h + p.top + p.bottom, ins[0].w + p.left + p.right, ins[0].c};
  l->pad_top = p.top;
  l->pad_left = p.left;
  l->nparams = 0;
  return CLT_OK;
}

int clt_pad_prepare(clt_replica *r, clt_err *e) {
  static const char *const names[] = {"pad_forward", "pad_backward"};
  return clt_layer_build_kernels(r, "zeropad.cl", names, 2, e);
}

static int pad_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  return clt_pad_prepare(r, e);
}

int clt_pad_copy(const clt_layer_io *io, const char *kname, cl_mem from, cl_mem to, clt_shape inner,
                 int top, int left, clt_shape outer, clt_shape over, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "zeropad.cl", "", kname, &k, e);
  if (status) return status;
  int per_item = PAD_ROWS_PER_ITEM;
  clt_karg args[] = {CLT_ARG(from),    CLT_ARG(to),      CLT_ARG(io->batch), CLT_ARG(inner.h),
                     CLT_ARG(inner.w), CLT_ARG(inner.c), CLT_ARG(top),       CLT_ARG(left),
                     CLT_ARG(outer.h), CLT_ARG(outer.w), CLT_ARG(per_item)};
  return clt_launch_rows(io->replica, k, kname, args, 11, (size_t)inner.c,
                         (size_t)io->batch * over.h * over.w, PAD_ROWS_PER_ITEM, e);
}

/* pad_forward over the output's positions or pad_backward over the input's. */
static int pad_run(const clt_layer *l, const clt_layer_io *io, const char *kname, cl_mem from,
                   cl_mem to, const clt_shape over, clt_err *e) {
  return clt_pad_copy(io, kname, from, to, l->in, l->pad_top, l->pad_left, l->out, over, e);
}

static int pad_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return pad_run(l, io, "pad_forward", io->x, io->y, l->out, e);
}

static int pad_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  return pad_run(l, io, "pad_backward", io->dy, io->dx, l->in, e);
}

/* Keras ZeroPadding2D: padding (p, (ph, pw) or ((top, bottom), (left, right))),
 * data_format. */
static int pad_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                          clt_err *e) {
  char format[32];
  int p[4];
  activation[0] = '\0';
  (void)size;
  int status = clt_kc_padding4(c, "padding", p, e);
  if (!status) clt_layer_hp(l, pad_hp)->pad = (clt_pad){p[0], p[1], p[2], p[3]};
  if (!status) status = clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e);
  if (!status && strcmp(format, "channels_last") != 0)
    status = clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  return status;
}

static int pad_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  return clt_pad_to_onnx(l, g, hp(l)->pad, inputs[0], output, e);
}

#ifdef CLT_REFERENCE
static void pad_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  for (int b = 0; b < io->batch; b++)
    for (int oy = 0; oy < o.h; oy++)
      for (int ox = 0; ox < o.w; ox++)
        for (int c = 0; c < o.c; c++) {
          const int iy = oy - l->pad_top, ix = ox - l->pad_left;
          const int inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
          io->y[(((size_t)b * o.h + oy) * o.w + ox) * o.c + c] =
              inside ? io->x[(((size_t)b * s.h + iy) * s.w + ix) * s.c + c] : 0.0;
        }
}

static void pad_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  if (!io->dx) return;
  for (int b = 0; b < io->batch; b++)
    for (int iy = 0; iy < s.h; iy++)
      for (int ix = 0; ix < s.w; ix++)
        for (int c = 0; c < s.c; c++) {
          const int oy = iy + l->pad_top, ox = ix + l->pad_left;
          io->dx[(((size_t)b * s.h + iy) * s.w + ix) * s.c + c] =
              io->dy[(((size_t)b * o.h + oy) * o.w + ox) * o.c + c];
        }
}
#endif

static const char *const pad_sources[] = {"zeropad.cl", NULL};

const clt_layer_ops clt_zeropad_ops = {
    .kind = "ZeroPadding2D",
    .ninputs = 1,
    .parse = pad_parse,
    .describe = pad_describe,
    .setup = pad_setup,
    .prepare = pad_prepare,
    .sources = pad_sources,
    .forward = pad_forward,
    .backward = pad_backward,
    .from_keras = pad_from_keras,
    .to_onnx = pad_to_onnx,
    .ref_forward = CLT_REF(pad_ref_forward),
    .ref_backward = CLT_REF(pad_ref_backward),
};
