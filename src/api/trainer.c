/* cltrain_trainer: a model mirrored on the chosen devices, driven a step (or a
 * part of one) at a time (src/dist/steps.c), with its checkpoints, evaluation,
 * prediction and ONNX export. The options mean what the train command's flags
 * of the same names mean (src/app/flags.c, src/app/train_setup.c). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"
#include "checkpoint.h"
#include "interrupt.h"
#include "npz.h"
#include "onnx.h"
#include "select.h"
#include "timing.h"
#include "trainer.h"

/* Where the custom loop stands in its step (cltrain.h: the parts' order). */
enum { PHASE_NONE, PHASE_FORWARD, PHASE_REDUCED };

struct cltrain_trainer {
  api_handle h;
  cltrain_ctx *ctx;
  clt_cluster *cluster; /* the run's processes, or NULL: this one alone (local=1) */
  clt_model *model;     /* a copy: the handle it came from may be freed */
  clt_trainer *t;
  clt_optimizer opt; /* the update's, its rate the schedule's or set_learning_rate's */
  uint64_t seed;
  long steps_done;
  int phase;
  /* The step in progress leaves its figures on the devices (no loss or correct
   * asked, one process): settle reads them at the next call that needs them. */
  int deferred;
  int batch_step; /* ... and it is of a batch in the caller's memory */
  long bad_step;  /* settle: the first of them whose update was non-finite (0: none) */
  /* A stepping call failed in a way that leaves the replicas out of step (an
   * aborted all-reduce): the message says so to every later stepping call. */
  int broken;
  char broken_msg[512];
  /* The epoch being stepped through, and its figures so far. */
  int epoch_active, epoch;
  double batch_losses, correct, t0, t1;
  long examples;
  int batches;
  /* What checkpoints record of the data last begun (unknown for memory datasets). */
  clt_checkpoint_data data;
  char *class_names; /* the data's, else the model's (or NULL) */
  char *keras_json;  /* the model file's text (or NULL) */
  float *flat;       /* model->flat_floats: packing and unpacking */
  float *grads;      /* model->grad_floats */
};

/* ---- options ------------------------------------------------------------------- */

static const char *const create_options[] = {
    "devices",           "batch-per-replica", "split",        "optimizer",   "lr",
    "momentum",          "nesterov",          "weight-decay", "lr-schedule", "seed",
    "allreduce-timeout", "check-replicas",    "local",        "wire",        NULL};

typedef struct trainer_opts {
  char devices[1024], split[256];
  long batch, nesterov, check_replicas, local;
  double timeout;
  uint64_t seed;
  clt_wire wire;
  clt_optimizer opt;
} trainer_opts;

static int read_flag(cltrain_ctx *ctx, const char *fn, const api_opts *o, const char *name,
                     long *out) {
  return api_opt_long(ctx, fn, o, name, 0, 1, out);
}

/* The optimizer, as the train command's choose_optimizer and parse_lr_flags make it. */
static int read_optimizer(cltrain_ctx *ctx, const char *fn, const api_opts *o, trainer_opts *to) {
  clt_optimizer_kind kind = CLT_OPT_ADAM;
  const char *name = api_opt(o, "optimizer");
  char kinds[64];
  if (name && !clt_optimizer_find(name, &kind)) {
    clt_optimizer_list(CLT_HP_COUNT, "or", kinds, sizeof kinds);
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option optimizer=%s: expected %s", name, kinds);
  }
  clt_optimizer *opt = &to->opt;
  *opt = clt_optimizer_defaults(kind);
  double lr = 0, momentum = opt->momentum, decay = 0;
  int status = api_opt_double(ctx, fn, o, "lr", 1e-12, 1e6, &lr);
  if (!status) status = api_opt_double(ctx, fn, o, "momentum", 0, 1, &momentum);
  if (!status) status = api_opt_double(ctx, fn, o, "weight-decay", 0, 1e6, &decay);
  if (!status) status = read_flag(ctx, fn, o, "nesterov", &to->nesterov);
  if (status) return status;
  const struct {
    int given;
    const char *option;
    clt_hyper h;
  } uses[] = {{api_opt(o, "momentum") != NULL, "momentum", CLT_HP_MOMENTUM},
              {to->nesterov != 0, "nesterov", CLT_HP_NESTEROV}};
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
    if (!uses[i].given || clt_optimizer_uses(kind, uses[i].h)) continue;
    clt_optimizer_list(uses[i].h, "and", kinds, sizeof kinds);
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option %s applies to optimizer %s, not %s",
                    uses[i].option, kinds, clt_optimizer_name(kind));
  }
  opt->momentum = momentum;
  opt->nesterov = (int)to->nesterov;
  opt->weight_decay = decay;
  if (opt->nesterov && opt->momentum == 0)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option nesterov=1 needs momentum above 0");
  if (lr > 0) opt->lr = lr;
  const char *schedule = api_opt(o, "lr-schedule");
  clt_err e = {0};
  if (schedule && clt_schedule_parse(schedule, "option lr-schedule", &opt->schedule, &e))
    return api_fail_err(ctx, fn, &e);
  if (opt->schedule.kind == CLT_SCHED_PIECEWISE) {
    if (lr > 0 && lr != opt->schedule.values[0]) {
      return api_fail(ctx, fn, CLTRAIN_ERR_ARG,
                      "option lr-schedule=piecewise takes its rates from values: lr=%g is not "
                      "values[0] %g (leave lr out)",
                      lr, opt->schedule.values[0]);
    }
    opt->lr = opt->schedule.values[0];
  }
  return CLTRAIN_OK;
}

