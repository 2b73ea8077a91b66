/* ONNX export: the graph builder the kinds' to_onnx call (onnx.h), and the
 * writer of the ModelProto (field numbers from onnx/onnx.proto). */
#define _POSIX_C_SOURCE 200809L
#include "onnx.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment.h"
#include "files.h"
#include "model.h"
#include "pb.h"

#define OPSET 13
#define IR_VERSION 7 /* ONNX 1.8, the first with opset 13 */
#define MAX_RANK 8

/* TensorProto.DataType */
enum { DT_FLOAT = 1, DT_INT64 = 7 };
/* AttributeProto.AttributeType */
enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_INTS = 7 };

typedef struct node {
  const char *op, *output;
  const char **inputs;
  int ninputs;
  clt_onnx_attr *attrs; /* names and strings point into g's strings */
  int nattrs;
} node;

typedef struct initializer {
  const char *name;
  int dtype, rank;
  int64_t dims[MAX_RANK];
  unsigned char *data; /* little-endian */
  size_t bytes;
} initializer;

/* A tensor name: made (a graph input, node output or initializer) or only
 * reserved by clt_onnx_name. */
typedef struct value {
  const char *name;
  int rank; /* 0: not known */
  int made;
} value;

struct clt_onnx {
  const clt_model *model;
  const float *flat;
  node *nodes;
  int nnodes, cap_nodes;
  initializer *inits;
  int ninits, cap_inits;
  value *values;
  int nvalues, cap_values;
  char **strings; /* every string g owns */
  size_t nstrings, cap_strings;
  int nomem; /* an allocation failed: every later call fails */
};

/* Array p of *cap elements of `size`, grown to hold n: the new array, or NULL (p is
 * then unchanged). */
static void *grow(void *p, int *cap, int n, size_t size) {
  if (n <= *cap) return p;
  int c = *cap ? *cap * 2 : 64;
  while (c < n) c *= 2;
  void *q = realloc(p, (size_t)c * size);
  if (q) *cap = c;
  return q;
}

/* A copy of s owned by g, or NULL (out of memory). */
static const char *keep(clt_onnx *g, const char *s) {
  if (g->nomem) return NULL;
  if (g->nstrings == g->cap_strings) {
    size_t c = g->cap_strings ? 2 * g->cap_strings : 256;
    char **q = realloc(g->strings, c * sizeof *q);
    if (!q) return g->nomem = 1, NULL;
    g->strings = q;
    g->cap_strings = c;
  }
  const size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (!copy) return g->nomem = 1, NULL;
  memcpy(copy, s, n);
  g->strings[g->nstrings++] = copy;
  return copy;
}

static value *find(const clt_onnx *g, const char *name) {
  for (int i = g->nvalues - 1; i >= 0; i--) {
    if (strcmp(g->values[i].name, name) == 0) return &g->values[i];
  }
  return NULL;
}

/* Adds name to the tensor table (copied), unmade with rank 0; NULL: out of memory. */
static value *add_value(clt_onnx *g, const char *name) {
  const char *copy = keep(g, name);
  value *values = copy ? grow(g->values, &g->cap_values, g->nvalues + 1, sizeof *values) : NULL;
  if (!values) {
    g->nomem = 1;
    return NULL;
  }
  g->values = values;
  value *v = &g->values[g->nvalues++];
  *v = (value){.name = copy};
  return v;
}

static int nomem(clt_err *e) {
  return clt_fail(e, CLT_ERR_NOMEM, "out of host memory building the ONNX graph");
}

/* The entry for a tensor about to be made by `what`: new, or one reserved by
 * clt_onnx_name; a name made before is refused. */
