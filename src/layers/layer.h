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
  size_t size;                          /* elements */
  size_t offset;                        /* in floats, within the replica's flat parameter buffer */
  double glorot_fan_in, glorot_fan_out; /* 0, 0: initialised to init_constant */
  float init_constant;                  /* 0 for biases and betas, 1 for gammas, variances */
  /* Not trained by Adam (BatchNormalization's moving statistics): these sit after
   * every trainable parameter in the flat buffer, and their slots in the gradient
   * buffer carry the replica's share of the batch statistics instead of a gradient,
   * so the all-reduce averages the statistics (see batchnorm.c). */
  int non_trainable;
  double moving_momentum; /* non-trainable: the moving average's momentum */
} clt_param;

typedef struct clt_layer clt_layer;

/* Buffers one forward or backward call works on (offsets are in floats). */
typedef struct clt_layer_io {
  clt_replica *replica;
  int batch;         /* examples in this call, >= 1 (the net handles empty slices) */
  int train;         /* forward in training mode (BatchNormalization: batch statistics) */
  float stat_weight; /* training: this slice's share of the global batch (count / global) */
  cl_mem x, x2;      /* input activations (batch, in[0]) and a second input (Add), or NULL */
  cl_mem y;          /* output activations (batch, out) */
  cl_mem dy;         /* backward: gradient of the output; layers may overwrite it */
  cl_mem dx, dx2;    /* backward: gradients of the inputs to write (not accumulate), or NULL */
  cl_mem params;     /* the flat parameter buffer */
  cl_mem grads;      /* the flat gradient buffer (same layout), written, not accumulated */
  cl_mem scratch;    /* shared scratch of at least ops->scratch_floats(batch) floats */
  cl_mem state;      /* this layer's own ops->state_floats floats, kept from forward to
                        backward (BatchNormalization's batch mean and 1/std), or NULL */
} clt_layer_io;

/* The same for the double-precision reference (host arrays, NHWC). */
typedef struct clt_ref_io {
  int batch;
  int train;
  double stat_weight;
  const double *params; /* the flat parameters, in doubles */
  double *grads;        /* flat gradients: backward writes the layer's slots; a training
                           forward may write its statistics' slots (NULL: don't) */
  const double *x, *x2;
  double *y;        /* forward writes it; backward reads it (a fused ReLU's mask) */
  double *dy;       /* backward: the output's gradient; may be overwritten */
  double *dx, *dx2; /* backward: input gradients, written (not accumulated) */
} clt_ref_io;

/* A layer kind: everything cltrain knows of it is behind this table, so the model,
 * the network and the reference interpreter never ask which kind a layer is. One
 * file in src/layers/ defines one table, named clt_<file>_ops (the build collects
 * them into clt_layer_kinds). Optional members may be NULL. */
