/* A model's plan on one kind of replica: the list of steps a forward and a
 * backward pass run, and which layers run fused with which.
 *
 * One pass (clt_plan_build) decides every fusion from what the layer kinds
 * say they can do (their CLT_FUSE_* bits) and what the backend supports; the
 * network (net.c) runs the list, the layers read what they do in their
 * clt_layer_io.fusion. The fusions:
 *
 *   relu mask   A ReLU's backward (dy *= y > 0) costs its producer a pass over
 *               its output and gradient; a MaxPooling2D that is the output's
 *               only reader applies the mask for free (fusion.relu_masked on
 *               the producer, masks_input_relu on the pooling).
 *   add         An Add right after its producer, that producer's output read
 *               by nothing else: the sum (and the Add's ReLU) joins the
 *               producer's output pass (BatchNormalization), saving the Add's
 *               pass over three tensors. The Add's backward still runs; the
 *               producer's own output buffer is never written (fusion.adds).
 *   pool        A first convolution's output is the largest tensor of a small
 *               CNN, written once and read back three times when a 2x2 max
 *               pooling follows: a producer that can pool its output, reading
 *               the model's input (whose gradient nobody needs), takes over
 *               the pooling right after it when it is the only reader
 *               (fusion.pools), on backends that support it. Both passes of
 *               the pooling are the producer's; its output is never stored.
 *   bias        A Conv2D's bias gradient is its output gradient's column sums,
 *               a pass over that gradient of its own; where a
 *               BatchNormalization is the output's only reader and the bias is
 *               trained (no ReLU between), the BatchNormalization's dx pass,
 *               which writes that gradient, adds the same partial sums and
 *               writes the bias gradient (fusion.sums_input_bias, input_bias;
 *               fusion.bias_summed on the Conv2D): the same bits, one pass less. */
#ifndef CLT_PLAN_H
#define CLT_PLAN_H

#include "model.h"

/* One step: a layer's ops, with what its passes do of their neighbours. */
typedef struct clt_plan_step {
  int layer;             /* the layer whose forward and backward run */
  int forward, backward; /* which of its passes run (an Add done by its producer's
                            forward runs its backward only) */
  clt_fusion fusion;
  int residual;      /* with fusion.adds: the Add's other input (-1: the model's input) */
  int residual_relu; /* with fusion.adds: the Add's ReLU */
  /* The layers whose buffers the passes use as their output: forward_out's
   * activation is y (the Add's or the pooling's when fused); backward_out's
   * activation and gradient are y and dy (the pooling's when it is fused). */
  int forward_out, backward_out;
} clt_plan_step;

typedef struct clt_plan {
  const char *backend; /* the backend's name it was built for */
  int nsteps;
  clt_plan_step *steps; /* allocated (clt_plan_free) */
} clt_plan;

/* Builds m's plan for replicas whose backend supports the conv-pool fusion
 * (fuses_conv_pool) or not. Steps are in model order. p is zeroed or a plan,
 * whose steps are replaced. */
int clt_plan_build(const clt_model *m, const char *backend, int fuses_conv_pool, clt_plan *p,
                   clt_err *e);

/* Frees p's steps and zeroes it. */
void clt_plan_free(clt_plan *p);

/* The plan as text, a line per step: "layer Kind: forward+backward; fusions",
 * for tests and --verbose. Returns the length it wanted (as snprintf). */
size_t clt_plan_describe(const clt_model *m, const clt_plan *p, char *buf, size_t size);

#endif