static int make_value(clt_onnx *g, const char *name, const char *what, value **out, clt_err *e) {
  if (!name || !name[0]) return clt_fail(e, CLT_ERR_INTERNAL, "ONNX %s without a name", what);
  value *v = find(g, name);
  if (v && v->made) {
    return clt_fail(e, CLT_ERR_INTERNAL, "ONNX %s: tensor name '%s' is already taken", what, name);
  }
  if (!v && !(v = add_value(g, name))) return nomem(e);
  v->made = 1;
  *out = v;
  return CLT_OK;
}

int clt_onnx_node(clt_onnx *g, const char *op_type, const char *const *inputs, int ninputs,
                  const char *output, const clt_onnx_attr *attrs, int nattrs, clt_err *e) {
  if (g->nomem) return nomem(e);
  if (!op_type || !op_type[0] || ninputs < 0 || nattrs < 0 || (ninputs && !inputs) ||
      (nattrs && !attrs)) {
    return clt_fail(e, CLT_ERR_INTERNAL, "bad ONNX node %s", op_type ? op_type : "(null)");
  }
  for (int k = 0; k < ninputs; k++) {
    if (!inputs[k]) return clt_fail(e, CLT_ERR_INTERNAL, "ONNX %s: input %d is NULL", op_type, k);
    if (!inputs[k][0]) continue; /* an omitted optional input */
    const value *v = find(g, inputs[k]);
    if (!v || !v->made) {
      return clt_fail(e, CLT_ERR_INTERNAL, "ONNX %s: input '%s' is not a tensor made so far",
                      op_type, inputs[k]);
    }
  }
  for (int a = 0; a < nattrs; a++) {
    const clt_onnx_attr *at = &attrs[a];
    if (!at->name || !at->name[0] || (at->type == CLT_ONNX_ATTR_STRING && !at->s) ||
        (at->type == CLT_ONNX_ATTR_INTS && (at->nints < 0 || at->nints > CLT_ONNX_MAX_INTS))) {
      return clt_fail(e, CLT_ERR_INTERNAL, "ONNX %s: bad attribute %d", op_type, a);
    }
  }
  value *out;
  int status = make_value(g, output, op_type, &out, e);
  if (status) return status;
  node *nodes = grow(g->nodes, &g->cap_nodes, g->nnodes + 1, sizeof *nodes);
  if (!nodes) return g->nomem = 1, nomem(e);
  g->nodes = nodes;
  node n = {.op = keep(g, op_type), .output = out->name, .ninputs = ninputs, .nattrs = nattrs};
  n.inputs = calloc((size_t)ninputs + 1, sizeof *n.inputs);
  n.attrs = calloc((size_t)nattrs + 1, sizeof *n.attrs);
  if (n.inputs && n.attrs) {
    for (int k = 0; k < ninputs; k++) n.inputs[k] = keep(g, inputs[k]);
    for (int a = 0; a < nattrs; a++) {
      n.attrs[a] = attrs[a];
      n.attrs[a].name = keep(g, attrs[a].name);
      if (attrs[a].type == CLT_ONNX_ATTR_STRING) n.attrs[a].s = keep(g, attrs[a].s);
    }
  }
  if (!n.inputs || !n.attrs || !n.op || g->nomem) {
    free(n.inputs);
    free(n.attrs);
    g->nomem = 1;
    return nomem(e);
  }
  g->nodes[g->nnodes++] = n;
  /* The output has its first input's rank unless the kind says otherwise. */
  if (!out->rank && ninputs > 0 && inputs[0][0]) out->rank = clt_onnx_rank(g, inputs[0]);
  return CLT_OK;
}