static int read_options(cltrain_ctx *ctx, const char *fn, const char *text, trainer_opts *to) {
  memset(to, 0, sizeof *to);
  api_opts *o = malloc(sizeof *o);
  if (!o) return api_fail(ctx, fn, CLTRAIN_ERR_NOMEM, "out of host memory");
  to->batch = 64;
  to->timeout = CLT_RING_DEFAULT_TIMEOUT;
  to->seed = 42;
  int status = api_opts_parse(ctx, fn, text, create_options, o);
  if (!status) status = api_opt_long(ctx, fn, o, "batch-per-replica", 1, 65536, &to->batch);
  if (!status) status = api_opt_double(ctx, fn, o, "allreduce-timeout", 0, 1e6, &to->timeout);
  if (!status) status = read_flag(ctx, fn, o, "check-replicas", &to->check_replicas);
  if (!status) status = read_flag(ctx, fn, o, "local", &to->local);
  if (!status) status = read_optimizer(ctx, fn, o, to);
  const char *wire = api_opt(o, "wire");
  clt_err we = {0};
  if (!status && wire && clt_wire_parse(wire, "option wire", &to->wire, &we))
    status = api_fail_err(ctx, fn, &we);
  const char *seed = api_opt(o, "seed");
  if (!status && seed) {
    char *end = NULL;
    errno = 0;
    to->seed = strtoull(seed, &end, 10);
    if (!*seed || *seed == '-' || *seed == '+' || *end || errno)
      status = api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option seed=%s: expected a non-negative integer",
                        seed);
  }
  const char *devices = api_opt(o, "devices"), *split = api_opt(o, "split");
  snprintf(to->devices, sizeof to->devices, "%s", devices ? devices : "all");
  snprintf(to->split, sizeof to->split, "%s", split ? split : "auto");
  free(o);
  return status;
}

/* ---- creating and freeing -------------------------------------------------------- */

CLTRAIN_API void cltrain_trainer_free(cltrain_trainer **tp) {
  if (!tp || !*tp) return;
  cltrain_trainer *t = *tp;
  *tp = NULL;
  if (t->h.kind != API_TRAINER) return;
  t->h.kind = API_FREED;
  clt_trainer_destroy(t->t);
  if (t->model) clt_model_free(t->model);
  free(t->model);
  free(t->class_names);
  free(t->keras_json);
  free(t->flat);
  free(t->grads);
  free(t);
}

/* The run's replicas, every process's (collective under MPI). */
static int run_replicas(clt_cluster *c, int n, int *total, clt_err *e) {
  int counts[CLT_MAX_REPLICAS] = {0};
  *total = n;
  if (clt_cluster_size(c) <= 1) return CLT_OK;
  if (clt_cluster_size(c) > CLT_MAX_REPLICAS)
    return clt_fail(e, CLT_ERR_ARG, "%d processes: cltrain handles up to %d", clt_cluster_size(c),
                    CLT_MAX_REPLICAS);
  int status = clt_cluster_allgather(c, &n, sizeof n, counts, e);
  *total = 0;
  for (int r = 0; r < clt_cluster_size(c) && !status; r++) *total += counts[r];
  return status;
}

/* Every process must send gradients the same way (collective under MPI). */
static int same_wire(clt_cluster *c, clt_wire wire, clt_err *e) {
  int wires[CLT_MAX_REPLICAS] = {0}, mine = (int)wire;
  if (clt_cluster_size(c) <= 1) return CLT_OK;
  int status = clt_cluster_allgather(c, &mine, sizeof mine, wires, e);
  for (int r = 1; r < clt_cluster_size(c) && !status; r++) {
    if (wires[r] != wires[0]) {
      status = clt_fail(e, CLT_ERR_ARG,
                        "option wire: rank %d has %s and rank 0 %s: every process must give the "
                        "same",
                        r, clt_wire_name((clt_wire)wires[r]), clt_wire_name((clt_wire)wires[0]));
    }
  }
  return status;
}

/* Everything after the options: the devices, the internal trainer and its
 * starting state, process 0's broadcast to every process. */
