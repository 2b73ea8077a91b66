/* Keras model files to model descriptions (see keras.h). The two formats differ
 * in where the input shape sits and how inbound nodes are written:
 *   tf.keras 2.x: "inbound_nodes": [[["conv2d", 0, 0, {}], ...]], InputLayer's
 *                 "batch_input_shape", a Sequential's first layer may carry it;
 *   Keras 3:      "inbound_nodes": [{"args": [<tensor> or [<tensor>, ...]],
 *                 "kwargs": {...}}] with <tensor> = {"class_name":
 *                 "__keras_tensor__", "config": {"keras_history": [name, 0, 0]}},
 *                 InputLayer's "batch_shape", the model's "build_config".
 * A nested model (a Sequential or functional model among the layers) is read into
 * the same node list, its layers in its own scope (names are unique per model, not
 * across them); its InputLayer and its own node become aliases, which pass their
 * one input through, and are resolved away before the graph is checked.
 * Nothing here knows a layer kind beyond the graph-level rules keras.h lists. */
#define _POSIX_C_SOURCE 200809L
#include "keras.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kconfig_impl.h"
#include "keras_augment.h"

#define MAX_INBOUND 16
#define MAX_DEPTH 16                           /* nested models within nested models */
#define NAME_MAX_LEN (CLT_LAYER_NAME_SIZE - 1) /* clt_layer's name */

typedef struct knode {
  const char *name, *cls;
  const cJSON *config;
  int scope;  /* the model it is a layer of: 0 the file's, else a nested model's */
  int parent; /* that nested model's node, or -1 */
  int ninputs;
  int inputs[MAX_INBOUND]; /* node indices */
  char input_names[MAX_INBOUND][64];
  int input_calls[MAX_INBOUND]; /* which call of the producer each input takes */
  int consumers;
  int emitted;
  /* A nested model: its input and output nodes and the index of its first call in
   * its consumers' inbound nodes (tf.keras 2.x counts the model's own graph as call
   * 0 when its first layer is an InputLayer). */
  int model, model_input, model_output, first_call;
  int listed_call;  /* the inbound node is tf.keras 2.x's list form */
  int alias;        /* passes its one input through (a nested model, its InputLayer) */
  int frozen;       /* trainable false, its own or a nested model's */
  int inference;    /* a tf.keras 2.x call with training=False, its own or a nested model's */
  char tensor[128]; /* the cltrain layer (or "input") holding this node's output */
  /* A ZeroPadding2D folded into this node: sides and the padding layer's name. */
  int pad[4];
  const char *pad_name;
  int skip;          /* a ZeroPadding2D folded into its consumer, or the final softmax */
  char renamed[128]; /* a nested model's layer named as another: "<model>/<layer>" */
  /* A Keras 3 operation node (module keras.src.ops.*: x + 3.0, inputs + x): its
   * number arguments, how many and the last, and whether one came before a tensor. */
  const char *op_module;
  int nconst;
  double constant;
  int const_first;
} knode;

/* A description entry and the node it came from (for frozen and inference). */
typedef struct kentry {
  char name[128];
  int node;
} kentry;

typedef struct loader {
  const char *origin;
  const clt_keras_opts *o;
  knode *nodes; /* n of them, in room allocated */
  int n, room;
  int scopes;        /* scopes handed out */
  int input, output; /* node indices */
  clt_shape shape;   /* from the file, 0 where open */
  int softmax_output;
  int keras2;      /* written by tf.keras 2.x ("keras_version" "2...") */
  clt_augment aug; /* the augmentation layers taken out (take_augmentation) */
  char *text;      /* the description being written, in size allocated bytes */
  size_t size, used;
  kentry *entries; /* nentries of them, in entries_room allocated */
  int nentries, entries_room;
} loader;

static const char *str(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int clt_keras_is_file(const char *model) {
  const size_t n = strlen(model);
  return strchr(model, '/') != NULL || (n > 5 && strcmp(model + n - 5, ".json") == 0);
}

static int is_model_class(const char *cls) {
  return strcmp(cls, "Sequential") == 0 || strcmp(cls, "Functional") == 0 ||
         strcmp(cls, "Model") == 0;
}

/* ---- the graph -------------------------------------------------------------- */

/* The node named `name` among the layers of model `scope`, or -1. */
static int find_node(const loader *ld, int scope, const char *name) {
  for (int i = 0; i < ld->n; i++) {
    if (ld->nodes[i].scope == scope && strcmp(ld->nodes[i].name, name) == 0) return i;
  }
  return -1;
}

/* " of nested model NAME" for the layers of a nested model, "" for the file's. */
static const char *scope_text(const loader *ld, int parent, char *buf, size_t size) {
  if (parent < 0) return "";
  snprintf(buf, size, " of nested model %s", ld->nodes[parent].name);
  return buf;
}

/* Records an inbound tensor [name, node_index, tensor_index] of node k. */
static int add_inbound(loader *ld, knode *k, const cJSON *history, clt_err *e) {
  const cJSON *name = cJSON_GetArrayItem(history, 0), *node = cJSON_GetArrayItem(history, 1),
              *tensor = cJSON_GetArrayItem(history, 2);
  if (!cJSON_IsString(name) || !cJSON_IsNumber(node) || !cJSON_IsNumber(tensor)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: malformed inbound node", ld->origin, k->name);
  }
  if (tensor->valueint != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: layer %s: takes output %d of call %d of layer %s; cltrain supports "
                    "layers called once with one output (no shared layers)",
                    ld->origin, k->name, tensor->valueint, node->valueint, name->valuestring);
  }
  if (k->ninputs == MAX_INBOUND) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: more than %d inputs", ld->origin, k->name,
                    MAX_INBOUND);
  }
  k->input_calls[k->ninputs] = node->valueint; /* checked once the producer is known */
  snprintf(k->input_names[k->ninputs++], sizeof k->input_names[0], "%s", name->valuestring);
  return CLT_OK;
}

/* Keras 3: collects the keras_history of every tensor in args (nested lists). */
static int collect_tensors(loader *ld, knode *k, const cJSON *v, clt_err *e) {
  if (cJSON_IsArray(v)) {
    for (const cJSON *it = v->child; it; it = it->next) {
      int status = collect_tensors(ld, k, it, e);
      if (status) return status;
    }
    return CLT_OK;
  }
  if (cJSON_IsNumber(v)) { /* an operation's constant (x + 3.0) */
    k->nconst++;
    k->constant = v->valuedouble;
    k->const_first = k->ninputs == 0;
    return CLT_OK;
  }
  if (!cJSON_IsObject(v)) return CLT_OK; /* a constant argument */
  const char *cls = str(v, "class_name");
  if (!cls || strcmp(cls, "__keras_tensor__") != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: an argument of class %s is not supported",
                    ld->origin, k->name, cls ? cls : "(none)");
  }
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(v, "config");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(cfg, "keras_history");
  if (!cJSON_IsArray(h)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: a tensor without keras_history", ld->origin,
                    k->name);
  }
  return add_inbound(ld, k, h, e);
}

/* null, or a list of nulls. */
static int all_null(const cJSON *v) {
  if (!cJSON_IsArray(v)) return cJSON_IsNull(v);
  for (const cJSON *it = v->child; it; it = it->next) {
    if (!cJSON_IsNull(it)) return 0;
  }
  return 1;
}

/* A call's keyword arguments: tensors and masks are refused. `training` is
 * tf.keras 2.x's to keep (listed: false runs the layer as at inference in training
 * too; true, training at inference too, is refused); Keras 3 records it but
 * replaces it by the outer call's in fit, evaluate and predict, so it is moot. */
static int read_kwargs(loader *ld, knode *k, const cJSON *kwargs, int listed, clt_err *e) {
  for (const cJSON *it = kwargs ? kwargs->child : NULL; it; it = it->next) {
    if (all_null(it)) continue; /* Keras 3 writes "mask": null, one per input */
    if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s: call argument %s is not supported (a tensor or mask)",
                      ld->origin, k->name, it->string);
    }
    if (!listed || strcmp(it->string, "training") != 0 || cJSON_IsNull(it)) continue;
    if (!cJSON_IsBool(it)) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: call argument training is not a boolean",
                      ld->origin, k->name);
    }
    if (cJSON_IsTrue(it)) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s: called with training=True (training mode at inference "
                      "too) is not supported",
                      ld->origin, k->name);
    }
    k->inference = 1;
  }
  return CLT_OK;
}