static int add_initializer(clt_onnx *g, const char *name, int dtype, int rank, const int64_t *dims,
                           const void *data, size_t itemsize, clt_err *e) {
  if (g->nomem) return nomem(e);
  if (!name || !name[0]) return clt_fail(e, CLT_ERR_INTERNAL, "ONNX initializer without a name");
  if (rank < 0 || rank > MAX_RANK || (rank && !dims)) {
    return clt_fail(e, CLT_ERR_INTERNAL, "ONNX initializer %s: rank %d", name, rank);
  }
  size_t count = 1;
  for (int d = 0; d < rank; d++) {
    if (dims[d] < 0 || (dims[d] && count > SIZE_MAX / 16 / (size_t)dims[d])) {
      return clt_fail(e, CLT_ERR_INTERNAL, "ONNX initializer %s: bad dimension %lld", name,
                      (long long)dims[d]);
    }
    count *= (size_t)dims[d];
  }
  if (count && !data) return clt_fail(e, CLT_ERR_INTERNAL, "ONNX initializer %s: no data", name);
  value *v;
  int status = make_value(g, name, "initializer", &v, e);
  if (status) return status;
  v->rank = rank;
  initializer *inits = grow(g->inits, &g->cap_inits, g->ninits + 1, sizeof *inits);
  if (!inits) return g->nomem = 1, nomem(e);
  g->inits = inits;
  initializer *in = &g->inits[g->ninits];
  *in = (initializer){.name = v->name, .dtype = dtype, .rank = rank, .bytes = count * itemsize};
  for (int d = 0; d < rank; d++) in->dims[d] = dims[d];
  in->data = malloc(in->bytes ? in->bytes : 1);
  if (!in->data) return g->nomem = 1, nomem(e);
  /* Little-endian, whatever the host's order. */
  const unsigned char *src = data;
  for (size_t i = 0; i < count; i++) {
    uint64_t u = 0;
    if (itemsize == 4) {
      uint32_t w;
      memcpy(&w, src + 4 * i, 4);
      u = w;
    } else {
      memcpy(&u, src + 8 * i, 8);
    }
    for (size_t b = 0; b < itemsize; b++) in->data[itemsize * i + b] = (unsigned char)(u >> 8 * b);
  }
  g->ninits++;
  return CLT_OK;
}

int clt_onnx_tensor(clt_onnx *g, const char *name, int rank, const int64_t *dims, const float *data,
                    clt_err *e) {
  return add_initializer(g, name, DT_FLOAT, rank, dims, data, 4, e);
}

int clt_onnx_tensor_i64(clt_onnx *g, const char *name, int rank, const int64_t *dims,
                        const int64_t *data, clt_err *e) {
  return add_initializer(g, name, DT_INT64, rank, dims, data, 8, e);
}

const float *clt_onnx_param(const clt_onnx *g, const struct clt_layer *l, int p) {
  if (p < 0 || p >= l->nparams) return NULL;
  return g->flat + l->params[p].offset;
}

const char *clt_onnx_name(clt_onnx *g, const struct clt_layer *l, const char *suffix) {
  char name[256];
  snprintf(name, sizeof name, "%s/%s", l->name, suffix);
  for (int k = 2; find(g, name); k++) snprintf(name, sizeof name, "%s/%s_%d", l->name, suffix, k);
  const value *v = add_value(g, name);
  return v ? v->name : ""; /* out of memory: "" is refused by the next call */
}

int clt_onnx_rank(const clt_onnx *g, const char *tensor) {
  const value *v = find(g, tensor);
  return v ? v->rank : 0;
}

void clt_onnx_set_rank(clt_onnx *g, const char *tensor, int rank) {
  value *v = find(g, tensor);
  if (!v) v = add_value(g, tensor);
  if (v) v->rank = rank;
}

static void graph_free(clt_onnx *g) {
  for (int i = 0; i < g->nnodes; i++) {
    free(g->nodes[i].inputs);
    free(g->nodes[i].attrs);
  }
  for (int i = 0; i < g->ninits; i++) free(g->inits[i].data);
  for (size_t i = 0; i < g->nstrings; i++) free(g->strings[i]);
  free(g->nodes);
  free(g->inits);
  free(g->values);
  free(g->strings);
}

/* ---- the inference graph --------------------------------------------------------- */

