/* Conv2D with an optional bias and fused ReLU, as im2col + GEMM.
 *
 * forward:  col = im2col(x)            [M = B*OH*OW, K = KH*KW*C]
 *           y   = col * W + bias       W is the Keras HWIO kernel seen as [K, CO]
 *           y   = relu(y)
 * backward: dy *= (y > 0), and dbias = column sums of dy, in one pass (the
 *           mask already applied by a MaxPooling2D reading y: fusion.relu_masked)
 *           col = im2col(x) again (scratch is shared between layers)
 *           dW  = col^T * dy
 *           dx  = col2im(dy * W^T)
 * The backend may run each pass's product over the image in place instead
 * (gemm.h's clt_conv_algos_for: no column matrix), or a 3x3 stride-1 layer's
 * passes as Winograd F(2x2,3x3) or F(4x4,3x3) (gemm.h's clt_winograd_*, in
 * the scratch: $CLTRAIN_WINOGRAD).
 * Without a bias (use_bias=False: no "bias" parameter, as Keras' get_weights) the
 * ReLU's backward still runs through that pass, its column sums going to scratch.
 * A ZeroPadding2D folded in front (l->pad, any four sides) is im2col's padding.
 * Scratch: [col: M*K floats][bias-gradient partial sums][CO sums without a bias].
 * With the 2x2 max pooling after it fused in (fusion.pools, where the backend
 * supports it), conv2d.cl's conv_pool_* run the convolution, ReLU and pooling
 * as one pass and write the pooled output (io->y: src/engine/net.c passes the
 * pooling's buffer); backward reads the pooled gradient (io->dy, the pooling's
 * output gradient) and recomputes the windows for dW and dbias,
 * into partial sums per block of pooled rows (scratch) that bias_grad_final
 * adds up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

/* Conv2D's options besides the common ones (see clt_conv_hp): filters, lora_rank, groups. */
static const clt_conv_hp conv_kind = {.has_filters = 1, .has_lora = 1, .has_groups = 1};

static const clt_conv_hp *hp(const clt_layer *l) { return clt_layer_hp(l, clt_conv_hp); }

/* "64,3x3,s1,valid,relu", "64,3x3,s2,same,nobias", "96,7x7,s1,same,g96" */
static int conv_parse(clt_layer *l, const char *args, clt_err *e) {
  return clt_conv_parse(l, args, conv_kind, e);
}

/* groups (1: a dense convolution). */
static int conv_groups(const clt_layer *l) { return hp(l)->groups > 1 ? hp(l)->groups : 1; }

/* groups == input channels == filters: a depthwise convolution (cl/depthwise.cl's
 * passes; Keras' kernel (KH, KW, 1, C) has the memory order of DepthwiseConv2D's
 * (KH, KW, C, 1)). Other groups: cl/grouped.cl's direct passes. */
static int conv_depthwise(const clt_layer *l) {
  return conv_groups(l) > 1 && conv_groups(l) == l->in.c && hp(l)->filters == l->in.c;
}

static int conv_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const clt_shape in = ins[0];
  const int kh = h->kernel_h, kw = h->kernel_w, s = h->stride;
  if (kh < 1 || kw < 1 || s < 1 || h->filters < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad kernel %dx%d, stride %d or filters %d", l->name, kh,
                    kw, s, h->filters);
  }
  const int groups = conv_groups(l);
  if (in.c % groups || h->filters % groups) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: groups %d must divide the %d input channels and %d filters", l->name,
                    groups, in.c, h->filters);
  }
  const int status = clt_conv_window(l, in, e);
  if (status) return status;
  l->out.c = h->filters;
  clt_param *k = &l->params[0], *b = &l->params[1];
  const int per_group = in.c / groups; /* exact: groups divides in.c */
  /* Keras' grouped kernel: (KH, KW, C / groups, filters). */
  *k = (clt_param){.name = "kernel",
                   .rank = 4,
                   .dims = {kh, kw, per_group, h->filters},
                   .size = (size_t)kh * kw * per_group * h->filters,
                   .glorot_fan_in = (double)kh * kw * per_group,
                   .glorot_fan_out = (double)kh * kw * h->filters};
  *b = (clt_param){.name = "bias", .rank = 1, .dims = {h->filters}, .size = (size_t)h->filters};
  l->nparams = h->nobias ? 1 : 2;
  return CLT_OK;
}

/* The bias parameter, or NULL without one. */
static const clt_param *conv_bias(const clt_layer *l) {
  return hp(l)->nobias ? NULL : &l->params[1];
}

