/* The layer interface: every layer kind is one .c file exposing an ops table.
 *
 * A clt_layer is the immutable description (kind, hyper-parameters, shapes,
 * where its parameters sit in the flat buffer), shared by all replicas. What a
 * replica needs to run it (buffers) is passed in a clt_layer_io per call, so
 * one description serves every device. */
#ifndef CLT_LAYER_H
#define CLT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "kconfig.h"
#include "onnx.h"

/* The largest image side (and padding) a model may declare: sizes computed from
 * such sides cannot overflow an int. */
#define CLT_MODEL_MAX_SIDE 16384

typedef struct clt_shape {
  int h, w, c; /* per example, NHWC */
} clt_shape;

static inline size_t clt_shape_size(clt_shape s) { return (size_t)s.h * s.w * s.c; }

#define CLT_MAX_LAYER_PARAMS 4

/* One parameter tensor in Keras layout, e.g. "kernel" (3,3,1,64). */
/* How a parameter starts, as Keras' initializers (src/engine/init.h):
 * CLT_INIT_DEFAULT is the kind's own (Glorot uniform with glorot_fan_in, else
 * init_constant). The others take their arguments from a and b: Constant(a),
 * RandomNormal(mean a, stddev b), RandomUniform(minval a, maxval b),
 * TruncatedNormal(mean a, stddev b: normal values redrawn beyond 2 stddev), and
 * VarianceScaling(scale a, mode, distribution) on the fans of the parameter's
 * shape (GlorotUniform, HeNormal, LecunUniform, ... are its special cases).
 * CLT_INIT_VALUES: the parameter's own values, given by the model file (a Keras
 * config's constants), at the model's constants[values_at ..] (clt_param). */
enum {
  CLT_INIT_DEFAULT,
  CLT_INIT_CONSTANT,
  CLT_INIT_NORMAL,
  CLT_INIT_UNIFORM,
  CLT_INIT_TRUNCATED,
  CLT_INIT_SCALING,
  CLT_INIT_VALUES
};
enum { CLT_FAN_IN, CLT_FAN_OUT, CLT_FAN_AVG };
enum { CLT_DIST_TRUNCATED, CLT_DIST_NORMAL, CLT_DIST_UNIFORM };
typedef struct clt_init {
  int kind;
  double a, b;
  int mode, distribution; /* CLT_INIT_SCALING: CLT_FAN_*, CLT_DIST_* */
} clt_init;

typedef struct clt_param {
  char name[24];
  char alias[24]; /* another version's name for it ("depthwise_kernel" in tf.keras 2.x
                     for Keras 3's "kernel"), accepted by --weights; or "" */
  int rank;
  int dims[4];
  size_t size;                          /* elements */
  size_t offset;                        /* in floats, within the replica's flat parameter buffer */
  double glorot_fan_in, glorot_fan_out; /* 0, 0: initialised to init_constant */
  float init_constant;                  /* 0 for biases and betas, 1 for gammas, variances */
  clt_init init;                        /* a model file's initializer (kind 0: the above) */
  size_t values_at;                     /* CLT_INIT_VALUES: its values' index in the model's
                                           constants (model.h) */
  /* Not trained by Adam (BatchNormalization's moving statistics): these sit after
   * every trainable parameter in the flat buffer, and their slots in the gradient
   * buffer carry the replica's share of the batch statistics instead of a gradient,
   * so the all-reduce averages the statistics (see batchnorm.c). */
  int non_trainable;
  double moving_momentum; /* non-trainable: the moving average's momentum */
  /* Keras keeps it in the layer's config, not among its weights (Normalization's
   * mean and variance given as constants): get_weights has no array for it, so
   * --weights in that order skips it. */
  int keras_config;
} clt_param;

typedef struct clt_layer clt_layer;

/* What a layer's passes do of their neighbours' work on a replica, as its
 * plan (src/engine/plan.h) decided from the kinds' fusions below and the
 * backend; all 0: the layer runs alone. */