/* A graph input: made, with its rank. */
static int graph_input(clt_onnx *g, const char *name, int rank, clt_err *e) {
  value *v;
  int status = make_value(g, name, "graph input", &v, e);
  if (!status) v->rank = rank;
  return status;
}

/* The model's preprocessing (as the batch sources do it), input → *out (NHWC). */
static int preprocess(clt_onnx *g, const clt_model *m, const char **out, clt_err *e) {
  int status;
  switch (m->preprocess) {
    case CLT_PRE_UNIT: {
      /* x * (1/255) in float32, as cl/data.cl computes it */
      const float scale = 1.0f / 255.0f;
      const char *in[2] = {"input", "preprocess/scale"};
      status = clt_onnx_tensor(g, in[1], 0, NULL, &scale, e);
      if (!status) status = clt_onnx_node(g, "Mul", in, 2, "preprocess/unit", NULL, 0, e);
      *out = "preprocess/unit";
      return status;
    }
    case CLT_PRE_CAFFE: {
      /* RGB → BGR along the channel axis, minus ImageNet's BGR means */
      const int64_t three = 3, order[3] = {2, 1, 0};
      const float means[3] = {103.939f, 116.779f, 123.68f};
      const char *gather[2] = {"input", "preprocess/bgr_order"};
      const char *sub[2] = {"preprocess/bgr", "preprocess/means"};
      const clt_onnx_attr axis = CLT_ONNX_INT("axis", 3);
      status = clt_onnx_tensor_i64(g, gather[1], 1, &three, order, e);
      if (!status) status = clt_onnx_node(g, "Gather", gather, 2, sub[0], &axis, 1, e);
      if (!status) status = clt_onnx_tensor(g, sub[1], 1, &three, means, e);
      if (!status) status = clt_onnx_node(g, "Sub", sub, 2, "preprocess/caffe", NULL, 0, e);
      *out = "preprocess/caffe";
      return status;
    }
    case CLT_PRE_RAW: /* the pixel values as they are */
      *out = "input";
      return CLT_OK;
  }
  return clt_fail(e, CLT_ERR_ARG, "model %s: preprocessing %d has no ONNX form", m->name,
                  (int)m->preprocess);
}

/* The last layer's output → "logits" (N, classes), flattened in cltrain's NHWC order. */
static int logits(clt_onnx *g, const clt_model *m, const char *x, clt_err *e) {
  const clt_layer *last = &m->layers[m->nlayers - 1];
  const int rank = clt_onnx_rank(g, x);
  int status = CLT_OK;
  if (rank == 2) return clt_onnx_node(g, "Identity", &x, 1, "logits", NULL, 0, e);
  if (rank != 4) {
    return clt_fail(e, CLT_ERR_INTERNAL, "layer %s's ONNX output has rank %d", x, rank);
  }
  if (last->out.h * last->out.w != 1) {
    const clt_onnx_attr perm = CLT_ONNX_INTS("perm", 4, 0, 2, 3, 1);
    status = clt_onnx_node(g, "Transpose", &x, 1, "logits/nhwc", &perm, 1, e);
    x = "logits/nhwc";
  }
  const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
  if (!status) status = clt_onnx_node(g, "Flatten", &x, 1, "logits", &axis, 1, e);
  if (!status) clt_onnx_set_rank(g, "logits", 2);
  return status;
}