static clt_conv_geom conv_geom(const clt_layer *l, int batch) {
  const clt_conv_hp *h = hp(l);
  return (clt_conv_geom){batch,     l->in.h,    l->in.w,     l->in.c,  h->kernel_h, h->kernel_w,
                         h->stride, l->pad_top, l->pad_left, l->out.h, l->out.w};
}

/* A 1x1 convolution with stride 1 reads the input as its column matrix. */
static int conv_pointwise(const clt_layer *l) {
  return hp(l)->kernel_h == 1 && hp(l)->kernel_w == 1 && hp(l)->stride == 1 && l->pad_top == 0 &&
         l->pad_left == 0;
}

/* Each pass's algorithm on r: the one chosen for the layer there (a tuner's),
 * else the backend's default; im2col's GEMM for a pointwise convolution, whose
 * input is its column matrix already. */
static clt_conv_algos conv_algos(const clt_layer *l, const clt_replica *r, const clt_conv_geom *g) {
  const clt_conv_algos none = {0, 0, 0};
  return conv_pointwise(l) ? none : clt_conv_algos_layer(r, l->name, g, hp(l)->filters);
}

static size_t conv_rows(const clt_layer *l, int batch) {
  return (size_t)batch * l->out.h * l->out.w;
}
static size_t conv_k(const clt_layer *l) {
  return (size_t)hp(l)->kernel_h * hp(l)->kernel_w * l->in.c;
}

/* The pair with a 2x2 max pooling after it (fusion.pools): its gradient's blocks of pooled rows (at
 * most CP_BLOCKS, so the partial sums stay small next to the work), each block's partial dW and
 * dbias. Scratch for up to `batch` examples: a smaller batch may take more blocks (26 rows: 26
 * blocks; 39 rows: 20), never more than min(rows, CP_BLOCKS). */
#define CP_BLOCKS 32
static int cp_rows_per_block(const clt_layer *l, int batch) {
  const int rows = batch * (l->out.h / 2);
  return (rows + CP_BLOCKS - 1) / CP_BLOCKS;
}
static size_t cp_partials(const clt_layer *l, int batch) {
  const int rows = batch * (l->out.h / 2), blocks = rows < CP_BLOCKS ? rows : CP_BLOCKS;
  return (size_t)blocks * (conv_k(l) + 1) * hp(l)->filters;
}

/* Whether the layer can run the 2x2 max pooling of its output (the plan
 * decides, fusion.pools): a ReLU, stride 1 and no padding anywhere (the windows
 * need no bounds), few taps (CP_MAX_K: the sums a work-item of conv2d.cl
 * keeps), filters in float16 blocks. */
#define CP_MAX_K 32
static int conv_can_pool_output(const clt_layer *l) {
  const clt_conv_hp *h = hp(l);
  return h->relu && h->stride == 1 && !clt_pad_any(l->pad) && l->pad_top == 0 && l->pad_left == 0 &&
         l->out.h == l->in.h - h->kernel_h + 1 && l->out.w == l->in.w - h->kernel_w + 1 &&
         conv_k(l) <= CP_MAX_K && h->filters % 16 == 0 && l->out.h >= 2 && l->out.w >= 2;
}

/* ---- groups ------------------------------------------------------------------------
 * Scratch: [depthwise: the kernel gradient's partial sums][bias-gradient partials]. */

static clt_depthwise grouped_dw(const clt_layer *l) {
  const clt_conv_hp *h = hp(l);
  return (clt_depthwise){h->kernel_h, h->kernel_w, h->stride, 1, l->params[0].offset};
}

/* Output positions per partial sum of the general groups' kernel gradient. */
#define GROUPED_ROWS_PER_BLOCK 256

static int grouped_blocks(const clt_layer *l, int batch) {
  return (int)((conv_rows(l, batch) + GROUPED_ROWS_PER_BLOCK - 1) / GROUPED_ROWS_PER_BLOCK);
}

/* The kernel gradient's partial sums (per block of output positions). */
static size_t grouped_partials(const clt_layer *l, int batch) {
  const clt_depthwise d = grouped_dw(l);
  return conv_depthwise(l) ? clt_depthwise_partials(l, &d, batch)
                           : (size_t)grouped_blocks(l, batch) * l->params[0].size;
}

static size_t grouped_scratch(const clt_layer *l, int batch) {
  return grouped_partials(l, batch) + clt_bias_relu_scratch((int)conv_rows(l, batch),
                                                            hp(l)->filters,
                                                            clt_layer_trained(l, conv_bias(l)));
}

