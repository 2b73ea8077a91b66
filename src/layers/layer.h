/* The layer interface: every layer kind is one .c file exposing an ops table.
 *
 * A clt_layer is the immutable description (kind, hyper-parameters, shapes,
 * where its parameters sit in the flat buffer), shared by all replicas. What a
 * replica needs to run it (buffers) is passed in a clt_layer_io per call, so
 * one description serves every device. */
#ifndef CLT_LAYER_H
#define CLT_LAYER_H

#include <stddef.h>

#include "replica.h"

typedef struct clt_shape {
  int h, w, c; /* per example, NHWC */
} clt_shape;

static inline size_t clt_shape_size(clt_shape s) { return (size_t)s.h * s.w * s.c; }

#define CLT_MAX_LAYER_PARAMS 4

/* One parameter tensor in Keras layout, e.g. "kernel" (3,3,1,64). */
typedef struct clt_param {
  char name[16];
  int rank;
  int dims[4];
  size_t size;   /* elements */
  size_t offset; /* in floats, within the replica's flat parameter buffer */
  double glorot_fan_in, glorot_fan_out; /* 0, 0: initialised to init_constant */
  float init_constant;                  /* 0 for biases and betas, 1 for gammas, variances */
  /* Not trained by Adam (BatchNormalization's moving statistics): these sit after
   * every trainable parameter in the flat buffer, and their slots in the gradient
   * buffer carry the replica's share of the batch statistics instead of a gradient,
   * so the all-reduce averages the statistics (see batchnorm.c). */
  int non_trainable;
} clt_param;

typedef struct clt_layer clt_layer;

/* Buffers one forward or backward call works on (offsets are in floats). */
typedef struct clt_layer_io {
  clt_replica *replica;
  int batch;        /* examples in this call, >= 1 (the net handles empty slices) */
  int train;        /* forward in training mode (BatchNormalization: batch statistics) */
  float stat_weight; /* training: this slice's share of the global batch (count / global) */
  cl_mem x, x2;     /* input activations (batch, in[0]) and a second input (Add), or NULL */
  cl_mem y;         /* output activations (batch, out) */
  cl_mem dy;        /* backward: gradient of the output; layers may overwrite it */
  cl_mem dx, dx2;   /* backward: gradients of the inputs to write (not accumulate), or NULL */
  cl_mem params;    /* the flat parameter buffer */
  cl_mem grads;     /* the flat gradient buffer (same layout), written, not accumulated */
  cl_mem scratch;   /* shared scratch of at least ops->scratch_floats(batch) floats */
  cl_mem state;     /* this layer's own ops->state_floats floats, kept from forward to
                       backward (BatchNormalization's batch mean and 1/std), or NULL */
} clt_layer_io;

typedef struct clt_layer_ops {
  const char *kind;
  /* Checks the input shapes (in[0 .. l->ninputs)), sets l->in, l->out and l->params. */
  int (*setup)(clt_layer *l, const clt_shape *in, clt_err *e);
  /* Scratch the layer needs for `batch` examples, in floats. */
  size_t (*scratch_floats)(const clt_layer *l, int batch);
  /* Builds kernels and reserves GEMM scratch on a replica for up to max_batch. */
  int (*prepare)(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e);
  int (*forward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  int (*backward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  /* Floats of per-replica state kept from forward to backward (NULL: none). */
  size_t (*state_floats)(const clt_layer *l);
  /* Output is the input memory itself (flatten): no buffer of its own. */
  int aliases_input;
  int ninputs; /* 1, or 2 for Add */
} clt_layer_ops;

struct clt_layer {
  const clt_layer_ops *ops;
  char name[32]; /* Keras layer name: conv2d, conv2d_1, max_pooling2d, dense, ... */
  /* The graph: layers are stored in an order where inputs come first. */
  int ninputs;
  int inputs[2]; /* index of the producing layer, or -1 for the model's input */
  /* hyper-parameters (those the kind uses) */
  int filters, kernel_h, kernel_w, stride, pad_same; /* conv */
  int pad;       /* conv, max pool: a ZeroPadding2D of `pad` on every side before it */
  int pool, pool_stride;                             /* max pool */
  int units;                                         /* dense */
  double epsilon, momentum;                          /* batch normalization */
  int relu;                                          /* fused activation */
  char pad_name[32]; /* Keras name of the folded ZeroPadding2D layer, for descriptions */
  /* derived by setup */
  clt_shape in, out;
  int pad_top, pad_left;
  int nparams;
  clt_param params[CLT_MAX_LAYER_PARAMS];
};

extern const clt_layer_ops clt_conv2d_ops;
extern const clt_layer_ops clt_maxpool_ops;
extern const clt_layer_ops clt_flatten_ops;
extern const clt_layer_ops clt_dense_ops;
extern const clt_layer_ops clt_batchnorm_ops;
extern const clt_layer_ops clt_add_ops;
extern const clt_layer_ops clt_gap_ops; /* GlobalAveragePooling2D */

/* Helpers shared by layers. */
/* grads[offset + c] = sum over rows of dy[r, c]; uses scratch (clt_bias_grad_scratch
 * floats). relu_y: the output of a fused ReLU, or NULL; if given, dy is first
 * masked in place (dy = 0 where relu_y <= 0): the ReLU's backward, in the same pass. */
int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem relu_y, cl_mem scratch,
                  size_t scratch_offset, int rows, int cols, size_t grad_offset, clt_err *e);
size_t clt_bias_grad_scratch(int rows, int cols);

#endif
