/* BatchNormalization (Keras, axis=-1 on NHWC) with an optional fused ReLU.
 *
 * The input is seen as rows = batch*H*W rows of C channels. Parameters, in Keras'
 * order: gamma, beta, moving_mean, moving_variance (the last two non-trainable);
 * scale=False drops gamma (1), center=False beta (0), as Keras' get_weights does.
 *
 * training forward: mean, biased var per channel over the rows (per block of rows
 *           by Welford's update on CPUs, a two-pass variance on GPUs; blocks
 *           combined by Chan et al.'s update, so a large mean does not cancel the
 *           variance away); inv_std = 1/sqrt(var+eps);
 *           y = gamma*(x-mean)*inv_std + beta (+ReLU). mean and inv_std are kept in
 *           io->state for backward. The gradient slots of the moving statistics get
 *           stat_weight*mean and stat_weight*unbiased var: the all-reduce turns them
 *           into the example-weighted average of the replicas' batch statistics,
 *           which the trainer folds into the moving averages.
 * inference: the same with moving_mean, moving_variance; no gradient written.
 * frozen:   (l->frozen) inference mode in training too, as Keras 3 runs a
 *           BatchNormalization whose trainable is false: the moving statistics
 *           normalise and are not updated; mean and inv_std of them are kept in
 *           io->state, and backward computes dx = g*gamma*inv_std alone (the
 *           coefficients of bn_grad_final over no blocks, then bn_dx).
 * backward: g = dy masked by (y > 0) if relu (fused into the two kernels that read
 *           dy: a separate scalar ReLU-backward pass cost PoCL about as much as those
 *           two together; y > 0 is taken from x and the statistics, recomputed as
 *           the forward computed it, so y is not read); dbeta = sum g;
 *           dgamma = sum g*xhat; dx = gamma*inv_std/n * (n*g - dbeta - xhat*dgamma).
 *           dy is not modified. The moving statistics' slots are left as the
 *           forward wrote them. With fusion.sums_input_bias (the input is a
 *           Conv2D's output that only this layer reads) the dx pass also sums dx
 *           per block of rows as clt_bias_grad would, and clt_bias_grad_final
 *           writes the Conv2D's bias gradient: the same bits without the
 *           Conv2D's pass over dx (fusion.bias_summed on the Conv2D).
 * Scratch: [partial sums: 2*nblocks*C][dx coefficients: 3*C][dx's partial sums:
 * clt_bias_grad_scratch]; inference uses its first 2*C floats for the statistics.
 * Launches (src/backend/backend.h; see cl/batchnorm.cl): partial sums
 * clt_launch_row_blocks, elementwise passes clt_launch_row_chunks, the final
 * sums over the blocks clt_launch_columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include <math.h>

#include "ref_resnet.h"
#endif

/* Rows per partial sum at least: enough blocks to occupy a device even at small
 * batches, few enough that the final pass over the blocks stays short. The
 * scratch is sized for these; a backend may take longer blocks
 * (clt_sum_block_rows). */
#define BN_ROWS_PER_BLOCK 128
/* Rows per work-item of the CPU's elementwise passes (bn_apply, bn_dx), each of
 * CLT_CPU_BLOCK_COLS channels: few enough rows for a device's cores at small
 * batches. GPUs take an element per work-item. */
#define BN_ROWS_PER_ITEM 16

typedef struct bn_hp {
  double epsilon, momentum;
  int relu;     /* fused activation */
  int nocenter; /* center=False: no beta */
  int noscale;  /* scale=False: no gamma */
} bn_hp;

static const bn_hp *hp(const clt_layer *l) { return clt_layer_hp(l, bn_hp); }

/* Indices of the parameters in l->params; gamma and beta -1 when absent. */
static int bn_gamma(const clt_layer *l) { return hp(l)->noscale ? -1 : 0; }
static int bn_beta(const clt_layer *l) { return hp(l)->nocenter ? -1 : !hp(l)->noscale; }
static int bn_mean(const clt_layer *l) { return !hp(l)->noscale + !hp(l)->nocenter; }
static int bn_var(const clt_layer *l) { return bn_mean(l) + 1; }

/* A parameter's offset in the flat buffers, -1 when absent (the kernels then use
 * gamma 1, beta 0 and write no gradient). */
