/* `cltrain train` before its first step: the devices, data, model, optimizer,
 * outputs, and what every process of an MPI run must agree on. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "train_impl.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "data.h"
#include "files.h"
#include "interrupt.h"
#include "keras.h"
#include "npz.h"
#include "report.h"
#include "select.h"
#include "timing.h"
#include "trainer.h"
#include "weights.h"

int clt_select_process_devices(const char *spec, clt_cluster *c, clt_device_list *list,
                               const clt_device **chosen, int *n, clt_err *e) {
  char mine[1024];
  int status = clt_process_device_spec(spec, c, "--devices", mine, sizeof mine, e);
  if (!status) status = clt_devices_enumerate(list, e);
  return status ? status : clt_select_listed(mine, "--devices", list, chosen, n, e);
}

static uint64_t model_hash(const clt_model *m) {
  const size_t size = clt_describe_max(m->nlayers);
  char *text = calloc(size, 1);
  uint64_t h = 1469598103934665603ull ^ (uint64_t)m->softmax_output;
  if (!text) return h;
  clt_model_describe(m, text, size);
  for (size_t i = 0; i < size && text[i]; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
  for (int i = 0; i < m->nlayers; i++) h = (h ^ (uint64_t)m->layers[i].frozen) * 1099511628211ull;
  free(text);
  return h;
}

/* Compares every process's configuration with process 0's; every process reaches
 * the same verdict. *replicas gets the run's replica count. */
int train_same_config(clt_cluster *c, const run_config *mine, int *replicas, clt_err *e) {
  const int procs = clt_cluster_size(c);
  run_config *all = malloc((size_t)procs * sizeof *all);
  if (!all) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  int status = clt_cluster_allgather(c, mine, sizeof *mine, all, e);
  *replicas = 0;
  for (int r = 0; r < procs && !status; r++) *replicas += all[r].replicas;
  for (int r = 1; r < procs && !status; r++) {
    const run_config *a = &all[0], *b = &all[r];
    char what[256] = "";
    if (a->model_hash != b->model_hash || strcmp(a->model, b->model) != 0)
      snprintf(what, sizeof what, "the model (%s vs %s)", b->model, a->model);
    else if (a->ntrain != b->ntrain || a->ntest != b->ntest)
      snprintf(what, sizeof what, "the data (%d training and %d test examples vs %d and %d)",
               b->ntrain, b->ntest, a->ntrain, a->ntest);
    else if (a->height != b->height || a->width != b->width || a->channels != b->channels ||
             a->classes != b->classes)
      snprintf(what, sizeof what, "the data (%dx%dx%d images of %d classes vs %dx%dx%d of %d)",
               b->height, b->width, b->channels, b->classes, a->height, a->width, a->channels,
               a->classes);
    else if (a->batch_per_replica != b->batch_per_replica || a->batch_given != b->batch_given)
      snprintf(what, sizeof what, "--batch-per-replica (%d%s vs %d%s)", b->batch_per_replica,
               b->batch_given ? "" : ", not given", a->batch_per_replica,
               a->batch_given ? "" : ", not given");
    else if (a->global_batch != b->global_batch)
      snprintf(what, sizeof what, "--global-batch (%d vs %d; 0: not given)", b->global_batch,
               a->global_batch);
    else if (a->seed != b->seed)
      snprintf(what, sizeof what, "--seed (%llu vs %llu)", (unsigned long long)b->seed,
               (unsigned long long)a->seed);
    else if (a->epochs != b->epochs)
      snprintf(what, sizeof what, "--epochs (%d vs %d)", b->epochs, a->epochs);
    else if (a->first_epoch != b->first_epoch || a->step != b->step)
      snprintf(what, sizeof what, "the starting point (epoch %d, step %lld vs epoch %d, step %lld)",
               b->first_epoch, b->step, a->first_epoch, a->step);
    else if (a->optimizer != b->optimizer || a->lr != b->lr || a->momentum != b->momentum ||
             a->weight_decay != b->weight_decay || a->nesterov != b->nesterov)
      snprintf(what, sizeof what, "the optimizer (%s, learning rate %g vs %s, %g)",
               clt_optimizer_name((clt_optimizer_kind)b->optimizer), b->lr,
               clt_optimizer_name((clt_optimizer_kind)a->optimizer), a->lr);
    else if (strcmp(a->split, b->split) != 0)
      snprintf(what, sizeof what, "--split (%s vs %s)", b->split, a->split);
    else if (strcmp(a->lr_control, b->lr_control) != 0)
      snprintf(what, sizeof what, "--lr-schedule or --reduce-lr-on-plateau");
    else if (a->augment_hash != b->augment_hash)
      snprintf(what, sizeof what, "the augmentation (--augment, or the model file's layers)");
    else if (strcmp(a->early_stop, b->early_stop) != 0)
      snprintf(what, sizeof what, "--early-stopping (%.100s vs %.100s)", b->early_stop,
               a->early_stop);
    else if (a->wire != b->wire)
      snprintf(what, sizeof what, "--wire (%s vs %s)", clt_wire_name((clt_wire)b->wire),
               clt_wire_name((clt_wire)a->wire));
    if (what[0]) {
      status = clt_fail(e, CLT_ERR_ARG,
                        "rank %d differs from rank 0 in %s: every process of a run must be "
                        "given the same model, data and options",
                        r, what);
    }
  }
  free(all);
  /* Every process computed the same verdict from the same figures. */
  if (status) clt_cluster_known(c);
  return status;
}

