/* Model descriptions: the layer list, its shapes and the flat parameter layout.
 * A clt_model is plain data shared read-only by every replica. */
#ifndef CLT_MODEL_H
#define CLT_MODEL_H

#include <stdint.h>

#include "layer.h"
#include "source.h" /* clt_preprocess: how the uint8 images become the network's input */

/* The model's layers are an allocation that grows as a description is read (any
 * number of them: ResNet50 takes 125 layers with padding and activations folded
 * in, DenseNet201 about 700, NASNetLarge about 1000); what is sized by the layer
 * count elsewhere (a net's buffers, its plans) is allocated at set-up. */
/* Bounds on what a model description may declare (clt_model_parse; the side
 * bound, CLT_MODEL_MAX_SIDE, is in layer.h) and on any layer's output per
 * example (1 GiB of floats), so no size computed from them overflows. */
#define CLT_MODEL_MAX_CHANNELS 4096
#define CLT_MODEL_MAX_CLASSES 1000000
#define CLT_MODEL_MAX_VALUES ((int64_t)1 << 28)
/* Room for the parameter values a model file gives as constants (a Keras
 * Normalization's mean and variance in its config): one such layer at the most
 * channels fits. */
#define CLT_MODEL_MAX_CONSTANTS ((size_t)2 * CLT_MODEL_MAX_CHANNELS)

/* A directed acyclic graph of layers, stored so that every layer's inputs come
 * before it; the last layer outputs the logits. */
typedef struct clt_model {
  char name[32];
  clt_shape input;
  int classes;
  clt_preprocess preprocess;
  int nlayers;
  clt_layer *layers; /* nlayers of them, in room allocated ones (clt_model_free) */
  int room;
  size_t param_count; /* every value, moving statistics included (Keras' count) */
  /* The flat buffer (clt_model_layout), each parameter aligned: the trained
   * parameters fill [0, trainable_floats) (what the optimizer updates), the moving
   * statistics of layers not frozen follow up to grad_floats (the gradient buffer
   * and the all-reduce cover [0, grad_floats)), and every frozen layer's
   * parameters fill the rest, up to flat_floats. */
  size_t trainable_floats, grad_floats, flat_floats;
  /* The model file's last layer was a softmax: cltrain trains on the logits before
   * it (the loss is the same), and exports and predicts probabilities after it. */
  int softmax_output;
  /* The values of parameters initialised CLT_INIT_VALUES (their values_at indexes
   * here), as the model file gave them. */
  size_t nconstants;
  float constants[CLT_MODEL_MAX_CONSTANTS];
} clt_model;

/* The built-in models' names, for --help and errors. */
extern const char *const clt_model_names;

/* Builds built-in model `name` for images of shape `input` and `classes` classes:
 * the model's description (clt_model_describe's text), then clt_model_parse. */
int clt_model_build(const char *name, clt_shape input, int classes, clt_model *m, clt_err *e);

/* Whether `name` is a built-in model; if so, *preprocess gets its preprocessing. */
int clt_model_is_builtin(const char *name, clt_preprocess *preprocess);

/* What a model holds beyond itself (its layers) is freed and m zeroed; a zeroed
 * model is empty. */
void clt_model_free(clt_model *m);

/* dst becomes a copy of src with layers of its own (dst: zeroed or a model, whose
 * storage is reused); out of memory leaves dst empty. */
int clt_model_copy(clt_model *dst, const clt_model *src, clt_err *e);

/* Builds a model from its description: space-separated entries "name=Kind(args)",
 * each optionally followed by "<in" or "<in1,in2" naming its inputs (earlier layers or
 * "input"; without it, the entry before); an entry "name=ZeroPadding2D(p)" or
 * "name=ZeroPadding2D(top,bottom,left,right)" without "<in" folds into the next
 * layer, one with "<in" is a padding layer of its own. Shapes follow from `input`; the last layer
 * must output `classes` logits (0: as many as it outputs, which m->classes then holds). name is
 * kept for messages and checkpoints. */
int clt_model_parse(const char *name, clt_shape input, int classes, clt_preprocess preprocess,
                    const char *description, clt_model *m, clt_err *e);
/* m is zeroed or a model (any function here that builds one into m, such as
 * clt_model_build or the model file readers, takes the same): its storage is
 * reused, its contents replaced. */

/* Lays the flat buffer out (offsets, param_count, trainable_floats, grad_floats,
 * flat_floats) from the layers' frozen flags; clt_model_parse does it with none
 * frozen. Call it after changing l->frozen. */
void clt_model_layout(clt_model *m);

/* Freezes every layer up to and including the one named `name`, on top of those
 * frozen already, and lays the buffer out again. No such layer: an error naming
 * `flag` ("--freeze-until"), the model and a few layers of close names. */
int clt_model_freeze_until(clt_model *m, const char *name, const char *flag, clt_err *e);

/* Which layers' output gradients a backward pass needs: needed[i] is 1 when layer
 * i trains weights or one of its inputs' gradients is needed, so the pass stops
 * below the lowest trainable layer. */
void clt_model_grads_needed(const clt_model *m, unsigned char *needed);

/* Keras initialisation from the seed: each parameter's initializer (clt_init),
 * by default Glorot-uniform kernels, zero biases.
 * flat has m->flat_floats floats; alignment gaps are zeroed. */
void clt_model_init_params(const clt_model *m, uint64_t seed, float *flat);

/* Room a description of n layers may take (ResNet50's is about 10 KB,
 * DenseNet201's about 40 KB): a layer's name, kind and inputs and a folded
 * padding's name and sides take under 512. */
#define CLT_DESCRIBE_PER_LAYER 512
static inline size_t clt_describe_max(int nlayers) {
  return ((size_t)(nlayers > 0 ? nlayers : 0) + 1) * CLT_DESCRIBE_PER_LAYER;
}

/* One line naming every layer and its hyper-parameters, e.g.
 * "conv2d=Conv2D(64,3x3,s1,valid,relu) max_pooling2d=MaxPooling2D(2,s2) ...":
 * the model as data (clt_model_parse reads it back), stored in checkpoints; two
 * models compute the same function iff their descriptions are equal. */
void clt_model_describe(const clt_model *m, char *buf, size_t size);

/* Largest per-example activation of any layer, in floats. */
size_t clt_model_max_activation(const clt_model *m);

/* Index of the layer named `name`, or -1. */
int clt_model_find(const clt_model *m, const char *name);

#endif