static int build(clt_onnx *g, const clt_model *m, clt_err *e) {
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    if (!l->ops->to_onnx) {
      return clt_fail(e, CLT_ERR_ARG,
                      "cannot export model %s to ONNX: layer %s of kind %s has no ONNX form",
                      m->name, l->name, l->ops->kind);
    }
  }
  const char *x;
  int status = graph_input(g, "input", 4, e);
  if (!status) status = preprocess(g, m, &x, e);
  const clt_onnx_attr perm = CLT_ONNX_INTS("perm", 4, 0, 3, 1, 2);
  if (!status) status = clt_onnx_node(g, "Transpose", &x, 1, "input/nchw", &perm, 1, e);
  x = "input/nchw";
  /* Each layer's output is the tensor named after it, but for the names of the
   * graph's outputs (a last Dense named "logits"). */
  const char **out = malloc((size_t)m->nlayers * sizeof *out);
  if (!out) return nomem(e);
  for (int i = 0; i < m->nlayers && !status; i++) {
    const clt_layer *l = &m->layers[i];
    const int taken = strcmp(l->name, "logits") == 0 || strcmp(l->name, "probabilities") == 0;
    out[i] = taken ? clt_onnx_name(g, l, "output") : l->name;
    const char *inputs[2];
    for (int k = 0; k < l->ninputs; k++) inputs[k] = l->inputs[k] >= 0 ? out[l->inputs[k]] : x;
    status = l->ops->to_onnx(l, g, inputs, out[i], e);
    const value *v = status ? NULL : find(g, out[i]);
    if (!status && (!v || !v->made)) {
      status = clt_fail(e, CLT_ERR_INTERNAL, "its ONNX form does not make tensor '%s'", out[i]);
    }
    if (status) clt_wrap(e, "cannot export layer %s (%s) to ONNX", l->name, l->ops->kind);
  }
  if (!status) status = logits(g, m, out[m->nlayers - 1], e);
  free(out);
  const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
  const char *in = "logits";
  if (!status && m->softmax_output)
    status = clt_onnx_node(g, "Softmax", &in, 1, "probabilities", &axis, 1, e);
  if (!status && g->nomem) status = nomem(e);
  return status;
}

/* ---- the protobuf ------------------------------------------------------------------- */

/* ValueInfoProto of a float32 tensor: name=1, type=2 { tensor_type=1 { elem_type=1,
 * shape=2 { dim=1 { dim_value=1 | dim_param=2 } } } }; dims < 0 are "N". */
static void value_info(clt_pb *b, int field, const char *name, int rank, const int64_t *dims) {
  const size_t vi = clt_pb_begin(b, field);
  clt_pb_string(b, 1, name);
  const size_t type = clt_pb_begin(b, 2), tensor = clt_pb_begin(b, 1);
  clt_pb_int(b, 1, DT_FLOAT);
  const size_t shape = clt_pb_begin(b, 2);
  for (int d = 0; d < rank; d++) {
    const size_t dim = clt_pb_begin(b, 1);
    if (dims[d] < 0) {
      clt_pb_string(b, 2, "N");
    } else {
      clt_pb_int(b, 1, dims[d]);
    }
    clt_pb_end(b, dim);
  }
  clt_pb_end(b, shape);
  clt_pb_end(b, tensor);
  clt_pb_end(b, type);
  clt_pb_end(b, vi);
}

/* AttributeProto: name=1, f=2, i=3, s=4, ints=8, type=20. */
static void attribute(clt_pb *b, const clt_onnx_attr *a) {
  const size_t mark = clt_pb_begin(b, 5);
  clt_pb_string(b, 1, a->name);
  switch (a->type) {
    case CLT_ONNX_ATTR_FLOAT:
      clt_pb_float(b, 2, a->f);
      clt_pb_int(b, 20, AT_FLOAT);
      break;
    case CLT_ONNX_ATTR_INT:
      clt_pb_int(b, 3, a->i);
      clt_pb_int(b, 20, AT_INT);
      break;
    case CLT_ONNX_ATTR_STRING:
      clt_pb_string(b, 4, a->s);
      clt_pb_int(b, 20, AT_STRING);
      break;
    case CLT_ONNX_ATTR_INTS:
      for (int k = 0; k < a->nints; k++) clt_pb_int(b, 8, a->ints[k]);
      clt_pb_int(b, 20, AT_INTS);
      break;
  }
  clt_pb_end(b, mark);
}