run_config train_config_of(const clt_model *m, const clt_data *d, int batch_per_replica,
                           uint64_t seed, int replicas) {
  run_config rc;
  memset(&rc, 0, sizeof rc);
  rc.model_hash = model_hash(m);
  char augment[CLT_AUG_TEXT_MAX];
  clt_augment_format(&d->spec.augment, augment, sizeof augment);
  rc.augment_hash = 1469598103934665603ull;
  for (const char *c = augment; *c; c++)
    rc.augment_hash = (rc.augment_hash ^ (unsigned char)*c) * 1099511628211ull;
  snprintf(rc.model, sizeof rc.model, "%s", m->name);
  rc.ntrain = d->ntrain;
  rc.ntest = d->ntest;
  rc.height = m->input.h;
  rc.width = m->input.w;
  rc.channels = m->input.c;
  rc.classes = m->classes;
  rc.batch_per_replica = batch_per_replica;
  rc.seed = seed;
  rc.replicas = replicas;
  return rc;
}

/* The replica lines of every process, in rank order, into a new string. */
int train_replica_lines(clt_cluster *c, const clt_device *const *devices, int n, char **out,
                        clt_err *e) {
  enum { LINES = 8192 };
  const int procs = clt_cluster_size(c);
  char *mine = calloc(LINES, 1), *all = calloc((size_t)procs, LINES);
  int counts[CLT_MAX_REPLICAS] = {0};
  int status = mine && all ? CLT_OK : clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status && procs > 1) status = clt_cluster_allgather(c, &n, sizeof n, counts, e);
  int first = 0;
  for (int r = 0; r < clt_cluster_rank(c) && !status; r++) first += counts[r];
  if (!status) {
    clt_report_replica_lines(devices, n, first, clt_cluster_rank(c), clt_cluster_host(c), procs,
                             mine, LINES);
    status = clt_cluster_allgather(c, mine, LINES, all, e);
  }
  if (!status) {
    /* Concatenate in place: each part is a string at the start of its slot. */
    size_t len = 0;
    for (int r = 0; r < procs; r++) {
      const size_t part = strlen(all + (size_t)r * LINES);
      memmove(all + len, all + (size_t)r * LINES, part);
      len += part;
    }
    all[len] = '\0';
    *out = all;
    all = NULL;
  }
  free(mine);
  free(all);
  return status;
}

/* Opens --data for training: the photo-folder options, limits and augmentation apply. */
static int open_train_data(const clt_train_opts *o, const clt_augment *aug, clt_data *d,
                           clt_err *e) {
  const clt_data_spec spec = {.dir = o->data_dir,
                              .with_train = 1,
                              .train_limit = o->train_limit,
                              .test_limit = o->test_limit,
                              .image_size = o->image_size,
                              .validation_split = o->validation_split,
                              .seed = o->seed,
                              .image_size_given = o->image_size_given,
                              .validation_split_given = o->validation_split_given,
                              .max_image_pixels = o->max_image_pixels,
                              .augment = *aug};
  return clt_data_open(&spec, d, e);
}

/* --preprocess: a model file's input (built-in models have their own). */
static int parse_preprocess(const clt_train_opts *o, clt_preprocess *pre, clt_err *e) {
  static const char *const names[] = {"unit", "caffe", "raw"}; /* by clt_preprocess */
  *pre = CLT_PRE_RAW;
  if (!o->preprocess) return CLT_OK;
  for (int p = 0; p < 3; p++) {
    if (strcmp(o->preprocess, names[p]) == 0) {
      *pre = (clt_preprocess)p;
      return CLT_OK;
    }
  }
  return clt_fail(e, CLT_ERR_ARG, "--preprocess %s: expected raw, unit or caffe", o->preprocess);
}

/* The images a model file's input takes: photos as decoded, before any crop. */
static clt_shape decoded_shape(const clt_data *d) {
  if (!d->photos) return (clt_shape){d->height, d->width, d->channels};
  return (clt_shape){d->spec.image_size, d->spec.image_size, d->channels};
}

/* --model FILE.json for data of this shape (NULL: the data's images as decoded);
 * photo folders are first resized to the model's input when it fixes one and
 * --image-size does not. *aug (may be NULL) gets the file's augmentation layers. */
static int keras_model(const clt_train_opts *o, clt_data *data, const clt_shape *forced,
                       clt_model *model, char **json, clt_augment *aug, clt_err *e) {
  clt_preprocess pre;
  int status = parse_preprocess(o, &pre, e);
  if (status) return status;
  if (data->photos && !o->image_size_given) {
    /* A file that does not say (or is bad) leaves the folder as it is: the load
     * below says what is wrong with it. */
    clt_err ignored = {0};
    clt_shape s;
    if (clt_keras_input_shape(o->model, &s, &ignored) == CLT_OK && s.h && s.h == s.w &&
        s.h != data->spec.image_size && (status = clt_data_reopen(data, s.h, o->seed, e)))
      return status;
  }
  clt_keras_opts ko = {.data = forced ? *forced : decoded_shape(data),
                       .classes = data->classes,
                       .preprocess = pre,
                       .weights_given = o->weights != NULL,
                       .augment = aug};
  return clt_keras_load(o->model, &ko, model, json, e);
}

