/* Early stopping as Keras 3's keras.callbacks.EarlyStopping defines it: its
 * arguments (Keras' names and defaults), the state it keeps between epochs
 * (Keras' attributes) and its rule at each epoch's end. Epochs count from 0
 * here, as Keras counts them; the user sees them from 1. */
#ifndef CLT_EARLY_STOP_H
#define CLT_EARLY_STOP_H

#include <stddef.h>

#include "status.h"

/* What is monitored: the validation set's or the training pass's loss or
 * accuracy (a fraction, as Keras logs it). */
typedef enum clt_monitor {
  CLT_MONITOR_VAL_LOSS,
  CLT_MONITOR_VAL_ACCURACY,
  CLT_MONITOR_LOSS,
  CLT_MONITOR_ACCURACY,
  CLT_MONITOR_COUNT
} clt_monitor;

typedef enum clt_es_mode { CLT_ES_AUTO, CLT_ES_MIN, CLT_ES_MAX, CLT_ES_MODE_COUNT } clt_es_mode;

typedef struct clt_early_stop {
  int enabled; /* 0: no early stopping; nothing else below is meaningful */
  /* Keras' arguments. */
  clt_monitor monitor;
  double min_delta; /* as given: its absolute value counts, as in Keras */
  int patience;
  clt_es_mode mode;
  int has_baseline; /* baseline=None when 0 */
  double baseline;
  int restore_best_weights;
  int start_from_epoch;
  /* Keras' state after the epochs seen so far. */
  int wait;
  int has_best; /* best is None until the first monitored epoch */
  double best;
  int best_epoch;
  int stopped_epoch; /* 0: not stopped (Keras never stops at epoch 0) */
} clt_early_stop;

/* "val_loss", "val_accuracy", "loss" or "accuracy". */
const char *clt_monitor_name(clt_monitor m);
/* "auto", "min" or "max". */
const char *clt_es_mode_name(clt_es_mode m);
/* Whether m is measured on validation data. */
int clt_monitor_is_validation(clt_monitor m);

/* Parses "monitor=val_loss,patience=5,..." (Keras' argument names, each at most
 * once, in any order; the others at Keras' defaults) into es, its state reset.
 * Errors are one line naming `flag` and the key. */
int clt_early_stop_parse(const char *flag, const char *text, clt_early_stop *es, clt_err *e);

/* The arguments as the flag takes them, every one, in Keras' order:
 * "monitor=val_loss,min_delta=0,patience=0,mode=auto,baseline=none,...". */
void clt_early_stop_describe(const clt_early_stop *es, char *buf, size_t size);

/* Whether two have the same arguments (their states aside). */
int clt_early_stop_same_args(const clt_early_stop *a, const clt_early_stop *b);

/* Whether an improvement is a fall: mode min, or mode auto on a loss. */
int clt_early_stop_minimizes(const clt_early_stop *es);

/* Keras' on_epoch_end for epoch (from 0) and the monitored value: *improved gets
 * whether current is the new best (the epoch whose weights restore_best_weights
 * keeps); returns 1 when training stops after this epoch. Values are compared in
 * float32, as Keras' ops.less and ops.greater compare them. */
int clt_early_stop_update(clt_early_stop *es, int epoch, double current, int *improved);

#endif