static int grouped_prepare(const clt_layer *l, clt_replica *r, clt_err *e) {
  static const char *const dw[] = {"depthwise_forward", "depthwise_backward_input",
                                   "depthwise_backward_filter"};
  static const char *const gr[] = {"grouped_forward", "grouped_backward_input",
                                   "grouped_backward_filter"};
  static const char *const bias[] = {"bias_act", "bias_grad_partial", "bias_grad_final"};
  int status = conv_depthwise(l) ? clt_layer_build_kernels(r, "depthwise.cl", dw, 3, e)
                                 : clt_layer_build_kernels(r, "grouped.cl", gr, 3, e);
  if (!status) status = clt_layer_build_kernels(r, "bias.cl", bias, 3, e);
  return status;
}

/* A cl/grouped.cl pass over (cols, rows): its buffers, then the shape. */
static int grouped_run(const clt_layer *l, const clt_layer_io *io, const char *kname,
                       const clt_karg *head, int nhead, const clt_karg *tail, int ntail,
                       size_t cols, size_t rows, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "grouped.cl", "", kname, &k, e);
  if (status) return status;
  const clt_conv_hp *h = hp(l);
  int groups = conv_groups(l);
  clt_karg args[24];
  int n = 0;
  for (int i = 0; i < nhead; i++) args[n++] = head[i];
  const clt_karg shape[] = {CLT_ARG(io->batch), CLT_ARG(l->in.h),     CLT_ARG(l->in.w),
                            CLT_ARG(l->in.c),   CLT_ARG(h->kernel_h), CLT_ARG(h->kernel_w),
                            CLT_ARG(h->stride), CLT_ARG(l->pad_top),  CLT_ARG(l->pad_left),
                            CLT_ARG(l->out.h),  CLT_ARG(l->out.w),    CLT_ARG(h->filters),
                            CLT_ARG(groups)};
  for (int i = 0; i < 13; i++) args[n++] = shape[i];
  for (int i = 0; i < ntail; i++) args[n++] = tail[i];
  return clt_launch_elements(io->replica, k, kname, args, n, cols, rows, e);
}

static int grouped_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_param *bias = conv_bias(l);
  int b = bias ? (int)bias->offset : -1, relu = hp(l)->relu;
  if (conv_depthwise(l)) {
    const clt_depthwise d = grouped_dw(l);
    return clt_depthwise_forward(l, io, &d, b, relu, io->y, e);
  }
  int w = (int)l->params[0].offset;
  const clt_karg head[] = {CLT_ARG(io->x), CLT_ARG(io->params), CLT_ARG(w), CLT_ARG(b),
                           CLT_ARG(io->y)};
  const clt_karg tail[] = {CLT_ARG(relu)};
  return grouped_run(l, io, "grouped_forward", head, 5, tail, 1, (size_t)hp(l)->filters,
                     conv_rows(l, io->batch), e);
}

static int grouped_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_depthwise d = grouped_dw(l);
  const size_t part = grouped_partials(l, io->batch);
  int status = clt_bias_relu_grad(io, hp(l)->relu && !io->fusion.relu_masked,
                                  clt_layer_trained(l, conv_bias(l)), part,
                                  (int)conv_rows(l, io->batch), hp(l)->filters, e);
  if (conv_depthwise(l)) {
    if (!status && !l->frozen) status = clt_depthwise_kernel_grad(l, io, &d, io->dy, 0, e);
    if (!status && io->dx) status = clt_depthwise_input_grad(l, io, &d, io->dy, e);
    return status;
  }
  int w = (int)l->params[0].offset;
  if (!status && !l->frozen) {
    /* Partial sums per block of positions at the start of scratch, then their sum. */
    int at = 0, per_block = GROUPED_ROWS_PER_BLOCK, nblocks = grouped_blocks(l, io->batch);
    int cols = (int)l->params[0].size;
    const clt_karg head[] = {CLT_ARG(io->x), CLT_ARG(io->dy), CLT_ARG(io->scratch), CLT_ARG(at)};
    const clt_karg tail[] = {CLT_ARG(per_block)};
    status = grouped_run(l, io, "grouped_backward_filter", head, 4, tail, 1, (size_t)hp(l)->filters,
                         (size_t)nblocks * (cols / hp(l)->filters), e);
    cl_kernel kf;
    if (!status) status = clt_replica_kernel(io->replica, "bias.cl", "", "bias_grad_final", &kf, e);
    clt_karg fargs[] = {CLT_ARG(io->scratch), CLT_ARG(at),        CLT_ARG(nblocks),
                        CLT_ARG(cols),        CLT_ARG(io->grads), CLT_ARG(w)};
    if (!status)
      status = clt_launch_columns(io->replica, kf, "grouped kernel gradient", fargs, 6,
                                  (size_t)cols, e);
  }
  if (!status && io->dx) {
    const clt_karg head[] = {CLT_ARG(io->dy), CLT_ARG(io->params), CLT_ARG(w), CLT_ARG(io->dx)};
    status = grouped_run(l, io, "grouped_backward_input", head, 4, NULL, 0, (size_t)l->in.c,
                         (size_t)io->batch * l->in.h * l->in.w, e);
  }
  return status;
}