/* --resume with --model FILE.json: the file must describe the checkpoint's model. */
static int same_keras_model(const clt_train_opts *o, clt_data *data, const char *path,
                            const clt_model *model, clt_err *e) {
  clt_model *fresh = calloc(1, sizeof *fresh);
  char *a = NULL, *b = NULL;
  int status = CLT_OK;
  const clt_shape trained = decoded_shape(data); /* as the checkpoint records it */
  if (!fresh) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  } else if ((status = keras_model(o, data, &trained, fresh, NULL, NULL, e))) {
    clt_wrap(e, "--resume: %s holds model %s, not the model of", path, model->name);
  } else {
    const int n = model->nlayers > fresh->nlayers ? model->nlayers : fresh->nlayers;
    const size_t size = clt_describe_max(n);
    if (!(a = malloc(size)) || !(b = malloc(size))) {
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    } else {
      clt_model_describe(model, a, size);
      clt_model_describe(fresh, b, size);
      if (strcmp(a, b) != 0 || fresh->softmax_output != model->softmax_output)
        status = clt_fail(e, CLT_ERR_ARG, "--resume: %s holds another model than %s", path,
                          o->model);
    }
  }
  if (fresh) clt_model_free(fresh);
  free(fresh);
  free(a);
  free(b);
  return status;
}

/* --freeze-until's value that freezes no layer (unless a layer is so named). */
#define FREEZE_NONE "none"

/* --freeze-until: every layer up to the one it names frozen, on top of the model
 * file's frozen layers, or with --resume instead of the checkpoint's; laid out. */
static int freeze_until(const clt_train_opts *o, clt_model *model, clt_err *e) {
  int status = CLT_OK;
  const int none = o->freeze_until && strcmp(o->freeze_until, FREEZE_NONE) == 0 &&
                   clt_model_find(model, FREEZE_NONE) < 0;
  /* With --resume the flag replaces the checkpoint's freezing; `none` also
   * unfreezes a model file's frozen layers (a second stage that fine-tunes all). */
  for (int i = 0; i < model->nlayers && ((o->resume && o->freeze_until) || none); i++)
    model->layers[i].frozen = 0;
  if (o->freeze_until && !none)
    status = clt_model_freeze_until(model, o->freeze_until, "--freeze-until", e);
  clt_model_layout(model);
  if (!status && model->trainable_floats == 0) {
    if (o->freeze_until) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--freeze-until %s freezes every layer of model %s that has weights: "
                      "nothing to train",
                      o->freeze_until, model->name);
    }
    return clt_fail(e, CLT_ERR_ARG,
                    "model %s: every layer that has weights is frozen: nothing to train",
                    model->name);
  }
  return status;
}

/* n with a comma between groups of three digits: "1,234,567". */
static void thousands(size_t n, char *buf, size_t size) {
  char digits[32];
  const int len = snprintf(digits, sizeof digits, "%zu", n);
  size_t used = 0;
  for (int i = 0; i < len && used + 2 < size; i++) {
    if (i > 0 && (len - i) % 3 == 0) buf[used++] = ',';
    buf[used++] = digits[i];
  }
  buf[used] = '\0';
}

/* Process 0's notes on the layers a resumed run trains that its checkpoint froze
 * (`was`), and back: what happens to their optimizer slots. */
static void note_freezing(const clt_train_opts *o, const clt_model *m, const unsigned char *was,
                          const clt_optimizer *opt) {
  if (clt_cluster_rank(o->cluster) != 0) return;
  const int slots = clt_optimizer_slot(opt, 0) != NULL;
  for (int unfreezing = 1; unfreezing >= 0; unfreezing--) {
    int layers = 0;
    size_t weights = 0;
    for (int i = 0; i < m->nlayers; i++) {
      const clt_layer *l = &m->layers[i];
      const int changed = unfreezing ? was[i] && !l->frozen : !was[i] && l->frozen;
      if (!l->nparams || !changed) continue;
      layers++;
      for (int p = 0; p < l->nparams; p++)
        weights += l->params[p].non_trainable ? 0 : l->params[p].size;
    }
    if (!layers) continue;
    char shown[32];
    thousands(weights, shown, sizeof shown);
    fprintf(stderr, "cltrain: note: %d layer%s (%s weights) become%s %s%s%s\n", layers,
            layers == 1 ? "" : "s", shown, layers == 1 ? "s" : "",
            unfreezing ? "trainable" : "frozen",
            !slots        ? ""
            : layers == 1 ? "; its optimizer slots "
                          : "; their optimizer slots ",
            !slots       ? ""
            : unfreezing ? "start at zero"
                         : "are dropped");
  }
}

/* --resume, before the data is opened: the newest checkpoint's (f, process 0's)
 * model, weights, optimizer state, counters and data records; flags that
 * contradict its model are refused. The model's frozen layers are the
 * checkpoint's (*was_frozen gets them, allocated) or, with --freeze-until, the
 * flag's. */
static int resume_checkpoint(const clt_train_opts *o, const train_resume_file *f, char *path,
                             size_t size, clt_model *model, clt_checkpoint *state,
                             unsigned char **was_frozen, clt_err *e) {
  snprintf(path, size, "%s", f->path);
  int status = clt_checkpoint_model_from(path, f->bytes, f->size, model, e);
  if (status) return status;
  if (o->weights) return clt_fail(e, CLT_ERR_ARG, "--weights: --resume takes the checkpoint's");
  if (!(*was_frozen = calloc((size_t)model->nlayers + 1, 1)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < model->nlayers; i++)
    (*was_frozen)[i] = (unsigned char)model->layers[i].frozen;
  if (o->model_given && !clt_keras_is_file(o->model) && strcmp(o->model, model->name) != 0) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s holds model %s, not --model %s", path,
                    model->name, o->model);
  }
  /* The preprocessing is the model's, like its input size. */
  clt_preprocess pre;
  if ((status = parse_preprocess(o, &pre, e))) return status;
  if (o->preprocess && clt_model_is_builtin(model->name, NULL)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--preprocess applies to model files; built-in model %s has its own",
                    model->name);
  }
  if (o->preprocess && pre != model->preprocess) {
    static const char *const names[] = {"unit", "caffe", "raw"}; /* by clt_preprocess */
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --preprocess %s, not %s", path,
                    names[model->preprocess], o->preprocess);
  }
  if ((status = freeze_until(o, model, e))) return status;
  return clt_checkpoint_load_from(path, f->bytes, f->size, model, 1, state, e);
}