typedef struct clt_fusion {
  int relu_masked;      /* backward: the output ReLU's mask was applied by its one reader */
  int masks_input_relu; /* backward: applies its input producer's ReLU mask to dx */
  int adds;             /* forward: also the next layer, an Add (io->residual, residual_relu) */
  int pools;            /* both passes: also the next layer, a 2x2 max pooling: y and dy
                           are the pooling's output and its gradient, and no input
                           gradient is computed (the input is the model's) */
  int bias_summed;      /* backward: its one reader wrote its bias gradient (the column
                           sums of dy) while writing dy: no pass of its own for it */
  int sums_input_bias;  /* backward: also writes its input's producer's bias gradient,
                           the column sums of dx, at io->grads[input_bias] */
  size_t input_bias;    /* with sums_input_bias: that gradient's offset */
} clt_fusion;

/* What a kind can do with its neighbours (ops->fusions' bits): */
enum {
  CLT_FUSE_OUTPUT_RELU = 1 << 0,     /* its output went through a ReLU of its own */
  CLT_FUSE_MASK_INPUT_RELU = 1 << 1, /* its backward can apply its input's ReLU mask
                                        (MaxPooling2D: a window's maximum is its
                                        output, so the mask is free there, where the
                                        producer would read its whole output) */
  CLT_FUSE_ACCUMULATE_DX = 1 << 2,   /* its backward can add its input's gradient into
                                        io->dx at no extra pass, where the input feeds
                                        other layers too (a residual block's input) */
  CLT_FUSE_ADD_RESIDUAL = 1 << 3,    /* its forward can add io->residual to its output
                                        and apply a ReLU in the same pass */
  CLT_FUSE_SUM = 1 << 4,             /* it is an elementwise sum of its two inputs
                                        (Add), which the producer of one can do */
  CLT_FUSE_SUM_RELU = 1 << 5,        /* ... followed by a ReLU */
  CLT_FUSE_MAX_POOL_2X2 = 1 << 6,    /* it is a 2x2, stride 2 max pooling, 'valid' and
                                        unpadded, which its producer can run */
  CLT_FUSE_POOL_OUTPUT = 1 << 7,     /* its passes can so pool their output (Conv2D of
                                        few taps with a ReLU, on backends that
                                        fuse_conv_pool) */
  CLT_FUSE_GRAD_IN_PLACE = 1 << 8,   /* its inputs' gradients are its output's (masked
                                        by a ReLU): its backward can leave them in
                                        dy's buffer (Add; src/engine/net.c) */
  CLT_FUSE_KEEPS_DY = 1 << 9,        /* its backward only reads io->dy (which layers
                                        may otherwise overwrite) and passes no buffer
                                        on as its input's gradient */
  CLT_FUSE_BIAS_BY_READER = 1 << 10, /* it has a trained bias whose gradient is its
                                        output gradient's column sums, no ReLU between
                                        (Conv2D): its one reader may sum them */
  CLT_FUSE_INPUT_BIAS = 1 << 11,     /* its backward can sum its input gradient's
                                        columns as it writes them, into the producer's
                                        bias gradient (BatchNormalization, in bn_dx) */
};

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
  int dx_accumulate; /* backward: add input 0's gradient into dx instead (only when
                        the kind's fusions include CLT_FUSE_ACCUMULATE_DX) */
  clt_fusion fusion; /* what this call does of its neighbours' work (src/engine/plan.h) */
  cl_mem residual;   /* forward with fusion.adds: added to the output before residual_relu;
                        y is then the Add's output buffer */
  int residual_relu;
  cl_mem params;  /* the flat parameter buffer */
  cl_mem grads;   /* the flat gradient buffer (same layout), written, not accumulated */
  cl_mem scratch; /* shared scratch of at least ops->scratch_floats(batch) floats */
  cl_mem state;   /* this layer's own ops->state_floats floats, kept from forward to
                     backward (BatchNormalization's batch mean and 1/std), or NULL */
  /* Where this slice sits, for layers that draw random numbers (Dropout): a
   * training step's draws depend only on (seed, step, global example index), so
   * every replica layout computes the same thing. */
  uint64_t seed; /* the run's seed */
  long step;     /* training step, from 0 */
  long example0; /* global index, within the step's global batch, of example 0 */
} clt_layer_io;