/* tf.keras 2.x's TFOpLambda (an operation, x + 3.0 or x * (1/6) in MobileNetV3):
 * its one call [tensor, node, index, kwargs], y in kwargs a number or another
 * tensor [name, node, index]. It becomes the Keras 3 operation node of the same
 * meaning (emit_op); its functions other than these are refused. */
static int read_tf_op(loader *ld, knode *k, const cJSON *call, clt_err *e) {
  static const struct {
    const char *function, *op;
  } ops[] = {{"__operators__.add", "Add"},      {"math.add", "Add"},
             {"__operators__.sub", "Subtract"}, {"math.subtract", "Subtract"},
             {"math.multiply", "Multiply"},     {"__operators__.truediv", "TrueDivide"},
             {"math.truediv", "TrueDivide"},    {"math.divide", "TrueDivide"}};
  const char *function = str(k->config, "function");
  const char *op = NULL;
  for (size_t j = 0; function && j < sizeof ops / sizeof ops[0]; j++) {
    if (strcmp(function, ops[j].function) == 0) op = ops[j].op;
  }
  if (!op) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: layer %s (TFOpLambda): function %s is not supported (only add, "
                    "subtract, multiply and divide of a tensor by a number or a tensor)",
                    ld->origin, k->name, function ? function : "(none)");
  }
  k->cls = op;
  k->op_module = "TFOpLambda";
  k->listed_call = 1;
  int status = add_inbound(ld, k, call, e);
  const cJSON *kwargs = cJSON_GetArrayItem(call, 3);
  if (!status && kwargs && !cJSON_IsObject(kwargs)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: malformed inbound_nodes", ld->origin,
                    k->name);
  }
  for (const cJSON *it = kwargs ? kwargs->child : NULL; it && !status; it = it->next) {
    if (strcmp(it->string, "name") == 0 && (cJSON_IsNull(it) || cJSON_IsString(it))) continue;
    if (strcmp(it->string, "y") == 0 && cJSON_IsNumber(it)) {
      k->nconst++;
      k->constant = it->valuedouble;
    } else if (strcmp(it->string, "y") == 0 && cJSON_IsArray(it) && cJSON_IsString(it->child)) {
      status = add_inbound(ld, k, it, e);
    } else {
      status = clt_fail(e, CLT_ERR_FORMAT,
                        "%s: layer %s (TFOpLambda): call argument %s is not supported (only y, "
                        "a number or a tensor)",
                        ld->origin, k->name, it->string);
    }
  }
  return status;
}

static int read_inbound(loader *ld, knode *k, const cJSON *inbound, clt_err *e) {
  if (!inbound || (cJSON_IsArray(inbound) && cJSON_GetArraySize(inbound) == 0)) return CLT_OK;
  if (!cJSON_IsArray(inbound)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: inbound_nodes is not a list", ld->origin,
                    k->name);
  }
  if (cJSON_GetArraySize(inbound) > 1) {
    if (k->model) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s is a nested model called %d times; cltrain flattens nested "
                      "models called once (no shared models)",
                      ld->origin, k->name, cJSON_GetArraySize(inbound));
    }
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: layer %s is called %d times; cltrain supports layers called once (no "
                    "shared layers)",
                    ld->origin, k->name, cJSON_GetArraySize(inbound));
  }
  const cJSON *node = inbound->child;
  if (cJSON_IsObject(node)) { /* Keras 3 */
    int status = read_kwargs(ld, k, cJSON_GetObjectItemCaseSensitive(node, "kwargs"), 0, e);
    return status ? status
                  : collect_tensors(ld, k, cJSON_GetObjectItemCaseSensitive(node, "args"), e);
  }
  if (!cJSON_IsArray(node)) goto bad;
  if (strcmp(k->cls, "TFOpLambda") == 0 && cJSON_IsString(node->child))
    return read_tf_op(ld, k, node, e);
  k->listed_call = 1;
  for (const cJSON *t = node->child; t; t = t->next) { /* tf.keras 2.x */
    if (!cJSON_IsArray(t)) goto bad;
    const cJSON *kwargs = cJSON_GetArrayItem(t, 3);
    if (kwargs && !cJSON_IsObject(kwargs)) goto bad;
    int status = read_kwargs(ld, k, kwargs, 1, e);
    if (!status) status = add_inbound(ld, k, t, e);
    if (status) return status;
  }
  return CLT_OK;
bad:
  return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: malformed inbound_nodes", ld->origin, k->name);
}

/* [name, 0, 0] or [[name, 0, 0], ...] → the one layer named among model scope's,
 * refusing several. */
static int endpoint(loader *ld, const cJSON *config, int scope, int parent, const char *key,
                    const char *what, int *out, clt_err *e) {
  char where[96], in[96];
  if (parent < 0) snprintf(where, sizeof where, "the model");
  else snprintf(where, sizeof where, "layer %s (a nested model)", ld->nodes[parent].name);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %s has no %s", ld->origin, where, key);
  if (cJSON_IsArray(v->child)) {
    if (cJSON_GetArraySize(v) > 1) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: %s has %d %ss; cltrain %s with one", ld->origin,
                      where, cJSON_GetArraySize(v), what,
                      parent < 0 ? "trains models" : "flattens nested models");
    }
    v = v->child;
  }
  const char *name = cJSON_IsString(v->child) ? v->child->valuestring : NULL;
  *out = name ? find_node(ld, scope, name) : -1;
  if (*out < 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: the %s %s%s is not one of its layers", ld->origin, what,
                    name ? name : "(unnamed)",
                    parent < 0 ? "" : scope_text(ld, parent, in, sizeof in));
  }
  return CLT_OK;
}

/* A new node of model `scope`, its name checked to be unique there. */
static int new_node(loader *ld, int scope, int parent, const char *name, int *out, clt_err *e) {
  if (ld->n == ld->room) {
    const int room = ld->room < 64 ? 64 : ld->room < INT_MAX / 2 ? 2 * ld->room : INT_MAX;
    knode *more = ld->n == INT_MAX ? NULL : realloc(ld->nodes, (size_t)room * sizeof *more);
    if (!more)
      return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory for %d layers", ld->origin,
                      ld->n + 1);
    ld->nodes = more;
    ld->room = room;
  }
  if (find_node(ld, scope, name) >= 0) {
    char in[96];
    return clt_fail(e, CLT_ERR_FORMAT, "%s: two layers%s are named %s", ld->origin,
                    scope_text(ld, parent, in, sizeof in), name);
  }
  knode *k = &ld->nodes[ld->n];
  memset(k, 0, sizeof *k);
  k->name = name;
  k->scope = scope;
  k->parent = parent;
  *out = ld->n++;
  return CLT_OK;
}

/* Reads the layers of a model's config into nodes of model `scope` (0: the file's;
 * else the nested model at node `parent`): names, classes, configs, frozen and
 * inference (the model's, passed down to its layers), and the inputs, resolved to
 * node indices among the scope's layers. Nested models are read recursively.
 * *in, *out: the model's input and output nodes. */
