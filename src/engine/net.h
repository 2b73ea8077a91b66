/* A model instantiated on one replica: the flat parameter, gradient and optimizer
 * state buffers, activation buffers sized for the largest batch, and the step. */
#ifndef CLT_NET_H
#define CLT_NET_H

#include "model.h"
#include "optimizer.h"
#include "plan.h"

/* Activation gradients live in a small pool of buffers, each large enough for
 * any layer's output: a layer's output gradient is taken from the pool when its
 * first consumer's backward writes it and returned once the layer's own backward
 * has read it. clt_net_create plans the schedule once, and sizes the pool so.
 * An inference-only net keeps an activation only until its last reader has run,
 * in a pool of buffers like the gradients' (ResNet50: 3). */

typedef struct clt_grad_plan {
  int out;       /* pool buffer holding the gradient of this layer's output */
  int in[2];     /* buffer the backward writes input k's gradient to, or -1 (none needed) */
  int add_to[2]; /* if >= 0: input k's gradient already exists there; in[k] is a temporary
                    whose content is added into it */
} clt_grad_plan;

/* Plans the gradient buffers of m's backward pass: plan[i] per layer, and the
 * pool's size (*nbuffers). clt_net_create calls it; exposed for the tests. */
int clt_net_plan_gradients(const clt_model *m, clt_grad_plan *plan, int *nbuffers, clt_err *e);

typedef struct clt_net {
  const clt_model *model;
  clt_replica *replica;
  int max_batch;
  int train;                       /* 0: inference only (no gradients, optimizer, state) */
  size_t device_bytes;             /* everything this net allocated on the device */
  cl_mem params;                   /* flat, model->flat_floats */
  cl_mem grads;                    /* model->grad_floats (frozen layers have none); NULL when
                                      inference only */
  cl_mem opt_state[CLT_OPT_SLOTS]; /* the optimizer's slot variables (Adam m and v, ...: see
                                      optimizer.h) of the trained parameters,
                                      model->trainable_floats; NULL when inference only */
  cl_mem input;                    /* (max_batch, input) floats, filled by a batch source */
  cl_mem labels;                   /* max_batch ints, filled by a batch source */
  /* Per layer (model->nlayers each, allocated with the net): */
  cl_mem *act;   /* outputs; aliases of the input for flatten; in an
                    inference net, buffers of act_pool */
  cl_mem *state; /* layers' forward-to-backward state, or NULL */
  clt_grad_plan *grad_plan;
  cl_mem *act_pool; /* act_buffers of them */
  int act_buffers;
  cl_mem *grad_pool; /* grad_buffers of them */
  int grad_buffers;
  clt_plan plan; /* the steps a pass runs, fused as the replica's backend allows */
  /* Whether the backward pass needs each layer's output gradient
   * (clt_model_grads_needed): layers that need none run no backward. */
  unsigned char *grads_needed;
  /* The moving statistics (BatchNormalization's) as runs of the flat buffer's tail
   * sharing a momentum: stat_first[k] up to the next run's start (or the end). */
  int stat_runs;
  int *stat_first;
  float *stat_momentum;
  cl_mem scratch;
  cl_mem losses, correct; /* per example */
  cl_mem metrics;         /* (loss sum, correct count) per slot */
  cl_mem grad_checks;     /* non-finite gradient count per slot */
  cl_mem check_partial;   /* its per-block partial counts */
  int metric_slots;
  /* The next step's place, for layers that draw random numbers (see clt_layer_io). */
  uint64_t seed;
  long step, example0;
} clt_net;

/* Allocates everything for batches up to max_batch, builds every kernel and
 * reserves GEMM scratch, so nothing is allocated or compiled inside the step. */
int clt_net_create(const clt_model *m, clt_replica *r, int max_batch, int metric_slots,
                   clt_net **out, clt_err *e);
/* The same for evaluation only: no gradient, optimizer or layer-state buffers,
 * and activations reused once read (clt_net_forward_backward with train 0 only). */
int clt_net_create_inference(const clt_model *m, clt_replica *r, int max_batch, int metric_slots,
                             clt_net **out, clt_err *e);
void clt_net_destroy(clt_net *net);

/* Builds every layer's kernels and reserves its GEMM scratch for the passes it
 * runs on the net's replica (clt_net_create does; again after the replica's
 * convolution choices changed, so that the new algorithms are ready). */
int clt_net_prepare(clt_net *net, clt_err *e);