/* The same for the double-precision reference (host arrays, NHWC). */
typedef struct clt_ref_io {
  int batch;
  int train;
  uint64_t seed; /* as clt_layer_io's */
  long step, example0;
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
  /* Optional: what the layer can do with its neighbours (CLT_FUSE_* bits). */
  unsigned (*fusions)(const clt_layer *l);
  /* The cl/ files its kernels come from (NULL-terminated, or NULL: none): a
   * model's kinds name the sources of its joint program. */
  const char *const *sources;
  /* Optional: builds kernels and reserves GEMM scratch on a replica for up to
   * max_batch examples, for the passes `f` says it runs. */
  int (*prepare)(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                 clt_err *e);
  /* The device passes (optional for an aliasing layer, which moves no data). */
  int (*forward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  int (*backward)(const clt_layer *l, const clt_layer_io *io, clt_err *e);
  /* Optional: hyper-parameters from a Keras model file: the layer's "config" of
   * class `kind` (see kconfig.h), each option read, checked and either
   * implemented or refused in one line. An activation the kind does not fuse is
   * left in `activation` (relu6, sigmoid, tanh, softmax; "" for none) and the
   * loader adds an Activation layer after it. NULL: the class is refused. */
  int (*from_keras)(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                    clt_err *e);
  /* Optional: the values a Keras layer's config gives l's parameters, once set up
   * (Normalization's mean and variance as constants): each such parameter's values
   * go to pool[*used ..] (room floats in all; *used advanced), its init becomes
   * CLT_INIT_VALUES there and it is marked keras_config. Bad values are refused in
   * one line as from_keras does. */
  int (*keras_values)(clt_layer *l, const clt_keras_config *c, float *pool, size_t room,
                      size_t *used, clt_err *e);
  /* Optional: the layer as ONNX nodes (see onnx.h: NCHW), reading tensors
   * inputs[0 .. ninputs) and writing tensor `output`. NULL: not exportable. */
  int (*to_onnx)(const clt_layer *l, clt_onnx *g, const char *const *inputs, const char *output,
                 clt_err *e);
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

/* Zero padding per side: rows above and below, columns left and right. */
typedef struct clt_pad {
  int top, bottom, left, right;
} clt_pad;

static inline int clt_pad_any(clt_pad p) { return p.top || p.bottom || p.left || p.right; }

/* The arguments of "ZeroPadding2D(p)" (every side p) or "ZeroPadding2D(t,b,l,r)", and
 * back (the short form when the sides are equal); src/layers/zeropad.c. parse returns
 * 0, or -1 for other text or a side outside [0, CLT_MODEL_MAX_SIDE]. */
int clt_pad_parse(const char *args, clt_pad *p);
void clt_pad_describe(clt_pad p, char *buf, size_t size);
/* zeropad.cl's kernels, which ZeroPadding2D and Cropping2D share: prepare builds
 * them; clt_pad_copy runs pad_forward (the inner image into zeros, over the outer
 * shape's positions: over = outer) or pad_backward (the inner part out of the
 * outer image: over = inner), the inner image at (top, left) of the outer. */
int clt_pad_prepare(clt_replica *r, clt_err *e);
int clt_pad_copy(const clt_layer_io *io, const char *kname, cl_mem from, cl_mem to, clt_shape inner,
                 int top, int left, clt_shape outer, clt_shape over, clt_err *e);
/* An ONNX Pad node (constant zeros) of p around the NCHW tensor `input`, for to_onnx. */
int clt_pad_to_onnx(const clt_layer *l, clt_onnx *g, clt_pad p, const char *input,
                    const char *output, clt_err *e);

/* Room for a layer's name and the terminating zero (NASNet's and ConvNeXt's names
 * run to 40 characters and more). */
#define CLT_LAYER_NAME_SIZE 64

/* Room for a kind's own hyper-parameter struct inside a clt_layer. */
#define CLT_LAYER_HP_BYTES 64

struct clt_layer {
  const clt_layer_ops *ops;
  char name[CLT_LAYER_NAME_SIZE]; /* Keras layer name: conv2d, conv2d_1, dense, ... */
  /* The graph: layers are stored in an order where inputs come first. */
  int ninputs;
  int inputs[2]; /* index of the producing layer, or -1 for the model's input */
  int frozen;    /* 1: its weights are not trained (BatchNormalization: inference mode) */
  clt_pad pad;   /* a ZeroPadding2D folded in front (all 0: none) */
  char pad_name[CLT_LAYER_NAME_SIZE]; /* its Keras name, for descriptions */
  /* The kind's hyper-parameters, as its own struct (see clt_layer_hp). */
  _Alignas(double) unsigned char hp[CLT_LAYER_HP_BYTES];
  /* derived by setup */
  clt_shape in, out;
  int pad_top, pad_left; /* zero padding before the first row and column of a window */
  int nparams;
  clt_param params[CLT_MAX_LAYER_PARAMS];
  /* A tf.keras 2.x call with training=False reaches it: tf.keras 2 runs it as at
   * inference in training too (BatchNormalization on its moving statistics,
   * Dropout as the identity). The training step runs it as any layer (frozen, a
   * BatchNormalization is on its moving statistics already); train notes where
   * that differs. */
  int inference;
};

/* The parameter p of l as its backward pass sees it: p, or NULL when l is frozen
 * (its weights get no gradient; its backward computes the input's alone). */
static inline const clt_param *clt_layer_trained(const clt_layer *l, const clt_param *p) {
  return l->frozen ? NULL : p;
}

/* A kind's view of l->hp: `clt_layer_hp(l, conv_hp)`; the size is checked at build time. */
#define clt_layer_hp(l, type) \
  ((void)sizeof(char[sizeof(type) <= CLT_LAYER_HP_BYTES ? 1 : -1]), (type *)(void *)(l)->hp)

/* Scratch and state floats of l (0 where the kind has none). */
size_t clt_layer_scratch_floats(const clt_layer *l, int batch);
size_t clt_layer_state_floats(const clt_layer *l);

/* ops->prepare for the passes `f` says (NULL: the layer alone), if the kind has one. */
int clt_layer_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                      clt_err *e);

/* The kind's fusions (0 where it declares none). */
unsigned clt_layer_fusions(const clt_layer *l);

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

/* The hyper-parameters of the convolutions (Conv2D, DepthwiseConv2D, SeparableConv2D),
 * their l->hp, and what they share. A kind starts l->hp from its own options:
 * filters (Conv2D, SeparableConv2D), a depth multiplier (DepthwiseConv2D,
 * SeparableConv2D), Keras' lora_rank (Conv2D: refused unless 0). */
typedef struct clt_conv_hp {
  int has_filters, has_mult, has_lora; /* the kind's options */
  int filters, mult;                   /* 0 where the kind has none */
  int kernel_h, kernel_w, stride;
  int pad_same;           /* TensorFlow's 'same', else 'valid' */
  int relu;               /* fused activation */
  int nobias;             /* use_bias=False */
  int has_groups, groups; /* Conv2D's groups (1: a dense convolution) */
} clt_conv_hp;

/* Whether l's passes take a convolution algorithm each (gemm.h's clt_conv_algos:
 * a Conv2D without groups that is not pointwise); if so its geometry for
 * `batch` examples and its filters. */
struct clt_conv_geom;
int clt_conv2d_tunable(const clt_layer *l, int batch, struct clt_conv_geom *g, int *filters);

/* parse and describe: "[F,]KHxKW,sSTRIDE,same|valid[,mM][,gG][,nobias][,relu]", F, ,mM
 * and ,gG where the kind has them (,mM when M is not 1, ,gG when G is not 1); parse
 * starts l->hp from `kind`. */
int clt_conv_parse(clt_layer *l, const char *args, clt_conv_hp kind, clt_err *e);
void clt_conv_describe(const clt_layer *l, char *buf, size_t size);

/* from_keras: l->hp from `kind` and the options kernel_size, strides, padding,
 * data_format, dilation_rate, groups, use_bias, activation, quantization_config and
 * the kind's own (filters, depth_multiplier, lora_rank), each read, in Keras' order,
 * checked and either kept or refused in one line. */
int clt_conv_from_keras(clt_layer *l, const clt_keras_config *c, clt_conv_hp kind, char *activation,
                        size_t size, clt_err *e);

/* setup's window: l->in = in; l->out.h, l->out.w, l->pad_top, l->pad_left for l->hp's
 * kernel and stride, with TensorFlow's 'same' padding or 'valid' after the
 * ZeroPadding2D folded in front (l->pad); refuses a negative or a folded padding with
 * 'same', and an input smaller than the kernel. */
int clt_conv_window(clt_layer *l, clt_shape in, clt_err *e);

/* The convolutions' to_onnx: an ONNX Conv of `input`, then a Relu when relu, writing
 * `output`. Its kernel, l->params[kernel] in Keras' layout (KH, KW, I, O), becomes the
 * initializer "<layer>/<name>" in ONNX's (O, I, KH, KW) = dims (a depthwise kernel
 * (KH, KW, C, M) is one of (KH, KW, 1, C*M)); its bias is l->params[bias], or none
 * (-1). Attributes: kernel_shape, strides, pads (l->pad_top and l->pad_left before;
 * after, what the last window reaches past the input) and group; stride 0: a 1x1
 * Conv that stays within its input (SeparableConv2D's pointwise one), kernel_shape
 * alone. */
int clt_onnx_conv(const clt_layer *l, clt_onnx *g, const char *input, int kernel, const char *name,
                  const int64_t dims[4], int bias, int stride, int group, int relu,
                  const char *output, clt_err *e);

/* cl/depthwise.cl's passes (src/layers/depthwise.c), for DepthwiseConv2D and the
 * depthwise half of SeparableConv2D: over l's window (l->in; l->out.h, l->out.w;
 * l->pad_top, l->pad_left), with a (KH, KW, C, M) kernel at `offset` floats into the
 * parameter and gradient buffers; C*M output channels. */
typedef struct clt_depthwise {
  int kh, kw, stride, mult;
  size_t offset;
} clt_depthwise;
/* Floats of the kernel gradient's partial sums (one set per block of output positions)
 * for `batch` examples. */
size_t clt_depthwise_partials(const clt_layer *l, const clt_depthwise *d, int batch);
/* y = depthwise(io->x) + the bias at params offset bias (-1: none), then ReLU if relu. */
int clt_depthwise_forward(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                          int bias, int relu, cl_mem y, clt_err *e);
/* The kernel's gradient into io->grads from io->x and the output's gradient dy: partial
 * sums into io->scratch from offset part, then conv.cl's bias_grad_final over them. */
int clt_depthwise_kernel_grad(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                              cl_mem dy, int part, clt_err *e);
/* io->dx from the output's gradient dy, gathered per input position. */
int clt_depthwise_input_grad(const clt_layer *l, const clt_layer_io *io, const clt_depthwise *d,
                             cl_mem dy, clt_err *e);

/* The global poolings (GlobalAveragePooling2D, GlobalMaxPooling2D): setup to 1x1xC;
 * from_keras: data_format (only channels_last) and keepdims ((N, 1, 1, C) or (N, C):
 * the same values, 1x1xC here); to_onnx: `op` (GlobalAveragePool, GlobalMaxPool),
 * then Flatten to (N, C), or Identity for an input of rank 2 (already 1x1). */
int clt_global_pool_setup(clt_layer *l, const clt_shape *ins, clt_err *e);
int clt_global_pool_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                               size_t size, clt_err *e);
int clt_global_pool_to_onnx(const clt_layer *l, clt_onnx *g, const char *op, const char *input,
                            const char *output, clt_err *e);