static int set_up(cltrain_trainer *t, const cltrain_model *m, const trainer_opts *to, clt_err *e) {
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int n = 0, total = 0;
  int status = clt_select_devices(to->devices, t->cluster, &t->ctx->devices, m->model, chosen, &n,
                                  e);
  if ((status = clt_cluster_agree(t->cluster, status, e))) return status;
  if ((status = run_replicas(t->cluster, n, &total, e))) return status;
  clt_split_mode split;
  double weights[CLT_BALANCE_MAX];
  if ((status = clt_split_parse(to->split, total, &split, weights, e))) {
    clt_wrap(e, "option split");
    clt_cluster_known(t->cluster); /* the same option and count everywhere */
    return status;
  }
  clt_ring_set_default_timeout(to->timeout);
  clt_cluster_set_timeout(t->cluster, to->timeout);
  if ((status = clt_trainer_create_steps(t->model, chosen, n, (int)to->batch, split, weights,
                                         t->cluster, &t->t, e)))
    return status;
  clt_trainer_check_replicas(t->t, (int)to->check_replicas);
  if ((status = same_wire(t->cluster, to->wire, e))) return status;
  if ((status = clt_trainer_set_wire(t->t, to->wire, e))) return status;
  memcpy(t->flat, m->weights, t->model->flat_floats * sizeof *t->flat);
  status = clt_cluster_bcast(t->cluster, t->flat, t->model->flat_floats * sizeof *t->flat, e);
  if (!status) status = clt_trainer_set_state(t->t, t->flat, NULL, NULL, e);
  return clt_cluster_agree(t->cluster, status, e);
}