static int bn_offset(const clt_layer *l, int index) {
  return index < 0 ? -1 : (int)l->params[index].offset;
}

/* "eps1.001e-05,m0.99,relu", "eps0.001,m0.99,nocenter,noscale" */
static int bn_parse(clt_layer *l, const char *args, clt_err *e) {
  bn_hp *h = clt_layer_hp(l, bn_hp);
  int used = 0;
  h->nocenter = h->noscale = 0;
  if (sscanf(args, "eps%lf,m%lf%n", &h->epsilon, &h->momentum, &used) == 2) {
    if (strncmp(args + used, ",nocenter", 9) == 0) {
      h->nocenter = 1;
      used += 9;
    }
    if (strncmp(args + used, ",noscale", 8) == 0) {
      h->noscale = 1;
      used += 8;
    }
  }
  if (used == 0 || clt_parse_relu_tail(args + used, &h->relu) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: BatchNormalization(%s): expected "
                    "BatchNormalization(epsEPSILON,mMOMENTUM[,nocenter][,noscale][,relu])",
                    l->name, args);
  }
  return CLT_OK;
}

static void bn_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "BatchNormalization(eps%g,m%g%s%s%s)", hp(l)->epsilon, hp(l)->momentum,
           hp(l)->nocenter ? ",nocenter" : "", hp(l)->noscale ? ",noscale" : "",
           hp(l)->relu ? ",relu" : "");
}

static int bn_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const bn_hp *h = hp(l);
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in.h, in.w, in.c);
  }
  if (!(h->epsilon > 0.0) || !(h->momentum >= 0.0 && h->momentum <= 1.0)) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad epsilon %g or momentum %g", l->name, h->epsilon,
                    h->momentum);
  }
  l->in = in;
  l->out = in;
  static const char *const names[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  static const float inits[] = {1.0f, 0.0f, 0.0f, 1.0f};
  l->nparams = 0;
  for (int i = 0; i < 4; i++) {
    if ((i == 0 && h->noscale) || (i == 1 && h->nocenter)) continue;
    clt_param *p = &l->params[l->nparams++];
    *p = (clt_param){.rank = 1,
                     .dims = {in.c},
                     .size = (size_t)in.c,
                     .init_constant = inits[i],
                     .non_trainable = i >= 2,
                     .moving_momentum = i >= 2 ? h->momentum : 0.0};
    snprintf(p->name, sizeof p->name, "%s", names[i]);
  }
  return CLT_OK;
}

static int bn_rows(const clt_layer *l, int batch) { return batch * l->in.h * l->in.w; }

/* Rows per partial-sum block on replica r. */
static int bn_rows_per_block(const clt_layer *l, const clt_replica *r, int rows) {
  return (int)clt_sum_block_rows(r, (size_t)l->in.c, (size_t)rows, BN_ROWS_PER_BLOCK);
}

static int bn_blocks(int rows, int per_block) { return (rows + per_block - 1) / per_block; }

/* The most blocks any backend uses: blocks of BN_ROWS_PER_BLOCK rows. */
static size_t bn_scratch(const clt_layer *l, int batch) {
  return (2 * (size_t)bn_blocks(bn_rows(l, batch), BN_ROWS_PER_BLOCK) + 3) * l->in.c +
         clt_bias_grad_scratch(bn_rows(l, batch), l->in.c);
}

static size_t bn_state(const clt_layer *l) { return 2 * (size_t)l->in.c; }

static const char *const bn_kernels[] = {
    "bn_partial_stats", "bn_stats_final", "bn_infer_stats", "bn_apply",
    "bn_partial_grad",  "bn_grad_final",  "bn_dx",          "bn_dx_sums"};

static int bn_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                      clt_err *e) {
  (void)l;
  (void)max_batch;
  static const char *const bias[] = {"bias_grad_final"};
  int status = clt_layer_build_kernels(r, "batchnorm.cl", bn_kernels,
                                       (int)(sizeof bn_kernels / sizeof bn_kernels[0]), e);
  if (!status && f && f->sums_input_bias)
    status = clt_layer_build_kernels(r, "bias.cl", bias, 1, e);
  return status;
}

