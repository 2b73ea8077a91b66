/* BatchNormalization (Keras, axis=-1 on NHWC) with an optional fused ReLU.
 *
 * The input is seen as rows = batch*H*W rows of C channels. Parameters, in Keras'
 * order: gamma, beta, moving_mean, moving_variance (the last two non-trainable).
 *
 * training forward: mean, biased var per channel over the rows (corrected two-pass,
 *           so a large mean does not cancel the variance away); inv_std = 1/sqrt(var+eps);
 *           y = gamma*(x-mean)*inv_std + beta (+ReLU). mean and inv_std are kept in
 *           io->state for backward. The gradient slots of the moving statistics get
 *           stat_weight*mean and stat_weight*unbiased var: the all-reduce turns them
 *           into the example-weighted average of the replicas' batch statistics,
 *           which the trainer folds into the moving averages.
 * inference: the same with moving_mean, moving_variance; no gradient written.
 * backward: g = dy masked by (y > 0) if relu (fused into the two kernels that read
 *           dy: a separate scalar ReLU-backward pass cost PoCL about as much as those
 *           two together); dbeta = sum g;
 *           dgamma = sum g*xhat; dx = gamma*inv_std/n * (n*g - dbeta - xhat*dgamma).
 *           dy is not modified. The moving statistics' slots are left as the
 *           forward wrote them.
 * Scratch: [partial sums: 2*nblocks*C][dx coefficients: 3*C]; inference uses its
 * first 2*C floats for the statistics.
 * Launches per kernel flavor (see cl/norm.cl): partial sums clt_launch_blocks,
 * elementwise passes clt_launch_rows, the final sums over the blocks a work-item
 * per channel on CPUs and clt_launch_blocks over (C, 1) on GPUs. */
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref_resnet.h"
#endif

/* Rows per partial sum on CPUs: enough blocks to occupy a device even at small
 * batches, few enough that the final pass over the blocks stays short. */
#define BN_ROWS_PER_BLOCK 128
/* GPUs: a block is a work-group of up to 32 channels (a 128-byte line) by row
 * lanes, so blocks x channel groups should fill a large GPU (132 SMs: about 8
 * groups each), while at most BN_GPU_MAX_BLOCKS blocks keep the final pass (one
 * work-group per 32 channels) short. Never fewer rows than BN_ROWS_PER_BLOCK:
 * the scratch, sized for the CPU's blocks, holds the GPU's fewer. */
#define BN_GPU_GROUPS 1024
#define BN_GPU_MAX_BLOCKS 256
/* Rows per work-item of the CPU's elementwise passes (bn_apply, bn_dx): with one
 * row (8 floats) per work-item bn_apply took PoCL 3x as long as with 4. GPUs take
 * an element per work-item. */
#define BN_ROWS_PER_ITEM 4

enum { BN_GAMMA, BN_BETA, BN_MEAN, BN_VAR };

typedef struct bn_hp {
  double epsilon, momentum;
  int relu; /* fused activation */
} bn_hp;

static const bn_hp *hp(const clt_layer *l) { return clt_layer_hp(l, bn_hp); }

/* "eps1.001e-05,m0.99,relu" */
static int bn_parse(clt_layer *l, const char *args, clt_err *e) {
  bn_hp *h = clt_layer_hp(l, bn_hp);
  int used = 0;
  if (sscanf(args, "eps%lf,m%lf%n", &h->epsilon, &h->momentum, &used) != 2 ||
      clt_parse_relu_tail(args + used, &h->relu) != 0) {
    return clt_fail(
        e, CLT_ERR_FORMAT,
        "%s: BatchNormalization(%s): expected BatchNormalization(epsEPSILON,mMOMENTUM[,relu])",
        l->name, args);
  }
  return CLT_OK;
}