CLTRAIN_API int cltrain_trainer_create(cltrain_ctx *ctx, const cltrain_model *m,
                                       const char *options, cltrain_trainer **out) {
  int status = api_check(ctx, API_CTX, __func__);
  if (!status) status = api_check(m, API_MODEL, __func__);
  if (status) return status;
  if (!out) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  trainer_opts to;
  if ((status = read_options(ctx, __func__, options, &to))) return status;
  cltrain_trainer *t = calloc(1, sizeof *t);
  if (t) {
    t->model = calloc(1, sizeof *t->model);
    t->flat = t->model ? malloc(m->model->flat_floats * sizeof *t->flat) : NULL;
    t->grads = malloc((m->model->grad_floats ? m->model->grad_floats : 1) * sizeof *t->grads);
  }
  if (!t || !t->model || !t->flat || !t->grads) {
    if (t) {
      if (t->model) clt_model_free(t->model);
      free(t->model);
      free(t->flat);
      free(t->grads);
    }
    free(t);
    return api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  }
  t->h.kind = API_TRAINER;
  t->ctx = ctx;
  t->cluster = to.local ? NULL : ctx->cluster;
  if (clt_model_copy(t->model, m->model, &(clt_err){0})) {
    cltrain_trainer_free(&t);
    return api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  }
  if ((m->keras_json && !(t->keras_json = strdup(m->keras_json))) ||
      (m->class_names && !(t->class_names = strdup(m->class_names)))) {
    cltrain_trainer_free(&t);
    return api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  }
  t->opt = to.opt;
  t->seed = to.seed;
  clt_err e = {0};
  if (set_up(t, m, &to, &e)) {
    status = api_fail_err(ctx, __func__, &e);
    cltrain_trainer_free(&t);
    return status;
  }
  *out = t;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_replicas(const cltrain_trainer *t) {
  if (api_check(t, API_TRAINER, __func__)) return -1;
  return clt_trainer_total_replicas(t->t);
}

CLTRAIN_API int cltrain_trainer_global_batch(const cltrain_trainer *t) {
  if (api_check(t, API_TRAINER, __func__)) return -1;
  return clt_trainer_global_batch(t->t);
}

/* ---- stepping -------------------------------------------------------------------- */

/* A stepping call's engine failure: recorded, and the trainer broken unless the
 * failure left the replicas in step (a non-finite figure, a refused argument). */
static int step_failed(cltrain_trainer *t, const char *fn, const clt_err *e) {
  const int status = api_fail_err(t, fn, e);
  if (e->code != CLT_ERR_NUMERIC && e->code != CLT_ERR_ARG) {
    t->broken = 1;
    snprintf(t->broken_msg, sizeof t->broken_msg, "%.500s", t->h.msg);
  }
  return status;
}

/* What every stepping call checks first: the trainer is in step, and no stop
 * was asked (in any process: every one answers alike). */
static int may_step(cltrain_trainer *t, const char *fn) {
  if (t->broken)
    return api_fail(t, fn, CLTRAIN_ERR_STATE,
                    "the trainer cannot step after an earlier failure (%s)", t->broken_msg);
  int asked = clt_interrupt_signal() != 0;
  clt_err e = {0};
  if (clt_cluster_any(t->cluster, &asked, &e)) return step_failed(t, fn, &e);
  if (asked)
    return api_fail(t, fn, CLTRAIN_ERR_STOPPED,
                    "stopped after %ld step%s: a stop was requested (cltrain_request_stop or a "
                    "signal)",
                    t->steps_done, t->steps_done == 1 ? "" : "s");
  return CLTRAIN_OK;
}

/* The batch's figures into the epoch's, and the caller's. */
static void count_batch(cltrain_trainer *t, const clt_step_result *r, double *loss, int *correct) {
  const double mean = r->examples ? r->loss_sum / r->examples : 0;
  t->batch_losses += mean;
  t->correct += r->correct;
  t->examples += r->examples;
  t->batches++;
  t->t1 = clt_now_seconds();
  if (loss) *loss = mean;
  if (correct) *correct = (int)r->correct;
}

/* A step's non-finite loss or gradient, reported by call fn. */
static int numeric(cltrain_trainer *t, const char *fn, long step) {
  return api_fail(t, fn, CLTRAIN_ERR_NUMERIC,
                  "step %ld: non-finite loss or gradient (the parameters are no longer usable: "
                  "restore a checkpoint; try a lower learning rate)",
                  step);
}

/* settle's: a deferred step's figures into the epoch's, its update's verdict noted. */
static void settled(void *ctx, long step, int forward, int updated, const clt_step_result *r) {
  cltrain_trainer *t = ctx;
  if (forward) count_batch(t, r, NULL, NULL);
  if (updated && r->bad && !t->bad_step) t->bad_step = step;
}

/* Reads the figures the steps run without them left on the devices (waiting for
 * those steps), before call fn goes on: the first non-finite update among them
 * is fn's error. */
static int settle(cltrain_trainer *t, const char *fn) {
  clt_err e = {0};
  t->bad_step = 0;
  if (clt_trainer_settle(t->t, settled, t, &e)) return step_failed(t, fn, &e);
  return t->bad_step ? numeric(t, fn, t->bad_step) : CLTRAIN_OK;
}

/* A step leaves its figures unread when the caller asks for none, in one process
 * (across processes the figures are summed by a collective, which every process
 * runs at the step). */
static int defers(const cltrain_trainer *t, const double *loss, const int *correct) {
  return !loss && !correct && clt_cluster_size(t->cluster) <= 1;
}

/* A dataset part's batch source, NULL (recorded as an error) where it has none. */
static clt_source *part_source(cltrain_trainer *t, const char *fn, cltrain_dataset *d,
                               cltrain_part part) {
  if (part != CLTRAIN_TRAIN && part != CLTRAIN_TEST) {
    api_fail(t, fn, CLTRAIN_ERR_ARG, "part %d: expected CLTRAIN_TRAIN or CLTRAIN_TEST", (int)part);
    return NULL;
  }
  clt_source *s = api_dataset_source(d, part);
  if (!s)
    api_fail(t, fn, CLTRAIN_ERR_ARG, "the dataset has no %s part",
             part == CLTRAIN_TRAIN ? "training" : "test");
  return s;
}

/* A dataset part feeds one trainer at a time (its images held on its devices). */
static int not_elsewhere(cltrain_trainer *t, const char *fn, clt_source *src, cltrain_part part) {
  if (!clt_source_attached(src) || src == clt_trainer_source(t->t, 0) ||
      src == clt_trainer_source(t->t, 1))
    return CLTRAIN_OK;
  return api_fail(t, fn, CLTRAIN_ERR_STATE,
                  "the dataset's %s part is in use by another trainer (until its epoch's last "
                  "step, or until it is freed)",
                  part == CLTRAIN_TRAIN ? "training" : "test");
}

/* What a checkpoint records of data folder d: as the train command records --data. */
static void record_data(cltrain_trainer *t, const cltrain_dataset *d) {
  clt_checkpoint_data *rec = &t->data;
  memset(rec, 0, sizeof *rec);
  if (d->memory || !d->data.spec.dir) return;
  char resolved[PATH_MAX];
  const char *dir = realpath(d->data.spec.dir, resolved) ? resolved : d->data.spec.dir;
  char *names = NULL;
  clt_err ignored;
  if (!clt_data_class_names(&d->data, &names, &ignored) && names) {
    free(t->class_names);
    t->class_names = names;
  }
  if (strlen(dir) >= sizeof rec->path || strpbrk(dir, "\n\r")) return;
  rec->known = 1;
  snprintf(rec->path, sizeof rec->path, "%s", dir);
  rec->train_limit = d->data.spec.train_limit;
  rec->test_limit = d->data.spec.test_limit;
  rec->validation_split = d->data.spec.validation_split;
  clt_augment_format(&d->data.spec.augment, rec->augment, sizeof rec->augment);
  rec->image_size = clt_augment_has(&d->data.spec.augment, CLT_AUG_CROP) ? d->data.spec.image_size
                                                                         : 0;
}

CLTRAIN_API int cltrain_trainer_begin_epoch(cltrain_trainer *t, cltrain_dataset *d,
                                            cltrain_part part, int epoch, int *steps) {
  int status = api_check(t, API_TRAINER, __func__);
  if (!status) status = api_check(d, API_DATASET, __func__);
  if (status) return status;
  if (epoch < 0)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "epoch %d: expected 0 or more", epoch);
  if (t->broken)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "the trainer cannot step after an earlier failure (%s)", t->broken_msg);
  clt_source *src = part_source(t, __func__, d, part);
  if (!src) return CLTRAIN_ERR_ARG;
  if ((status = not_elsewhere(t, __func__, src, part)) || (status = settle(t, __func__)))
    return status;
  clt_err e = {0};
  int n = 0;
  t->epoch_active = 0;
  t->phase = PHASE_NONE;
  if (clt_trainer_end_steps(t->t, &e) || clt_trainer_use_source(t->t, 0, src, &e) ||
      clt_trainer_begin_steps(t->t, t->seed, epoch, &n, &e))
    return e.code == CLT_ERR_ARG ? api_fail_err(t, __func__, &e) : step_failed(t, __func__, &e);
  record_data(t, d);
  t->data.global_batch = clt_trainer_global_batch(t->t);
  t->epoch_active = 1;
  t->epoch = epoch;
  t->batch_losses = t->correct = 0;
  t->examples = 0;
  t->batches = 0;
  t->t0 = t->t1 = clt_now_seconds();
  if (steps) *steps = n;
  return CLTRAIN_OK;
}

