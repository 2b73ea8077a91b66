/* A checkpoint's member "metadata" (checkpoint.h): a JSON object with the format
 * version, the model (name, input shape, classes, architecture, and for a model
 * known by no name its preprocessing and softmax output; its frozen layers, when
 * any), the optimizer as Keras'
 * get_config names it, the data trained on and the cltrain version. Internal to
 * src/formats. */
#ifndef CLT_CHECKPOINT_META_H
#define CLT_CHECKPOINT_META_H

#include "checkpoint.h"
#include "early_stop.h"
#include "model.h"
#include "npz.h"
#include "optimizer.h"

typedef struct clt_checkpoint_meta {
  int format;
  char model[64];
  clt_shape input;
  int classes;
  char preprocess[64]; /* "" for built-in models */
  int softmax_output;  /* "output": "softmax": the model file ended in a softmax */
  char *architecture;  /* allocated (clt_checkpoint_meta_free) */
  /* "frozen": the layers whose weights the run did not train (none in an older
   * cltrain's checkpoint), by name; allocated. */
  int nfrozen;
  char (*frozen)[CLT_LAYER_NAME_SIZE];
  /* Read only when asked for: the optimizer's kind and hyper-parameters; lr 0 when
   * the metadata records none (an older cltrain's checkpoint, Adam's state). */
  clt_optimizer optimizer;
  clt_plateau plateau;       /* read with the optimizer; active 0 when none is recorded */
  clt_checkpoint_data data;  /* known 0 when the metadata records none */
  clt_early_stop early_stop; /* enabled 0 when the metadata records none */
  /* "conv_algorithms": the convolution algorithms the run's replicas ran next,
   * a line each ("R LAYER FWD DW DX", trainer.h's clt_trainer_conv_record); ""
   * when none is recorded. */
  char conv_algorithms[CLT_CONV_RECORD_MAX];
  /* "gemm_tilings" and "replicas" (checkpoint.h), allocated, the lines joined
   * by newlines; NULL when the key is absent (an older cltrain's checkpoint). */
  char *gemm_tilings, *replicas;
} clt_checkpoint_meta;

/* The metadata of model m trained with opt (none recorded when opt->lr is 0; its
 * learning-rate schedule as "optimizer.learning_rate_schedule", --lr-schedule's
 * text) and plateau (may be NULL; recorded with the optimizer when active, as
 * "reduce_lr_on_plateau": {"config": --reduce-lr-on-plateau's text, "wait",
 * "cooldown_counter", "best"}) on data (none recorded unless data->known) with
 * early stopping es (may be NULL; none recorded unless es->enabled) and the
 * replicas' choices (checkpoint.h: the convolution algorithms, NULL or "":
 * none recorded; the GEMM tilings and the replicas, NULL: none recorded, ""
 * an empty list), in the layout of Python's json.dumps; a new string, NULL
 * when out of memory. */
char *clt_checkpoint_meta_json(const clt_model *m, const clt_optimizer *opt,
                               const clt_plateau *plateau, const clt_checkpoint_data *data,
                               const clt_early_stop *es, const char *conv_algorithms,
                               const char *gemm_tilings, const char *replicas);

/* Reads member "metadata" of z (the checkpoint at path) into meta, the optimizer
 * too when with_optimizer (the data and early stopping always). Errors name the
 * file and the key. meta is then freed by clt_checkpoint_meta_free, after an
 * error too. */
int clt_checkpoint_meta_read(const char *path, const clt_npz *z, int with_optimizer,
                             clt_checkpoint_meta *meta, clt_err *e);

/* Frees what meta holds and zeroes it. */
void clt_checkpoint_meta_free(clt_checkpoint_meta *meta);

/* Which of m's layers meta records frozen (frozen[i], m->nlayers of them); a name
 * that is no layer of m is an error. */
int clt_checkpoint_meta_frozen(const clt_checkpoint_meta *meta, const clt_model *m,
                               unsigned char *frozen, clt_err *e);

/* Builds the model meta describes, its frozen layers frozen (laid out so). */
int clt_checkpoint_meta_model(const clt_checkpoint_meta *meta, clt_model *m, clt_err *e);

#endif