/* The shapes of batchnorm.cl's launches over C channels (see the kernels there). */
typedef enum bn_shape {
  BN_CHANNELS, /* a work-item per channel */
  BN_FINAL,    /* the final sums over the blocks: per channel, lanes on GPUs */
  BN_BLOCKS,   /* partial sums over n blocks of rows */
  BN_ROWS      /* elementwise over n rows */
} bn_shape;

/* Launches batchnorm.cl's `name` in `shape` over C channels (and n blocks or rows). */
static int bn_run(const clt_layer_io *io, const char *name, const clt_karg *args, int nargs,
                  bn_shape shape, int C, int n, clt_err *e) {
  clt_replica *r = io->replica;
  cl_kernel k;
  int status = clt_replica_kernel(r, "batchnorm.cl", "", name, &k, e);
  if (status) return status;
  switch (shape) {
    case BN_FINAL:
      return clt_launch_columns(r, k, name, args, nargs, (size_t)C, e);
    case BN_BLOCKS:
      return clt_launch_row_blocks(r, k, name, args, nargs, (size_t)C, (size_t)n, e);
    case BN_ROWS:
      return clt_launch_row_chunks(r, k, name, args, nargs, (size_t)C, (size_t)n, BN_ROWS_PER_ITEM,
                                   e);
    case BN_CHANNELS:
      break;
  }
  return clt_launch1d(r, k, name, args, nargs, (size_t)C, e);
}

/* Batch statistics into io->state (mean, inv_std) and the moving statistics' slots:
 * a mean and sum of squared deviations per block of rows, the blocks combined by
 * Chan et al.'s update (see bn_partial_stats in batchnorm.cl). */
static int bn_batch_stats(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int rows = bn_rows(l, io->batch), C = l->in.c;
  int per_block = bn_rows_per_block(l, io->replica, rows);
  int nblocks = bn_blocks(rows, per_block), part = 0, part2 = nblocks * C;
  int mean_slot = bn_offset(l, bn_mean(l)), var_slot = bn_offset(l, bn_var(l));
  float eps = (float)hp(l)->epsilon, w = io->stat_weight;
  clt_karg block_args[] = {CLT_ARG(io->x),       CLT_ARG(rows), CLT_ARG(C),    CLT_ARG(per_block),
                           CLT_ARG(io->scratch), CLT_ARG(part), CLT_ARG(part2)};
  int status = bn_run(io, "bn_partial_stats", block_args, 7, BN_BLOCKS, C, nblocks, e);
  if (status) return status;
  clt_karg final_args[] = {CLT_ARG(io->scratch),
                           CLT_ARG(part),
                           CLT_ARG(part2),
                           CLT_ARG(nblocks),
                           CLT_ARG(rows),
                           CLT_ARG(per_block),
                           CLT_ARG(C),
                           CLT_ARG(eps),
                           CLT_ARG(io->state),
                           CLT_ARG(io->grads),
                           CLT_ARG(mean_slot),
                           CLT_ARG(var_slot),
                           CLT_ARG(w)};
  return bn_run(io, "bn_stats_final", final_args, 13, BN_FINAL, C, 0, e);
}