static void bn_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "BatchNormalization(eps%g,m%g%s)", hp(l)->epsilon, hp(l)->momentum,
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
  for (int i = 0; i < 4; i++) {
    l->params[i] = (clt_param){.rank = 1,
                               .dims = {in.c},
                               .size = (size_t)in.c,
                               .init_constant = inits[i],
                               .non_trainable = i >= BN_MEAN,
                               .moving_momentum = i >= BN_MEAN ? h->momentum : 0.0};
    snprintf(l->params[i].name, sizeof l->params[i].name, "%s", names[i]);
  }
  l->nparams = 4;
  return CLT_OK;
}

static int bn_rows(const clt_layer *l, int batch) { return batch * l->in.h * l->in.w; }

/* Rows per partial-sum block on replica r (see BN_GPU_GROUPS). */
static int bn_rows_per_block(const clt_layer *l, const clt_replica *r, int rows) {
  if (r->flavor != CLT_KERNELS_GPU) return BN_ROWS_PER_BLOCK;
  int blocks = BN_GPU_GROUPS / ((l->in.c + 31) / 32);
  if (blocks > BN_GPU_MAX_BLOCKS) blocks = BN_GPU_MAX_BLOCKS;
  if (blocks < 1) blocks = 1;
  const int per = (rows + blocks - 1) / blocks;
  return per > BN_ROWS_PER_BLOCK ? per : BN_ROWS_PER_BLOCK;
}

static int bn_blocks(int rows, int per_block) { return (rows + per_block - 1) / per_block; }

/* The most blocks either flavor uses (the CPU's: the GPU's blocks are longer). */
static size_t bn_scratch(const clt_layer *l, int batch) {
  return (2 * (size_t)bn_blocks(bn_rows(l, batch), BN_ROWS_PER_BLOCK) + 3) * l->in.c;
}

static size_t bn_state(const clt_layer *l) { return 2 * (size_t)l->in.c; }

static const char *const bn_kernels[] = {"bn_partial_sum",  "bn_partial_dev", "bn_mean",
                                         "bn_var",          "bn_infer_stats", "bn_apply",
                                         "bn_partial_grad", "bn_grad_final",  "bn_dx"};

static int bn_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)l;
  (void)max_batch;
  return clt_layer_build_kernels(r, "norm.cl", bn_kernels,
                                 (int)(sizeof bn_kernels / sizeof bn_kernels[0]), e);
}

/* The shapes of norm.cl's launches over C channels (see the kernels there). */
typedef enum bn_shape {
  BN_CHANNELS, /* a work-item per channel */
  BN_FINAL,    /* the final sums over the blocks: per channel, lanes on GPUs */
  BN_BLOCKS,   /* partial sums over n blocks of rows */
  BN_ROWS      /* elementwise over n rows */
} bn_shape;

/* Launches norm.cl's `name` in `shape` over C channels (and n blocks or rows). */
static int bn_run(const clt_layer_io *io, const char *name, const clt_karg *args, int nargs,
                  bn_shape shape, int C, int n, clt_err *e) {
  clt_replica *r = io->replica;
  cl_kernel k;
  int status = clt_replica_kernel(r, "norm.cl", "", name, &k, e);
  if (status) return status;
  switch (shape) {
    case BN_FINAL:
      if (r->flavor == CLT_KERNELS_GPU)
        return clt_launch_blocks(r, k, name, args, nargs, (size_t)C, 1, e);
      return clt_launch1d(r, k, name, args, nargs, (size_t)C, e);
    case BN_BLOCKS:
      return clt_launch_blocks(r, k, name, args, nargs, (size_t)C, (size_t)n, e);
    case BN_ROWS:
      return clt_launch_rows(r, k, name, args, nargs, (size_t)C, (size_t)n, BN_ROWS_PER_ITEM, e);
    case BN_CHANNELS:
      break;
  }
  return clt_launch1d(r, k, name, args, nargs, (size_t)C, e);
}

/* Batch statistics into io->state (mean, inv_std) and the moving statistics' slots:
 * a first-pass mean, then deviations from it (see bn_partial_dev in norm.cl). */