/* Winograd's room, for either tile, wherever the geometry fits: a replica may
 * choose it (the scratch is sized without knowing the replica), and it is about
 * the column matrix's size or less. */
static size_t conv_winograd_scratch(const clt_layer *l, int batch) {
  const clt_conv_geom g = conv_geom(l, batch);
  if (conv_pointwise(l) || !clt_winograd_fits(&g)) return 0;
  const clt_conv_algos f2 = {CLT_CONV_WINOGRAD2, CLT_CONV_WINOGRAD2, CLT_CONV_WINOGRAD2};
  const clt_conv_algos f4 = {CLT_CONV_WINOGRAD4, CLT_CONV_WINOGRAD4, CLT_CONV_WINOGRAD4};
  const size_t n2 = clt_winograd_scratch(&g, hp(l)->filters, &f2);
  const size_t n4 = clt_winograd_scratch(&g, hp(l)->filters, &f4);
  return n2 > n4 ? n2 : n4;
}

/* Room for either way of running (the plan, per replica, picks one). */
static size_t conv_scratch(const clt_layer *l, int batch) {
  size_t rows = conv_rows(l, batch);
  if (conv_groups(l) > 1) return grouped_scratch(l, batch);
  size_t col = conv_pointwise(l) ? 0 : rows * conv_k(l);
  size_t unfused = col + clt_bias_relu_scratch((int)rows, hp(l)->filters,
                                               clt_layer_trained(l, conv_bias(l)));
  size_t fused = conv_can_pool_output(l) ? cp_partials(l, batch) : 0;
  size_t winograd = conv_winograd_scratch(l, batch);
  if (winograd > unfused) unfused = winograd;
  return unfused > fused ? unfused : fused;
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

/* The pair's kernel for l's taps: conv2d.cl's copy for 3x3 taps over one channel
 * (its loops unrolled), else the general one. Each compiles only if a run
 * launches it. */
static const char *cp_kernel(const clt_layer *l, int backward) {
  const int k331 = hp(l)->kernel_h == 3 && hp(l)->kernel_w == 3 && l->in.c == 1;
  if (backward) return k331 ? "conv_pool_backward_3x3c1" : "conv_pool_backward";
  return k331 ? "conv_pool_forward_3x3c1" : "conv_pool_forward";
}

static int conv_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                        clt_err *e) {
  static const char *const cols[] = {"im2col", "im2col_rows", "col2im"};
  static const char *const bias[] = {"bias_act", "bias_grad_partial", "bias_grad_final"};
  const char *const fused[] = {cp_kernel(l, 0), cp_kernel(l, 1)};
  if (conv_groups(l) > 1) return grouped_prepare(l, r, e);
  if (f->pools) {
    int status = clt_layer_build_kernels(r, "conv2d.cl", fused, 2, e);
    return status ? status : clt_layer_build_kernels(r, "bias.cl", bias + 2, 1, e);
  }
  int status = clt_layer_build_kernels(r, "conv2d.cl", cols, 3, e);
  if (!status) status = clt_layer_build_kernels(r, "bias.cl", bias, 3, e);
  if (status) return status;
  const clt_gemm_shape shapes[3] = {fwd_shape(l, max_batch), dw_shape(l, max_batch),
                                    dcol_shape(l, max_batch)};
  const clt_conv_geom g = conv_geom(l, max_batch);
  const clt_conv_algos a = conv_algos(l, r, &g);
  if (a.forward == CLT_CONV_IN_PLACE || a.weight_grad == CLT_CONV_IN_PLACE)
    status = clt_conv_reserve(r, &g, hp(l)->filters, e);
  if (a.input_grad == CLT_CONV_IN_PLACE && !status)
    status = clt_conv_dx_reserve(r, &g, hp(l)->filters, e);
  if (!status) status = clt_winograd_reserve(r, &g, hp(l)->filters, &a, e);
  /* The passes that multiply a column matrix. */
  const int algo[3] = {a.forward, a.weight_grad, a.input_grad};
  for (int i = 0; i < 3 && !status; i++)
    if (algo[i] == CLT_CONV_IM2COL) status = clt_gemm_reserve(r, &shapes[i], e);
  return status;
}

/* Runs im2col or col2im (they share the argument list) over `positions`, each
 * `floats` contiguous floats (see cl/conv2d.cl). */