static int bn_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int rows = bn_rows(l, io->batch), C = l->in.c, off = 0, relu = hp(l)->relu || io->residual_relu;
  int gamma_off = bn_offset(l, bn_gamma(l)), beta_off = bn_offset(l, bn_beta(l));
  cl_mem stats = io->state;
  int status;
  if (io->train && !io->state) return clt_fail(e, CLT_ERR_INTERNAL, "%s: no state buffer", l->name);
  if (io->train && !l->frozen) {
    status = bn_batch_stats(l, io, e);
  } else {
    /* The moving statistics in the training state's layout, so one bn_apply serves
     * (and a frozen layer's backward finds them there). */
    int mean_off = bn_offset(l, bn_mean(l)), var_off = bn_offset(l, bn_var(l));
    float eps = (float)hp(l)->epsilon;
    if (!io->train) stats = io->scratch;
    clt_karg args[] = {CLT_ARG(io->params), CLT_ARG(mean_off), CLT_ARG(var_off), CLT_ARG(C),
                       CLT_ARG(eps),        CLT_ARG(stats),    CLT_ARG(off)};
    status = bn_run(io, "bn_infer_stats", args, 7, BN_CHANNELS, C, 0, e);
  }
  if (status) return clt_wrap(e, "%s", l->name);
  int per_item = BN_ROWS_PER_ITEM;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->y),    CLT_ARG(rows), CLT_ARG(C),
                     CLT_ARG(per_item),  CLT_ARG(stats),    CLT_ARG(off),  CLT_ARG(io->params),
                     CLT_ARG(gamma_off), CLT_ARG(beta_off), CLT_ARG(relu), CLT_ARG(io->residual)};
  status = bn_run(io, "bn_apply", args, 12, BN_ROWS, C, rows, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int bn_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->state) return clt_fail(e, CLT_ERR_INTERNAL, "%s: no state buffer", l->name);
  int rows = bn_rows(l, io->batch), C = l->in.c;
  int per_block = bn_rows_per_block(l, io->replica, rows);
  int nblocks = bn_blocks(rows, per_block), part = 0, part2 = nblocks * C, coef = 2 * nblocks * C;
  const int gamma_off = bn_offset(l, bn_gamma(l)), beta_off = bn_offset(l, bn_beta(l));
  int gamma_slot = gamma_off, beta_slot = beta_off;
  int relu = hp(l)->relu, status = CLT_OK;
  if (l->frozen) {
    /* No gradient of gamma and beta, and the statistics are constants: the sums
     * over no blocks leave dx = g * gamma * inv_std. */
    nblocks = 0;
    gamma_slot = beta_slot = -1;
  } else {
    clt_karg args[] = {CLT_ARG(io->dy),    CLT_ARG(io->x),       CLT_ARG(io->params),
                       CLT_ARG(gamma_off), CLT_ARG(beta_off),    CLT_ARG(relu),
                       CLT_ARG(rows),      CLT_ARG(C),           CLT_ARG(per_block),
                       CLT_ARG(io->state), CLT_ARG(io->scratch), CLT_ARG(part),
                       CLT_ARG(part2)};
    status = bn_run(io, "bn_partial_grad", args, 13, BN_BLOCKS, C, nblocks, e);
  }
  if (!status) {
    /* Gamma and beta share the layout of the gradient buffer: same offsets (-1: absent
     * or frozen, no gradient). */
    clt_karg args[] = {CLT_ARG(io->scratch), CLT_ARG(part),       CLT_ARG(part2),
                       CLT_ARG(nblocks),     CLT_ARG(rows),       CLT_ARG(C),
                       CLT_ARG(io->state),   CLT_ARG(io->params), CLT_ARG(gamma_off),
                       CLT_ARG(io->grads),   CLT_ARG(gamma_slot), CLT_ARG(beta_slot),
                       CLT_ARG(io->scratch), CLT_ARG(coef)};
    status = bn_run(io, "bn_grad_final", args, 14, BN_FINAL, C, 0, e);
  }
  const int sums = io->fusion.sums_input_bias;
  if (!status && sums && !io->dx) {
    status = clt_fail(e, CLT_ERR_INTERNAL, "%s: its input's bias gradient needs dx", l->name);
  } else if (!status && io->dx) {
    /* With sums: dx's partial sums after the coefficients, in blocks of
     * clt_bias_grad's rows. */
    int sums_at = coef + 3 * C, block = sums ? CLT_BIAS_GRAD_ROWS_PER_BLOCK : BN_ROWS_PER_ITEM;
    clt_karg args[] = {CLT_ARG(io->dy),    CLT_ARG(io->x),       CLT_ARG(io->params),
                       CLT_ARG(gamma_off), CLT_ARG(beta_off),    CLT_ARG(relu),
                       CLT_ARG(io->dx),    CLT_ARG(rows),        CLT_ARG(C),
                       CLT_ARG(block),     CLT_ARG(io->state),   CLT_ARG(io->scratch),
                       CLT_ARG(coef),      CLT_ARG(io->scratch), CLT_ARG(sums_at)};
    if (sums) {
      status = bn_run(io, "bn_dx_sums", args, 15, BN_BLOCKS, C,
                      bn_blocks(rows, CLT_BIAS_GRAD_ROWS_PER_BLOCK), e);
      if (!status)
        status = clt_bias_grad_final(io, io->scratch, (size_t)sums_at, rows, C,
                                     io->fusion.input_bias, e);
    } else {
      status = bn_run(io, "bn_dx", args, 13, BN_ROWS, C, rows, e);
    }
  }
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

