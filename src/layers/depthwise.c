/* DepthwiseConv2D: each input channel c convolved with its own depth_multiplier (M)
 * filters, output channel c*M + m, with an optional bias and fused ReLU; direct
 * kernels (cl/depthwise.cl).
 *
 * forward:  y[.., c*M + m] = bias + sum over taps of x[.., c] * w[ky, kx, c, m] (+ReLU)
 * backward: dy *= (y > 0), and dbias = column sums of dy, in one pass (conv.cl's);
 *           dW = per-block partial sums over the output positions, then summed over
 *           the blocks (conv.cl's bias_grad_final); dx gathered per input position.
 * Padding: TensorFlow's 'same', 'valid', or a ZeroPadding2D folded in front (l->pad,
 * MobileNetV2's asymmetric (0, 1) before its stride-2 blocks).
 * Scratch: [dW partials: nblocks*KH*KW*CO][bias-gradient partials][CO sums without
 * a bias]. */
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

/* Output positions per partial sum of the kernel's gradient. */
#define DW_ROWS_PER_BLOCK 512

/* DepthwiseConv2D's options besides the common ones (see clt_conv_hp): depth_multiplier. */
static const clt_conv_hp dw_kind = {.has_mult = 1};

static const clt_conv_hp *hp(const clt_layer *l) { return clt_layer_hp(l, clt_conv_hp); }

/* "3x3,s1,same", "3x3,s2,valid,m2,nobias,relu" */
static int dw_parse(clt_layer *l, const char *args, clt_err *e) {
  return clt_conv_parse(l, args, dw_kind, e);
}

static int dw_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const clt_shape in = ins[0];
  const int kh = h->kernel_h, kw = h->kernel_w, s = h->stride;
  if (kh < 1 || kw < 1 || s < 1 || h->mult < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad kernel %dx%d, stride %d or depth multiplier %d",
                    l->name, kh, kw, s, h->mult);
  }
  const int status = clt_conv_window(l, in, e);
  if (status) return status;
  const int co = in.c * h->mult;
  l->out.c = co;
  /* Keras' Glorot fans of a (KH, KW, C, M) kernel. */
  l->params[0] = (clt_param){.name = "kernel",
                             .alias = "depthwise_kernel",
                             .rank = 4,
                             .dims = {kh, kw, in.c, h->mult},
                             .size = (size_t)kh * kw * co,
                             .glorot_fan_in = (double)kh * kw * in.c,
                             .glorot_fan_out = (double)kh * kw * h->mult};
  l->params[1] = (clt_param){.name = "bias", .rank = 1, .dims = {co}, .size = (size_t)co};
  l->nparams = h->nobias ? 1 : 2;
  return CLT_OK;
}

/* The kernel of l, for the passes. */
static clt_depthwise dw_kernel(const clt_layer *l) {
  const clt_conv_hp *h = hp(l);
  return (clt_depthwise){h->kernel_h, h->kernel_w, h->stride, h->mult, l->params[0].offset};
}

/* The bias parameter, or NULL without one. */
static const clt_param *dw_bias(const clt_layer *l) { return hp(l)->nobias ? NULL : &l->params[1]; }

static int dw_positions(const clt_layer *l, int batch) { return batch * l->out.h * l->out.w; }

static int dw_blocks(const clt_layer *l, int batch) {
  return (dw_positions(l, batch) + DW_ROWS_PER_BLOCK - 1) / DW_ROWS_PER_BLOCK;
}

size_t clt_depthwise_partials(const clt_layer *l, const clt_depthwise *d, int batch) {
  return (size_t)dw_blocks(l, batch) * d->kh * d->kw * l->in.c * d->mult;
}

static size_t dw_scratch(const clt_layer *l, int batch) {
  const clt_depthwise d = dw_kernel(l);
  return clt_depthwise_partials(l, &d, batch) +
         clt_bias_relu_scratch(dw_positions(l, batch), l->out.c, clt_layer_trained(l, dw_bias(l)));
}