/* NodeProto: input=1, output=2, name=3, op_type=4, attribute=5 (graph field 1). */
static void encode_node(clt_pb *b, const node *n) {
  const size_t mark = clt_pb_begin(b, 1);
  for (int k = 0; k < n->ninputs; k++) clt_pb_string(b, 1, n->inputs[k]);
  clt_pb_string(b, 2, n->output);
  clt_pb_string(b, 3, n->output); /* node names: their outputs', unique */
  clt_pb_string(b, 4, n->op);
  for (int a = 0; a < n->nattrs; a++) attribute(b, &n->attrs[a]);
  clt_pb_end(b, mark);
}

/* TensorProto: dims=1, data_type=2, name=8, raw_data=9 (graph field 5). */
static void encode_initializer(clt_pb *b, const initializer *in) {
  const size_t mark = clt_pb_begin(b, 5);
  for (int d = 0; d < in->rank; d++) clt_pb_int(b, 1, in->dims[d]);
  clt_pb_int(b, 2, in->dtype);
  clt_pb_string(b, 8, in->name);
  clt_pb_bytes(b, 9, in->data, in->bytes);
  clt_pb_end(b, mark);
}

/* StringStringEntryProto: key=1, value=2 (model field 14). */
static void metadata(clt_pb *b, const char *key, const char *text) {
  const size_t mark = clt_pb_begin(b, 14);
  clt_pb_string(b, 1, key);
  clt_pb_string(b, 2, text);
  clt_pb_end(b, mark);
}

/* Metadata "preprocessing": the mode's name, as --preprocess and checkpoints name it. */
static const char *preprocess_name(clt_preprocess p) {
  switch (p) {
    case CLT_PRE_UNIT:
      return "unit";
    case CLT_PRE_CAFFE:
      return "caffe";
    case CLT_PRE_RAW:
      return "raw";
  }
  return "";
}

/* Metadata "preprocessing_arithmetic": what the graph's first nodes compute. */
static const char *preprocess_arithmetic(clt_preprocess p) {
  switch (p) {
    case CLT_PRE_UNIT:
      return "inside the graph: x * float32(1/255)";
    case CLT_PRE_CAFFE:
      return "inside the graph: the channels reversed (RGB to BGR), then minus float32 "
             "(103.939, 116.779, 123.68), ImageNet's BGR means";
    case CLT_PRE_RAW:
      return "none: the graph takes the pixel values as they are";
  }
  return "";
}

/* Metadata "class_names": names (one per line) as a JSON array; NULL when out of memory. */
static char *class_names_json(const char *names) {
  cJSON *a = cJSON_CreateArray();
  int ok = a != NULL;
  for (const char *at = names; ok && *at;) {
    const size_t n = strcspn(at, "\n");
    char *name = malloc(n + 1);
    cJSON *item = NULL;
    if (name) {
      memcpy(name, at, n);
      name[n] = '\0';
      item = cJSON_CreateString(name);
      free(name);
    }
    ok = item && cJSON_AddItemToArray(a, item);
    if (!ok) cJSON_Delete(item);
    at += n + (at[n] == '\n');
  }
  char *text = ok ? cJSON_PrintUnformatted(a) : NULL;
  cJSON_Delete(a);
  return text;
}

/* The keys that say what the input is: its shape and layout, and, for a model
 * trained on photos (3 channels; IDX data is grey), how a photo becomes it. */