/* The epoch's next batch exists, or why not. */
static int batch_left(cltrain_trainer *t, const char *fn) {
  if (!t->epoch_active)
    return api_fail(t, fn, CLTRAIN_ERR_STATE, "no epoch begun (cltrain_trainer_begin_epoch)");
  if (clt_trainer_steps_left(t->t) == 0)
    return api_fail(t, fn, CLTRAIN_ERR_STATE, "epoch %d has no batch left", t->epoch);
  return CLTRAIN_OK;
}

/* After a step's update: an epoch whose last step ran lets go of its dataset
 * (its batch_left says why no step is left). */
static void after_update(cltrain_trainer *t) {
  if (!t->epoch_active || clt_trainer_steps_left(t->t) > 0) return;
  clt_err ignored;
  clt_trainer_use_source(t->t, 0, NULL, &ignored);
}

/* What a step of the epoch checks first: a live trainer in step, a batch left,
 * no stop asked; *defer gets whether its figures stay on the devices. Figures
 * asked (or a caller's batch's left unread): the earlier steps' are read first. */
static int epoch_step_start(cltrain_trainer *t, const char *fn, const double *loss,
                            const int *correct, int *defer) {
  int status = api_check(t, API_TRAINER, fn);
  if (!status) status = batch_left(t, fn);
  if (!status) status = may_step(t, fn);
  if (status) return status;
  *defer = defers(t, loss, correct);
  return !*defer || t->batch_step ? settle(t, fn) : CLTRAIN_OK;
}

/* A forward and backward pass has run (of a caller's batch: batch_step): the
 * all-reduce may follow, and the figures asked are counted. */
static int forwarded(cltrain_trainer *t, const clt_step_result *r, int defer, int batch_step,
                     double *loss, int *correct) {
  t->phase = PHASE_FORWARD;
  t->deferred = defer;
  t->batch_step = batch_step;
  if (!defer) count_batch(t, r, loss, correct);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_forward_backward(cltrain_trainer *t, double *loss, int *correct) {
  int defer = 0;
  const int status = epoch_step_start(t, __func__, loss, correct, &defer);
  if (status) return status;
  clt_step_result r = {0};
  clt_err e = {0};
  t->phase = PHASE_NONE;
  if (clt_trainer_forward(t->t, NULL, t->steps_done, defer ? NULL : &r, &e))
    return step_failed(t, __func__, &e);
  return forwarded(t, &r, defer, 0, loss, correct);
}

CLTRAIN_API int cltrain_trainer_forward_backward_batch(cltrain_trainer *t, const void *images,
                                                       cltrain_format format, const int32_t *labels,
                                                       int count, double *loss, int *correct) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  const int global = clt_trainer_global_batch(t->t);
  if (!images || !labels)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "the %s are NULL", images ? "labels" : "images");
  if (format != CLTRAIN_U8 && format != CLTRAIN_F32)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "format %d: expected CLTRAIN_U8 or CLTRAIN_F32",
                    (int)format);
  if (count < 1 || count > global)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG,
                    "a batch of %d examples: expected 1 to the global batch, %d", count, global);
  for (int i = 0; i < count; i++) {
    if (labels[i] < 0 || labels[i] >= t->model->classes)
      return api_fail(t, __func__, CLTRAIN_ERR_ARG, "labels[%d] = %d: expected 0 to %d", i,
                      (int)labels[i], t->model->classes - 1);
  }
  /* The batch's pass reuses the metric slots: every earlier step's figures first. */
  if ((status = may_step(t, __func__)) || (status = settle(t, __func__))) return status;
  const int defer = defers(t, loss, correct);
  const clt_host_batch b = {images, format == CLTRAIN_F32, labels, count};
  clt_step_result r = {0};
  clt_err e = {0};
  t->phase = PHASE_NONE;
  if (clt_trainer_forward(t->t, &b, t->steps_done, defer ? NULL : &r, &e))
    return step_failed(t, __func__, &e);
  return forwarded(t, &r, defer, 1, loss, correct);
}

