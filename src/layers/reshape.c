/* Reshape (Keras). Activations are NHWC in memory, Keras' (row-major) order, so a
 * reshape moves no data: its output is its input buffer seen as the target shape,
 * (H, W, C) or (C) (1x1xC here, as Flatten's). Description: Reshape(h,w,c). */
#include <stdio.h>
#include <string.h>

#include "layer.h"

typedef struct reshape_hp {
  int h, w, c; /* the target shape */
} reshape_hp;

static const reshape_hp *hp(const clt_layer *l) { return clt_layer_hp(l, reshape_hp); }

/* Whether the target's entries are each >= 1, or -1 (what the input's size leaves)
 * for at most one. */
static int target_ok(const reshape_hp *h) {
  const int d[3] = {h->h, h->w, h->c};
  int open = 0;
  for (int i = 0; i < 3; i++) {
    if (d[i] == -1) open++;
    else if (d[i] < 1 || d[i] > (i < 2 ? CLT_MODEL_MAX_SIDE : 1 << 30)) return 0;
  }
  return open <= 1;
}

/* "h,w,c" */
static int reshape_parse(clt_layer *l, const char *args, clt_err *e) {
  reshape_hp *h = clt_layer_hp(l, reshape_hp);
  char tail;
  if (sscanf(args, "%d,%d,%d%c", &h->h, &h->w, &h->c, &tail) != 3 || !target_ok(h)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Reshape(%s): expected Reshape(h,w,c), each >= 1 or one of them -1",
                    l->name, args);
  }
  return CLT_OK;
}

static void reshape_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "Reshape(%d,%d,%d)", hp(l)->h, hp(l)->w, hp(l)->c);
}

static int reshape_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const reshape_hp *h = hp(l);
  const size_t n = clt_shape_size(in);
  const size_t known = (size_t)(h->h < 0 ? 1 : h->h) * (h->w < 0 ? 1 : h->w) *
                       (h->c < 0 ? 1 : h->c);
  const size_t open = n % known == 0 ? n / known : 0;
  clt_shape out = {h->h < 0 ? (int)open : h->h, h->w < 0 ? (int)open : h->w,
                   h->c < 0 ? (int)open : h->c};
  if (open == 0 || open > (1u << 30) || clt_shape_size(out) != n) {
    return clt_fail(e, CLT_ERR_ARG, "%s: cannot reshape %dx%dx%d (%zu values) to %dx%dx%d", l->name,
                    in.h, in.w, in.c, n, h->h, h->w, h->c);
  }
  l->in = in;
  l->out = out;
  l->nparams = 0;
  return CLT_OK;
}

/* target_shape: (C) or (H, W, C), one entry may be -1 (what the input's size leaves);
 * the input's size is checked by setup. Other ranks are refused. */
static int reshape_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                              size_t size, clt_err *e) {
  reshape_hp *h = clt_layer_hp(l, reshape_hp);
  int t[3];
  if (size) activation[0] = '\0';
  if (!clt_kc_has(c, "target_shape")) return clt_kc_fail(c, e, "target_shape: missing");
  if (clt_kc_ints(c, "target_shape", 1, 0, t, e) == CLT_OK) {
    h->h = h->w = 1, h->c = t[0];
  } else if (clt_kc_ints(c, "target_shape", 3, 0, t, e) == CLT_OK) {
    h->h = t[0], h->w = t[1], h->c = t[2];
  } else {
    return clt_kc_fail(c, e,
                       "target_shape must be (C) or (H, W, C) (other ranks are not supported)");
  }
  if (!target_ok(h)) {
    return clt_kc_fail(c, e, "target_shape (%d, %d, %d): expected entries >= 1, one may be -1",
                       h->h, h->w, h->c);
  }
  return CLT_OK;
}

/* NCHW back to NHWC, Keras' reshape there, then to NCHW for a rank-4 target; a (C)
 * target of a rank-2 tensor is the identity. */
static int reshape_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                           const char *output, clt_err *e) {
  const int in_rank = clt_onnx_rank(g, inputs[0]);
  const int64_t one[1] = {4};
  const int64_t shape[4] = {0, hp(l)->h, hp(l)->w, hp(l)->c};
  const clt_onnx_attr to_nhwc = CLT_ONNX_INTS("perm", 4, 0, 2, 3, 1);
  const clt_onnx_attr to_nchw = CLT_ONNX_INTS("perm", 4, 0, 3, 1, 2);
  const char *src = inputs[0];
  int status = CLT_OK;
  if (in_rank == 4) {
    src = clt_onnx_name(g, l, "nhwc");
    status = clt_onnx_node(g, "Transpose", inputs, 1, src, &to_nhwc, 1, e);
  }
  const char *rs[2] = {src, clt_onnx_name(g, l, "shape")};
  const char *reshaped = clt_onnx_name(g, l, "reshaped");
  if (!status) status = clt_onnx_tensor_i64(g, rs[1], 1, one, shape, e);
  if (!status) status = clt_onnx_node(g, "Reshape", rs, 2, reshaped, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Transpose", &reshaped, 1, output, &to_nchw, 1, e);
  if (!status) clt_onnx_set_rank(g, output, 4);
  return status;
}

#ifdef CLT_REFERENCE
/* The reference keeps every output in its own array: a copy. */
static void reshape_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  memcpy(io->y, io->x, clt_shape_size(l->out) * io->batch * sizeof *io->y);
}

static void reshape_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) memcpy(io->dx, io->dy, clt_shape_size(l->out) * io->batch * sizeof *io->dx);
}
#endif

const clt_layer_ops clt_reshape_ops = {
    .kind = "Reshape",
    .ninputs = 1,
    .aliases_input = 1,
    .parse = reshape_parse,
    .describe = reshape_describe,
    .setup = reshape_setup,
    .from_keras = reshape_from_keras,
    .to_onnx = reshape_to_onnx,
    .ref_forward = CLT_REF(reshape_ref_forward),
    .ref_backward = CLT_REF(reshape_ref_backward),
};