static int bn_batch_stats(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int rows = bn_rows(l, io->batch), C = l->in.c;
  int per_block = bn_rows_per_block(l, io->replica, rows);
  int nblocks = bn_blocks(rows, per_block), part = 0, part2 = nblocks * C;
  int mean_slot = (int)l->params[BN_MEAN].offset, var_slot = (int)l->params[BN_VAR].offset;
  float eps = (float)hp(l)->epsilon, w = io->stat_weight;
  clt_karg sum_args[] = {CLT_ARG(io->x),     CLT_ARG(rows),        CLT_ARG(C),
                         CLT_ARG(per_block), CLT_ARG(io->scratch), CLT_ARG(part)};
  int status = bn_run(io, "bn_partial_sum", sum_args, 6, BN_BLOCKS, C, nblocks, e);
  if (status) return status;
  clt_karg mean_args[] = {CLT_ARG(io->scratch), CLT_ARG(part), CLT_ARG(nblocks),
                          CLT_ARG(rows),        CLT_ARG(C),    CLT_ARG(io->state)};
  status = bn_run(io, "bn_mean", mean_args, 6, BN_FINAL, C, 0, e);
  if (status) return status;
  /* The in-order queue runs this after bn_mean has read the partial sums. */
  clt_karg dev_args[] = {CLT_ARG(io->x),     CLT_ARG(rows),      CLT_ARG(C),
                         CLT_ARG(per_block), CLT_ARG(io->state), CLT_ARG(io->scratch),
                         CLT_ARG(part),      CLT_ARG(part2)};
  status = bn_run(io, "bn_partial_dev", dev_args, 8, BN_BLOCKS, C, nblocks, e);
  if (status) return status;
  clt_karg var_args[] = {CLT_ARG(io->scratch), CLT_ARG(part),      CLT_ARG(part2),
                         CLT_ARG(nblocks),     CLT_ARG(rows),      CLT_ARG(C),
                         CLT_ARG(eps),         CLT_ARG(io->state), CLT_ARG(io->grads),
                         CLT_ARG(mean_slot),   CLT_ARG(var_slot),  CLT_ARG(w)};
  return bn_run(io, "bn_var", var_args, 12, BN_FINAL, C, 0, e);
}

static int bn_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int rows = bn_rows(l, io->batch), C = l->in.c, off = 0, relu = hp(l)->relu;
  int gamma_off = (int)l->params[BN_GAMMA].offset, beta_off = (int)l->params[BN_BETA].offset;
  cl_mem stats = io->state;
  int status;
  if (io->train) {
    if (!io->state) return clt_fail(e, CLT_ERR_INTERNAL, "%s: no state buffer", l->name);
    status = bn_batch_stats(l, io, e);
  } else {
    /* The moving statistics in the training state's layout, so one bn_apply serves. */
    int mean_off = (int)l->params[BN_MEAN].offset, var_off = (int)l->params[BN_VAR].offset;
    float eps = (float)hp(l)->epsilon;
    stats = io->scratch;
    clt_karg args[] = {CLT_ARG(io->params), CLT_ARG(mean_off), CLT_ARG(var_off), CLT_ARG(C),
                       CLT_ARG(eps),        CLT_ARG(stats),    CLT_ARG(off)};
    status = bn_run(io, "bn_infer_stats", args, 7, BN_CHANNELS, C, 0, e);
  }
  if (status) return clt_wrap(e, "%s", l->name);
  int per_item = BN_ROWS_PER_ITEM;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->y),    CLT_ARG(rows), CLT_ARG(C),
                     CLT_ARG(per_item),  CLT_ARG(stats),    CLT_ARG(off),  CLT_ARG(io->params),
                     CLT_ARG(gamma_off), CLT_ARG(beta_off), CLT_ARG(relu)};
  status = bn_run(io, "bn_apply", args, 11, BN_ROWS, C, rows, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int bn_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->state) return clt_fail(e, CLT_ERR_INTERNAL, "%s: no state buffer", l->name);
  int rows = bn_rows(l, io->batch), C = l->in.c;
  int per_block = bn_rows_per_block(l, io->replica, rows);
  int nblocks = bn_blocks(rows, per_block), part = 0, part2 = nblocks * C, coef = 2 * nblocks * C;
  int gamma_off = (int)l->params[BN_GAMMA].offset, beta_off = (int)l->params[BN_BETA].offset;
  int relu = hp(l)->relu, status;
  {
    clt_karg args[] = {CLT_ARG(io->dy),      CLT_ARG(io->x), CLT_ARG(io->y),     CLT_ARG(relu),
                       CLT_ARG(rows),        CLT_ARG(C),     CLT_ARG(per_block), CLT_ARG(io->state),
                       CLT_ARG(io->scratch), CLT_ARG(part),  CLT_ARG(part2)};
    status = bn_run(io, "bn_partial_grad", args, 11, BN_BLOCKS, C, nblocks, e);
  }
  if (!status) {
    /* Gamma and beta share the layout of the gradient buffer: same offsets. */
    clt_karg args[] = {CLT_ARG(io->scratch), CLT_ARG(part),       CLT_ARG(part2),
                       CLT_ARG(nblocks),     CLT_ARG(rows),       CLT_ARG(C),
                       CLT_ARG(io->state),   CLT_ARG(io->params), CLT_ARG(gamma_off),
                       CLT_ARG(io->grads),   CLT_ARG(gamma_off),  CLT_ARG(beta_off),
                       CLT_ARG(io->scratch), CLT_ARG(coef)};
    status = bn_run(io, "bn_grad_final", args, 14, BN_FINAL, C, 0, e);
  }
  if (!status && io->dx) {
    int per_item = BN_ROWS_PER_ITEM;
    clt_karg args[] = {CLT_ARG(io->dy),    CLT_ARG(io->x),       CLT_ARG(io->y), CLT_ARG(relu),
                       CLT_ARG(io->dx),    CLT_ARG(rows),        CLT_ARG(C),     CLT_ARG(per_item),
                       CLT_ARG(io->state), CLT_ARG(io->scratch), CLT_ARG(coef)};
    status = bn_run(io, "bn_dx", args, 11, BN_ROWS, C, rows, e);
  }
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

