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
 * 0.01, "momentum": 0.9, ...}) and cltrain version. Checkpoints without an
 * optimizer in their metadata (older cltrain) hold Adam's state.
 *
 * Saves are atomic: temp file, fsync, rename, fsync of the folder; then the
 * index the same way; old checkpoints are removed only after the index names
 * the new one. A crash at any instant leaves the previous index and the file
 * it names intact. */
#ifndef CLT_CHECKPOINT_H
#define CLT_CHECKPOINT_H

#include <stdint.h>

#include "model.h"
#include "optimizer.h"

#define CLT_CHECKPOINT_FORMAT 1

/* What a checkpoint holds besides the model description. Arrays are flat in the
 * model's layout (model->flat_floats floats). */
typedef struct clt_checkpoint {
  float *params;
  /* The optimizer's slot variables (optimizer.h: Adam m and v, ...), flat like params;
   * zeros where it keeps none. */
  float *opt_state[CLT_OPT_SLOTS];
  /* Its kind and hyper-parameters. lr 0: not recorded (a checkpoint of an older
   * cltrain, whose state is Adam's), and not written by a save. */
  clt_optimizer optimizer;
  int64_t iterations; /* optimizer steps taken */
  int64_t epoch;      /* epochs completed */
  int64_t save_counter;
  uint64_t seed;
  char *class_names; /* photo folders: the class names, one per line, as member
                        "data/class_names"; NULL when trained on IDX files */
  char *keras_json;  /* a model file's text, as member "model/keras_json" (the model
                        itself is rebuilt from the architecture); NULL otherwise */
} clt_checkpoint;

/* Saves st as the next checkpoint in dir (created if missing): K is one more than
 * the largest ckpt-K.npz already there. Keeps the newest `keep` (0: all).
 * st->save_counter is set to K. path_out (may be NULL) receives the file written. */
int clt_checkpoint_save(const char *dir, int keep, const clt_model *m, clt_checkpoint *st,
                        char *path_out, size_t path_size, clt_err *e);

/* Creates dir (and parents) if missing and checks it is writable: called before
 * training so a bad --checkpoint-dir fails at once, not after the first epochs. */
int clt_checkpoint_prepare_dir(const char *dir, clt_err *e);

/* DIR (through its index) or a .npz file → the checkpoint file's path. */
int clt_checkpoint_resolve(const char *dir_or_file, char *path, size_t size, clt_err *e);

/* Reads the model description of a checkpoint (name, input shape, classes) and
 * builds that model. */
int clt_checkpoint_model(const char *path, clt_model *m, clt_err *e);

/* Loads a checkpoint written for model m into st (arrays allocated here, free
 * with clt_checkpoint_free). Checks format version, model and architecture,
 * every member's presence, dtype and shape. with_optimizer = 0 skips the
 * optimizer and its state (evaluation). */
int clt_checkpoint_load(const char *path, const clt_model *m, int with_optimizer,
                        clt_checkpoint *st, clt_err *e);
void clt_checkpoint_free(clt_checkpoint *st);

/* Test hook: when > 0, the save fails on purpose just before its n-th file-system
 * step (1: write temp file, 2: rename it, 3: sync folder, 4: write temp index,
 * 5: rename index, 6: sync folder, 7: remove old ones), as a crash there would. */
extern int clt_checkpoint_fail_before_step;

#endif