/* Process 0's note that a data flag given with --resume differs from what the
 * checkpoint records. */
static void note_differs(const clt_train_opts *o, const char *flag, const char *given,
                         const char *recorded) {
  if (clt_cluster_rank(o->cluster) != 0) return;
  fprintf(stderr,
          "cltrain: note: --%s %s differs from the checkpoint's %s; the run continues but is no "
          "longer exact\n",
          flag, given, recorded);
}

/* A limit as the notes show it: "0 (all)" for none. */
static void show_limit(long n, char *buf, size_t size) {
  snprintf(buf, size, n ? "%ld" : "%ld (all)", n);
}

/* --resume: the data flags left out are the checkpoint's (into eff: the data as
 * recorded, its image size and seed); one given with another value is taken, with
 * a note. A checkpoint without records (an older cltrain) leaves the flags as they
 * are, with a note; its seed and image size are known all the same. */
static void resume_data_flags(const clt_train_opts *o, const char *path, const clt_model *model,
                              clt_checkpoint *state, clt_train_opts *eff, clt_augment *aug) {
  const clt_checkpoint_data *rec = &state->data;
  char given[4096], recorded[64];
  if (!o->image_size_given) eff->image_size = rec->image_size ? rec->image_size : model->input.h;
  if (o->seed_given && o->seed != state->seed) {
    snprintf(given, sizeof given, "%llu", (unsigned long long)o->seed);
    snprintf(recorded, sizeof recorded, "%llu", (unsigned long long)state->seed);
    note_differs(o, "seed", given, recorded);
    state->seed = o->seed;
  }
  eff->seed = state->seed;
  if (!rec->known) {
    if (clt_cluster_rank(o->cluster) == 0)
      fprintf(stderr,
              "cltrain: note: %s does not record its data flags (an older cltrain): --data, "
              "--train-limit, --test-limit and --validation-split are as given or their "
              "defaults, exact only if they are the run's\n",
              path);
    return;
  }
  if (!o->data_given) {
    eff->data_dir = rec->path;
  } else if (!realpath(o->data_dir, given) || strcmp(given, rec->path) != 0) {
    if (clt_cluster_rank(o->cluster) == 0)
      fprintf(stderr,
              "cltrain: note: --data %s differs from the checkpoint's %s; the run continues but "
              "is no longer exact\n",
              o->data_dir, rec->path);
  }
  const struct {
    int given;
    const char *flag;
    long mine, *out, recorded;
  } limits[] = {{o->train_limit_given, "train-limit", o->train_limit, &eff->train_limit,
                 rec->train_limit},
                {o->test_limit_given, "test-limit", o->test_limit, &eff->test_limit,
                 rec->test_limit}};
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    if (!limits[i].given) {
      *limits[i].out = limits[i].recorded;
    } else if (limits[i].mine != limits[i].recorded) {
      show_limit(limits[i].mine, given, sizeof given);
      show_limit(limits[i].recorded, recorded, sizeof recorded);
      note_differs(o, limits[i].flag, given, recorded);
    }
  }
  if (!o->validation_split_given) {
    eff->validation_split = rec->validation_split;
  } else if (o->validation_split != rec->validation_split) {
    snprintf(given, sizeof given, "%g", o->validation_split);
    snprintf(recorded, sizeof recorded, "%g", rec->validation_split);
    note_differs(o, "validation-split", given, recorded);
  }
  /* The augmentation (the metadata's text was checked when read). */
  clt_augment_format(aug, given, sizeof given);
  if (!o->augment_given) {
    clt_err ignored;
    if (!rec->augment[0] || clt_augment_parse(rec->augment, aug, &ignored))
      memset(aug, 0, sizeof *aug);
  } else if (strcmp(given, rec->augment) != 0) {
    note_differs(o, "augment", given, rec->augment[0] ? rec->augment : "(none)");
  }
}

/* Whether text is one line of UTF-8, as the metadata's strings are. */
static int one_line_utf8(const char *text) {
  const unsigned char *c = (const unsigned char *)text;
  while (*c) {
    const unsigned char *at = c;
    const uint32_t cp = clt_npz_utf8_next(&c);
    if (cp < 0x20 || cp == 0x7f || (cp == 0xFFFD && c == at + 1)) return 0;
  }
  return 1;
}

/* What the checkpoints of this run record of its data (o: the flags in effect;
 * the global batch is the caller's). A path that is not one line of UTF-8 is not
 * recorded: the metadata could not give it back. */
static void record_data(const clt_train_opts *o, clt_checkpoint_data *rec) {
  char resolved[4096];
  const char *dir = realpath(o->data_dir, resolved) ? resolved : o->data_dir;
  rec->known = strlen(dir) < sizeof rec->path && one_line_utf8(dir);
  if (!rec->known) return;
  snprintf(rec->path, sizeof rec->path, "%s", dir);
  rec->train_limit = o->train_limit;
  rec->test_limit = o->test_limit;
  rec->validation_split = o->validation_split;
}

/* The model: the checkpoint's with --resume (read already, the data opened as it
 * records), else built for the data; either way checked against the data, and the
 * class names kept. */