static int read_scope(loader *ld, const cJSON *config, int sequential, int scope, int parent,
                      int depth, int frozen, int inference, int *in, int *out, clt_err *e) {
  char where[96];
  const char *of = scope_text(ld, parent, where, sizeof where);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(config, "layers");
  if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0) {
    if (parent >= 0) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s (a nested model) has no layers", ld->origin,
                      ld->nodes[parent].name);
    }
    return clt_fail(e, CLT_ERR_FORMAT, "%s: the model has no layers", ld->origin);
  }
  const int first = ld->n;
  int status = CLT_OK, i;
  /* A Sequential without InputLayer: an implicit input node (no config) in front. */
  const char *first_cls = str(layers->child, "class_name");
  if (sequential && (!first_cls || strcmp(first_cls, "InputLayer") != 0)) {
    if ((status = new_node(ld, scope, parent, "input", &i, e))) return status;
    ld->nodes[i].cls = "InputLayer";
  }
  for (const cJSON *it = layers->child; it; it = it->next) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(it, "config");
    const char *cls = str(it, "class_name"), *name = str(cfg, "name");
    if (!name) name = str(it, "name");
    if (!cls || !cJSON_IsObject(cfg) || !name) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %d%s has no class_name, config or name",
                      ld->origin, ld->n - first + 1, of);
    }
    if ((status = new_node(ld, scope, parent, name, &i, e))) return status;
    knode *k = &ld->nodes[i];
    k->cls = cls;
    k->config = cfg;
    k->model = is_model_class(cls);
    const char *module = str(it, "module");
    if (module && strncmp(module, "keras.src.ops", 13) == 0) k->op_module = module;
    const cJSON *trainable = cJSON_GetObjectItemCaseSensitive(cfg, "trainable");
    k->frozen = frozen || cJSON_IsFalse(trainable);
    k->inference = inference;
    if (!sequential &&
        (status = read_inbound(ld, k, cJSON_GetObjectItemCaseSensitive(it, "inbound_nodes"), e)))
      return status;
    if (!k->model) continue;
    if (depth == MAX_DEPTH) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: nested models more than %d deep",
                      ld->origin, name, MAX_DEPTH);
    }
    int model_in, model_out;
    status = read_scope(ld, cfg, strcmp(cls, "Sequential") == 0, ++ld->scopes, i, depth + 1,
                        k->frozen, k->inference, &model_in, &model_out, e);
    if (status) return status;
    k = &ld->nodes[i];
    k->alias = 1;
    k->model_input = model_in;
    k->model_output = model_out;
    const knode *mi = &ld->nodes[model_in];
    k->first_call = k->listed_call && mi->config && strcmp(mi->cls, "InputLayer") == 0;
  }
  if (sequential) {
    /* A chain: each layer of the scope takes the one before. */
    int prev = -1;
    for (int j = first; j < ld->n; j++) {
      knode *k = &ld->nodes[j];
      if (k->scope != scope) continue;
      if (prev >= 0) {
        k->ninputs = 1;
        k->inputs[0] = prev;
      }
      prev = j;
    }
    *in = first;
    *out = prev;
    if (*out == *in) {
      if (parent >= 0) {
        return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s (a nested model) has no layers",
                        ld->origin, ld->nodes[parent].name);
      }
      return clt_fail(e, CLT_ERR_FORMAT, "%s: the model has no layers", ld->origin);
    }
  } else {
    if ((status = endpoint(ld, config, scope, parent, "input_layers", "input", in, e)) ||
        (status = endpoint(ld, config, scope, parent, "output_layers", "output", out, e)))
      return status;
    for (int j = first; j < ld->n; j++) {
      knode *k = &ld->nodes[j];
      if (k->scope != scope) continue;
      for (int t = 0; t < k->ninputs; t++) {
        const int p = find_node(ld, scope, k->input_names[t]);
        if (p < 0) {
          return clt_fail(e, CLT_ERR_FORMAT,
                          "%s: layer %s%s takes input %s, which is not a layer of %s", ld->origin,
                          k->name, of, k->input_names[t], of[0] ? of + 4 : "the model");
        }
        const int call = ld->nodes[p].model ? ld->nodes[p].first_call : 0;
        if (k->input_calls[t] != call) {
          return clt_fail(e, CLT_ERR_FORMAT,
                          "%s: layer %s: takes output 0 of call %d of layer %s; cltrain supports "
                          "layers called once with one output (no shared layers)",
                          ld->origin, k->name, k->input_calls[t] - call, ld->nodes[p].name);
        }
        k->inputs[t] = p;
      }
    }
  }
  /* Each nested model of the scope: its input takes the model's input, and the
   * model's node passes its output on. */
  for (int j = first; j < ld->n; j++) {
    knode *k = &ld->nodes[j];
    if (k->scope != scope || !k->model) continue;
    if (k->ninputs != 1) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s (a nested model) takes %d inputs; cltrain flattens nested "
                      "models of one input",
                      ld->origin, k->name, k->ninputs);
    }
    knode *mi = &ld->nodes[k->model_input];
    if (strcmp(mi->cls, "InputLayer") != 0) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s (a nested model): its input %s is a %s, not an InputLayer",
                      ld->origin, k->name, mi->name, mi->cls);
    }
    mi->alias = 1;
    mi->ninputs = 1;
    mi->inputs[0] = k->inputs[0];
    k->inputs[0] = k->model_output;
  }
  return CLT_OK;
}

/* The node an alias stands for, following aliases; -1 for a loop of aliases. */
static int resolve_alias(const loader *ld, int i) {
  for (int steps = 0; ld->nodes[i].alias; steps++) {
    if (steps > ld->n) return -1;
    i = ld->nodes[i].inputs[0];
  }
  return i;
}

/* A nested model's layer named as another layer of the file becomes
 * "<model>/<layer>" (every nested model on the way, outermost first). */
static int rename_clashes(loader *ld, clt_err *e) {
  for (int i = 0; i < ld->n; i++) {
    knode *k = &ld->nodes[i];
    if (k->alias || i == ld->input || k->parent < 0) continue;
    int clash = 0;
    for (int j = 0; j < ld->n && !clash; j++) {
      const knode *o = &ld->nodes[j];
      clash = j != i && !o->alias && j != ld->input && strcmp(o->name, k->name) == 0;
    }
    if (!clash) continue;
    int path[MAX_DEPTH + 1], depth = 0;
    for (int p = k->parent; p >= 0 && depth <= MAX_DEPTH; p = ld->nodes[p].parent)
      path[depth++] = p;
    char full[MAX_DEPTH * 128 + 128] = "";
    size_t used = 0;
    for (int d = depth - 1; d >= 0; d--)
      used += (size_t)snprintf(full + used, sizeof full - used, "%.126s/", ld->nodes[path[d]].name);
    snprintf(full + used, sizeof full - used, "%.126s", k->name);
    if (strlen(full) > NAME_MAX_LEN) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s of nested model %s is named as another layer of the file, and "
                      "%s, its name where names clash, is longer than %d characters; rename one "
                      "of them",
                      ld->origin, k->name, ld->nodes[k->parent].name, full, NAME_MAX_LEN);
    }
    snprintf(k->renamed, sizeof k->renamed, "%s", full);
  }
  for (int i = 0; i < ld->n; i++) {
    if (ld->nodes[i].renamed[0]) ld->nodes[i].name = ld->nodes[i].renamed;
  }
  for (int i = 0; i < ld->n; i++) {
    const knode *k = &ld->nodes[i];
    if (k->alias || i == ld->input) continue;
    for (int j = i + 1; j < ld->n; j++) {
      const knode *o = &ld->nodes[j];
      if (!o->alias && j != ld->input && strcmp(o->name, k->name) == 0) {
        return clt_fail(e, CLT_ERR_FORMAT,
                        "%s: two layers are named %s, also after naming nested models' layers "
                        "<model>/<layer> where names clash",
                        ld->origin, k->name);
      }
    }
  }
  return CLT_OK;
}

/* Reads the layer list: names, classes, configs, (functional) inbound nodes and
 * nested models, whose aliases are then resolved away. */
static int read_layers(loader *ld, const cJSON *root, clt_err *e) {
  const char *cls = str(root, "class_name");
  const cJSON *config = cJSON_GetObjectItemCaseSensitive(root, "config");
  if (!cls || !cJSON_IsObject(config)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: not a Keras model (no class_name and config at the top; expected "
                    "model.to_json()'s output)",
                    ld->origin);
  }
  if (!is_model_class(cls)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: a model of class %s; cltrain reads Sequential and functional models",
                    ld->origin, cls);
  }
  /* The file's model may be frozen too: its trainable passes down as a nested model's. */
  const int frozen = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(config, "trainable"));
  int status = read_scope(ld, config, strcmp(cls, "Sequential") == 0, 0, -1, 0, frozen, 0,
                          &ld->input, &ld->output, e);
  if (status) return status;
  if (!ld->nodes) return clt_fail(e, CLT_ERR_FORMAT, "%s: the model has no layers", ld->origin);
  /* Every reference to an alias goes to what it stands for. */
  for (int i = 0; i < ld->n; i++) {
    knode *k = &ld->nodes[i];
    for (int t = 0; t < k->ninputs && !k->alias; t++) {
      const int to = resolve_alias(ld, k->inputs[t]);
      if (to < 0) {
        return clt_fail(e, CLT_ERR_FORMAT, "%s: the graph has a cycle through layer %s", ld->origin,
                        ld->nodes[k->inputs[t]].name);
      }
      k->inputs[t] = to;
    }
  }
  if ((ld->output = resolve_alias(ld, ld->output)) < 0)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: the graph has a cycle through its output", ld->origin);
  if (ld->output == ld->input)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: the model has no layers", ld->origin);
  return rename_clashes(ld, e);
}