CLTRAIN_API int cltrain_trainer_allreduce(cltrain_trainer *t) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (t->broken)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "the trainer cannot step after an earlier failure (%s)", t->broken_msg);
  if (t->phase != PHASE_FORWARD)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "no cltrain_trainer_forward_backward since the last all-reduce");
  clt_err e = {0};
  if (clt_trainer_reduce(t->t, &e)) return step_failed(t, __func__, &e);
  t->phase = PHASE_REDUCED;
  return CLTRAIN_OK;
}

/* A step's update ran: the count advances; a non-finite loss or gradient is an
 * error, now or (r NULL: a deferred step) when the figures are read, which the
 * epoch's last step and a caller's batch (whose pass ends) do at once. */
static int updated(cltrain_trainer *t, const char *fn, const clt_step_result *r) {
  t->steps_done++;
  t->phase = PHASE_NONE;
  after_update(t);
  if (r) return r->bad ? numeric(t, fn, t->steps_done) : CLTRAIN_OK;
  return t->batch_step || clt_trainer_steps_left(t->t) == 0 ? settle(t, fn) : CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_apply(cltrain_trainer *t) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (t->broken)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "the trainer cannot step after an earlier failure (%s)", t->broken_msg);
  if (t->phase != PHASE_REDUCED)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "no cltrain_trainer_allreduce since the last forward_backward");
  clt_step_result r = {0};
  clt_err e = {0};
  if (clt_trainer_update(t->t, &t->opt, t->steps_done, t->deferred ? NULL : &r, &e))
    return step_failed(t, __func__, &e);
  return updated(t, __func__, t->deferred ? NULL : &r);
}

CLTRAIN_API int cltrain_trainer_step(cltrain_trainer *t, double *loss, int *correct) {
  int defer = 0;
  const int status = epoch_step_start(t, __func__, loss, correct, &defer);
  if (status) return status;
  clt_step_result r = {0};
  clt_err e = {0};
  t->phase = PHASE_NONE;
  t->deferred = defer;
  t->batch_step = 0;
  if (clt_trainer_one_step(t->t, &t->opt, t->steps_done, defer ? NULL : &r, &e))
    return step_failed(t, __func__, &e);
  if (defer) return updated(t, __func__, NULL);
  count_batch(t, &r, loss, correct);
  return updated(t, __func__, &r);
}

/* ---- gradients, parameters, learning rate, metrics --------------------------------- */

CLTRAIN_API size_t cltrain_trainer_floats(const cltrain_trainer *t) {
  if (api_check(t, API_TRAINER, __func__)) return 0;
  return t->model->param_count;
}

/* Between the flat layout (flat_floats, or the gradient's grad_floats: `limit`)
 * and the caller's array, the layers' parameters in order (as a checkpoint lists
 * them); values past limit read as zeros and are not written. */
static void pack(const clt_model *m, const float *flat, size_t limit, float *out) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    for (int p = 0; p < l->nparams; p++) {
      const clt_param *q = &l->params[p];
      if (q->offset + q->size <= limit) memcpy(out + at, flat + q->offset, q->size * sizeof *out);
      else memset(out + at, 0, q->size * sizeof *out);
      at += q->size;
    }
  }
}

static void unpack(const clt_model *m, const float *in, size_t limit, float *flat) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    for (int p = 0; p < l->nparams; p++) {
      const clt_param *q = &l->params[p];
      if (q->offset + q->size <= limit) memcpy(flat + q->offset, in + at, q->size * sizeof *in);
      at += q->size;
    }
  }
}

