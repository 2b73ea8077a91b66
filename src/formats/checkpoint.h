/* Checkpoints: DIR/ckpt-K.npz plus TensorFlow's text index DIR/checkpoint.
 *
 * Members, in Keras layout so `model.set_weights` accepts them: "<layer>/<param>"
 * (conv2d/kernel (3,3,1,64) HWIO, dense/kernel (in,out) with rows in NHWC flatten
 * order, ...), the optimizer's slot variables "optimizer/<layer>/<param>/<slot>"
 * (Adam "m" and "v"; SGD "momentum"; RMSprop "velocity" and "momentum"; see
 * optimizer.h), counters "optimizer/iterations" (steps), "epoch" (epochs completed),
 * "save_counter" (K), "data/seed" (the data order of epoch e depends only on
 * the seed and e, so the seed is the order's whole state), and "metadata", a
 * JSON string with the format version, model name, input shape, classes,
 * architecture, optimizer (as Keras' get_config: {"name": "sgd", "learning_rate":
 * 0.01, "momentum": 0.9, ...}; under --lr-schedule also "learning_rate_schedule":
 * "cosine:decay_steps=1000,...", learning_rate being its initial rate),
 * ReduceLROnPlateau's arguments and state ({"config": "monitor=val_loss,...",
 * "wait": 1, "cooldown_counter": 0, "best": 0.31}, learning_rate being its
 * current rate), the data the run trained on ({"path": "/abs/dir",
 * "train_limit": 640, "test_limit": 0, "validation_split": 0, "global_batch": 64}:
 * --data resolved, the flags that select examples and how many make a step; with
 * data/seed and the input size, what --resume and eval default to), the frozen
 * layers ("frozen": their names, when any: their weights have no slot
 * variables), with --early-stopping its arguments and state ("early_stopping":
 * {"monitor": "val_loss", "min_delta": 0, "patience": 5, "mode": "auto",
 * "baseline": null, "restore_best_weights": true, "start_from_epoch": 0, "wait":
 * 2, "best": 0.3012, "best_epoch": 7, "stopped_epoch": 0}, Keras' names, epochs
 * numbered from 1, 0 for none) and cltrain version (checkpoint_meta.c writes and
 * reads it). Checkpoints without an optimizer in their metadata (older cltrain)
 * hold Adam's state; without data, their data flags are unknown; without
 * frozen layers, every layer trained.
 *
 * A save in the middle of an epoch also records how far into epoch `epoch + 1`
 * it is: "data/epoch_step" (int64 scalar, optimizer steps already taken in that
 * epoch; 0 at an epoch boundary, and 0 when absent, as in older checkpoints) and,
 * when that is above 0, "data/epoch_sums" (float64, shape (epoch_step, 2): each of
 * those steps' summed loss and count of correct predictions, so the epoch's
 * figures come out as if it had not been interrupted).
 * Optional members: "data/class_names", "model/keras_json", "data/epoch_step",
 * "data/epoch_sums"; everything else listed above is required (the slot
 * variables only when the optimizer is loaded, i.e. not for evaluation).
 *
 * Loading trusts nothing: a member the model does not expect is refused (as Keras
 * refuses a weights file that does not match), and so is any parameter, slot
 * variable, moving statistic or epoch sum that is NaN or infinite, naming the
 * member and the first bad index, and metadata with a key missing, of the wrong
 * type or out of range, naming the key. The index may name only a file of its own
 * folder.
 *
 * Beside the index, DIR/best_checkpoint names the best checkpoint of a run with
 * --early-stopping, in the index's text format:
 *   best_checkpoint_path: "ckpt-4"
 *   monitor: "val_loss"
 *   value: 0.30119999999999997
 *   epoch: 7
 *   restored_in: "ckpt-6"
 * (restored_in only once the run ended restoring the best's weights: its last
 * checkpoint, for which eval, export and predict take the best). --keep never
 * removes the checkpoint it names. A folder without it has no best.
 *
 * Saves are atomic: temp file, fsync, rename, fsync of the folder; then the
 * best record and the index the same way; old checkpoints are removed only after
 * the index names the new one. A crash at any instant leaves the previous index
 * and best record and the files they name intact. */
#ifndef CLT_CHECKPOINT_H
#define CLT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "early_stop.h"
#include "model.h"
#include "optimizer.h"

#define CLT_CHECKPOINT_FORMAT 1