/* Process 0's note on a model file's layers that tf.keras 2.x runs as at inference
 * in training (a call with training=False) and cltrain's training step does not:
 * BatchNormalization layers not frozen, and Dropout. */
static void note_inference(const clt_train_opts *o, const clt_model *m) {
  int n = 0, first = -1;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    const int bn = strcmp(l->ops->kind, "BatchNormalization") == 0;
    if (!l->inference || !((bn && !l->frozen) || strcmp(l->ops->kind, "Dropout") == 0)) continue;
    if (first < 0) first = i;
    n++;
  }
  if (!n || clt_cluster_rank(o->cluster) != 0) return;
  fprintf(stderr,
          "cltrain: note: %s: layer %s%s, called with training=False, train%s as in Keras 3 "
          "(BatchNormalization on batch statistics, Dropout on), not as at inference as in "
          "tf.keras 2\n",
          o->model, m->layers[first].name, n > 1 ? " and others" : "", n > 1 ? "" : "s");
}

static int setup_model(const clt_train_opts *o, clt_data *data, clt_model *model,
                       clt_checkpoint *state, const char *ckpt_path, clt_err *e) {
  int status = CLT_OK;
  if (o->resume) {
    if (o->model_given && clt_keras_is_file(o->model) &&
        (status = same_keras_model(o, data, ckpt_path, model, e)))
      return status;
    const int trained = state->data.image_size ? state->data.image_size : model->input.h;
    if (data->photos && o->image_size_given && o->image_size != trained) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--resume: %s was trained on %dx%d images, not --image-size %d (leave the "
                      "flag out to continue at %d)",
                      ckpt_path, trained, trained, o->image_size, trained);
    }
  } else if (clt_keras_is_file(o->model)) {
    clt_augment layers = {0};
    if ((status = keras_model(o, data, NULL, model, &state->keras_json, &layers, e))) return status;
    /* The file's augmentation layers run where --augment's would. */
    if (layers.n && o->augment) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--augment: model file %s has augmentation layers of its own; give one or "
                      "the other",
                      o->model);
    }
    if (layers.n && !data->photos) {
      return clt_fail(e, CLT_ERR_ARG,
                      "%s: its augmentation layers (RandomFlip, ...) need a photo folder; %s holds "
                      "IDX files",
                      o->model, o->data_dir);
    }
    if (layers.n && (status = clt_data_set_augment(data, &layers, e))) return status;
    note_inference(o, model);
  } else {
    /* Photo folders default to the second reference workload's model. */
    const char *name = data->photos && !o->model_given ? "resnet50" : o->model;
    if (o->preprocess) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--preprocess applies to model files; built-in model %s has its own", name);
    }
    const clt_shape input = {data->height, data->width, data->channels};
    if ((status = clt_model_build(name, input, data->classes, model, e))) {
      if (e->code == CLT_ERR_FORMAT) clt_wrap(e, "%s", o->data_dir);
      return status;
    }
  }
  if ((status = clt_data_check_input(data, model->name, model->input.h, model->input.w,
                                     model->input.c, model->classes, e))) {
    return status;
  }
  if (o->resume && (status = clt_data_check_classes(data, state->class_names, ckpt_path, e))) {
    return status;
  }
  if (!state->class_names) status = clt_data_class_names(data, &state->class_names, e);
  return status;
}

/* The optimizer: --optimizer's, Keras' defaults for what the flags leave out; with
 * --resume (ckpt) the checkpoint's, which flags given must not contradict (--lr may
 * change its learning rate). Meaningless combinations are refused. */
static int choose_optimizer(const clt_train_opts *o, const clt_optimizer *ckpt, const char *path,
                            clt_optimizer *opt, clt_err *e) {
  clt_optimizer_kind kind = ckpt ? ckpt->kind : CLT_OPT_ADAM;
  char kinds[64];
  if (o->optimizer_given && !clt_optimizer_find(o->optimizer, &kind)) {
    clt_optimizer_list(CLT_HP_COUNT, "or", kinds, sizeof kinds);
    return clt_fail(e, CLT_ERR_ARG, "--optimizer %s: expected %s", o->optimizer, kinds);
  }
  const char *name = clt_optimizer_name(kind);
  if (ckpt && kind != ckpt->kind) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --optimizer %s, not %s", path,
                    clt_optimizer_name(ckpt->kind), name);
  }
  /* A flag of a hyper-parameter the kind does not use is a mistake, not a no-op. */
  const struct {
    int given;
    const char *flag;
    clt_hyper h;
  } flags[] = {{o->momentum_given, "--momentum", CLT_HP_MOMENTUM},
               {o->nesterov, "--nesterov", CLT_HP_NESTEROV}};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (!flags[i].given || clt_optimizer_uses(kind, flags[i].h)) continue;
    clt_optimizer_list(flags[i].h, "and", kinds, sizeof kinds);
    return clt_fail(e, CLT_ERR_ARG, "%s applies to --optimizer %s, not %s", flags[i].flag, kinds,
                    name);
  }
  *opt = ckpt ? *ckpt : clt_optimizer_defaults(kind);
  if (!(opt->lr > 0)) opt->lr = clt_optimizer_defaults(kind).lr; /* an older, Adam checkpoint */
  if (!ckpt) {
    if (o->momentum_given) opt->momentum = o->momentum;
    opt->nesterov = o->nesterov;
    opt->weight_decay = o->weight_decay;
  } else if (o->momentum_given && o->momentum != ckpt->momentum) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --momentum %g, not %g", path,
                    ckpt->momentum, o->momentum);
  } else if (o->nesterov && !ckpt->nesterov) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained without --nesterov", path);
  } else if (o->weight_decay_given && o->weight_decay != ckpt->weight_decay) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --weight-decay %g, not %g", path,
                    ckpt->weight_decay, o->weight_decay);
  }
  if (opt->nesterov && opt->momentum == 0) {
    return clt_fail(e, CLT_ERR_ARG, "--nesterov needs --momentum above 0");
  }
  if (o->lr > 0) opt->lr = o->lr;
  return CLT_OK;
}