/* Counts consumers and checks the graph: no cycle, every layer feeding the
 * output, one input. Orders the layers so inputs come first (files Keras writes
 * are in that order already; nested models' layers sit where the model does):
 * order[0 .. *placed). */
static int order_graph(loader *ld, int *order, int *placed_out, int *pending, int *done, int *reach,
                       clt_err *e) {
  int real = 0;
  for (int i = 0; i < ld->n; i++) {
    knode *k = &ld->nodes[i];
    if (k->alias) continue;
    real++;
    for (int j = 0; j < k->ninputs; j++) ld->nodes[k->inputs[j]].consumers++;
    if (strcmp(k->cls, "InputLayer") == 0 && i != ld->input) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: a second input %s; cltrain trains models with one image input",
                      ld->origin, k->name);
    }
    if (strcmp(k->cls, "InputLayer") != 0 && k->ninputs == 0) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s has no input", ld->origin, k->name);
    }
  }
  /* Kahn's algorithm, taking the earliest ready node each time: the file's order
   * when it is already a topological one. */
  int placed = 0;
  for (int i = 0; i < ld->n; i++) {
    pending[i] = ld->nodes[i].ninputs;
    done[i] = ld->nodes[i].alias;
  }
  while (placed < real) {
    int next = -1;
    for (int i = 0; i < ld->n && next < 0; i++) {
      if (!done[i] && pending[i] == 0) next = i;
    }
    if (next < 0) {
      for (int i = 0; i < ld->n; i++) {
        if (!done[i]) {
          return clt_fail(e, CLT_ERR_FORMAT, "%s: the graph has a cycle through layer %s",
                          ld->origin, ld->nodes[i].name);
        }
      }
      return clt_fail(e, CLT_ERR_INTERNAL, "%s: ordering the layers", ld->origin);
    }
    done[next] = 1;
    order[placed++] = next;
    for (int i = 0; i < ld->n; i++) {
      if (ld->nodes[i].alias) continue;
      for (int j = 0; j < ld->nodes[i].ninputs; j++) {
        if (ld->nodes[i].inputs[j] == next) pending[i]--;
      }
    }
  }
  *placed_out = placed;
  /* Every layer must lead to the output. */
  reach[ld->output] = 1;
  for (int p = placed - 1; p >= 0; p--) {
    const knode *k = &ld->nodes[order[p]];
    if (!reach[order[p]]) continue;
    for (int j = 0; j < k->ninputs; j++) reach[k->inputs[j]] = 1;
  }
  for (int i = 0; i < ld->n; i++) {
    if (!reach[i] && i != ld->input && !ld->nodes[i].alias) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s does not lead to the output %s", ld->origin,
                      ld->nodes[i].name, ld->nodes[ld->output].name);
    }
  }
  if (ld->nodes[ld->output].consumers) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: the output layer %s feeds other layers", ld->origin,
                    ld->nodes[ld->output].name);
  }
  return CLT_OK;
}

/* order_graph with its working arrays. */
static int check_graph(loader *ld, int *order, int *placed_out, clt_err *e) {
  const size_t n = (size_t)ld->n;
  int *pending = calloc(3 * n + 1, sizeof *pending);
  if (!pending) return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", ld->origin);
  const int status = order_graph(ld, order, placed_out, pending, pending + n, pending + 2 * n, e);
  free(pending);
  return status;
}

/* ---- configs ------------------------------------------------------------------ */

/* A dtype: "float32" or Keras 3's {"class_name": "DTypePolicy", "config": {"name": ...}}. */
static const char *dtype_name(const cJSON *v) {
  if (cJSON_IsString(v)) return v->valuestring;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(v, "config");
  return str(cfg, "name");
}

/* Keras' initializers by class and by string name, and what each is: a kind of
 * clt_init with its default arguments. */
static const struct {
  const char *cls, *alias;
  clt_init init;
} initializers[] = {
    {"Zeros", "zeros", {CLT_INIT_CONSTANT, 0, 0, 0, 0}},
    {"Ones", "ones", {CLT_INIT_CONSTANT, 1, 0, 0, 0}},
    {"Constant", "constant", {CLT_INIT_CONSTANT, 0, 0, 0, 0}},
    {"RandomNormal", "random_normal", {CLT_INIT_NORMAL, 0, 0.05, 0, 0}},
    {"RandomUniform", "random_uniform", {CLT_INIT_UNIFORM, -0.05, 0.05, 0, 0}},
    {"TruncatedNormal", "truncated_normal", {CLT_INIT_TRUNCATED, 0, 0.05, 0, 0}},
    {"VarianceScaling",
     "variance_scaling",
     {CLT_INIT_SCALING, 1, 0, CLT_FAN_IN, CLT_DIST_TRUNCATED}},
    {"GlorotUniform", "glorot_uniform", {CLT_INIT_SCALING, 1, 0, CLT_FAN_AVG, CLT_DIST_UNIFORM}},
    {"GlorotNormal", "glorot_normal", {CLT_INIT_SCALING, 1, 0, CLT_FAN_AVG, CLT_DIST_TRUNCATED}},
    {"HeNormal", "he_normal", {CLT_INIT_SCALING, 2, 0, CLT_FAN_IN, CLT_DIST_TRUNCATED}},
    {"HeUniform", "he_uniform", {CLT_INIT_SCALING, 2, 0, CLT_FAN_IN, CLT_DIST_UNIFORM}},
    {"LecunNormal", "lecun_normal", {CLT_INIT_SCALING, 1, 0, CLT_FAN_IN, CLT_DIST_TRUNCATED}},
    {"LecunUniform", "lecun_uniform", {CLT_INIT_SCALING, 1, 0, CLT_FAN_IN, CLT_DIST_UNIFORM}},
};
#define NINITIALIZERS ((int)(sizeof initializers / sizeof initializers[0]))

/* An initializer's class: "GlorotUniform", or a string "glorot_uniform". */
static int initializer_is(const cJSON *v, const char *cls, const char *alias) {
  if (cJSON_IsString(v)) return strcmp(v->valuestring, alias) == 0;
  const char *c = str(v, "class_name");
  return c && (strcmp(c, cls) == 0 || strcmp(c, alias) == 0);
}

/* A number option of an initializer's config into *out (absent: left). */
static int init_number(const cJSON *it, double *out, char *why, size_t size) {
  if (!cJSON_IsNumber(it)) {
    snprintf(why, size, "%s is not a number", it->string);
    return -1;
  }
  *out = it->valuedouble;
  return 0;
}

/* Reads initializer v (a class with its config, or a string name) into *in; -1
 * with the reason in why where cltrain cannot draw it. The seed is not Keras':
 * every initializer draws from --seed. */
