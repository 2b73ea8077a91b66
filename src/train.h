/* `cltrain train`: the training loop over a dataset on the selected devices. */
#ifndef CLT_TRAIN_H
#define CLT_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "status.h"

typedef struct clt_train_opts {
  const char *data_dir;
  const char *model;
  const char *devices;
  int epochs;
  double lr;
  uint64_t seed;
  int batch_per_replica;
  long train_limit, test_limit; /* 0: all */
  const char *log_path;         /* JSON Lines, one object per epoch; NULL: none */
  const char *checkpoint_dir;
  int checkpoint_every;
  int checkpoint_flags_given;   /* the user asked for checkpoints explicitly */
  int progress;                 /* draw a progress bar (stdout is a terminal) */
  int profile;                  /* print device time per kernel after each epoch */
  FILE *out;                    /* where epoch lines go */
} clt_train_opts;

void clt_train_defaults(clt_train_opts *o);
int clt_train(const clt_train_opts *o, clt_err *e);

#endif