static int conv_cols(const clt_layer *l, const clt_layer_io *io, const char *kname, cl_mem from,
                     cl_mem to, size_t positions, size_t floats, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "conv2d.cl", "", kname, &k, e);
  if (status) return status;
  const clt_conv_hp *h = hp(l);
  clt_karg args[] = {CLT_ARG(from),        CLT_ARG(to),          CLT_ARG(io->batch),
                     CLT_ARG(l->in.h),     CLT_ARG(l->in.w),     CLT_ARG(l->in.c),
                     CLT_ARG(h->kernel_h), CLT_ARG(h->kernel_w), CLT_ARG(h->stride),
                     CLT_ARG(l->pad_top),  CLT_ARG(l->pad_left), CLT_ARG(l->out.h),
                     CLT_ARG(l->out.w)};
  char label[128];
  snprintf(label, sizeof label, "%s %s", l->name, kname);
  return clt_launch_positions(io->replica, k, label, args, 13, floats, positions, 1, e);
}

/* im2col of io->x into scratch, by kernel tap (C channels each), or with few
 * channels by output row (OW positions, all their taps). */
static int conv_im2col(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const size_t rows = conv_rows(l, io->batch);
  if (l->in.c < 4) {
    return conv_cols(l, io, "im2col_rows", io->x, io->scratch, (size_t)io->batch * l->out.h,
                     (size_t)l->out.w * conv_k(l), e);
  }
  return conv_cols(l, io, "im2col", io->x, io->scratch, rows * hp(l)->kernel_h * hp(l)->kernel_w,
                   (size_t)l->in.c, e);
}

/* The pair's kernels move float16 vectors through pointers: the parameters must
 * start on 16 floats (the model aligns them to 32). */
static int conv_pool_aligned(const clt_layer *l, clt_err *e) {
  for (int p = 0; p < l->nparams; p++) {
    if (l->params[p].offset % 16)
      return clt_fail(e, CLT_ERR_INTERNAL, "%s: %s at float %zu, not a multiple of 16", l->name,
                      l->params[p].name, l->params[p].offset);
  }
  return CLT_OK;
}

/* The pair's kernels' shape arguments, in their order (after the buffers). */
#define CP_SHAPE_ARGS(l, io, ph, pw)                                                            \
  CLT_ARG((io)->batch), CLT_ARG((l)->in.h), CLT_ARG((l)->in.w), CLT_ARG((l)->in.c),             \
      CLT_ARG(hp(l)->kernel_h), CLT_ARG(hp(l)->kernel_w), CLT_ARG(hp(l)->filters), CLT_ARG(ph), \
      CLT_ARG(pw)

/* The pair's forward: y's batch * (OH/2) * (OW/2) * CO floats get the pooled
 * output; a work-item per pooled row. */
static int conv_pool_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int status = conv_pool_aligned(l, e);
  if (!status) status = clt_replica_kernel(io->replica, "conv2d.cl", "", cp_kernel(l, 0), &k, e);
  if (status) return status;
  const clt_param *bias = conv_bias(l);
  int w_off = (int)l->params[0].offset, b_off = bias ? (int)bias->offset : -1;
  int ph = l->out.h / 2, pw = l->out.w / 2;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->params), CLT_ARG(w_off),
                     CLT_ARG(b_off), CLT_ARG(io->y),      CP_SHAPE_ARGS(l, io, ph, pw)};
  return clt_launch1d(io->replica, k, "conv_pool_forward", args, 14, (size_t)io->batch * ph, e);
}

/* The pair's backward from the pooled gradient (io->dy, batch * (OH/2) * (OW/2) * CO
 * floats): partial sums per block of pooled rows and 16 channels, a block a
 * work-item (long work, as clt_launch_row_blocks' groups of one), then
 * bias_grad_final over the blocks into dW and dbias. */
static int conv_pool_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel kb, kf;
  int status = conv_pool_aligned(l, e);
  if (!status) status = clt_replica_kernel(io->replica, "conv2d.cl", "", cp_kernel(l, 1), &kb, e);
  if (!status) status = clt_replica_kernel(io->replica, "bias.cl", "", "bias_grad_final", &kf, e);
  if (status) return status;
  const clt_param *bias = conv_bias(l);
  int w_off = (int)l->params[0].offset, b_off = bias ? (int)bias->offset : -1;
  int ph = l->out.h / 2, pw = l->out.w / 2, per = cp_rows_per_block(l, io->batch);
  const int nblocks = (io->batch * ph + per - 1) / per;
  clt_karg args[] = {CLT_ARG(io->x),
                     CLT_ARG(io->params),
                     CLT_ARG(w_off),
                     CLT_ARG(b_off),
                     CLT_ARG(io->dy),
                     CLT_ARG(io->scratch),
                     CP_SHAPE_ARGS(l, io, ph, pw),
                     CLT_ARG(per)};
  const size_t global[2] = {(size_t)nblocks, (size_t)hp(l)->filters / 16}, local[2] = {1, 1};
  status = clt_launch(io->replica, kb, "conv_pool_backward", args, 16, 2, global, local, e);
  /* dW's sums, then dbias's after them in scratch (cols: K*CO, then CO). */
  int part = 0, cols = (int)conv_k(l) * hp(l)->filters;
  for (int pass = 0; pass < (bias ? 2 : 1) && !status; pass++) {
    int off = pass ? b_off : w_off;
    clt_karg fargs[] = {CLT_ARG(io->scratch), CLT_ARG(part),      CLT_ARG(nblocks),
                        CLT_ARG(cols),        CLT_ARG(io->grads), CLT_ARG(off)};
    status = clt_launch_columns(io->replica, kf, pass ? "bias_grad_final" : "kernel_grad_final",
                                fargs, 6, (size_t)cols, e);
    part = nblocks * cols;
    cols = hp(l)->filters;
  }
  return status;
}