/* --lr-schedule and --reduce-lr-on-plateau, before any work: their arguments,
 * and what a fresh run can tell from the flags alone. */
static int parse_lr_flags(const clt_train_opts *o, clt_schedule *schedule, clt_plateau *plateau,
                          clt_err *e) {
  int status = CLT_OK;
  memset(schedule, 0, sizeof *schedule);
  memset(plateau, 0, sizeof *plateau);
  if (o->lr_schedule && (status = clt_schedule_parse(o->lr_schedule, "--lr-schedule", schedule, e)))
    return status;
  if (o->reduce_lr_on_plateau &&
      (status = clt_plateau_parse(o->reduce_lr_on_plateau, "--reduce-lr-on-plateau", plateau, e)))
    return status;
  if (o->lr_schedule && o->reduce_lr_on_plateau) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--reduce-lr-on-plateau: the learning rate follows --lr-schedule and cannot be "
                    "set (Keras' ReduceLROnPlateau refuses an optimizer with a schedule)");
  }
  if (schedule->kind == CLT_SCHED_PIECEWISE && o->lr > 0 && o->lr != schedule->values[0]) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--lr-schedule piecewise takes its rates from values: --lr %g is not "
                    "values[0] %g (leave --lr out)",
                    o->lr, schedule->values[0]);
  }
  return CLT_OK;
}

/* Whether the run evaluates validation data after each epoch: --validation-split
 * (the epoch line's Validation figures). The t10k files of an IDX folder are a
 * test set, not validation data. */
static int has_validation(const clt_data *d) { return d->validation && d->ntest > 0; }

/* The rate's schedule into opt and the plateau into *plateau: the flags', or
 * with --resume those the checkpoint records (in opt and *plateau already) when
 * a flag is left out. A plateau given again with the recorded arguments keeps
 * its state; with others it starts afresh. */
static int choose_lr_control(const clt_train_opts *o, const clt_schedule *schedule,
                             const clt_plateau *given, const clt_data *data, const char *path,
                             clt_optimizer *opt, clt_plateau *plateau, clt_err *e) {
  if (o->lr_schedule) opt->schedule = *schedule;
  if (o->reduce_lr_on_plateau) {
    char mine[512], recorded[512];
    clt_plateau_format(given, mine, sizeof mine);
    clt_plateau_format(plateau, recorded, sizeof recorded);
    if (!plateau->active || strcmp(mine, recorded) != 0) *plateau = *given;
  }
  if (opt->schedule.kind == CLT_SCHED_PIECEWISE) {
    if (o->lr > 0 && o->lr != opt->schedule.values[0]) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--lr-schedule piecewise (%s's) takes its rates from values: --lr %g is not "
                      "values[0] %g (leave --lr out)",
                      path, o->lr, opt->schedule.values[0]);
    }
    opt->lr = opt->schedule.values[0];
  }
  if (plateau->active && opt->schedule.kind != CLT_SCHED_NONE && o->lr_schedule) {
    return clt_fail(
        e, CLT_ERR_ARG,
        "--lr-schedule: %s records --reduce-lr-on-plateau, which cannot set a scheduled "
        "learning rate (Keras' ReduceLROnPlateau refuses an optimizer with a schedule)",
        path);
  }
  if (plateau->active && opt->schedule.kind != CLT_SCHED_NONE) {
    return clt_fail(
        e, CLT_ERR_ARG,
        "--reduce-lr-on-plateau: %s's learning rate follows --lr-schedule %s and cannot "
        "be set (Keras' ReduceLROnPlateau refuses an optimizer with a schedule)",
        path, clt_schedule_name(opt->schedule.kind));
  }
  if (plateau->active && clt_cb_monitor_needs_validation(&plateau->monitor) &&
      !has_validation(data)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--reduce-lr-on-plateau: monitor=%s needs validation data: give "
                    "--validation-split F (the test set is never monitored), or monitor=loss",
                    clt_cb_quantity_name(plateau->monitor.quantity));
  }
  return CLT_OK;
}

/* A fresh run's state: weights initialised once on the host from the seed and
 * broadcast, so every replica starts identical; zero optimizer state. */
int train_fresh_state(const clt_model *model, uint64_t seed, clt_checkpoint *state, clt_err *e) {
  state->params = malloc(model->flat_floats * sizeof(float));
  state->opt_state[0] = calloc(model->flat_floats, sizeof(float));
  state->opt_state[1] = calloc(model->flat_floats, sizeof(float));
  if (!state->params || !state->opt_state[0] || !state->opt_state[1]) {
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  }
  clt_model_init_params(model, seed, state->params);
  return CLT_OK;
}

/* --resume: early stopping continues as the checkpoint records it (es); the
 * flag may start it where the run had none, but not change it. */
static int resume_early_stop(const clt_train_opts *o, const char *path, const clt_early_stop *given,
                             clt_early_stop *es, clt_err *e) {
  if (!given->enabled) return CLT_OK;
  if (!es->enabled) {
    *es = *given;
    return CLT_OK;
  }
  if (clt_early_stop_same_args(es, given)) return CLT_OK;
  char had[512];
  clt_early_stop_describe(es, had, sizeof had);
  return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --early-stopping %s, not %s", path,
                  had, o->early_stopping);
}