static int dw_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                      clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"depthwise_forward", "depthwise_backward_input",
                                      "depthwise_backward_filter"};
  static const char *const conv[] = {"bias_grad_partial", "bias_grad_final"};
  int status = clt_layer_build_kernels(r, "depthwise.cl", names, 3, e);
  if (!status) status = clt_layer_build_kernels(r, "bias.cl", conv, 2, e);
  return status;
}

int clt_depthwise_forward(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                          int bias, int relu, cl_mem y, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "depthwise.cl", "", "depthwise_forward", &k, e);
  if (status) return status;
  int w_off = (int)d->offset;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->params), CLT_ARG(w_off),
                     CLT_ARG(bias),      CLT_ARG(y),          CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),   CLT_ARG(l->in.w),    CLT_ARG(l->in.c),
                     CLT_ARG(d->mult),   CLT_ARG(d->kh),      CLT_ARG(d->kw),
                     CLT_ARG(d->stride), CLT_ARG(l->pad_top), CLT_ARG(l->pad_left),
                     CLT_ARG(l->out.h),  CLT_ARG(l->out.w),   CLT_ARG(relu)};
  const size_t positions = (size_t)dw_positions(l, io->batch);
  return clt_launch_positions(io->replica, k, "depthwise_forward", args, 18,
                              (size_t)l->in.c * d->mult, positions, 1, e);
}

static int dw_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_depthwise d = dw_kernel(l);
  const int bias = hp(l)->nobias ? -1 : (int)l->params[1].offset;
  return clt_depthwise_forward(l, io, &d, bias, hp(l)->relu, io->y, e);
}

/* Partial sums per block of output positions into scratch, then conv.cl's
 * bias_grad_final adds the blocks into the gradient buffer. */
int clt_depthwise_kernel_grad(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                              cl_mem dy, int part, clt_err *e) {
  clt_replica *r = io->replica;
  cl_kernel kp, kf;
  int status = clt_replica_kernel(r, "depthwise.cl", "", "depthwise_backward_filter", &kp, e);
  if (!status) status = clt_replica_kernel(r, "bias.cl", "", "bias_grad_final", &kf, e);
  if (status) return status;
  int per_block = DW_ROWS_PER_BLOCK, nblocks = dw_blocks(l, io->batch);
  clt_karg pargs[] = {CLT_ARG(io->x),      CLT_ARG(dy),          CLT_ARG(io->scratch),
                      CLT_ARG(part),       CLT_ARG(io->batch),   CLT_ARG(l->in.h),
                      CLT_ARG(l->in.w),    CLT_ARG(l->in.c),     CLT_ARG(d->mult),
                      CLT_ARG(d->kh),      CLT_ARG(d->kw),       CLT_ARG(d->stride),
                      CLT_ARG(l->pad_top), CLT_ARG(l->pad_left), CLT_ARG(l->out.h),
                      CLT_ARG(l->out.w),   CLT_ARG(per_block)};
  const int taps = d->kh * d->kw, channels = l->in.c * d->mult;
  status = clt_launch_rows(r, kp, "depthwise_backward_filter", pargs, 17, (size_t)channels,
                           (size_t)nblocks * taps, 1, e);
  if (status) return status;
  int cols = taps * channels, off = (int)d->offset;
  clt_karg fargs[] = {CLT_ARG(io->scratch), CLT_ARG(part),      CLT_ARG(nblocks),
                      CLT_ARG(cols),        CLT_ARG(io->grads), CLT_ARG(off)};
  return clt_launch_columns(r, kf, "depthwise kernel gradient", fargs, 6, (size_t)cols, e);
}