static int conv_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (conv_groups(l) > 1) return grouped_forward(l, io, e);
  if (io->fusion.pools) return conv_pool_forward(l, io, e);
  const clt_gemm_shape fwd = fwd_shape(l, io->batch);
  const int pointwise = conv_pointwise(l);
  const clt_conv_geom g = conv_geom(l, io->batch);
  const int algo = conv_algos(l, io->replica, &g).forward;
  if (algo != CLT_CONV_IM2COL && algo != CLT_CONV_IN_PLACE) {
    const clt_param *bias = conv_bias(l);
    return clt_winograd_forward(io->replica, &g, hp(l)->filters, algo, io->x, io->params,
                                l->params[0].offset, io->y, io->params,
                                bias ? (long)bias->offset : -1, hp(l)->relu, io->scratch, e);
  }
  if (algo == CLT_CONV_IN_PLACE) {
    const clt_param *bias = conv_bias(l);
    return clt_conv_forward(io->replica, &g, hp(l)->filters, io->x, io->params, l->params[0].offset,
                            io->y, io->params, bias ? (long)bias->offset : -1, hp(l)->relu, e);
  }
  int status = pointwise ? CLT_OK : conv_im2col(l, io, e);
  if (status) return status;
  return clt_gemm_bias_relu(io, &fwd, pointwise ? io->x : io->scratch, &l->params[0], conv_bias(l),
                            hp(l)->relu, e);
}

static int conv_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (conv_groups(l) > 1) return grouped_backward(l, io, e);
  /* A pooling pair reads the model's input: frozen, it has nothing to compute. */
  if (io->fusion.pools) return l->frozen ? CLT_OK : conv_pool_backward(l, io, e);
  const size_t rows = conv_rows(l, io->batch);
  const int pointwise = conv_pointwise(l);
  const clt_conv_geom g = conv_geom(l, io->batch);
  const clt_conv_algos a = conv_algos(l, io->replica, &g);
  const int winograd_dw = a.weight_grad != CLT_CONV_IM2COL && a.weight_grad != CLT_CONV_IN_PLACE;
  const int winograd_dx = a.input_grad != CLT_CONV_IM2COL && a.input_grad != CLT_CONV_IN_PLACE;
  /* Winograd's passes keep no column matrix in the scratch. */
  const size_t col_floats = pointwise || (winograd_dw && winograd_dx) ? 0 : rows * conv_k(l);
  cl_mem col = pointwise ? io->x : io->scratch;
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass,
   * or was done by the next layer (fusion.relu_masked). The bias gradient was
   * written by the one reader that wrote dy (fusion.bias_summed: no ReLU then).
   * A frozen layer computes no weight gradient. */
  int status = io->fusion.bias_summed
                   ? CLT_OK
                   : clt_bias_relu_grad(io, hp(l)->relu && !io->fusion.relu_masked,
                                        clt_layer_trained(l, conv_bias(l)), col_floats, (int)rows,
                                        hp(l)->filters, e);
  if (!status && !l->frozen && winograd_dw) {
    status = clt_winograd_dw(io->replica, &g, hp(l)->filters, a.weight_grad, io->x, io->dy,
                             io->grads, l->params[0].offset, io->scratch, e);
  } else if (!status && !l->frozen && a.weight_grad == CLT_CONV_IN_PLACE) {
    status = clt_conv_dw(io->replica, &g, hp(l)->filters, io->x, io->dy, io->grads,
                         l->params[0].offset, e);
  } else if (!status && !l->frozen) {
    if (!pointwise) status = conv_im2col(l, io, e);
    const clt_gemm_shape dw = dw_shape(l, io->batch);
    if (!status)
      status = clt_gemm(io->replica, &dw, 1.0f, col, 0, io->dy, 0, 0.0f, io->grads,
                        l->params[0].offset, e);
  }
  /* The tuner's probes time the input gradient apart from the weight's. */
  if (!status && io->dx) clt_replica_submark(io->replica, l->name, "input gradient");
  if (!status && io->dx && winograd_dx) {
    status = clt_winograd_dx(io->replica, &g, hp(l)->filters, a.input_grad, io->dy, io->params,
                             l->params[0].offset, io->dx, io->scratch, e);
  } else if (!status && io->dx && a.input_grad == CLT_CONV_IN_PLACE) {
    status = clt_conv_dx(io->replica, &g, hp(l)->filters, io->dy, io->params, l->params[0].offset,
                         io->dx, e);
  } else if (!status && io->dx) {
    /* The in-order queue runs this after dW has consumed col, so col is reused;
     * a pointwise convolution's column gradient is the input gradient itself. */
    const clt_gemm_shape dcol = dcol_shape(l, io->batch);
    const float beta = pointwise && io->dx_accumulate ? 1.0f : 0.0f;
    status = clt_gemm(io->replica, &dcol, 1.0f, io->dy, 0, io->params, l->params[0].offset, beta,
                      pointwise ? io->dx : io->scratch, 0, e);
    if (!status && !pointwise) {
      status = conv_cols(l, io, "col2im", io->scratch, io->dx,
                         (size_t)io->batch * l->in.h * l->in.w, (size_t)l->in.c, e);
    }
  }
  return status;
}