/* Every output path, before anything is created: a bad --log must not leave a
 * new checkpoint folder behind. */
static int check_outputs(const clt_train_opts *o, clt_err *e) {
  int status = CLT_OK;
  if (o->checkpoint_every > 0 || o->early_stopping)
    status = clt_check_output_dir(o->checkpoint_dir, "--checkpoint-dir", e);
  if (!status && o->log_path) status = clt_check_output_file(o->log_path, "--log", e);
  if (!status && o->trace_path) status = clt_check_output_file(o->trace_path, "--trace", e);
  if (!status && o->trace_path) status = clt_check_replaceable(o->trace_path, "--trace", e);
  if (!status && o->tensorboard_dir)
    status = clt_check_output_dir(o->tensorboard_dir, "--tensorboard", e);
  return status;
}

/* Under a selection by type (--devices all, the default, or cpu, gpu, accelerator)
 * a device too small to train the model on one example is left out, with a note
 * naming it: the others train. Named by index, it stays an error (at set-up). */
static int skip_small_devices(const clt_train_opts *o, const clt_model *model,
                              const clt_device **chosen, int *n, clt_err *e) {
  char spec[1024];
  int status = clt_process_device_spec(o->devices, o->cluster, "--devices", spec, sizeof spec, e);
  if (status) return status;
  if (!clt_select_by_type(spec)) return CLT_OK;
  const double need = clt_trainer_device_need(model);
  int kept = 0;
  double largest = 0;
  for (int i = 0; i < *n; i++) {
    const clt_device *d = chosen[i];
    const double mib = (double)d->global_mem_bytes / 1048576.0;
    if ((double)d->global_mem_bytes >= need) {
      chosen[kept++] = d;
      continue;
    }
    if (mib > largest) largest = mib;
    char who[64] = "";
    if (clt_cluster_size(o->cluster) > 1)
      snprintf(who, sizeof who, "rank %d: ", clt_cluster_rank(o->cluster));
    fprintf(stderr,
            "cltrain: note: %sskipping device %d (%s): its %.0f MiB cannot hold model %s (one "
            "example needs %.0f MiB)\n",
            who, d->index, d->name, mib, model->name, need / 1048576.0);
  }
  if (kept == 0) {
    return clt_fail(e, CLT_ERR_DEVICE,
                    "--devices %s: no device can hold model %s (one example needs %.0f MiB; the "
                    "largest has %.0f MiB); try a smaller model or --image-size",
                    spec, model->name, need / 1048576.0, largest);
  }
  *n = kept;
  return CLT_OK;
}

/* train_set_up's work; *was_frozen (allocated) gets a resumed checkpoint's frozen
 * layers. */
static int set_up(const clt_train_opts *o, const train_resume_file *resume, clt_data *data,
                  clt_model *model, clt_checkpoint *state, char *ckpt_path, size_t path_size,
                  clt_optimizer *opt, clt_device_list *devices, const clt_device **chosen,
                  int *nchosen, clt_report *rep, clt_trace **trace, int *lock_fd,
                  unsigned char **was_frozen, clt_err *e) {
  clt_cluster *c = o->cluster;
  clt_schedule schedule;
  clt_plateau plateau;
  int status = parse_lr_flags(o, &schedule, &plateau, e);
  if (status) return status;
  clt_wire wire;
  if ((status = clt_wire_parse(o->wire, "--wire", &wire, e))) return status;
  clt_early_stop given = {0};
  if (o->early_stopping &&
      (status = clt_early_stop_parse("--early-stopping", o->early_stopping, &given, e)))
    return status;
  if (clt_cluster_rank(c) == 0 && (status = check_outputs(o, e))) return status;
  if (clt_cluster_size(c) > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_ARG, "%d processes: cltrain handles up to %d", clt_cluster_size(c),
                    CLT_MAX_REPLICAS);
  }
  clt_augment aug = {0};
  if (o->augment && clt_augment_parse(o->augment, &aug, e)) return clt_wrap(e, "--augment");
  if (!o->resume && (status = choose_optimizer(o, NULL, NULL, opt, e))) return status;
  /* With --resume the flags in effect are partly the checkpoint's. */
  clt_train_opts eff = *o;
  if (o->resume) {
    status = resume_checkpoint(o, resume, ckpt_path, path_size, model, state, was_frozen, e);
    if (status) return status;
    resume_data_flags(o, ckpt_path, model, state, &eff, &aug);
    if ((status = resume_early_stop(o, ckpt_path, &given, &state->early_stop, e))) return status;
  } else {
    state->early_stop = given;
  }
  /* Early stopping watches data held out of training, never the test set. */
  const clt_early_stop *es = &state->early_stop;
  if (es->enabled && clt_monitor_is_validation(es->monitor) && !(eff.validation_split > 0)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--early-stopping monitor=%s needs validation data: give --validation-split F "
                    "(the test set is never monitored)",
                    clt_monitor_name(es->monitor));
  }
  if ((status = open_train_data(&eff, &aug, data, e))) return status;
  if ((status = setup_model(&eff, data, model, state, ckpt_path, e))) return status;
  if (!o->resume && (status = freeze_until(o, model, e))) return status;
  if (o->resume && (status = choose_optimizer(o, &state->optimizer, ckpt_path, opt, e)))
    return status;
  if ((status = choose_lr_control(o, &schedule, &plateau, data, o->resume ? ckpt_path : "the run",
                                  opt, &state->plateau, e)))
    return status;
  if (o->resume) note_freezing(o, model, *was_frozen, opt);
  state->optimizer = *opt; /* what the checkpoints record */
  if (!o->resume || !state->data.known || o->data_given) {
    record_data(&eff, &state->data);
  } else {
    /* The data opened from the recorded path, which stays as it is. */
    state->data.train_limit = eff.train_limit;
    state->data.test_limit = eff.test_limit;
    state->data.validation_split = eff.validation_split;
  }
  clt_augment_format(&data->spec.augment, state->data.augment, sizeof state->data.augment);
  state->data.image_size = clt_augment_has(&data->spec.augment, CLT_AUG_CROP)
                               ? data->spec.image_size
                               : 0;
  if ((status = clt_select_process_devices(o->devices, c, devices, chosen, nchosen, e)))
    return status;
  if ((status = skip_small_devices(o, model, chosen, nchosen, e))) return status;
  if (clt_cluster_rank(c) != 0) return CLT_OK;
  const int saves = o->checkpoint_every > 0 || es->enabled;
  if (saves && (status = clt_checkpoint_prepare_dir(o->checkpoint_dir, e))) return status;
  /* One writer per folder: another trainer's saves and --keep would undo this one's. */
  if (saves && (status = clt_checkpoint_lock(o->checkpoint_dir, lock_fd, e))) return status;
  /* A best that an earlier run recorded is not this run's. */
  if (saves && !o->resume && (status = clt_checkpoint_best_forget(o->checkpoint_dir, e)))
    return status;
  rep->log_path = o->log_path;
  if (o->log_path && !(rep->log = fopen(o->log_path, o->resume ? "a" : "w"))) {
    return clt_fail(e, CLT_ERR_IO, "%s: cannot open log for writing: %s", o->log_path,
                    strerror(errno));
  }
  /* Room for every span of the traced steps: a host phase or ring step a few
   * dozen times per replica, a kernel or copy per launch. */
  const int spans = (o->trace_steps + 1) * (*nchosen) * (4 * model->nlayers * 6 + 64) + 4096;
  if (o->trace_path && (status = clt_trace_open(o->trace_path, spans, trace, e))) return status;
  if (o->tensorboard_dir) {
    /* A new event file per run (a resumed one too), as Keras' callback writes. */
    status = clt_tb_open(o->tensorboard_dir, "train", &rep->tb_train, e);
    if (!status && data->ntest)
      status = clt_tb_open(o->tensorboard_dir, "validation", &rep->tb_validation, e);
    rep->tb_every = o->tensorboard_every;
  }
  return status;
}

