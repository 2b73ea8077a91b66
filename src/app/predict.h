/* `cltrain predict`: a checkpoint's most likely classes for new images. */
#ifndef CLT_PREDICT_H
#define CLT_PREDICT_H

#include <stdio.h>

#include "checkpoint.h"
#include "model.h"
#include "onnx.h"

typedef struct clt_predict_opts {
  const char *checkpoint; /* folder (its index names the newest) or .npz */
  int best;               /* --best: the folder's best checkpoint */
  char **paths;           /* the images: files and folders (clt_cli_parse's list) */
  int npaths;
  int top_k;          /* classes shown per image; more than the model has: all */
  const char *format; /* table, csv or jsonl */
  const char *output; /* written atomically; NULL: standard output */
  const char *devices;
  int batch_per_replica;
  long max_image_pixels; /* as in clt_train_opts */
  int checkpoint_given;  /* --checkpoint was given (not the default) */
  FILE *out;             /* the predictions without --output */
} clt_predict_opts;

/* Predicts every image and writes the lines. An image that cannot be used (a
 * path that does not exist, a file that does not decode) is named on standard
 * error and skipped; *skipped gets how many were. Fails when nothing could be
 * predicted, before writing anything. */
int clt_predict(const clt_predict_opts *o, int *skipped, clt_err *e);

/* The class names of a checkpoint's model, one per line in label order: the
 * photo folder's, kept by the checkpoint; a grey 10-class model was trained on
 * IDX files, which carry no names: Fashion-MNIST's (the default data), saying so.
 * NULL names where neither applies. */
clt_onnx_info clt_class_names(const clt_model *m, const clt_checkpoint *state);

#endif