#ifdef CLT_REFERENCE
/* With groups: the convolution of each group's channels by its filters, in double
 * precision, from the definition (the kernel (KH, KW, C / groups, F)). */
static void grouped_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  const int F = h->filters, CG = s.c / conv_groups(l), FG = F / conv_groups(l);
  const double *w = io->params + l->params[0].offset;
  for (int n = 0; n < io->batch; n++)
    for (int oy = 0; oy < o.h; oy++)
      for (int ox = 0; ox < o.w; ox++)
        for (int f = 0; f < F; f++) {
          double sum = h->nobias ? 0.0 : io->params[l->params[1].offset + f];
          for (int ky = 0; ky < h->kernel_h; ky++)
            for (int kx = 0; kx < h->kernel_w; kx++) {
              const int iy = oy * h->stride - l->pad_top + ky,
                        ix = ox * h->stride - l->pad_left + kx;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int c = 0; c < CG; c++)
                sum +=
                    io->x[(((size_t)n * s.h + iy) * s.w + ix) * s.c + (size_t)(f / FG) * CG + c] *
                    w[((size_t)(ky * h->kernel_w + kx) * CG + c) * F + f];
            }
          io->y[(((size_t)n * o.h + oy) * o.w + ox) * F + f] = h->relu && sum < 0 ? 0.0 : sum;
        }
}

static void grouped_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  const clt_shape s = l->in, o = l->out;
  const int F = h->filters, CG = s.c / conv_groups(l), FG = F / conv_groups(l);
  const double *w = io->params + l->params[0].offset;
  double *dw = io->grads ? io->grads + l->params[0].offset : NULL;
  double *db = io->grads && !h->nobias ? io->grads + l->params[1].offset : NULL;
  if (h->relu) ref_relu_backward(io->y, io->dy, clt_shape_size(o) * io->batch, io->dy);
  if (dw) memset(dw, 0, l->params[0].size * sizeof *dw);
  if (db) memset(db, 0, (size_t)F * sizeof *db);
  if (io->dx) memset(io->dx, 0, clt_shape_size(s) * io->batch * sizeof *io->dx);
  for (int n = 0; n < io->batch; n++)
    for (int oy = 0; oy < o.h; oy++)
      for (int ox = 0; ox < o.w; ox++)
        for (int f = 0; f < F; f++) {
          const double g = io->dy[(((size_t)n * o.h + oy) * o.w + ox) * F + f];
          if (db) db[f] += g;
          for (int ky = 0; ky < h->kernel_h; ky++)
            for (int kx = 0; kx < h->kernel_w; kx++) {
              const int iy = oy * h->stride - l->pad_top + ky,
                        ix = ox * h->stride - l->pad_left + kx;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int c = 0; c < CG; c++) {
                const size_t xi = (((size_t)n * s.h + iy) * s.w + ix) * s.c +
                                  (size_t)(f / FG) * CG + c;
                const size_t wi = ((size_t)(ky * h->kernel_w + kx) * CG + c) * F + f;
                if (dw) dw[wi] += io->x[xi] * g;
                if (io->dx) io->dx[xi] += w[wi] * g;
              }
            }
        }
}