static int read_initializer(const cJSON *v, clt_init *in, char *why, size_t size) {
  const char *cls = cJSON_IsString(v) ? v->valuestring : str(v, "class_name");
  int k = 0;
  while (k < NINITIALIZERS && !initializer_is(v, initializers[k].cls, initializers[k].alias)) k++;
  if (k == NINITIALIZERS) {
    snprintf(why, size,
             "%s is not supported (supported: Zeros, Ones, Constant, RandomNormal, "
             "RandomUniform, TruncatedNormal, VarianceScaling, GlorotUniform, GlorotNormal, "
             "HeNormal, HeUniform, LecunNormal, LecunUniform)",
             cls ? cls : "(no class)");
    return -1;
  }
  *in = initializers[k].init;
  const cJSON *cfg = cJSON_IsString(v) ? NULL : cJSON_GetObjectItemCaseSensitive(v, "config");
  const int kind = in->kind, named = k >= 7; /* Glorot, He, Lecun: fixed arguments */
  for (const cJSON *it = cfg ? cfg->child : NULL; it; it = it->next) {
    const char *key = it->string;
    int bad = 0;
    if (strcmp(key, "seed") == 0) continue;
    if ((kind == CLT_INIT_CONSTANT && k == 2 && strcmp(key, "value") == 0) ||
        (kind == CLT_INIT_SCALING && !named && strcmp(key, "scale") == 0)) {
      bad = init_number(it, &in->a, why, size);
    } else if ((kind == CLT_INIT_NORMAL || kind == CLT_INIT_TRUNCATED) &&
               (strcmp(key, "mean") == 0 || strcmp(key, "stddev") == 0)) {
      bad = init_number(it, key[0] == 'm' ? &in->a : &in->b, why, size);
    } else if (kind == CLT_INIT_UNIFORM &&
               (strcmp(key, "minval") == 0 || strcmp(key, "maxval") == 0)) {
      bad = init_number(it, strcmp(key, "minval") == 0 ? &in->a : &in->b, why, size);
    } else if (kind == CLT_INIT_SCALING && !named && strcmp(key, "mode") == 0) {
      const char *mode = cJSON_IsString(it) ? it->valuestring : "";
      in->mode = strcmp(mode, "fan_in") == 0    ? CLT_FAN_IN
                 : strcmp(mode, "fan_out") == 0 ? CLT_FAN_OUT
                 : strcmp(mode, "fan_avg") == 0 ? CLT_FAN_AVG
                                                : -1;
      if (in->mode < 0) {
        snprintf(why, size, "VarianceScaling mode %.40s is not fan_in, fan_out or fan_avg", mode);
        bad = -1;
      }
    } else if (kind == CLT_INIT_SCALING && !named && strcmp(key, "distribution") == 0) {
      const char *d = cJSON_IsString(it) ? it->valuestring : "";
      /* Keras reads "normal" as "truncated_normal" */
      in->distribution = strcmp(d, "truncated_normal") == 0 || strcmp(d, "normal") == 0
                             ? CLT_DIST_TRUNCATED
                         : strcmp(d, "untruncated_normal") == 0 ? CLT_DIST_NORMAL
                         : strcmp(d, "uniform") == 0            ? CLT_DIST_UNIFORM
                                                                : -1;
      if (in->distribution < 0) {
        snprintf(why, size,
                 "VarianceScaling distribution %.40s is not truncated_normal, untruncated_normal, "
                 "normal or uniform",
                 d);
        bad = -1;
      }
    } else if (kind == CLT_INIT_SCALING &&
               (strcmp(key, "input_axes") == 0 || strcmp(key, "output_axes") == 0) &&
               cJSON_IsNull(it)) {
      /* the fans of the shape, as without */
    } else {
      char *value = cJSON_PrintUnformatted(it);
      snprintf(why, size, "%s option %s=%.40s is not supported", cls, key, value ? value : "?");
      free(value);
      bad = -1;
    }
    if (bad) return -1;
  }
  if ((kind == CLT_INIT_SCALING && !(in->a > 0)) ||
      ((kind == CLT_INIT_NORMAL || kind == CLT_INIT_TRUNCATED) && !(in->b >= 0)) ||
      (kind == CLT_INIT_UNIFORM && !(in->a <= in->b))) {
    snprintf(why, size, "%s: bad arguments (%g, %g)", cls, in->a, in->b);
    return -1;
  }
  return 0;
}

/* The initializer of parameter p in a Keras layer's config: the key
 * "<name>_initializer", or for "<x>_kernel" (also as the alias) "<x>_initializer";
 * NULL where there is none. */
static const cJSON *param_initializer(const cJSON *config, const clt_param *p) {
  const char *names[2] = {p->name, p->alias};
  for (int n = 0; n < 2; n++) {
    if (!names[n][0]) continue;
    char key[64];
    snprintf(key, sizeof key, "%s_initializer", names[n]);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (v) return v;
    const size_t len = strlen(names[n]);
    if (len > 7 && strcmp(names[n] + len - 7, "_kernel") == 0) {
      snprintf(key, sizeof key, "%.*s_initializer", (int)(len - 7), names[n]);
      if ((v = cJSON_GetObjectItemCaseSensitive(config, key))) return v;
    }
  }
  return NULL;
}

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The keys every layer may have: name, trainable, dtype, initializers (Keras'
 * defaults, which cltrain uses, unless --weights makes them moot), regularizers and
 * constraints (none). Marks them read. */
static int check_common(const loader *ld, clt_keras_config *c, clt_err *e) {
  int i = 0;
  for (const cJSON *it = c->obj->child; it; it = it->next, i++) {
    const char *key = it->string;
    int known = 1;
    if (strcmp(key, "name") == 0 || strcmp(key, "batch_input_shape") == 0) {
      /* the latter: a Sequential's input shape on its first layer (read_input) */
    } else if (strcmp(key, "trainable") == 0) {
      /* read_scope took it: false freezes the layer */
      if (!cJSON_IsBool(it)) return clt_kc_fail(c, e, "trainable is not true or false");
    } else if (strcmp(key, "dtype") == 0) {
      const char *d = dtype_name(it);
      if (!cJSON_IsNull(it) && (!d || strcmp(d, "float32") != 0))
        return clt_kc_fail(c, e, "dtype %s is not supported (only float32)", d ? d : "(object)");
    } else if (ends_with(key, "_regularizer") || ends_with(key, "_constraint") ||
               strcmp(key, "quantization_config") == 0) {
      if (!cJSON_IsNull(it)) {
        const char *cls = cJSON_IsString(it) ? it->valuestring : str(it, "class_name");
        return clt_kc_fail(c, e, "%s %s is not supported (only none)", key, cls ? cls : "");
      }
    } else if (ends_with(key, "_initializer")) {
      /* Drawn as Keras does (set_flags gives each parameter its own); moot under --weights. */
      clt_init init;
      char why[320];
      if (!ld->o->weights_given && !cJSON_IsNull(it) &&
          read_initializer(it, &init, why, sizeof why))
        return clt_kc_fail(c, e, "%s %s; start from --weights instead", key, why);
    } else {
      known = 0;
    }
    if (known && i < CLT_KC_MAX_KEYS) c->read[i] = 1;
  }
  return CLT_OK;
}

/* Refuses the first key nobody read. */
static int check_all_read(const clt_keras_config *c, clt_err *e) {
  int i = 0;
  for (const cJSON *it = c->obj->child; it; it = it->next, i++) {
    if (i >= CLT_KC_MAX_KEYS) return clt_kc_fail(c, e, "more than %d options", CLT_KC_MAX_KEYS);
    if (c->read[i]) continue;
    char *value = cJSON_PrintUnformatted(it);
    clt_kc_fail(c, e, "option %s=%.60s is not supported", it->string, value ? value : "?");
    free(value);
    return CLT_ERR_FORMAT;
  }
  return CLT_OK;
}

/* ---- writing the description ------------------------------------------------------ */

static int append(loader *ld, clt_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int append(loader *ld, clt_err *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(ld->text + ld->used, ld->size - ld->used, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= ld->size - ld->used) { /* the text grows */
    const size_t size = 2 * (ld->size + (size_t)n);
    char *more = realloc(ld->text, size);
    if (!more) return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", ld->origin);
    ld->text = more;
    ld->size = size;
    va_start(ap, fmt);
    n = vsnprintf(ld->text + ld->used, ld->size - ld->used, fmt, ap);
    va_end(ap);
  }
  if (n < 0) return clt_fail(e, CLT_ERR_FORMAT, "%s: the model cannot be described", ld->origin);
  ld->used += (size_t)n;
  return CLT_OK;
}

/* Notes that description entry `name` comes from node i (its frozen and inference). */
static int remember(loader *ld, const char *name, int i, clt_err *e) {
  if (ld->nentries == ld->entries_room) {
    const int room = ld->entries_room < 64            ? 64
                     : ld->entries_room < INT_MAX / 2 ? 2 * ld->entries_room
                                                      : INT_MAX;
    kentry *more = ld->nentries == INT_MAX ? NULL
                                           : realloc(ld->entries, (size_t)room * sizeof *more);
    if (!more) return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", ld->origin);
    ld->entries = more;
    ld->entries_room = room;
  }
  kentry *k = &ld->entries[ld->nentries++];
  snprintf(k->name, sizeof k->name, "%s", name);
  k->node = i;
  return CLT_OK;
}

static int check_name(const loader *ld, const char *name, clt_err *e) {
  if (strlen(name) > NAME_MAX_LEN || strpbrk(name, " =<,()") || !name[0] ||
      strcmp(name, "input") == 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: layer name '%s': cltrain needs names of 1 to %d characters without "
                    "spaces, '=', '<', ',' or parentheses, other than 'input'",
                    ld->origin, name, NAME_MAX_LEN);
  }
  return CLT_OK;
}

