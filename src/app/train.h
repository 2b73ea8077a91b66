/* `cltrain train` and `cltrain eval`: the loops around the trainer. */
#ifndef CLT_TRAIN_H
#define CLT_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "device.h"
#include "status.h"

/* The options of `cltrain train`; their defaults are in its flag table (flags.c). */
typedef struct clt_train_opts {
  const char *data_dir;    /* IDX files or a photo folder (one subfolder per class) */
  int image_size;          /* photo folders: images are resized to this square */
  double validation_split; /* fraction of the training examples held out for evaluation */
  long max_image_pixels;   /* photo folders: refuse bigger images (width * height); 0: the
                              default, CLT_PHOTOS_MAX_PIXELS */
  const char *augment;     /* photo folders: --augment's text (augment.h), or NULL */
  const char *model;       /* a built-in model's name or a Keras model file (.json) */
  const char *weights;     /* starting weights (.npz), or NULL */
  const char *preprocess;  /* model files: raw, unit or caffe; NULL: raw */
  const char *devices;     /* under MPI: one selection for every process, or "A;B;..." one
                              per rank; $CLTRAIN_DEVICES overrides it for its process */
  const char *split;       /* auto, equal or weights "3,1" (one per replica of the run) */
  int epochs;
  const char *early_stopping; /* --early-stopping KEY=VALUE,... (Keras' arguments), or NULL */
  const char *optimizer;      /* adam, sgd or rmsprop (optimizer.h) */
  double lr;                  /* 0: the optimizer's Keras default */
  double momentum;            /* sgd, rmsprop */
  int nesterov;               /* sgd with momentum */
  double weight_decay;        /* decoupled, all optimizers */
  /* Set explicitly (checked against a resumed checkpoint). */
  int optimizer_given, momentum_given, weight_decay_given;
  /* --lr-schedule NAME:ARGS (from lr) and --reduce-lr-on-plateau ARGS (schedule.h); NULL: none. */
  const char *lr_schedule, *reduce_lr_on_plateau;
  uint64_t seed;
  int batch_per_replica;
  int global_batch;             /* examples per step over the run's replicas (when given) */
  long train_limit, test_limit; /* 0: all */
  const char *log_path;         /* JSON Lines, one object per epoch; NULL: none */
  /* Freeze every layer up to this one ("none": no layer); NULL: the model file's
   * frozen layers (with --resume: the checkpoint's). */
  const char *freeze_until;
  const char *checkpoint_dir;
  int checkpoint_every;        /* epochs; 0: never */
  int keep;                    /* newest checkpoints kept; 0: all */
  int resume;                  /* continue from the newest checkpoint in checkpoint_dir */
  int model_given, seed_given; /* set explicitly (checked against a resumed checkpoint) */
  /* Set explicitly: with --resume they override the checkpoint's records. */
  int data_given, train_limit_given, test_limit_given, batch_per_replica_given;
  int global_batch_given;
  int image_size_given, validation_split_given; /* set explicitly (photo folders only) */
  int augment_given;                            /* set explicitly (with --resume: overrides) */
  int check_replicas;                           /* verify identical parameters after every step */
  int progress;                                 /* draw a progress bar (stdout is a terminal) */
  int profile;                                  /* print device time per kernel after each epoch */
  int verbose;                                  /* print the OpenCL compilers' build logs */
  int trace_steps;                              /* --trace: the steps it covers */
  int tensorboard_every; /* --tensorboard: the batch loss every N steps (0: epochs only) */
  int trace_steps_given, tensorboard_every_given; /* set explicitly (need --trace, --tensorboard) */
  double allreduce_timeout; /* seconds a replica may hold up the others' all-reduce (ring.h;
                               0: no limit) */
  const char *wire;         /* --wire: how gradients cross between processes, fp32 or fp16 */
  const char *tune;         /* --tune: auto or off ($CLTRAIN_TUNE when not given) */
  int tune_given;
  double tune_budget;          /* --tune-budget: seconds of tuning between two epochs */
  const char *tune_file;       /* --tune-file: the tuning file, pinned; NULL: the cache folder's */
  const char *trace_path;      /* --trace: Chrome trace-event JSON of the first steps, or NULL */
  const char *tensorboard_dir; /* --tensorboard: event files under DIR/train, DIR/validation */
  FILE *out;                   /* where epoch lines go */
  clt_cluster *cluster;        /* the processes of an MPI run (NULL: this one); process 0
                                  prints, logs and saves checkpoints */
} clt_train_opts;

int clt_train(const clt_train_opts *o, clt_err *e);

/* The data flags not given default to the checkpoint's records (the training
 * run's test data). */
typedef struct clt_eval_opts {
  const char *checkpoint; /* folder (its index names the newest) or .npz file */
  int best;               /* --best: the folder's best checkpoint */
  const char *data_dir;
  double validation_split; /* evaluate this held-out fraction (0: the test set) */
  long max_image_pixels;   /* as in clt_train_opts */
  uint64_t seed;           /* ... chosen with this seed, as in training */
  const char *devices;
  int batch_per_replica;
  long test_limit; /* 0: all */
  /* Set explicitly, overriding the checkpoint's records. */
  int checkpoint_given, data_given, validation_split_given, seed_given, test_limit_given;
  int batch_per_replica_given;
  int verbose;             /* print the OpenCL compilers' build logs */
  const char *logits_path; /* write the logits, float32 (examples, classes), as .npy; or NULL */
  FILE *out;
  clt_cluster *cluster; /* as in clt_train_opts */
} clt_eval_opts;

int clt_eval(const clt_eval_opts *o, clt_err *e);

/* This process's devices for --devices `spec` (see clt_train_opts.devices), in
 * selection order, from list (enumerated here; free it with clt_devices_free). */
int clt_select_process_devices(const char *spec, clt_cluster *c, clt_device_list *list,
                               const clt_device **chosen, int *n, clt_err *e);

#endif