static void input_metadata(clt_pb *b, const clt_model *m, const clt_onnx_info *info) {
  char text[1024];
  const int h = m->input.h, w = m->input.w, c = m->input.c;
  metadata(b, "input_layout", "NHWC");
  snprintf(text, sizeof text, "%d", h);
  metadata(b, "input_height", text);
  snprintf(text, sizeof text, "%d", w);
  metadata(b, "input_width", text);
  snprintf(text, sizeof text, "%d", c);
  metadata(b, "input_channels", text);
  if (c == 1 || c == 3) metadata(b, "input_channel_order", c == 3 ? "RGB" : "grey");
  metadata(b, "input_values",
           "float32 pixel values 0..255: the uint8 image, decoded and resized, not scaled (the "
           "graph preprocesses)");
  if (c != 3) {
    snprintf(text, sizeof text, "none: the images are fed as stored (IDX files, %dx%d)", h, w);
    metadata(b, "resize", text);
    return;
  }
  metadata(b, "decode",
           "to 8-bit RGB: grey and palette expanded, 16-bit PNG rounded to 8 bits (v / 257), alpha "
           "dropped without compositing, no gamma or ICC handling; JPEG by libjpeg (ISLOW DCT, "
           "CMYK and YCCK converted)");
  const int d = info ? info->decoded_size : 0;
  if (d > 0) {
    /* The training cropped: the photo is decoded to d x d, then resized as Keras'
     * RandomCrop does outside training. */
    int y0, x0, wh, ww;
    clt_augment_crop_window(d, d, h, w, &y0, &x0, &wh, &ww);
    snprintf(text, sizeof text,
             "bilinear, half_pixel coordinates, no antialiasing, to %dx%d whatever the aspect "
             "ratio, rounded to uint8 (tf.image.resize(method='bilinear') rounded); then, as "
             "Keras' RandomCrop(%d, %d) outside training (smart_resize), rows %d to %d and "
             "columns %d to %d of it resized the same way to %dx%d, rounded to uint8",
             d, d, h, w, y0, y0 + wh - 1, x0, x0 + ww - 1, h, w);
  } else {
    snprintf(text, sizeof text,
             "bilinear, half_pixel coordinates, no antialiasing, to %dx%d whatever the aspect "
             "ratio, rounded to uint8 (tf.image.resize(method='bilinear') rounded)",
             h, w);
  }
  metadata(b, "resize", text);
  if (info && info->augment && info->augment[0]) {
    snprintf(text, sizeof text,
             "%s: in training only; outside it each is the identity but a crop, part of the "
             "resize above (docs/photos.md)",
             info->augment);
    metadata(b, "augmentation", text);
  }
  snprintf(text, sizeof text,
           "all in float32; for output index i along an axis of n input pixels (out = %d rows, %d "
           "columns): f = (i + 0.5) * (n / out) - 0.5, lo = max(floor(f), 0), hi = min(ceil(f), "
           "n - 1), t = f - floor(f); per channel top = p[lo_y][lo_x] + (p[lo_y][hi_x] - "
           "p[lo_y][lo_x]) * t_x, bottom the same on row hi_y, v = top + (bottom - top) * t_y; "
           "pixel = uint8(floor(min(v + 0.5, 255))) (docs/onnx.md: as a numpy function)",
           h, w);
  metadata(b, "resize_arithmetic", text);
}

/* ModelProto: ir_version=1, producer_name=2, producer_version=3, doc_string=6, graph=7,
 * opset_import=8, metadata_props=14. GraphProto: node=1, name=2, initializer=5,
 * doc_string=10, input=11, output=12. */