/* The supported classes, for refusals. */
/* Keras classes that cltrain runs as another kind: standalone activations
 * (Activation(leaky_relu,a), Activation(elu,a)). */
static const struct {
  const char *cls, *kind;
} class_kinds[] = {{"LeakyReLU", "Activation"}, {"ELU", "Activation"}};

/* The kind that runs Keras class cls, or NULL. */
static const clt_layer_ops *kind_of_class(const char *cls) {
  for (size_t i = 0; i < sizeof class_kinds / sizeof class_kinds[0]; i++) {
    if (strcmp(cls, class_kinds[i].cls) == 0) return clt_layer_kind(class_kinds[i].kind);
  }
  return clt_layer_kind(cls);
}

static void supported_classes(char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "InputLayer");
  for (size_t i = 0; i < sizeof class_kinds / sizeof class_kinds[0] && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, ", %s", class_kinds[i].cls);
  for (int i = 0; clt_layer_kinds[i] && used < size; i++) {
    if (!clt_layer_kinds[i]->from_keras) continue;
    used += (size_t)snprintf(buf + used, size - used, ", %s", clt_layer_kinds[i]->kind);
  }
}

/* The shape of the model's input from the InputLayer (batch_shape or
 * batch_input_shape) or the model's build_config. */
static int read_shape(loader *ld, const cJSON *shape, const char *where, clt_err *e) {
  int dims[3] = {0, 0, 0};
  if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) != 4) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: %s: the input must be images (batch, height, width, channels)", ld->origin,
                    where);
  }
  for (int d = 0; d < 3; d++) {
    const cJSON *v = cJSON_GetArrayItem(shape, d + 1);
    if (cJSON_IsNumber(v) && v->valueint >= 1) dims[d] = v->valueint;
    else if (!cJSON_IsNull(v))
      return clt_fail(e, CLT_ERR_FORMAT, "%s: %s: bad input dimension", ld->origin, where);
  }
  ld->shape = (clt_shape){dims[0], dims[1], dims[2]};
  return CLT_OK;
}

/* An InputLayer's config: the file's input (its shape read), or a nested model's
 * (its shape follows from the layers before). */
static int check_input_layer(loader *ld, const knode *k, int shape, clt_err *e) {
  clt_keras_config c = {.obj = k->config, .layer = k->name, .cls = k->cls};
  int status = check_common(ld, &c, e);
  int sparse = 0, ragged = 0;
  if (!status) status = clt_kc_bool(&c, "sparse", 0, &sparse, e);
  if (!status) status = clt_kc_bool(&c, "ragged", 0, &ragged, e);
  if (!status && (sparse || ragged)) status = clt_kc_fail(&c, e, "sparse or ragged input");
  const char *key = clt_kc_has(&c, "batch_shape") ? "batch_shape" : "batch_input_shape";
  if (!status && shape)
    status = read_shape(ld, cJSON_GetObjectItemCaseSensitive(k->config, key), k->name, e);
  static const char *const ignored[] = {"input_tensor", "optional", NULL};
  static const char *const nested[] = {"batch_shape", "batch_input_shape", NULL};
  if (!status) clt_kc_ignore(&c, ignored);
  if (!status && !shape) clt_kc_ignore(&c, nested);
  if (!status) status = check_all_read(&c, e);
  return status;
}

/* The input shape layer i declares: its batch_input_shape (tf.keras 2.x puts a
 * Sequential's there), or, for a nested model, its InputLayer's or first layer's. */
static const cJSON *declared_shape(const loader *ld, int i) {
  for (int depth = 0; depth <= MAX_DEPTH; depth++) {
    const knode *k = &ld->nodes[i];
    const cJSON *config = k->config;
    if (k->model) {
      config = ld->nodes[k->model_input].config;
      i = k->model_input + 1; /* without an InputLayer: the model's first layer */
    }
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(config, "batch_input_shape");
    if (!shape) shape = cJSON_GetObjectItemCaseSensitive(config, "batch_shape");
    if (shape || !k->model || i >= ld->n) return shape;
  }
  return NULL;
}

static int read_input(loader *ld, const cJSON *root, clt_err *e) {
  knode *k = &ld->nodes[ld->input];
  snprintf(k->tensor, sizeof k->tensor, "input");
  if (k->config) {
    if (strcmp(k->cls, "InputLayer") != 0) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: the model's input %s is a %s, not an InputLayer",
                      ld->origin, k->name, k->cls);
    }
    return check_input_layer(ld, k, 1, e);
  }
  /* A Sequential without InputLayer: the first layer's batch_input_shape (tf.keras
   * 2.x) or the model's build_config (Keras 3), else the data's shape. */
  const cJSON *shape = ld->input + 1 < ld->n ? declared_shape(ld, ld->input + 1) : NULL;
  if (!shape) {
    const cJSON *build = cJSON_GetObjectItemCaseSensitive(root, "build_config");
    shape = cJSON_GetObjectItemCaseSensitive(build, "input_shape");
  }
  if (shape && !cJSON_IsNull(shape)) return read_shape(ld, shape, "input_shape", e);
  ld->shape = (clt_shape){0, 0, 0};
  return CLT_OK;
}

/* A ZeroPadding2D with one consumer that takes padding folds into it (no copy). */
static int fold_padding(loader *ld, int i, clt_err *e) {
  knode *k = &ld->nodes[i];
  int consumer = -1;
  for (int j = 0; j < ld->n && k->consumers == 1; j++) {
    for (int t = 0; t < ld->nodes[j].ninputs && !ld->nodes[j].alias; t++) {
      if (ld->nodes[j].inputs[t] == i) consumer = j;
    }
  }
  if (consumer < 0) return CLT_OK;
  knode *c = &ld->nodes[consumer];
  const clt_layer_ops *ops = clt_layer_kind(c->cls);
  const char *padding = str(c->config, "padding");
  if (!ops || !ops->folds_padding || c->ninputs != 1 || (padding && strcmp(padding, "valid") != 0))
    return CLT_OK;
  clt_keras_config cfg = {.obj = k->config, .layer = k->name, .cls = k->cls};
  char format[32];
  int status = check_common(ld, &cfg, e);
  if (!status) status = clt_kc_padding4(&cfg, "padding", c->pad, e);
  if (!status)
    status = clt_kc_string(&cfg, "data_format", "channels_last", format, sizeof format, e);
  if (!status && strcmp(format, "channels_last") != 0)
    status = clt_kc_fail(&cfg, e, "data_format %s is not supported (only channels_last)", format);
  if (!status) status = check_all_read(&cfg, e);
  if (status) return status;
  c->pad_name = k->name;
  c->inputs[0] = k->inputs[0];
  k->skip = 1;
  return CLT_OK;
}

/* Keras' augmentation layers in a chain from the input (each the only consumer of
 * the one before) leave the model for the photo loader: skipped, their output is
 * the input. Anywhere else they are refused. */
static int take_augmentation(loader *ld, clt_err *e) {
  int at = ld->input;
  while (at != ld->output && ld->nodes[at].consumers == 1) {
    int next = -1;
    for (int j = 0; j < ld->n && next < 0; j++) {
      for (int t = 0; t < ld->nodes[j].ninputs && !ld->nodes[j].alias; t++)
        if (ld->nodes[j].inputs[t] == at) next = j;
    }
    knode *k = next >= 0 ? &ld->nodes[next] : NULL;
    if (!k || next == ld->output || k->ninputs != 1 || !clt_keras_is_augmentation(k->cls)) break;
    if (!k->config) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s (%s) has no config", ld->origin, k->name,
                      k->cls);
    }
    clt_keras_config cfg = {.obj = k->config, .layer = k->name, .cls = k->cls};
    int status = check_common(ld, &cfg, e);
    if (!status) status = clt_keras_augment_stage(&cfg, &ld->aug, e);
    if (!status) status = check_all_read(&cfg, e);
    if (status) return status;
    k->skip = 1;
    snprintf(k->tensor, sizeof k->tensor, "input");
    at = next;
  }
  for (int i = 0; i < ld->n; i++) {
    const knode *k = &ld->nodes[i];
    if (!k->skip && clt_keras_is_augmentation(k->cls)) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: layer %s (%s): cltrain runs augmentation layers only in a chain right "
                      "after the input (it augments the decoded photos)",
                      ld->origin, k->name, k->cls);
    }
  }
  return CLT_OK;
}