/* The data a run trained on: metadata key "data". */
typedef struct clt_checkpoint_data {
  int known;                    /* 0: not recorded (an older cltrain), and not written */
  char path[4096];              /* --data, resolved to an absolute path */
  long train_limit, test_limit; /* 0: all */
  double validation_split;      /* photo folders: the held-out fraction; 0: none */
  int global_batch;             /* examples per step, over all replicas */
  /* Photo folders: the training's augmentation (augment.h's canonical text; "" none,
   * also for older checkpoints) and, where it crops, the size photos are decoded to
   * before it (0: the model's input size). */
  char augment[CLT_AUG_TEXT_MAX];
  int image_size;
} clt_checkpoint_data;

/* What a checkpoint holds besides the model description. Arrays are flat in the
 * model's layout (model->flat_floats floats). */
/* The longest record of convolution algorithms a checkpoint holds. */
#define CLT_CONV_RECORD_MAX 65536

typedef struct clt_checkpoint {
  float *params;
  /* The optimizer's slot variables (optimizer.h: Adam m and v, ...), flat like params;
   * zeros where it keeps none. */
  float *opt_state[CLT_OPT_SLOTS];
  /* Its kind and hyper-parameters. lr 0: not recorded (a checkpoint of an older
   * cltrain, whose state is Adam's), and not written by a save. */
  clt_optimizer optimizer;
  /* --reduce-lr-on-plateau's arguments and state (active 0: none), in the
   * metadata beside the optimizer; its current rate is the optimizer's lr. */
  clt_plateau plateau;
  int64_t iterations; /* optimizer steps taken */
  int64_t epoch;      /* epochs completed */
  int64_t save_counter;
  uint64_t seed;
  char *class_names; /* photo folders: the class names, one per line, as member
                        "data/class_names"; NULL when trained on IDX files */
  char *keras_json;  /* a model file's text, as member "model/keras_json" (the model
                        itself is rebuilt from the architecture); NULL otherwise */
  /* Optimizer steps already done in the unfinished epoch epoch + 1 (member
   * "data/epoch_step"); 0 at an epoch boundary and in older checkpoints. */
  int64_t epoch_step;
  /* epoch_step x 2 doubles: each of those steps' summed loss and correct count
   * (member "data/epoch_sums", written only when epoch_step > 0). The caller fills
   * it for a save; a load allocates it (NULL when epoch_step is 0), and
   * clt_checkpoint_free frees it. */
  double *epoch_sums;
  clt_checkpoint_data data;  /* with seed: the examples and their order */
  clt_early_stop early_stop; /* --early-stopping's arguments and state (enabled 0: none) */
  /* The convolution algorithms the replicas run next (the metadata's
   * "conv_algorithms": trainer.h's clt_trainer_conv_record), or NULL: none.
   * A load allocates it; clt_checkpoint_free frees it. */
  char *conv_algorithms;
  /* The GEMM tilings every cpu-backend replica takes ("gemm_tilings": a line
   * each, "R tA0 tB0 mM nN kK TILING", trainer.h's clt_trainer_choices) and
   * who ran each replica ("replicas": "R RANK HOST BUILD DEVICE"), or NULL:
   * none recorded (an older cltrain); "" is an empty list. A load allocates
   * them; clt_checkpoint_free frees them. */
  char *gemm_tilings, *replicas;
  /* For a save: this is the run's best checkpoint so far (early_stop's best),
   * which the folder's best record then names. Not read by a load. */
  int best;
} clt_checkpoint;

/* A folder's best record (DIR/best_checkpoint). */
typedef struct clt_checkpoint_best {
  long k;           /* the best checkpoint: ckpt-K.npz */
  char monitor[32]; /* the quantity, its value then and the epoch (from 1) */
  double value;
  int epoch;
  long restored_in; /* the run's last checkpoint when it ended restoring the best's weights; 0:
                       none */
} clt_checkpoint_best;

/* Saves st as the next checkpoint in dir (created if missing): K is one more than
 * the largest ckpt-K.npz already there. Keeps the newest `keep` (0: all) and the
 * one the best record names; with st->best the record names this one.
 * st->save_counter is set to K. path_out (may be NULL) receives the file written.
 * Temp files left by crashed saves are removed: this process's own, and others'
 * only while this process holds the folder's lock (clt_checkpoint_lock), since
 * without it another process may be writing them right now. */
