/* Cropping2D: y is x without `top` rows above, `bottom` below, `left` columns on the
 * left and `right` on the right. forward copies the kept window into y (no alias:
 * y is a buffer of its own); backward scatters dy into dx inside zeros. The
 * kernels are ZeroPadding2D's (cl/zeropad.cl), their roles swapped: cropping's
 * forward is the padding's backward and its backward the padding's forward.
 * Description: Cropping2D(p) (every side p) or Cropping2D(top,bottom,left,right). */
#include <stdio.h>
#include <string.h>

#include "layer.h"

/* Positions per work-item of the CPU kernels (8 channels each). */
typedef struct crop_hp {
  clt_pad crop;
} crop_hp;

static const crop_hp *hp(const clt_layer *l) { return clt_layer_hp(l, crop_hp); }

/* "1" or "0,1,2,3" */
static int crop_parse(clt_layer *l, const char *args, clt_err *e) {
  if (clt_pad_parse(args, &clt_layer_hp(l, crop_hp)->crop) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Cropping2D(%s): expected Cropping2D(p) or "
                    "Cropping2D(top,bottom,left,right), none negative",
                    l->name, args);
  }
  return CLT_OK;
}

static void crop_describe(const clt_layer *l, char *buf, size_t size) {
  char args[64];
  clt_pad_describe(hp(l)->crop, args, sizeof args);
  snprintf(buf, size, "Cropping2D(%s)", args);
}

static int crop_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_pad p = hp(l)->crop;
  const clt_shape in = ins[0];
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0) {
    return clt_fail(e, CLT_ERR_ARG, "%s: negative cropping", l->name);
  }
  if ((long)p.top + p.bottom >= in.h || (long)p.left + p.right >= in.w) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: cropping (%d,%d) rows and (%d,%d) columns leaves nothing of a %dx%d input",
                    l->name, p.top, p.bottom, p.left, p.right, in.h, in.w);
  }
  l->in = in;
  l->out = (clt_shape){in.h - p.top - p.bottom, in.w - p.left - p.right, in.c};
  l->nparams = 0;
  return CLT_OK;
}

static int crop_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                        clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  return clt_pad_prepare(r, e);
}

/* zeropad.cl's kernels with the roles swapped: the output sits inside the input. */
static int crop_run(const clt_layer *l, const clt_layer_io *io, const char *kname, cl_mem from,
                    cl_mem to, const clt_shape over, clt_err *e) {
  return clt_pad_copy(io, kname, from, to, l->out, hp(l)->crop.top, hp(l)->crop.left, l->in, over,
                      e);
}

/* y[b, oy, ox] = x[b, oy + top, ox + left]: the padding's backward. */
static int crop_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return crop_run(l, io, "pad_backward", io->x, io->y, l->out, e);
}

/* dx = dy inside zeros: the padding's forward. */
static int crop_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  return crop_run(l, io, "pad_forward", io->dy, io->dx, l->in, e);
}

/* Keras Cropping2D: cropping (c, (ch, cw) or ((top, bottom), (left, right))),
 * data_format. */
static int crop_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                           clt_err *e) {
  char format[32];
  int p[4];
  activation[0] = '\0';
  (void)size;
  if (!clt_kc_has(c, "cropping")) return clt_kc_fail(c, e, "cropping: missing");
  int status = clt_kc_padding4(c, "cropping", p, e);
  if (!status && (p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0))
    status = clt_kc_fail(c, e, "cropping must not be negative");
  if (!status) clt_layer_hp(l, crop_hp)->crop = (clt_pad){p[0], p[1], p[2], p[3]};
  if (!status) status = clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e);
  if (!status && strcmp(format, "channels_last") != 0)
    status = clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  return status;
}

/* Opset 13's Slice over H and W of the NCHW tensor: starts, ends and axes as int64
 * inputs. */
static int crop_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                        const char *output, clt_err *e) {
  const clt_pad p = hp(l)->crop;
  const int64_t starts[2] = {p.top, p.left}, ends[2] = {l->in.h - p.bottom, l->in.w - p.right};
  const int64_t axes[2] = {2, 3}, dims[1] = {2};
  const char *const in[4] = {inputs[0], clt_onnx_name(g, l, "starts"), clt_onnx_name(g, l, "ends"),
                             clt_onnx_name(g, l, "axes")};
  int status = clt_onnx_tensor_i64(g, in[1], 1, dims, starts, e);
  if (!status) status = clt_onnx_tensor_i64(g, in[2], 1, dims, ends, e);
  if (!status) status = clt_onnx_tensor_i64(g, in[3], 1, dims, axes, e);
  if (!status) status = clt_onnx_node(g, "Slice", in, 4, output, NULL, 0, e);
  return status;
}

#ifdef CLT_REFERENCE
static void crop_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  const clt_pad p = hp(l)->crop;
  for (int b = 0; b < io->batch; b++)
    for (int oy = 0; oy < o.h; oy++)
      for (int ox = 0; ox < o.w; ox++)
        for (int c = 0; c < o.c; c++)
          io->y[(((size_t)b * o.h + oy) * o.w + ox) * o.c + c] =
              io->x[(((size_t)b * s.h + oy + p.top) * s.w + ox + p.left) * s.c + c];
}

static void crop_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_shape s = l->in, o = l->out;
  const clt_pad p = hp(l)->crop;
  if (!io->dx) return;
  for (int b = 0; b < io->batch; b++)
    for (int iy = 0; iy < s.h; iy++)
      for (int ix = 0; ix < s.w; ix++)
        for (int c = 0; c < s.c; c++) {
          const int oy = iy - p.top, ox = ix - p.left;
          const int inside = oy >= 0 && oy < o.h && ox >= 0 && ox < o.w;
          io->dx[(((size_t)b * s.h + iy) * s.w + ix) * s.c + c] =
              inside ? io->dy[(((size_t)b * o.h + oy) * o.w + ox) * o.c + c] : 0.0;
        }
}
#endif

static const char *const crop_sources[] = {"zeropad.cl", NULL};

const clt_layer_ops clt_cropping_ops = {
    .kind = "Cropping2D",
    .ninputs = 1,
    .parse = crop_parse,
    .describe = crop_describe,
    .setup = crop_setup,
    .prepare = crop_prepare,
    .sources = crop_sources,
    .forward = crop_forward,
    .backward = crop_backward,
    .from_keras = crop_from_keras,
    .to_onnx = crop_to_onnx,
    .ref_forward = CLT_REF(crop_ref_forward),
    .ref_backward = CLT_REF(crop_ref_backward),
};