/* The tensor a node reads as input j. */
static const char *input_tensor(const loader *ld, const knode *k, int j) {
  return ld->nodes[k->inputs[j]].tensor;
}

/* A Keras 3 operation node of a tensor and a number: x + c, x - c, c - x, x * c,
 * c * x and x / c as Rescaling(scale,offset). Returns 1 when it is not one. */
static int emit_op_constant(loader *ld, int i, clt_err *e) {
  knode *k = &ld->nodes[i];
  const double c = k->constant;
  double scale = 1.0, offset = 0.0;
  if (k->nconst != 1 || k->ninputs != 1) return 1;
  if (strcmp(k->cls, "Add") == 0) offset = c;
  else if (strcmp(k->cls, "Subtract") == 0)
    scale = k->const_first ? -1.0 : 1.0, offset = k->const_first ? c : -c;
  else if (strcmp(k->cls, "Multiply") == 0) scale = c;
  else if ((strcmp(k->cls, "TrueDivide") == 0 || strcmp(k->cls, "Divide") == 0) &&
           !k->const_first && c != 0.0)
    scale = 1.0 / c;
  else return 1;
  int status = append(ld, e, "%s=Rescaling(%.17g,%.17g)<%s ", k->name, scale, offset,
                      input_tensor(ld, k, 0));
  if (!status) status = remember(ld, k->name, i, e);
  if (!status) snprintf(k->tensor, sizeof k->tensor, "%s", k->name);
  return status;
}

/* Keras 3's operation nodes: a tensor and a number (emit_op_constant), or Add,
 * Subtract and Multiply of two tensors, which are the layers of those names
 * (emit_node goes on: *done 0). Others are refused naming the node. */
static int emit_op(loader *ld, int i, int *done, clt_err *e) {
  knode *k = &ld->nodes[i];
  *done = 1;
  const int status = emit_op_constant(ld, i, e);
  if (status != 1) return status;
  const int pair = k->nconst == 0 && k->ninputs == 2;
  if (pair && (strcmp(k->cls, "Add") == 0 || strcmp(k->cls, "Subtract") == 0 ||
               strcmp(k->cls, "Multiply") == 0)) {
    *done = 0;
    return CLT_OK;
  }
  return clt_fail(e, CLT_ERR_FORMAT,
                  "%s: layer %s: operation %s (%s) of %d tensor%s and %d number%s is not "
                  "supported (only Add, Subtract, Multiply of two tensors or a tensor and a "
                  "number, and a tensor divided by a number)",
                  ld->origin, k->name, k->cls, k->op_module, k->ninputs, k->ninputs == 1 ? "" : "s",
                  k->nconst, k->nconst == 1 ? "" : "s");
}

/* Writes one Keras layer as description entries. */
static int emit_node(loader *ld, int i, clt_err *e) {
  knode *k = &ld->nodes[i];
  int status = check_name(ld, k->name, e);
  if (status) return status;
  if (k->op_module) {
    int done;
    if ((status = emit_op(ld, i, &done, e)) || done) return status;
  }
  clt_keras_config cfg = {.obj = k->config, .layer = k->name, .cls = k->cls, .keras2 = ld->keras2};
  const int is_output = i == ld->output;
  /* A final softmax (Activation('softmax') or Softmax) is the loss's: skipped. */
  if (is_output && (strcmp(k->cls, "Activation") == 0 || strcmp(k->cls, "Softmax") == 0)) {
    char act[16] = "softmax";
    if (strcmp(k->cls, "Activation") == 0) status = clt_kc_activation(&cfg, act, sizeof act, e);
    if (status) return status;
    if (strcmp(act, "softmax") == 0 || strcmp(act, "linear") == 0) {
      ld->softmax_output = act[0] == 's';
      memcpy(k->tensor, input_tensor(ld, k, 0), sizeof k->tensor); /* another node's */
      return CLT_OK;
    }
    return clt_kc_fail(&cfg, e,
                       "the output is %s; cltrain's loss (sparse categorical cross-entropy) "
                       "takes logits or a softmax",
                       act);
  }
  const clt_layer_ops *ops = kind_of_class(k->cls);
  if (!ops || !ops->from_keras) {
    char known[600];
    supported_classes(known, sizeof known);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: layer %s: class %s is not supported (supported: %s)",
                    ld->origin, k->name, k->cls, known);
  }
  clt_layer l;
  memset(&l, 0, sizeof l);
  l.ops = ops;
  l.ninputs = ops->ninputs;
  snprintf(l.name, sizeof l.name, "%s", k->name);
  char act[16] = "";
  if ((status = check_common(ld, &cfg, e))) return status;
  if (k->op_module && strcmp(k->op_module, "TFOpLambda") == 0) {
    static const char *const function[] = {"function", NULL}; /* read_tf_op's */
    clt_kc_ignore(&cfg, function);
  }
  if ((status = ops->from_keras(&l, &cfg, act, sizeof act, e))) return status;
  if ((status = check_all_read(&cfg, e))) return status;
  if (is_output) {
    /* The output's activation must leave logits or probabilities. */
    const char *a = str(k->config, "activation");
    if (act[0] && strcmp(act, "softmax") != 0) a = act;
    if (a && strcmp(a, "linear") != 0 && strcmp(a, "softmax") != 0) {
      return clt_kc_fail(&cfg, e,
                         "the output's activation is %s; cltrain's loss (sparse categorical "
                         "cross-entropy) takes logits (linear) or a softmax",
                         a);
    }
    if (strcmp(k->cls, "ReLU") == 0)
      return clt_kc_fail(&cfg, e, "the output is a ReLU; the loss takes logits or a softmax");
    if (ops != clt_layer_kind(k->cls))
      return clt_kc_fail(&cfg, e, "the output is a %s; the loss takes logits or a softmax", k->cls);
  }
  char kind[160];
  ops->describe(&l, kind, sizeof kind);
  if (k->pad_name) {
    const int *p = k->pad;
    if ((status = check_name(ld, k->pad_name, e))) return status;
    if (p[0] == p[1] && p[1] == p[2] && p[2] == p[3])
      status = append(ld, e, "%s=ZeroPadding2D(%d) ", k->pad_name, p[0]);
    else
      status = append(ld, e, "%s=ZeroPadding2D(%d,%d,%d,%d) ", k->pad_name, p[0], p[1], p[2], p[3]);
    if (status) return status;
  }
  const int want = ops->ninputs;
  if (k->ninputs < want || (want == 1 && k->ninputs != 1)) {
    return clt_kc_fail(&cfg, e, "takes %d input%s, the model gives it %d", want,
                       want == 1 ? "" : "s", k->ninputs);
  }
  /* Add and Concatenate of n > 2 tensors: pairs, "<name>/1" ... then "<name>". */
  char prev[128];
  snprintf(prev, sizeof prev, "%s", input_tensor(ld, k, 0));
  for (int j = 1; j < k->ninputs - 1; j++) {
    char part[128];
    snprintf(part, sizeof part, "%s/%d", k->name, j);
    if ((status = check_name(ld, part, e))) return status;
    if ((status = append(ld, e, "%s=%s<%s,%s ", part, kind, prev, input_tensor(ld, k, j))) ||
        (status = remember(ld, part, i, e)))
      return status;
    snprintf(prev, sizeof prev, "%s", part);
  }
  if (want == 2)
    status = append(ld, e, "%s=%s<%s,%s ", k->name, kind, prev,
                    input_tensor(ld, k, k->ninputs - 1));
  else status = append(ld, e, "%s=%s<%s ", k->name, kind, prev);
  if (!status) status = remember(ld, k->name, i, e);
  if (status) return status;
  snprintf(k->tensor, sizeof k->tensor, "%s", k->name);
  if (act[0] && strcmp(act, "linear") != 0) {
    if (is_output && strcmp(act, "softmax") == 0) {
      ld->softmax_output = 1;
      return CLT_OK;
    }
    char name[128];
    snprintf(name, sizeof name, "%s/%s", k->name, act);
    if ((status = check_name(ld, name, e))) return status;
    if ((status = append(ld, e, "%s=Activation(%s)<%s ", name, act, k->name)) ||
        (status = remember(ld, name, i, e)))
      return status;
    snprintf(k->tensor, sizeof k->tensor, "%s", name);
  }
  return CLT_OK;
}

