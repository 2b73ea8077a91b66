/* Keras model files: what `model.to_json()` writes (Keras 3 or tf.keras 2.x,
 * Sequential or functional), read into a cltrain model.
 *
 * The file becomes a model description (see clt_model_parse): each Keras layer's
 * class names a layer kind, whose from_keras reads its config; the loader only
 * handles what is about the graph: the input, inbound nodes, a ZeroPadding2D folded
 * into the layer after it, activations the kinds do not fuse (added as Activation
 * layers), Add and Concatenate of more than two tensors (chained in pairs), and a
 * final softmax (cltrain trains on the logits before it; the loss is the same). */
#ifndef CLT_KERAS_H
#define CLT_KERAS_H

#include "augment.h"
#include "model.h"

typedef struct clt_keras_opts {
  clt_shape data; /* the images' shape: dimensions the file leaves open come from it */
  int classes;    /* the data's classes: the model must output as many */
  clt_preprocess preprocess;
  int weights_given; /* --weights: initializers other than Keras' defaults do not matter */
  /* Keras' augmentation layers (RandomFlip, RandomRotation, RandomZoom, RandomTranslation,
   * RandomCrop, RandomContrast, RandomBrightness) in a chain right after the input leave
   * the model: they go here (NULL: dropped), for the photo loader to run (augment.h), and
   * the model's layers take the images they make (a RandomCrop's size); elsewhere they
   * are refused. */
  clt_augment *augment;
} clt_keras_opts;

/* Largest model file read (ResNet50's to_json() is about 100 KB). */
#define CLT_KERAS_MAX_BYTES (16 << 20)

/* Reads the model file at path into m (named after the file). *json_out, if not
 * NULL, receives the file's text (malloc'ed; the caller frees it), which
 * checkpoints keep. Errors are one line naming the file and, where one is at
 * fault, the layer. */
int clt_keras_load(const char *path, const clt_keras_opts *o, clt_model *m, char **json_out,
                   clt_err *e);

/* The same from text; origin names it in messages (and, its last path component,
 * the model). */
int clt_keras_parse(const char *origin, const char *text, const clt_keras_opts *o, clt_model *m,
                    clt_err *e);

/* The input shape a model file declares, 0 where it leaves a dimension open: for
 * photo folders, which are resized to the model's input. */
int clt_keras_input_shape(const char *path, clt_shape *shape, clt_err *e);

/* Whether a --model value names a model file rather than a built-in model. */
int clt_keras_is_file(const char *model);

#endif