/* For the to_onnx of the two-input kinds (Add, Concatenate): ins[0..2) = inputs, but
 * for an input of rank 4 next to one of rank 2 (both 1x1xC here), which is flattened
 * first; *rank gets the smaller rank, the output's. */
int clt_onnx_same_rank(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *ins[2], int *rank, clt_err *e);

/* The forward of the GEMM layers (Conv2D, Dense, SeparableConv2D's pointwise half):
 * io->y = a * kernel (the GEMM s) + bias, then ReLU if relu. Without a bias (NULL)
 * the plain product, then conv.cl's bias_act with no bias for the ReLU. */
struct clt_gemm_shape;
int clt_gemm_bias_relu(const clt_layer_io *io, const struct clt_gemm_shape *s, cl_mem a,
                       const clt_param *kernel, const clt_param *bias, int relu, clt_err *e);

/* The first pass of those layers' backward over io->dy (rows x cols): a fused ReLU's
 * backward (dy *= y > 0, if relu) with the bias gradient, dy's column sums, into
 * io->grads; without a bias (NULL) the pass runs for the ReLU alone, its sums going
 * to scratch. Scratch from offset `at`: clt_bias_relu_scratch(rows, cols, bias)
 * floats. */
int clt_bias_relu_grad(const clt_layer_io *io, int relu, const clt_param *bias, size_t at, int rows,
                       int cols, clt_err *e);