int clt_checkpoint_save(const char *dir, int keep, const clt_model *m, clt_checkpoint *st,
                        char *path_out, size_t path_size, clt_err *e);

/* Creates dir (and parents) if missing and checks it is writable: called before
 * training so a bad --checkpoint-dir fails at once, not after the first epochs. */
int clt_checkpoint_prepare_dir(const char *dir, clt_err *e);

/* DIR (through its index) or a .npz file → the checkpoint file's path. */
int clt_checkpoint_resolve(const char *dir_or_file, char *path, size_t size, clt_err *e);

/* A folder's best record into *b; *found 0 (and CLT_OK) when it has none. */
int clt_checkpoint_best_read(const char *dir, clt_checkpoint_best *b, int *found, clt_err *e);
/* Records in the best record that the run ended restoring the best's weights,
 * its last checkpoint being ckpt-K. */
int clt_checkpoint_best_restored(const char *dir, long k, clt_err *e);
/* Removes the best record that an earlier run left (a fresh run's first save). */
int clt_checkpoint_best_forget(const char *dir, clt_err *e);

/* The checkpoint eval, export and predict use for DIR or FILE: a file is itself;
 * for a folder, with best its best record's (an error naming the folder where
 * none is recorded), else the index's newest, unless the run that saved it ended
 * restoring its best weights (restore_best_weights), which are then the model:
 * the best's. *is_best (may be NULL) says whether the best was chosen. */
int clt_checkpoint_resolve_model(const char *dir_or_file, int best, char *path, size_t size,
                                 int *is_best, clt_err *e);

/* Reads the model description of a checkpoint (name, input shape, classes) and
 * builds that model. */
int clt_checkpoint_model(const char *path, clt_model *m, clt_err *e);

/* Loads a checkpoint written for model m into st (arrays allocated here, free
 * with clt_checkpoint_free). Checks format version, model and architecture,
 * every member's presence, dtype and shape, that every value is finite and that
 * there is no member the model does not expect. with_optimizer = 0 skips the
 * optimizer and its state (evaluation): its slot variables are then optional,
 * but checked when present. m's frozen layers may differ from the checkpoint's
 * (--resume --freeze-until): slots are loaded for the layers m trains, zeros
 * where the checkpoint froze the layer. */
int clt_checkpoint_load(const char *path, const clt_model *m, int with_optimizer,
                        clt_checkpoint *st, clt_err *e);
/* clt_checkpoint_model and clt_checkpoint_load of a checkpoint file already in
 * memory (size bytes; NULL: read the file), such as one process 0 read and sent
 * to the others; path names it in errors. */
int clt_checkpoint_model_from(const char *path, const unsigned char *bytes, size_t size,
                              clt_model *m, clt_err *e);
int clt_checkpoint_load_from(const char *path, const unsigned char *bytes, size_t size,
                             const clt_model *m, int with_optimizer, clt_checkpoint *st,
                             clt_err *e);
void clt_checkpoint_free(clt_checkpoint *st);

/* Takes the checkpoint folder for this process alone: an advisory flock(LOCK_EX |
 * LOCK_NB) on DIR/.cltrain.lock, which then holds the holder's PID. The kernel
 * drops the lock when the holder exits however it dies (kill -9 included), so a
 * folder is never left locked. A second trainer is refused with the holder's PID.
 * The lock file itself is left in place: removing it could let two processes lock
 * two different files of the same name. *fd_out receives the descriptor to pass
 * to clt_checkpoint_unlock. */
int clt_checkpoint_lock(const char *dir, int *fd_out, clt_err *e);
/* Releases the lock (fd < 0: nothing to do). */
void clt_checkpoint_unlock(int fd);

/* Whether name is a member that a checkpoint of model m holds besides m's weights
 * (optimizer slot variables of its trainable parameters, counters, metadata,
 * data/... and model/keras_json): --weights accepts a checkpoint as a weights file
 * and ignores them. */
int clt_checkpoint_extra_member(const clt_model *m, const char *name);

/* Test hook: when > 0, the save fails on purpose just before its n-th file-system
 * step (1: write temp file, 2: rename it, 3: sync folder, 4: write temp index,
 * 5: rename index, 6: sync folder, 7: remove old ones), as a crash there would. */
extern int clt_checkpoint_fail_before_step;

#endif