/* Copies between host and the flat buffers (blocking). */
int clt_net_write_params(clt_net *net, const float *flat, clt_err *e);
int clt_net_read_params(clt_net *net, float *flat, clt_err *e);
int clt_net_read_grads(clt_net *net, float *flat, clt_err *e); /* grad_floats floats */
int clt_net_write_grads(clt_net *net, const float *flat, clt_err *e);

/* Device bytes a net for max_batch examples allocates, without the batch source's
 * (train 0: an inference-only net). */
size_t clt_net_bytes(const clt_model *m, int max_batch, int train);

/* Sets where the next forward's slice sits: the run's seed, the training step
 * (from 0) and the global index of the slice's first example in its global batch.
 * Dropout's masks depend only on these, so every replica layout draws the same. */
void clt_net_set_position(clt_net *net, uint64_t seed, long step, long example0);

/* Enqueues forward, loss and (train) backward for the loaded batch of `count`
 * examples. Per-example losses are multiplied by loss_scale (1 / global batch)
 * for the gradient; the metrics slot receives the unscaled loss sum and the
 * number correct. count may be 0: gradients are then zero. */
int clt_net_forward_backward(clt_net *net, int count, float loss_scale, int metric_slot, int train,
                             clt_err *e);

/* The all-reduce's buckets, as PyTorch DDP's: the gradient buffer ([0,
 * grad_floats) of the flat layout) cut at layer boundaries into contiguous
 * ranges, from the highest offsets down, which is the order the backward pass
 * completes them in (layers are laid out in model order and their backward runs
 * in reverse). The first bucket also holds the buffer's tail of moving
 * statistics, written by the forward pass. */
typedef struct clt_bucket {
  size_t offset, count; /* floats [offset, offset + count) of the flat buffers */
  int layer;            /* complete once this layer's backward has run: the lowest in it */
} clt_bucket;
#define CLT_MAX_BUCKETS 64

/* Cuts m's gradient buffer into buckets of whole layers, each closed once it
 * holds at least min_floats (the last, the first layers', may hold fewer), at
 * most CLT_MAX_BUCKETS (min_floats doubles until they fit). The buckets tile
 * [0, grad_floats). Returns how many (at least 1). */
int clt_net_buckets(const clt_model *m, size_t min_floats, clt_bucket *out);

/* clt_net_forward_backward in training, which also enqueues a marker on the
 * replica's queue as each bucket's gradient is final (after its layer's
 * backward; with count 0, after the zeroing): done[b] completes then. The caller
 * releases the events; on failure none is left. */
int clt_net_forward_backward_marked(clt_net *net, int count, float loss_scale, int metric_slot,
                                    const clt_bucket *buckets, int nbuckets, cl_event *done,
                                    clt_err *e);

/* Enqueues one update of the trainable params from grads by optimizer opt (step
 * counts from 1; Adam's bias correction uses it), and the moving-average update of
 * BatchNormalization's statistics from the batch statistics the all-reduce averaged
 * into their gradient slots. Every replica runs the same float operations (built with
 * replica->exact_options), so replicas on different devices stay bit-identical. */
int clt_net_update(clt_net *net, const clt_optimizer *opt, long step, clt_err *e);

/* clt_net_update, its kernel also counting the non-finite values of the whole
 * gradient buffer (read as it updates) into grad-check slot `slot` (< 0: none kept). */
int clt_net_update_checked(clt_net *net, const clt_optimizer *opt, long step, int slot, clt_err *e);

/* Makes the net hold `slots` metric and gradient-check slots (their values are
 * lost): a trainer whose passes grew longer. Waits for the replica's queue. */
int clt_net_set_metric_slots(clt_net *net, int slots, clt_err *e);

/* Reads metric slot `slot` (loss sum and correct count: 2 floats) and, when check
 * is not NULL in a training net, its gradient check: blocking (the queue is
 * finished) with done NULL, else enqueued, *done completing once both are read
 * (the caller releases it). */
int clt_net_read_slot(clt_net *net, int slot, float *metrics, float *check, cl_event *done,
                      clt_err *e);

/* Reads metrics slots [0, n) as 2n floats (blocking). */
int clt_net_read_metrics(clt_net *net, float *out, int n, clt_err *e);

/* Enqueues a read (non-blocking: done once the queue is finished) of the last
 * forward's logits, count x classes floats, into out. */
int clt_net_read_logits(clt_net *net, int count, float *out, clt_err *e);

/* Reads grad-check slots [0, n) back (blocking). */
int clt_net_read_grad_checks(clt_net *net, float *out, int n, clt_err *e);

#endif