size_t clt_bias_relu_scratch(int rows, int cols, const clt_param *bias);

/* Helpers shared by layers. */
/* grads[offset + c] = sum over rows of dy[r, c]; uses scratch (clt_bias_grad_scratch
 * floats). relu_y: the output of a fused ReLU, or NULL; if given, dy is first
 * masked in place (dy = 0 where relu_y <= 0): the ReLU's backward, in the same pass. */
int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem relu_y, cl_mem scratch,
                  size_t scratch_offset, int rows, int cols, size_t grad_offset, clt_err *e);
size_t clt_bias_grad_scratch(int rows, int cols);
/* Rows per partial sum of clt_bias_grad: a pass that writes dy can add the same
 * partial sums (bias.cl's bias_grad_partial's layout and order) and leave the
 * rest to clt_bias_grad_final. */
#define CLT_BIAS_GRAD_ROWS_PER_BLOCK 256
/* The second pass of clt_bias_grad: grads[grad_offset + c] = the sum of the
 * blocks' partial sums of column c in scratch from scratch_offset, in order. */
int clt_bias_grad_final(const clt_layer_io *io, cl_mem scratch, size_t scratch_offset, int rows,
                        int cols, size_t grad_offset, clt_err *e);

/* The elementwise kinds over cl/broadcast.cl (src/layers/multiply.c): Multiply,
 * Subtract, CustomScaleLayer, LayerScale. Two inputs of one shape, or one of them
 * (1, 1, C) per example, broadcast over the other's positions (squeeze-and-excitation).
 * setup: l->in = in[0], l->out the larger shape; *bcast = 0 (equal shapes), 1 (in[0]
 * is broadcast) or 2 (in[1]); refuses other shapes naming both. */