int clt_depthwise_input_grad(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                             cl_mem dy, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "depthwise.cl", "", "depthwise_backward_input", &k,
                                  e);
  if (status) return status;
  int w_off = (int)d->offset;
  clt_karg args[] = {CLT_ARG(dy),         CLT_ARG(io->params),  CLT_ARG(w_off),
                     CLT_ARG(io->dx),     CLT_ARG(io->batch),   CLT_ARG(l->in.h),
                     CLT_ARG(l->in.w),    CLT_ARG(l->in.c),     CLT_ARG(d->mult),
                     CLT_ARG(d->kh),      CLT_ARG(d->kw),       CLT_ARG(d->stride),
                     CLT_ARG(l->pad_top), CLT_ARG(l->pad_left), CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  const size_t positions = (size_t)io->batch * l->in.h * l->in.w;
  return clt_launch_positions(io->replica, k, "depthwise_backward_input", args, 16, (size_t)l->in.c,
                              positions, 1, e);
}

static int dw_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const clt_depthwise d = dw_kernel(l);
  const int rows = dw_positions(l, io->batch), co = l->out.c;
  const size_t bias_part = clt_depthwise_partials(l, &d, io->batch);
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass, first;
   * a frozen layer computes no weight gradient. */
  int status = clt_bias_relu_grad(io, h->relu, clt_layer_trained(l, dw_bias(l)), bias_part, rows,
                                  co, e);
  if (!status && !l->frozen) status = clt_depthwise_kernel_grad(l, io, &d, io->dy, 0, e);
  if (!status && io->dx) status = clt_depthwise_input_grad(l, io, &d, io->dy, e);
  return status;
}

#ifdef CLT_REFERENCE
static void dw_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  ref_depthwise_forward(io->x, io->batch, s.h, s.w, s.c, h->mult, io->params + l->params[0].offset,
                        h->nobias ? NULL : io->params + l->params[1].offset, h->kernel_h,
                        h->kernel_w, h->stride, l->pad_top, l->pad_left, o.h, o.w, io->y);
  if (h->relu) ref_relu_forward(io->y, clt_shape_size(o) * io->batch, io->y);
}

static void dw_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  if (h->relu) ref_relu_backward(io->y, io->dy, clt_shape_size(o) * io->batch, io->dy);
  ref_depthwise_backward(io->x, io->batch, s.h, s.w, s.c, h->mult, io->params + l->params[0].offset,
                         h->kernel_h, h->kernel_w, h->stride, l->pad_top, l->pad_left, o.h, o.w,
                         io->dy, io->dx, io->grads + l->params[0].offset,
                         h->nobias ? NULL : io->grads + l->params[1].offset);
}
#endif

/* Keras DepthwiseConv2D (Keras 3; tf.keras 2.x adds Conv2D's groups): depth_multiplier
 * and the convolutions' options. */
static int dw_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                         clt_err *e) {
  return clt_conv_from_keras(l, c, dw_kind, activation, size, e);
}

/* ONNX Conv with group = C and the kernel as (C*M, 1, KH, KW); then Relu when fused. */
static int dw_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                      const char *output, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const int64_t dims[4] = {l->out.c, 1, h->kernel_h, h->kernel_w};
  return clt_onnx_conv(l, g, inputs[0], 0, "depthwise_kernel", dims, h->nobias ? -1 : 1, h->stride,
                       l->in.c, h->relu, output, e);
}

static const char *const dw_sources[] = {"depthwise.cl", "bias.cl", NULL};

const clt_layer_ops clt_depthwise_ops = {
    .kind = "DepthwiseConv2D",
    .ninputs = 1,
    .folds_padding = 1,
    .parse = dw_parse,
    .describe = clt_conv_describe,
    .setup = dw_setup,
    .scratch_floats = dw_scratch,
    .prepare = dw_prepare,
    .sources = dw_sources,
    .forward = dw_forward,
    .backward = dw_backward,
    .from_keras = dw_from_keras,
    .to_onnx = dw_to_onnx,
    .ref_forward = CLT_REF(dw_ref_forward),
    .ref_backward = CLT_REF(dw_ref_backward),
};
