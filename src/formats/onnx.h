/* The ONNX graph under construction, as a kind's to_onnx sees it (src/formats/onnx.c
 * implements it and writes the protobuf).
 *
 * Layout inside the graph is NCHW (ONNX's Conv, pools and BatchNormalization
 * work on NCHW): a layer's input and output tensors are (N, C, H, W), or (N, C)
 * where cltrain's shape is 1x1xC after Flatten, GlobalAveragePooling2D or Dense
 * (rank 2) once a layer flattened it (Flatten, the global pools, Dense; see
 * clt_onnx_rank). The exporter transposes the model's NHWC input once at the
 * start. Parameters are in Keras layout (HWIO kernels...): a kind converts them
 * (e.g. to OIHW) when it adds them as initializers. Opset 13. */
#ifndef CLT_ONNX_H
#define CLT_ONNX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

typedef struct clt_onnx clt_onnx;
struct clt_layer;

typedef enum clt_onnx_attr_type {
  CLT_ONNX_ATTR_INT,
  CLT_ONNX_ATTR_INTS,
  CLT_ONNX_ATTR_FLOAT,
  CLT_ONNX_ATTR_STRING,
} clt_onnx_attr_type;

#define CLT_ONNX_MAX_INTS 8

typedef struct clt_onnx_attr {
  const char *name;
  const char *s;
  int64_t i;
  int64_t ints[CLT_ONNX_MAX_INTS];
  clt_onnx_attr_type type;
  float f;
  int nints;
} clt_onnx_attr;

#define CLT_ONNX_INT(n, v) ((clt_onnx_attr){.name = (n), .type = CLT_ONNX_ATTR_INT, .i = (v)})
#define CLT_ONNX_FLOAT(n, v) ((clt_onnx_attr){.name = (n), .type = CLT_ONNX_ATTR_FLOAT, .f = (v)})
#define CLT_ONNX_STRING(n, v) ((clt_onnx_attr){.name = (n), .type = CLT_ONNX_ATTR_STRING, .s = (v)})
/* CLT_ONNX_INTS("pads", 4, 0, 0, 1, 1) */
#define CLT_ONNX_INTS(n, count, ...) \
  ((clt_onnx_attr){                  \
      .name = (n), .type = CLT_ONNX_ATTR_INTS, .nints = (count), .ints = {__VA_ARGS__}})

/* Adds a node: op_type (an ONNX operator of the default domain), inputs by
 * tensor name (an empty string "" for an omitted optional input), one output. */
int clt_onnx_node(clt_onnx *g, const char *op_type, const char *const *inputs, int ninputs,
                  const char *output, const clt_onnx_attr *attrs, int nattrs, clt_err *e);

/* Adds a float32 initializer (copied) of shape dims[0 .. rank). */
int clt_onnx_tensor(clt_onnx *g, const char *name, int rank, const int64_t *dims, const float *data,
                    clt_err *e);
/* The same for int64 (shapes for Reshape, axes, pads of Pad). */
int clt_onnx_tensor_i64(clt_onnx *g, const char *name, int rank, const int64_t *dims,
                        const int64_t *data, clt_err *e);

/* The trained values of l->params[p] (Keras layout, l->params[p].size floats). */
const float *clt_onnx_param(const clt_onnx *g, const struct clt_layer *l, int p);

/* A unique tensor name "<layer>/<suffix>" for an intermediate tensor or an
 * initializer of layer l; the string lives as long as g. */
const char *clt_onnx_name(clt_onnx *g, const struct clt_layer *l, const char *suffix);

/* Rank (2 or 4) of a tensor made so far. A kind's output has its first input's
 * rank unless its to_onnx sets another (Flatten, GlobalAveragePooling2D, Dense: 2). */
int clt_onnx_rank(const clt_onnx *g, const char *tensor);
void clt_onnx_set_rank(clt_onnx *g, const char *tensor, int rank);

/* What an export says beside the graph about the data the model was trained on. */
typedef struct clt_onnx_info {
  const char *class_names;        /* one per line in label order (as checkpoints keep them);
                                     NULL: none known */
  const char *class_names_source; /* where the names come from (NULL: not said) */
  const char *augment;            /* the training's augmentation (augment.h's text; NULL: none) */
  int decoded_size; /* where it crops: photos are decoded to this square, then resized to the
                       input as Keras' RandomCrop does at inference (0: no crop) */
} clt_onnx_info;

/* Writes model m with the trained parameters flat_params (m->flat_floats floats) as
 * an ONNX model (opset 13) of its inference graph to path, atomically (temp file,
 * fsync, rename: a failure leaves no file). Input "input": float32 (N, H, W, C),
 * NHWC pixel values 0..255, the model's preprocessing done inside the graph;
 * output "logits" float32 (N, classes), and "probabilities" (softmax) when
 * m->softmax_output. metadata_props (docs/onnx.md) say what the input expects:
 * its shape and layout, the preprocessing, and for a 3-channel model (trained on
 * photos) how a photo is decoded and resized to it; info (may be NULL) adds the
 * class names. A layer whose kind has no to_onnx fails it in one line. */
struct clt_model;
int clt_onnx_export(const struct clt_model *m, const float *flat_params, const char *path,
                    clt_err *e);
/* The same with info, also printing each node ("Conv conv2d/conv <- input/nchw, ...")
 * on log (NULL: nothing) and giving the file's size in *bytes (may be NULL). */
int clt_onnx_export_log(const struct clt_model *m, const float *flat_params,
                        const clt_onnx_info *info, const char *path, FILE *log, size_t *bytes,
                        clt_err *e);

#endif