#ifdef CLT_REFERENCE
/* gamma, beta (NULL when absent) in the flat buffer p. */
static const double *ref_param(const clt_layer *l, const double *p, int index) {
  return index < 0 ? NULL : p + l->params[index].offset;
}

static void bn_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const double *gamma = ref_param(l, io->params, bn_gamma(l));
  const double *beta = ref_param(l, io->params, bn_beta(l));
  const int rows = bn_rows(l, io->batch), C = l->in.c;
  if (!io->train || l->frozen) {
    ref_batchnorm_forward_infer(io->x, rows, C, gamma, beta,
                                io->params + l->params[bn_mean(l)].offset,
                                io->params + l->params[bn_var(l)].offset, hp(l)->epsilon,
                                hp(l)->relu, io->y);
    return;
  }
  double *mean = malloc(2 * (size_t)C * sizeof *mean);
  if (!mean) return;
  double *var_unbiased = mean + C;
  ref_batchnorm_forward_train(io->x, rows, C, gamma, beta, hp(l)->epsilon, hp(l)->relu, io->y, mean,
                              NULL, var_unbiased);
  /* What a device writes to the moving statistics' gradient slots (see above). */
  for (int c = 0; c < C && io->grads; c++) {
    io->grads[l->params[bn_mean(l)].offset + c] = io->stat_weight * mean[c];
    io->grads[l->params[bn_var(l)].offset + c] = io->stat_weight * var_unbiased[c];
  }
  free(mean);
}

static void bn_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (l->frozen) {
    /* Inference mode: y = gamma * (x - mean) / sqrt(var + eps) + beta, constants
     * but x; no gradient of the parameters. */
    const double *gamma = ref_param(l, io->params, bn_gamma(l));
    const double *var = io->params + l->params[bn_var(l)].offset;
    const int rows = bn_rows(l, io->batch), C = l->in.c;
    for (size_t at = 0; io->dx && at < (size_t)rows * C; at++) {
      const int c = (int)(at % (size_t)C);
      const double g = hp(l)->relu && !(io->y[at] > 0) ? 0.0 : io->dy[at];
      io->dx[at] = g * (gamma ? gamma[c] : 1.0) / sqrt(var[c] + hp(l)->epsilon);
    }
    return;
  }
  ref_batchnorm_backward(io->x, bn_rows(l, io->batch), l->in.c,
                         ref_param(l, io->params, bn_gamma(l)),
                         ref_param(l, io->params, bn_beta(l)), hp(l)->epsilon, hp(l)->relu, io->dy,
                         io->dx, (double *)ref_param(l, io->grads, bn_gamma(l)),
                         (double *)ref_param(l, io->grads, bn_beta(l)));
}
#endif

/* Keras BatchNormalization (Keras 3 and tf.keras 2.x): axis (the channels: -1 or 3),
 * momentum, epsilon, center, scale; synchronized and fused change nothing on one
 * replica's slice (cltrain normalises per replica, as MirroredStrategy's default);
 * renorm, virtual batches and adjustments are refused. */