static void conv_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  if (conv_groups(l) > 1) {
    grouped_ref_forward(l, io);
    return;
  }
  const clt_shape s = l->in, o = l->out;
  /* Without a bias the reference adds zeros. */
  double *zeros = h->nobias ? calloc((size_t)h->filters, sizeof *zeros) : NULL;
  if (h->nobias && !zeros) return;
  ref_conv2d_forward(io->x, io->batch, s.h, s.w, s.c, io->params + l->params[0].offset,
                     h->nobias ? zeros : io->params + l->params[1].offset, h->kernel_h, h->kernel_w,
                     h->filters, h->stride, l->pad_top, l->pad_left, o.h, o.w, io->y);
  if (h->relu) ref_relu_forward(io->y, clt_shape_size(o) * io->batch, io->y);
  free(zeros);
}

static void conv_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const clt_conv_hp *h = hp(l);
  if (conv_groups(l) > 1) {
    grouped_ref_backward(l, io);
    return;
  }
  const clt_shape s = l->in, o = l->out;
  /* Without a bias its gradient goes to a scratch, dropped. */
  double *dbias = h->nobias ? malloc((size_t)h->filters * sizeof *dbias)
                            : io->grads + l->params[1].offset;
  if (!dbias) return;
  if (h->relu) ref_relu_backward(io->y, io->dy, clt_shape_size(o) * io->batch, io->dy);
  ref_conv2d_backward(io->x, io->batch, s.h, s.w, s.c, io->params + l->params[0].offset,
                      h->kernel_h, h->kernel_w, h->filters, h->stride, l->pad_top, l->pad_left, o.h,
                      o.w, io->dy, io->dx, io->grads + l->params[0].offset, dbias);
  if (h->nobias) free(dbias);
}
#endif

/* ---- tuning ------------------------------------------------------------------------ */

int clt_conv2d_tunable(const clt_layer *l, int batch, struct clt_conv_geom *g, int *filters) {
  if (strcmp(l->ops->kind, "Conv2D") != 0 || conv_groups(l) > 1 || conv_pointwise(l)) return 0;
  *g = conv_geom(l, batch);
  *filters = hp(l)->filters;
  return 1;
}

/* ---- Keras and ONNX ---------------------------------------------------------------- */

/* Keras Conv2D (Keras 3 and tf.keras 2.x): filters and the convolutions' options;
 * lora_rank refused unless 0. */
static int conv_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                           clt_err *e) {
  return clt_conv_from_keras(l, c, conv_kind, activation, size, e);
}

/* ONNX Conv with the kernel as OIHW, then Relu when fused. */
static int conv_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                        const char *output, clt_err *e) {
  const clt_conv_hp *h = hp(l);
  const int64_t dims[4] = {h->filters, l->in.c / conv_groups(l), h->kernel_h, h->kernel_w};
  return clt_onnx_conv(l, g, inputs[0], 0, "kernel", dims, h->nobias ? -1 : 1, h->stride,
                       conv_groups(l), h->relu, output, e);
}

/* Its ReLU; a pointwise convolution's input gradient is one GEMM, which can add
 * into dx; the 2x2 max pooling after it; a trained bias without a ReLU after it,
 * whose gradient (dy's column sums) the reader that writes dy can add up. */
static unsigned conv_fusions(const clt_layer *l) {
  if (conv_groups(l) > 1) return hp(l)->relu ? CLT_FUSE_OUTPUT_RELU : 0u;
  return (hp(l)->relu ? CLT_FUSE_OUTPUT_RELU : 0u) |
         (conv_pointwise(l) ? CLT_FUSE_ACCUMULATE_DX : 0u) |
         (conv_can_pool_output(l) ? CLT_FUSE_POOL_OUTPUT : 0u) |
         (!hp(l)->relu && clt_layer_trained(l, conv_bias(l)) ? CLT_FUSE_BIAS_BY_READER : 0u);
}

/* A grouped convolution's depthwise.cl or grouped.cl build as programs of their own
 * (clt_replica_kernel): every other Conv2D's program stays without them. */
static const char *const conv_sources[] = {"conv2d.cl", "bias.cl", NULL};

const clt_layer_ops clt_conv2d_ops = {
    .kind = "Conv2D",
    .ninputs = 1,
    .folds_padding = 1,
    .parse = conv_parse,
    .describe = clt_conv_describe,
    .setup = conv_setup,
    .scratch_floats = conv_scratch,
    .prepare = conv_prepare,
    .forward = conv_forward,
    .backward = conv_backward,
    .fusions = conv_fusions,
    .sources = conv_sources,
    .from_keras = conv_from_keras,
    .to_onnx = conv_to_onnx,
    .ref_forward = CLT_REF(conv_ref_forward),
    .ref_backward = CLT_REF(conv_ref_backward),
};