int clt_bcast_setup(clt_layer *l, const clt_shape *in, int *bcast, clt_err *e);
/* Builds cl/broadcast.cl's kernels (for a kind's prepare). */
int clt_bcast_prepare(clt_replica *r, clt_err *e);
/* io->y over l->out: x * x2 (mul) or a * x + b * x2, x2 from off2 floats in; bx, bx2:
 * that input is a per-channel row broadcast over groups of g rows of l->out. */
int clt_bcast_forward(const clt_layer *l, const clt_layer_io *io, cl_mem x, int bx, cl_mem x2,
                      int off2, int bx2, int g, int mul, float a, float b, clt_err *e);
/* A full-shape input's gradient dx = io->dy * other (mul; other broadcast over groups
 * of g rows when bother, from off floats in) or a * io->dy. */
int clt_bcast_grad(const clt_layer *l, const clt_layer_io *io, cl_mem other, int off, int bother,
                   int g, int mul, float a, cl_mem dx, clt_err *e);
/* A broadcast input's gradient, ds[off + group * C + c] = the sum, in order, over a
 * group's g rows of io->dy * other (mul; other full-shape) or a * io->dy. */
int clt_bcast_grad_sum(const clt_layer *l, const clt_layer_io *io, cl_mem other, int g, int mul,
                       float a, cl_mem ds, int off, clt_err *e);
/* The same in doubles for the references: y over rows x C. */
void clt_bcast_ref_forward(const double *x, int bx, const double *x2, int bx2, size_t rows, int c,
                           size_t g, int mul, double a, double b, double *y);
void clt_bcast_ref_grad(const double *dy, const double *other, int bother, size_t rows, int c,
                        size_t g, int mul, double a, double *dx);
void clt_bcast_ref_grad_sum(const double *dy, const double *other, size_t rows, int c, size_t g,
                            int mul, double a, double *ds);
/* from_keras of Multiply and Subtract, which have no options of their own. */
int clt_bcast_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                         clt_err *e);
/* to_onnx of a two-input kind: `op` (Mul, Sub, Add) of the inputs; a broadcast one (rank
 * 2 here when a global pooling made it) reshaped to (N, C, 1, 1) first. */
int clt_bcast_to_onnx(const clt_layer *l, clt_onnx *g, int bcast, const char *op,
                      const char *const *inputs, const char *output, clt_err *e);

#endif