/* The checks of the get and set functions. */
static int array_ok(cltrain_trainer *t, const char *fn, const void *a, size_t n) {
  int status = api_check(t, API_TRAINER, fn);
  if (status) return status;
  if (!a) return api_fail(t, fn, CLTRAIN_ERR_ARG, "the array is NULL");
  if (n != t->model->param_count)
    return api_fail(t, fn, CLTRAIN_ERR_ARG, "n = %zu: the trainer's floats are %zu", n,
                    t->model->param_count);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_get_gradients(cltrain_trainer *t, float *out, size_t n) {
  int status = array_ok(t, __func__, out, n);
  if (!status) status = settle(t, __func__);
  if (status) return status;
  clt_err e = {0};
  if (clt_trainer_get_grads(t->t, t->grads, &e)) return api_fail_err(t, __func__, &e);
  pack(t->model, t->grads, t->model->grad_floats, out);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_set_gradients(cltrain_trainer *t, const float *in, size_t n) {
  int status = array_ok(t, __func__, in, n);
  if (status) return status;
  if (t->phase != PHASE_REDUCED)
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "gradients are set between cltrain_trainer_allreduce and apply");
  if ((status = settle(t, __func__))) return status;
  clt_err e = {0};
  memset(t->grads, 0, t->model->grad_floats * sizeof *t->grads);
  unpack(t->model, in, t->model->grad_floats, t->grads);
  if (clt_trainer_set_grads(t->t, t->grads, &e)) return api_fail_err(t, __func__, &e);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_get_params(cltrain_trainer *t, float *out, size_t n) {
  int status = array_ok(t, __func__, out, n);
  if (!status) status = settle(t, __func__);
  if (status) return status;
  clt_err e = {0};
  if (clt_trainer_get_state(t->t, t->flat, NULL, NULL, &e)) return api_fail_err(t, __func__, &e);
  pack(t->model, t->flat, t->model->flat_floats, out);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_set_params(cltrain_trainer *t, const float *in, size_t n) {
  int status = array_ok(t, __func__, in, n);
  if (status) return status;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(in[i]))
      return api_fail(t, __func__, CLTRAIN_ERR_ARG, "in[%zu] = %g: not a finite number", i,
                      (double)in[i]);
  }
  if ((status = settle(t, __func__))) return status;
  clt_err e = {0};
  memset(t->flat, 0, t->model->flat_floats * sizeof *t->flat);
  unpack(t->model, in, t->model->flat_floats, t->flat);
  if (clt_trainer_set_params(t->t, t->flat, &e)) return api_fail_err(t, __func__, &e);
  return CLTRAIN_OK;
}

CLTRAIN_API long cltrain_trainer_steps_done(const cltrain_trainer *t) {
  if (api_check(t, API_TRAINER, __func__)) return -1;
  return t->steps_done;
}

CLTRAIN_API double cltrain_trainer_learning_rate(const cltrain_trainer *t) {
  if (api_check(t, API_TRAINER, __func__)) return -1;
  return clt_optimizer_rate(&t->opt, t->steps_done + 1);
}

CLTRAIN_API int cltrain_trainer_set_learning_rate(cltrain_trainer *t, double lr) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (!(lr >= 1e-12 && lr <= 1e6))
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "learning rate %g: expected [1e-12, 1e6]", lr);
  /* A fixed rate from now on: the schedule (if any) no longer applies. */
  memset(&t->opt.schedule, 0, sizeof t->opt.schedule);
  t->opt.lr = lr;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_metrics(const cltrain_trainer *t, double *loss, double *accuracy,
                                        long *examples, double *images_per_second) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  /* The figures of steps run without them are read first: the handle caches
   * what the devices hold, so reading them leaves it as the caller sees it. */
  if ((status = settle((cltrain_trainer *)t, __func__))) return status;
  const double wall = t->t1 - t->t0;
  if (loss) *loss = t->batches ? t->batch_losses / t->batches : 0;
  if (accuracy) *accuracy = t->examples ? t->correct / (double)t->examples : 0;
  if (examples) *examples = t->examples;
  if (images_per_second) *images_per_second = wall > 0 ? (double)t->examples / wall : 0;
  return CLTRAIN_OK;
}

/* ---- evaluation and prediction ------------------------------------------------------ */

CLTRAIN_API int cltrain_trainer_evaluate(cltrain_trainer *t, cltrain_dataset *d, cltrain_part part,
                                         double *loss, double *accuracy) {
  int status = api_check(t, API_TRAINER, __func__);
  if (!status) status = api_check(d, API_DATASET, __func__);
  if (status) return status;
  clt_source *src = part_source(t, __func__, d, part);
  if (!src) return CLTRAIN_ERR_ARG;
  if (t->epoch_active && src == clt_trainer_source(t->t, 0))
    return api_fail(t, __func__, CLTRAIN_ERR_STATE,
                    "the dataset part of epoch %d, which is still being stepped through", t->epoch);
  if ((status = not_elsewhere(t, __func__, src, part)) || (status = settle(t, __func__)))
    return status;
  clt_err e = {0};
  double l = 0, acc = 0;
  status = clt_trainer_use_source(t->t, 1, src, &e);
  if (!status) status = clt_trainer_evaluate(t->t, &l, &acc, &e);
  clt_err ignored;
  clt_trainer_use_source(t->t, 1, NULL, &ignored);
  if (status)
    return e.code == CLT_ERR_ARG ? api_fail_err(t, __func__, &e) : step_failed(t, __func__, &e);
  if (loss) *loss = l;
  if (accuracy) *accuracy = acc;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_predict(cltrain_trainer *t, const void *images,
                                        cltrain_format format, int count, float *logits) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (!images || !logits)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "the %s are NULL", images ? "logits" : "images");
  if (format != CLTRAIN_U8 && format != CLTRAIN_F32)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "format %d: expected CLTRAIN_U8 or CLTRAIN_F32",
                    (int)format);
  if (count < 1)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "count %d: expected 1 or more", count);
  if ((status = settle(t, __func__))) return status;
  const clt_host_batch b = {images, format == CLTRAIN_F32, NULL, count};
  clt_err e = {0};
  if (clt_trainer_predict_host(t->t, &b, logits, &e)) return step_failed(t, __func__, &e);
  return CLTRAIN_OK;
}