typedef struct clt_layer_ops {
  const char *kind;  /* Keras' class name, the word in model descriptions */
  int ninputs;       /* 1, or 2 for Add */
  int aliases_input; /* the output is the input's memory (Flatten): no buffer of its own */
  int folds_padding; /* accepts a ZeroPadding2D folded in front (l->pad) */
  /* Hyper-parameters from a description's argument text, the part between the
   * parentheses of "Conv2D(64,3x3,s1,valid,relu)" ("" when there are none), and
   * back: describe writes what parse reads. */
  int (*parse)(clt_layer *l, const char *args, clt_err *e);
  void (*describe)(const clt_layer *l, char *buf, size_t size);
  /* Checks the input shapes (in[0 .. ninputs)), sets l->in, l->out, the padding and
   * l->params (Keras' names, shapes, initialisers). */
  int (*setup)(clt_layer *l, const clt_shape *in, clt_err *e);
  /* Optional: scratch for `batch` examples and state kept from forward to backward,
   * in floats. */
  size_t (*scratch_floats)(const clt_layer *l, int batch);
  size_t (*state_floats)(const clt_layer *l);
  /* Optional: builds kernels and reserves GEMM scratch on a replica for up to max_batch. */
  int (*prepare)(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e);
  /* The device passes (optional for an aliasing layer, which moves no data). */
  int (*forward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  int (*backward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  /* The double-precision references the device passes are tested against: compiled
   * into the test library only (CLT_REFERENCE), NULL in the product. */
  void (*ref_forward)(const clt_layer *l, const clt_ref_io *io);
  void (*ref_backward)(const clt_layer *l, const clt_ref_io *io);
} clt_layer_ops;

#ifdef CLT_REFERENCE
#define CLT_REF(fn) fn
#else
#define CLT_REF(fn) NULL
#endif

/* Room for a kind's own hyper-parameter struct inside a clt_layer. */
#define CLT_LAYER_HP_BYTES 64

struct clt_layer {
  const clt_layer_ops *ops;
  char name[32]; /* Keras layer name: conv2d, conv2d_1, max_pooling2d, dense, ... */
  /* The graph: layers are stored in an order where inputs come first. */
  int ninputs;
  int inputs[2];     /* index of the producing layer, or -1 for the model's input */
  int pad;           /* a ZeroPadding2D of `pad` on every side, folded in front */
  char pad_name[32]; /* its Keras name, for descriptions */
  /* The kind's hyper-parameters, as its own struct (see clt_layer_hp). */
  _Alignas(double) unsigned char hp[CLT_LAYER_HP_BYTES];
  /* derived by setup */
  clt_shape in, out;
  int pad_top, pad_left; /* zero padding before the first row and column of a window */
  int nparams;
  clt_param params[CLT_MAX_LAYER_PARAMS];
};

/* A kind's view of l->hp: `clt_layer_hp(l, conv_hp)`; the size is checked at build time. */
#define clt_layer_hp(l, type) \
  ((void)sizeof(char[sizeof(type) <= CLT_LAYER_HP_BYTES ? 1 : -1]), (type *)(void *)(l)->hp)

/* Scratch and state floats of l (0 where the kind has none). */
size_t clt_layer_scratch_floats(const clt_layer *l, int batch);
size_t clt_layer_state_floats(const clt_layer *l);

/* Builds kernels names[0..n) of cl/<file> on r (for a kind's prepare). */
int clt_layer_build_kernels(clt_replica *r, const char *file, const char *const *names, int n,
                            clt_err *e);

/* Every kind, NULL-terminated (generated from src/layers/ by the build). */
extern const clt_layer_ops *const clt_layer_kinds[];

/* The kind named `kind` ("Conv2D"), or NULL. */
const clt_layer_ops *clt_layer_kind(const char *kind);

/* Starts layer l from one description entry "name=Kind(args)" or "name=Kind":
 * kind, name and hyper-parameters; one input (-1) and no padding. */
int clt_layer_init(clt_layer *l, const char *entry, clt_err *e);

/* parse and describe of a kind without hyper-parameters ("Flatten"). */
int clt_layer_parse_none(clt_layer *l, const char *args, clt_err *e);
void clt_layer_describe_none(const clt_layer *l, char *buf, size_t size);

/* Parsing helpers for the kinds: reads an optional ",relu" (or "relu" at the start)
 * that must end the text; returns 0, or -1 if anything else follows. */
int clt_parse_relu_tail(const char *rest, int *relu);

/* Helpers shared by layers. */
/* grads[offset + c] = sum over rows of dy[r, c]; uses scratch (clt_bias_grad_scratch
 * floats). relu_y: the output of a fused ReLU, or NULL; if given, dy is first
 * masked in place (dy = 0 where relu_y <= 0): the ReLU's backward, in the same pass. */
int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem relu_y, cl_mem scratch,
                  size_t scratch_offset, int rows, int cols, size_t grad_offset, clt_err *e);
size_t clt_bias_grad_scratch(int rows, int cols);

#endif
