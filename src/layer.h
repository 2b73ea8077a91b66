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
  double glorot_fan_in, glorot_fan_out; /* 0, 0: initialised to zero */
} clt_param;

typedef struct clt_layer clt_layer;

/* Buffers one forward or backward call works on (offsets are in floats). */
typedef struct clt_layer_io {
  clt_replica *replica;
  int batch;        /* examples in this call, >= 1 (the net handles empty slices) */
  cl_mem x;         /* input activations (batch, in) */
  cl_mem y;         /* output activations (batch, out) */
  cl_mem dy;        /* backward: gradient of the output; layers may overwrite it */
  cl_mem dx;        /* backward: gradient of the input to write, or NULL (first layer) */
  cl_mem params;    /* the flat parameter buffer */
  cl_mem grads;     /* the flat gradient buffer (same layout), written, not accumulated */
  cl_mem scratch;   /* shared scratch of at least ops->scratch_floats(batch) floats */
} clt_layer_io;

typedef struct clt_layer_ops {
  const char *kind;
  /* Checks the input shape, sets l->out and l->params. */
  int (*setup)(clt_layer *l, clt_shape in, clt_err *e);
  /* Scratch the layer needs for `batch` examples, in floats. */
  size_t (*scratch_floats)(const clt_layer *l, int batch);
  /* Builds kernels and reserves GEMM scratch on a replica for up to max_batch. */
  int (*prepare)(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e);
  int (*forward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  int (*backward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  /* Output is the input memory itself (flatten): no buffer of its own. */
  int aliases_input;
} clt_layer_ops;

struct clt_layer {
  const clt_layer_ops *ops;
  char name[32]; /* Keras layer name: conv2d, conv2d_1, max_pooling2d, dense, ... */
  /* hyper-parameters (those the kind uses) */
  int filters, kernel_h, kernel_w, stride, pad_same; /* conv */
  int pool, pool_stride;                             /* max pool */
  int units;                                         /* dense */
  int relu;                                          /* fused activation */
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

/* Helpers shared by layers. */
/* grads[offset + c] = sum over rows of dy[r, c]; uses scratch (clt_bias_grad_scratch floats). */
int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem scratch, size_t scratch_offset,
                  int rows, int cols, size_t grad_offset, clt_err *e);
size_t clt_bias_grad_scratch(int rows, int cols);
int clt_relu_backward(const clt_layer_io *io, cl_mem dy, cl_mem y, size_t n, clt_err *e);

#endif