/* Everything before the first step that each process does by itself: the
 * optimizer, data, model, devices and (process 0) the checkpoint folder and log. */
int train_set_up(const clt_train_opts *o, const train_resume_file *resume, clt_data *data,
                 clt_model *model, clt_checkpoint *state, char *ckpt_path, size_t path_size,
                 clt_optimizer *opt, clt_device_list *devices, const clt_device **chosen,
                 int *nchosen, clt_report *rep, clt_trace **trace, int *lock_fd, clt_err *e) {
  unsigned char *was_frozen = NULL;
  const int status = set_up(o, resume, data, model, state, ckpt_path, path_size, opt, devices,
                            chosen, nchosen, rep, trace, lock_fd, &was_frozen, e);
  free(was_frozen);
  return status;
}

int train_global_batch(const clt_train_opts *o, int recorded, int replicas, int *global,
                       clt_err *e) {
  const long per = (long)o->batch_per_replica * replicas;
  if (o->global_batch_given && o->batch_per_replica_given && per != o->global_batch) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--global-batch %d and --batch-per-replica %d disagree: %d x %d replica%s = "
                    "%ld (give one of the two)",
                    o->global_batch, o->batch_per_replica, o->batch_per_replica, replicas,
                    replicas == 1 ? "" : "s", per);
  }
  long g = per;
  if (o->global_batch_given) g = o->global_batch;
  else if (!o->batch_per_replica_given && o->resume && recorded > 0) g = recorded;
  /* Only a recorded one can exceed --global-batch's range. */
  if (g > 16777216) {
    return clt_fail(e, CLT_ERR_ARG,
                    "the checkpoint's global batch %ld is above 16777216: give --global-batch", g);
  }
  if (g < replicas) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s%ld: a global batch smaller than the run's %d replicas (each needs at "
                    "least one example)",
                    o->global_batch_given ? "--global-batch " : "the checkpoint's global batch ", g,
                    replicas);
  }
  *global = (int)g;
  return CLT_OK;
}

int train_batch_per_replica(int flag, int given, int recorded, int replicas, int *same) {
  int batch = flag;
  if (!given && recorded > 0 && replicas > 0)
    batch = recorded / replicas > 0 ? recorded / replicas : 1;
  *same = recorded <= 0 || (long)batch * replicas == recorded;
  return batch;
}

/* Starts the line "compiling kernels for device 0 (NAME) ..." due in a second. */
int train_compiling_notice(const clt_device *const *chosen, int n, clt_notice **out, clt_err *e) {
  char text[320];
  int len = snprintf(text, sizeof text, "cltrain: compiling kernels for device");
  for (int i = 0; i < n && len > 0 && (size_t)len < sizeof text; i++) {
    len += snprintf(text + len, sizeof text - (size_t)len, "%s %d (%s)",
                    i == 0       ? ""
                    : i == n - 1 ? " and"
                                 : ",",
                    chosen[i]->index, chosen[i]->name);
  }
  if (len > 0 && (size_t)len < sizeof text)
    snprintf(text + len, sizeof text - (size_t)len, " ... (once: the driver keeps them)");
  return clt_notice_start(1.0, stderr, text, out, e);
}