static int encode(const clt_onnx *g, const clt_model *m, const clt_onnx_info *info, clt_pb *b,
                  clt_err *e) {
  const size_t arch_size = clt_describe_max(m->nlayers);
  char *arch = malloc(arch_size);
  char *names = info && info->class_names ? class_names_json(info->class_names) : NULL;
  if (!arch || (info && info->class_names && !names)) {
    free(arch);
    cJSON_free(names);
    return nomem(e);
  }
  clt_model_describe(m, arch, arch_size);
  char text[512];
  clt_pb_int(b, 1, IR_VERSION);
  clt_pb_string(b, 2, "cltrain");
  clt_pb_string(b, 3, CLT_VERSION);
  snprintf(text, sizeof text,
           "Model %s exported by cltrain %s: input 'input' float32 (N, %d, %d, %d) NHWC, pixel "
           "values 0..255%s; output 'logits' float32 (N, %d)%s. The metadata says how.",
           m->name, CLT_VERSION, m->input.h, m->input.w, m->input.c,
           m->input.c == 3 ? " of a photo decoded to RGB and resized" : "", m->classes,
           m->softmax_output ? " and 'probabilities' (softmax of the logits)" : "");
  clt_pb_string(b, 6, text);

  const size_t graph = clt_pb_begin(b, 7);
  for (int i = 0; i < g->nnodes; i++) encode_node(b, &g->nodes[i]);
  clt_pb_string(b, 2, m->name);
  for (int i = 0; i < g->ninits; i++) encode_initializer(b, &g->inits[i]);
  const int64_t in_dims[4] = {-1, m->input.h, m->input.w, m->input.c};
  const int64_t out_dims[2] = {-1, m->classes};
  value_info(b, 11, "input", 4, in_dims);
  value_info(b, 12, "logits", 2, out_dims);
  if (m->softmax_output) value_info(b, 12, "probabilities", 2, out_dims);
  clt_pb_end(b, graph);

  const size_t opset = clt_pb_begin(b, 8);
  clt_pb_int(b, 2, OPSET); /* domain 1 left out: the default domain "" */
  clt_pb_end(b, opset);

  metadata(b, "cltrain_version", CLT_VERSION);
  metadata(b, "model", m->name);
  metadata(b, "architecture", arch);
  if (names) {
    metadata(b, "class_names", names);
    if (info->class_names_source) metadata(b, "class_names_source", info->class_names_source);
  }
  input_metadata(b, m, info);
  metadata(b, "preprocessing", preprocess_name(m->preprocess));
  metadata(b, "preprocessing_arithmetic", preprocess_arithmetic(m->preprocess));
  snprintf(text, sizeof text, "logits: float32 (N, %d), before softmax%s", m->classes,
           m->softmax_output ? "; probabilities: float32 (N, classes), softmax over axis 1" : "");
  metadata(b, "output_layout", text);
  metadata(b, "internal_layout", "NCHW after one Transpose of the preprocessed input");
  free(arch);
  cJSON_free(names);
  return clt_pb_failed(b) ? nomem(e) : CLT_OK;
}

/* ---- the file ----------------------------------------------------------------------- */

static void log_nodes(const clt_onnx *g, FILE *log) {
  for (int i = 0; i < g->nnodes; i++) {
    const node *n = &g->nodes[i];
    fprintf(log, "  %s %s <-", n->op, n->output);
    for (int k = 0; k < n->ninputs; k++) fprintf(log, "%s %s", k ? "," : "", n->inputs[k]);
    fputc('\n', log);
  }
  size_t floats = 0;
  for (int i = 0; i < g->ninits; i++) floats += g->inits[i].bytes;
  fprintf(log, "  %d nodes, %d initializers (%zu bytes)\n", g->nnodes, g->ninits, floats);
}

int clt_onnx_export_log(const clt_model *m, const float *flat_params, const clt_onnx_info *info,
                        const char *path, FILE *log, size_t *bytes, clt_err *e) {
  clt_onnx g = {.model = m, .flat = flat_params};
  clt_pb b;
  clt_pb_init(&b);
  if (m->nlayers < 1) return clt_fail(e, CLT_ERR_ARG, "model %s has no layers", m->name);
  int status = build(&g, m, e);
  if (!status && log) log_nodes(&g, log);
  if (!status) status = encode(&g, m, info, &b, e);
  graph_free(&g);
  if (!status) status = clt_write_atomic(path, b.data, b.len, e);
  if (!status && bytes) *bytes = b.len;
  clt_pb_free(&b);
  return status;
}

int clt_onnx_export(const clt_model *m, const float *flat_params, const char *path, clt_err *e) {
  return clt_onnx_export_log(m, flat_params, NULL, path, NULL, NULL, e);
}