static int bn_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                         clt_err *e) {
  static const char *const ignored[] = {"synchronized", "fused", "renorm_momentum", NULL};
  bn_hp *h = clt_layer_hp(l, bn_hp);
  int axis = -1, center = 1, scale = 1, renorm = 0, virtual_batch = 0;
  (void)size;
  activation[0] = '\0';
  memset(h, 0, sizeof *h);
  clt_kc_ignore(c, ignored);
  int status = clt_kc_ints(c, "axis", 1, -1, &axis, e);
  if (!status) status = clt_kc_double(c, "momentum", 0.99, &h->momentum, e);
  if (!status) status = clt_kc_double(c, "epsilon", 0.001, &h->epsilon, e);
  if (!status) status = clt_kc_bool(c, "center", 1, &center, e);
  if (!status) status = clt_kc_bool(c, "scale", 1, &scale, e);
  if (!status) status = clt_kc_bool(c, "renorm", 0, &renorm, e);
  if (!status) status = clt_kc_int(c, "virtual_batch_size", 0, &virtual_batch, e);
  if (status) return status;
  if (axis != -1 && axis != 3)
    return clt_kc_fail(c, e, "axis %d is not supported (only -1 or 3, the channels)", axis);
  if (renorm) return clt_kc_fail(c, e, "renorm is not supported (only false)");
  if (clt_kc_has(c, "renorm_clipping"))
    return clt_kc_fail(c, e, "renorm_clipping is not supported (only none)");
  if (virtual_batch)
    return clt_kc_fail(c, e, "virtual_batch_size %d is not supported (only none)", virtual_batch);
  if (clt_kc_has(c, "adjustment")) return clt_kc_fail(c, e, "adjustment is not supported");
  if (!(h->epsilon > 0.0)) return clt_kc_fail(c, e, "epsilon %g: must be positive", h->epsilon);
  if (!(h->momentum >= 0.0 && h->momentum <= 1.0))
    return clt_kc_fail(c, e, "momentum %g: must be in [0, 1]", h->momentum);
  h->nocenter = !center;
  h->noscale = !scale;
  return CLT_OK;
}

/* ONNX BatchNormalization (inference: the moving statistics), gamma 1 and beta 0
 * when absent; then Relu when fused. */
static int bn_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                      const char *output, clt_err *e) {
  const int C = l->in.c;
  const int64_t dims[1] = {C};
  static const char *const suffix[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
  const int index[4] = {bn_gamma(l), bn_beta(l), bn_mean(l), bn_var(l)};
  const char *names[5] = {inputs[0]};
  float *fill = malloc((size_t)C * sizeof *fill);
  int status = fill ? CLT_OK : clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", l->name);
  for (int i = 0; i < 4 && !status; i++) {
    names[i + 1] = clt_onnx_name(g, l, suffix[i]);
    const float *values = index[i] >= 0 ? clt_onnx_param(g, l, index[i]) : fill;
    for (int k = 0; k < C && index[i] < 0; k++) fill[k] = i == 0 ? 1.0f : 0.0f;
    status = clt_onnx_tensor(g, names[i + 1], 1, dims, values, e);
  }
  free(fill);
  const clt_onnx_attr attrs[2] = {CLT_ONNX_FLOAT("epsilon", (float)hp(l)->epsilon),
                                  CLT_ONNX_FLOAT("momentum", (float)hp(l)->momentum)};
  const char *bn_out = hp(l)->relu ? clt_onnx_name(g, l, "bn") : output;
  if (!status) status = clt_onnx_node(g, "BatchNormalization", names, 5, bn_out, attrs, 2, e);
  if (!status && hp(l)->relu) status = clt_onnx_node(g, "Relu", &bn_out, 1, output, NULL, 0, e);
  return status;
}

/* An Add after a BatchNormalization without a ReLU of its own joins bn_apply's
 * pass (a residual block's last BatchNormalization): its own ReLU, if any,
 * would come before the sum (fusion.adds). The backward reads dy and leaves it
 * alone, so an Add's output gradient can be its input's in place. Its dx pass
 * can sum dx into the input's producer's bias gradient (fusion.sums_input_bias). */
static unsigned bn_fusions(const clt_layer *l) {
  return CLT_FUSE_KEEPS_DY | CLT_FUSE_INPUT_BIAS | (hp(l)->relu ? 0u : CLT_FUSE_ADD_RESIDUAL);
}

static const char *const bn_sources[] = {"batchnorm.cl", "bias.cl", NULL};

const clt_layer_ops clt_batchnorm_ops = {
    .kind = "BatchNormalization",
    .ninputs = 1,
    .parse = bn_parse,
    .describe = bn_describe,
    .setup = bn_setup,
    .scratch_floats = bn_scratch,
    .prepare = bn_prepare,
    .sources = bn_sources,
    .forward = bn_forward,
    .backward = bn_backward,
    .fusions = bn_fusions,
    .state_floats = bn_state,
    .from_keras = bn_from_keras,
    .to_onnx = bn_to_onnx,
    .ref_forward = CLT_REF(bn_ref_forward),
    .ref_backward = CLT_REF(bn_ref_backward),
};