/* ---- checkpoints and export ---------------------------------------------------------- */

/* The state a save writes: the parameters and slots read back, with the records. */
static int fill_state(cltrain_trainer *t, int epoch, clt_checkpoint *st, clt_err *e) {
  const size_t bytes = t->model->flat_floats * sizeof(float);
  st->params = malloc(bytes);
  st->opt_state[0] = calloc(1, bytes);
  st->opt_state[1] = calloc(1, bytes);
  if (!st->params || !st->opt_state[0] || !st->opt_state[1])
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  st->optimizer = t->opt;
  st->iterations = t->steps_done;
  st->epoch = epoch;
  st->seed = t->seed;
  st->data = t->data;
  st->data.global_batch = clt_trainer_global_batch(t->t);
  if ((t->class_names && !(st->class_names = strdup(t->class_names))) ||
      (t->keras_json && !(st->keras_json = strdup(t->keras_json))))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  return clt_trainer_get_state(t->t, st->params, st->opt_state[0], st->opt_state[1], e);
}

CLTRAIN_API int cltrain_trainer_save(cltrain_trainer *t, const char *dir, int epoch, int keep) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (!dir || !*dir) return api_fail(t, __func__, CLTRAIN_ERR_ARG, "no folder given");
  if (epoch < 0 || keep < 0)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "%s %d: expected 0 or more",
                    epoch < 0 ? "epoch" : "keep", epoch < 0 ? epoch : keep);
  if ((status = settle(t, __func__))) return status;
  clt_checkpoint st = {0};
  clt_err e = {0};
  int fd = -1;
  char written[4096];
  status = fill_state(t, epoch, &st, &e);
  if (!status && clt_cluster_rank(t->cluster) == 0) {
    /* One writer per folder, as the train command's. */
    status = clt_checkpoint_prepare_dir(dir, &e);
    if (!status) status = clt_checkpoint_lock(dir, &fd, &e);
    if (!status)
      status = clt_checkpoint_save(dir, keep, t->model, &st, written, sizeof written, &e);
    clt_checkpoint_unlock(fd);
  }
  clt_checkpoint_free(&st);
  if (clt_cluster_agree(t->cluster, status, &e)) return api_fail_err(t, __func__, &e);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_restore(cltrain_trainer *t, const char *checkpoint) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (!checkpoint || !*checkpoint)
    return api_fail(t, __func__, CLTRAIN_ERR_ARG, "no checkpoint given");
  if ((status = settle(t, __func__))) return status;
  char path[4096];
  clt_checkpoint st = {0};
  clt_err e = {0};
  status = clt_checkpoint_resolve(checkpoint, path, sizeof path, &e);
  if (!status) status = clt_checkpoint_load(path, t->model, 1, &st, &e);
  if (!status && st.optimizer.lr > 0 && st.optimizer.kind != t->opt.kind) {
    status = clt_fail(&e, CLT_ERR_ARG, "%s was trained with optimizer %s; the trainer's is %s",
                      path, clt_optimizer_name(st.optimizer.kind), clt_optimizer_name(t->opt.kind));
  }
  status = clt_cluster_agree(t->cluster, status, &e);
  /* Process 0's state in every process, as the train command's --resume. */
  const size_t bytes = t->model->flat_floats * sizeof(float);
  if (!status) status = clt_cluster_bcast(t->cluster, st.params, bytes, &e);
  for (int k = 0; k < CLT_OPT_SLOTS && !status; k++)
    status = clt_cluster_bcast(t->cluster, st.opt_state[k], bytes, &e);
  if (!status)
    status = clt_trainer_set_state(t->t, st.params, st.opt_state[0], st.opt_state[1], &e);
  if (!status) {
    t->steps_done = (long)st.iterations;
    t->phase = PHASE_NONE;
  }
  clt_checkpoint_free(&st);
  if (status)
    return e.code == CLT_ERR_DEVICE ? step_failed(t, __func__, &e) : api_fail_err(t, __func__, &e);
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_trainer_export_onnx(cltrain_trainer *t, const char *path) {
  int status = api_check(t, API_TRAINER, __func__);
  if (status) return status;
  if (!path || !*path) return api_fail(t, __func__, CLTRAIN_ERR_ARG, "no path given");
  if ((status = settle(t, __func__))) return status;
  clt_err e = {0};
  const clt_onnx_info info = {.class_names = t->class_names,
                              .class_names_source = t->class_names
                                                        ? "the photo folder's class subfolders, "
                                                          "sorted by byte value"
                                                        : NULL,
                              .augment = t->data.augment[0] ? t->data.augment : NULL,
                              .decoded_size = t->data.image_size};
  status = clt_trainer_get_state(t->t, t->flat, NULL, NULL, &e);
  if (!status) status = clt_onnx_export_log(t->model, t->flat, &info, path, NULL, NULL, &e);
  if (status) return api_fail_err(t, __func__, &e);
  return CLTRAIN_OK;
}