#ifdef CLT_REFERENCE
static void bn_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const double *gamma = io->params + l->params[BN_GAMMA].offset;
  const double *beta = io->params + l->params[BN_BETA].offset;
  const int rows = bn_rows(l, io->batch), C = l->in.c;
  if (!io->train) {
    ref_batchnorm_forward_infer(io->x, rows, C, gamma, beta, io->params + l->params[BN_MEAN].offset,
                                io->params + l->params[BN_VAR].offset, hp(l)->epsilon, hp(l)->relu,
                                io->y);
    return;
  }
  double *mean = malloc(2 * (size_t)C * sizeof *mean);
  if (!mean) return;
  double *var_unbiased = mean + C;
  ref_batchnorm_forward_train(io->x, rows, C, gamma, beta, hp(l)->epsilon, hp(l)->relu, io->y, mean,
                              NULL, var_unbiased);
  /* What a device writes to the moving statistics' gradient slots (see above). */
  for (int c = 0; c < C && io->grads; c++) {
    io->grads[l->params[BN_MEAN].offset + c] = io->stat_weight * mean[c];
    io->grads[l->params[BN_VAR].offset + c] = io->stat_weight * var_unbiased[c];
  }
  free(mean);
}

static void bn_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  ref_batchnorm_backward(io->x, bn_rows(l, io->batch), l->in.c,
                         io->params + l->params[BN_GAMMA].offset,
                         io->params + l->params[BN_BETA].offset, hp(l)->epsilon, hp(l)->relu,
                         io->dy, io->dx, io->grads + l->params[BN_GAMMA].offset,
                         io->grads + l->params[BN_BETA].offset);
}
#endif

const clt_layer_ops clt_batchnorm_ops = {
    .kind = "BatchNormalization",
    .ninputs = 1,
    .parse = bn_parse,
    .describe = bn_describe,
    .setup = bn_setup,
    .scratch_floats = bn_scratch,
    .prepare = bn_prepare,
    .forward = bn_forward,
    .backward = bn_backward,
    .state_floats = bn_state,
    .ref_forward = CLT_REF(bn_ref_forward),
    .ref_backward = CLT_REF(bn_ref_backward),
};