/* Each parameter's initializer from the Keras layer's config (check_common read
 * them): Keras' own defaults stay the kinds' (Glorot uniform kernels, which draw
 * the same, and constants). */
static void set_initializers(const loader *ld, const cJSON *config, clt_layer *l) {
  for (int p = 0; p < l->nparams && !ld->o->weights_given; p++) {
    clt_param *prm = &l->params[p];
    const cJSON *v = param_initializer(config, prm);
    clt_init init;
    char why[320];
    if (!v || cJSON_IsNull(v) || read_initializer(v, &init, why, sizeof why)) continue;
    if (prm->glorot_fan_in != 0 && initializer_is(v, "GlorotUniform", "glorot_uniform")) continue;
    prm->init = init;
  }
}

/* Each layer's frozen and inference, from the Keras layer it came from, and the
 * values its config gives its parameters (ops->keras_values); the flat buffer laid
 * out for them. */
static int set_flags(const loader *ld, clt_model *m, clt_err *e) {
  int status = CLT_OK;
  for (int i = 0; i < m->nlayers && !status; i++) {
    clt_layer *l = &m->layers[i];
    for (int j = 0; j < ld->nentries; j++) {
      if (strcmp(ld->entries[j].name, l->name) != 0) continue;
      const knode *k = &ld->nodes[ld->entries[j].node];
      l->frozen = k->frozen;
      l->inference = k->inference;
      set_initializers(ld, k->config, l);
      if (l->ops->keras_values) {
        clt_keras_config cfg = {.obj = k->config,
                                .layer = k->name,
                                .cls = k->cls,
                                .keras2 = ld->keras2};
        status = l->ops->keras_values(l, &cfg, m->constants, CLT_MODEL_MAX_CONSTANTS,
                                      &m->nconstants, e);
      }
      break;
    }
  }
  clt_model_layout(m); /* frozen layers' weights last */
  return status;
}

static int load(loader *ld, const char *text, clt_model *m, clt_err *e) {
  cJSON *root = cJSON_Parse(text);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    long offset = at && at >= text ? (long)(at - text) : -1;
    return clt_fail(e, CLT_ERR_FORMAT, "%s: not valid JSON (error near byte %ld)", ld->origin,
                    offset);
  }
  int *order = NULL, placed = 0;
  const char *version = str(root, "keras_version");
  ld->keras2 = version && version[0] == '2';
  int status = read_layers(ld, root, e);
  if (!status && !(order = calloc((size_t)ld->n + 1, sizeof *order)))
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", ld->origin);
  if (!status) status = check_graph(ld, order, &placed, e);
  if (!status) snprintf(ld->nodes[ld->input].tensor, sizeof ld->nodes[0].tensor, "input");
  for (int i = 0; i < ld->n && !status; i++) {
    const knode *k = &ld->nodes[i];
    if (k->alias && k->config && strcmp(k->cls, "InputLayer") == 0)
      status = check_input_layer(ld, k, 0, e); /* a nested model's */
  }
  if (!status) status = take_augmentation(ld, e);
  for (int p = 0; p < placed && !status; p++) {
    const int i = order[p];
    if (strcmp(ld->nodes[i].cls, "ZeroPadding2D") == 0 && i != ld->output)
      status = fold_padding(ld, i, e);
  }
  for (int p = 0; p < placed && !status; p++) {
    const int i = order[p];
    if (i == ld->input || ld->nodes[i].skip) continue;
    status = emit_node(ld, i, e);
  }
  /* The input last: what the layers say about the file comes first. */
  if (!status) status = read_input(ld, root, e);
  const clt_shape in = ld->shape, data = ld->o->data;
  if (!status &&
      ((in.h && in.h != data.h) || (in.w && in.w != data.w) || (in.c && in.c != data.c))) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: the model takes %dx%dx%d images (0: any), the data's are %dx%dx%d",
                      ld->origin, in.h, in.w, in.c, data.h, data.w, data.c);
  }
  if (!status) {
    if (ld->used && ld->text[ld->used - 1] == ' ') ld->text[--ld->used] = '\0';
    /* Named after the file, in characters checkpoints' metadata takes as they are. */
    char name[32];
    snprintf(name, sizeof name, "%s", base_name(ld->origin));
    for (char *c = name; *c; c++) {
      if (!isalnum((unsigned char)*c) && !strchr("._-", *c)) *c = '_';
    }
    /* The layers take the images the augmentation makes (a crop's size). */
    clt_shape layers_in = data;
    clt_augment_out_size(&ld->aug, data.h, data.w, &layers_in.h, &layers_in.w);
    status = clt_model_parse(name, layers_in, ld->o->classes, ld->o->preprocess, ld->text, m, e);
    if (!status) {
      m->softmax_output = ld->softmax_output;
      status = set_flags(ld, m, e);
      if (!status && ld->o->augment) *ld->o->augment = ld->aug;
    } else {
      clt_wrap(e, "%s", ld->origin);
    }
  }
  /* Kinds' refusals name the layer; the file goes in front. */
  if (status && strncmp(e->msg, ld->origin, strlen(ld->origin)) != 0) clt_wrap(e, "%s", ld->origin);
  cJSON_Delete(root);
  free(order);
  return status;
}

int clt_keras_parse(const char *origin, const char *text, const clt_keras_opts *o, clt_model *m,
                    clt_err *e) {
  loader *ld = calloc(1, sizeof *ld);
  const size_t size = 1 << 16; /* grows as it is written */
  char *desc = malloc(size);
  int status = CLT_OK;
  if (!ld || !desc) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", origin);
    free(desc);
  } else {
    ld->origin = origin;
    ld->o = o;
    ld->input = -1;
    ld->text = desc;
    ld->size = size;
    desc[0] = '\0';
    status = load(ld, text, m, e);
    free(ld->text);
    free(ld->nodes);
    free(ld->entries);
  }
  free(ld);
  return status;
}

static int read_file(const char *path, char **out, clt_err *e) {
  FILE *f = fopen(path, "rb");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = malloc(CLT_KERAS_MAX_BYTES + 1);
  size_t n = buf ? fread(buf, 1, CLT_KERAS_MAX_BYTES + 1, f) : 0;
  const int err = ferror(f);
  fclose(f);
  if (!buf) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
  if (err || n > CLT_KERAS_MAX_BYTES) {
    free(buf);
    return err ? clt_fail(e, CLT_ERR_IO, "%s: read error", path)
               : clt_fail(e, CLT_ERR_FORMAT, "%s: larger than %d MB; not a model file", path,
                          CLT_KERAS_MAX_BYTES >> 20);
  }
  buf[n] = '\0';
  if (strlen(buf) != n) {
    free(buf);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: not a JSON text (a NUL byte)", path);
  }
  *out = buf;
  return CLT_OK;
}

int clt_keras_load(const char *path, const clt_keras_opts *o, clt_model *m, char **json_out,
                   clt_err *e) {
  char *text = NULL;
  int status = read_file(path, &text, e);
  if (!status) status = clt_keras_parse(path, text, o, m, e);
  if (!status && json_out) {
    *json_out = text;
    text = NULL;
  }
  free(text);
  return status;
}

int clt_keras_input_shape(const char *path, clt_shape *shape, clt_err *e) {
  char *text = NULL;
  int status = read_file(path, &text, e);
  if (status) return status;
  loader *ld = calloc(1, sizeof *ld);
  cJSON *root = cJSON_Parse(text);
  if (!ld || !root) {
    status = !ld ? clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path)
                 : clt_fail(e, CLT_ERR_FORMAT, "%s: not valid JSON", path);
  } else {
    static const clt_keras_opts any = {{0, 0, 0}, 0, CLT_PRE_RAW, 1, NULL};
    ld->origin = path;
    ld->o = &any;
    ld->input = -1;
    status = read_layers(ld, root, e);
    if (!status) status = read_input(ld, root, e);
    if (!status) *shape = ld->shape;
  }
  cJSON_Delete(root);
  if (ld) free(ld->nodes);
  free(ld);
  free(text);
  return status;
}
