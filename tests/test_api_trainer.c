/* The public API's trainer (src/api/trainer.c) on two PoCL devices: the first
 * steps give `cltrain train`'s parameters bit for bit (the fast path and the
 * three parts alike), a batch in the caller's memory equals the epoch's same
 * batch, the parts' order and bad arguments are refused naming the function,
 * checkpoints load in `cltrain eval` and `cltrain export` and restore, predict
 * agrees with evaluate, steps asked for no figures give the same figures when
 * read later (a non-finite one reported then), and a stop request stops the
 * stepping calls. With --stall: a stalled replica is reported (CLTRAIN_FAULT).
 * argv: the cltrain binary, the Fashion-MNIST folder, a scratch folder. With
 * --bench N [B] (after them): images/s of N epochs of 2048 examples through
 * cltrain_trainer_step beside `cltrain train`'s, at B examples per replica
 * (default 64). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_impl.h"
#include "check.h"
#include "checkpoint.h"
#include "idx.h"
#include "rng.h"
#include "timing.h"

static const char *cltrain, *data_dir, *scratch;

/* ---- the handles ------------------------------------------------------------------ */

static cltrain_ctx *open_ctx(void) {
  cltrain_ctx *c = NULL;
  if (cltrain_open(NULL, &c)) {
    fprintf(stderr, "%s\n", cltrain_errmsg(NULL));
    exit(1);
  }
  return c;
}

static cltrain_dataset *open_data(cltrain_ctx *ctx, long train_limit, long test_limit) {
  cltrain_dataset *d = NULL;
  char opts[128];
  snprintf(opts, sizeof opts, "train-limit=%ld test-limit=%ld", train_limit, test_limit);
  if (cltrain_dataset_open(ctx, data_dir, opts, &d)) {
    fprintf(stderr, "%s\n", cltrain_errmsg(ctx));
    exit(1);
  }
  return d;
}

static void free_data(cltrain_dataset *d) { cltrain_dataset_free(&d); }

/* A model for 28x28x1 images of 10 classes with its starting weights of `seed`:
 * built-in name, or a description. */
static cltrain_model *make_model(cltrain_ctx *ctx, const char *name, uint64_t seed) {
  cltrain_model *m = NULL;
  char opts[128];
  snprintf(opts, sizeof opts, "input=28x28x1 classes=10 seed=%llu", (unsigned long long)seed);
  if (cltrain_model_create(ctx, name, NULL, opts, &m)) {
    fprintf(stderr, "%s\n", cltrain_errmsg(ctx));
    exit(1);
  }
  return m;
}

static void free_model(cltrain_model *m) { cltrain_model_free(&m); }

/* ---- helpers ---------------------------------------------------------------------- */

static int starts(const char *msg, const char *fn) { return strncmp(msg, fn, strlen(fn)) == 0; }

static int run(const char *cmd) {
  const int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The parameters of checkpoint path, packed as cltrain_trainer_get_params packs them. */
static float *checkpoint_params(const cltrain_model *m, const char *path, size_t n) {
  clt_checkpoint st = {0};
  clt_err e = {0};
  char file[4096];
  if (clt_checkpoint_resolve(path, file, sizeof file, &e) ||
      clt_checkpoint_load(file, m->model, 0, &st, &e)) {
    fprintf(stderr, "%s: %s\n", path, e.msg);
    return NULL;
  }
  float *out = malloc(n * sizeof *out);
  size_t at = 0;
  for (int i = 0; i < m->model->nlayers; i++) {
    const clt_layer *l = &m->model->layers[i];
    for (int p = 0; p < l->nparams; p++) {
      memcpy(out + at, st.params + l->params[p].offset, l->params[p].size * sizeof *out);
      at += l->params[p].size;
    }
  }
  clt_checkpoint_free(&st);
  if (at == n) return out;
  free(out);
  return NULL;
}

static float *params_of(cltrain_trainer *t) {
  const size_t n = cltrain_trainer_floats(t);
  float *p = malloc(n * sizeof *p);
  if (cltrain_trainer_get_params(t, p, n)) {
    free(p);
    return NULL;
  }
  return p;
}

static int same_bits(const float *a, const float *b, size_t n) {
  return a && b && memcmp(a, b, n * sizeof *a) == 0;
}

/* ---- the checks -------------------------------------------------------------------- */

static const char *const equal_opts = "devices=all split=equal batch-per-replica=32 seed=42";

/* `cltrain train` for one epoch of 128 examples (2 global batches on 2 devices)
 * against the API's 2 steps, by the fast path and by the parts. */
static void same_as_command(cltrain_ctx *ctx, cltrain_model *m) {
  char cmd[8192], dir[4096];
  snprintf(dir, sizeof dir, "%s/command", scratch);
  snprintf(cmd, sizeof cmd,
           "%s train --data %s --epochs 1 --train-limit 128 --test-limit 64 --batch-per-replica 32 "
           "--split equal --seed 42 --checkpoint-every 1 --checkpoint-dir %s >/dev/null",
           cltrain, data_dir, dir);
  check(run(cmd) == 0, "cltrain train runs (%s)", cmd);
  cltrain_dataset *d = open_data(ctx, 128, 64);
  const size_t n = m->model->param_count;
  float *want = checkpoint_params(m, dir, n);
  check(want != NULL, "the command's checkpoint loads");
  for (int parts = 0; parts < 2; parts++) {
    cltrain_trainer *t = NULL;
    int steps = 0, status = cltrain_trainer_create(ctx, m, equal_opts, &t);
    check(status == CLTRAIN_OK, "trainer created (%s)", cltrain_errmsg(ctx));
    if (status) continue;
    check(cltrain_trainer_replicas(t) == 2 && cltrain_trainer_global_batch(t) == 64,
          "2 replicas, global batch 64");
    check(cltrain_trainer_floats(t) == n, "floats: the model's parameter count");
    status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, &steps);
    check(status == CLTRAIN_OK && steps == 2, "epoch 0 begun: 2 steps (%s)", cltrain_errmsg(t));
    double losses[2] = {0};
    int correct[2] = {0};
    for (int s = 0; s < 2 && !status; s++) {
      if (parts) {
        status = cltrain_trainer_forward_backward(t, &losses[s], &correct[s]);
        if (!status) status = cltrain_trainer_allreduce(t);
        if (!status) status = cltrain_trainer_apply(t);
      } else {
        status = cltrain_trainer_step(t, &losses[s], &correct[s]);
      }
    }
    check(status == CLTRAIN_OK, "%s: 2 steps (%s)", parts ? "parts" : "step", cltrain_errmsg(t));
    float *got = params_of(t);
    check(same_bits(got, want, n), "%s: parameters after 2 steps equal cltrain train's bit for bit",
          parts ? "forward_backward + allreduce + apply" : "cltrain_trainer_step");
    free(got);
    check(cltrain_trainer_steps_done(t) == 2, "steps_done 2");
    double loss = 0, acc = 0, ips = 0;
    long examples = 0;
    cltrain_trainer_metrics(t, &loss, &acc, &examples, &ips);
    check(examples == 128 && fabs(loss - (losses[0] + losses[1]) / 2) < 1e-12 &&
              fabs(acc - (correct[0] + correct[1]) / 128.0) < 1e-12 && ips > 0,
          "metrics: 128 examples, loss %.4f the batches' mean, accuracy %.3f, %.0f images/s", loss,
          acc, ips);
    check(losses[0] > 1.5 && losses[0] < 3.5, "the first batch's loss %.4f near ln 10", losses[0]);
    status = parts ? cltrain_trainer_forward_backward(t, NULL, NULL)
                   : cltrain_trainer_step(t, NULL, NULL);
    check(status == CLTRAIN_ERR_STATE && strstr(cltrain_errmsg(t), "no batch left") &&
              starts(cltrain_errmsg(t),
                     parts ? "cltrain_trainer_forward_backward" : "cltrain_trainer_step"),
          "a step past the epoch's end: CLTRAIN_ERR_STATE (%s)", cltrain_errmsg(t));
    cltrain_trainer_free(&t);
    check(t == NULL, "free sets the handle to NULL");
  }
  free(want);
  free_data(d);
}

/* The epoch's first batch given from the caller's memory gives the epoch's loss and
 * gradient (uint8 and float images alike). */
static void memory_batch(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_dataset *d = open_data(ctx, 128, 64);
  clt_dataset raw = {0};
  clt_err e = {0};
  if (clt_idx_load_dir(data_dir, "train", &raw, &e)) {
    check(0, "IDX files load: %s", e.msg);
    free_data(d);
    return;
  }
  int order[128];
  clt_epoch_order(42, 0, order, 128);
  const int pixels = 28 * 28;
  uint8_t *images = malloc((size_t)64 * pixels);
  float *floats = malloc((size_t)64 * pixels * sizeof *floats);
  int32_t labels[64];
  for (int i = 0; i < 64; i++) {
    memcpy(images + (size_t)i * pixels, raw.pixels + (size_t)order[i] * pixels, (size_t)pixels);
    for (int p = 0; p < pixels; p++)
      floats[(size_t)i * pixels + p] = (float)images[(size_t)i * pixels + p] * (1.0f / 255.0f);
    labels[i] = raw.labels[order[i]];
  }
  cltrain_trainer *t = NULL;
  cltrain_trainer_create(ctx, m, equal_opts, &t);
  const size_t n = cltrain_trainer_floats(t);
  float *g_epoch = malloc(n * sizeof *g_epoch), *g_mem = malloc(n * sizeof *g_mem);
  double l_epoch = 0, l_mem = 0, l_float = 0;
  int c_epoch = 0, c_mem = 0;
  int status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
  if (!status) status = cltrain_trainer_forward_backward(t, &l_epoch, &c_epoch);
  if (!status) status = cltrain_trainer_allreduce(t);
  if (!status) status = cltrain_trainer_get_gradients(t, g_epoch, n);
  if (!status)
    status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 64, &l_mem,
                                                    &c_mem);
  if (!status) status = cltrain_trainer_allreduce(t);
  if (!status) status = cltrain_trainer_get_gradients(t, g_mem, n);
  check(status == CLTRAIN_OK, "an epoch batch and a memory batch (%s)", cltrain_errmsg(t));
  check(l_mem == l_epoch && c_mem == c_epoch && same_bits(g_mem, g_epoch, n),
        "the caller's copy of the epoch's first batch: the same loss (%.6f), correct count and "
        "summed gradient, bit for bit",
        l_mem);
  status = cltrain_trainer_forward_backward_batch(t, floats, CLTRAIN_F32, labels, 64, &l_float,
                                                  NULL);
  if (!status) status = cltrain_trainer_allreduce(t);
  if (!status) status = cltrain_trainer_get_gradients(t, g_mem, n);
  check(status == CLTRAIN_OK && l_float == l_epoch && same_bits(g_mem, g_epoch, n),
        "the same batch as preprocessed floats: the same loss and gradient");
  /* Accumulation over two batches: the gradients summed and set before apply. */
  double half = 0;
  status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 32, &half, NULL);
  if (!status) status = cltrain_trainer_allreduce(t);
  if (!status) status = cltrain_trainer_get_gradients(t, g_mem, n);
  if (!status)
    status = cltrain_trainer_forward_backward_batch(t, images + (size_t)32 * pixels, CLTRAIN_U8,
                                                    labels + 32, 32, NULL, NULL);
  if (!status) status = cltrain_trainer_allreduce(t);
  if (!status) status = cltrain_trainer_get_gradients(t, g_epoch, n);
  for (size_t i = 0; i < n; i++) g_epoch[i] = (g_epoch[i] + g_mem[i]) * 0.5f;
  if (!status) status = cltrain_trainer_set_gradients(t, g_epoch, n);
  float *before = params_of(t);
  if (!status) status = cltrain_trainer_apply(t);
  float *after = params_of(t);
  check(status == CLTRAIN_OK && before && after && !same_bits(before, after, n) &&
            cltrain_trainer_steps_done(t) == 1,
        "two half batches accumulated and applied: one step (%s)", cltrain_errmsg(t));
  check(half > 1.5 && half < 3.5, "a half batch's loss %.4f", half);
  free(before);
  free(after);
  free(g_epoch);
  free(g_mem);
  free(images);
  free(floats);
  clt_dataset_free(&raw);
  cltrain_trainer_free(&t);
  free_data(d);
}

/* Calls out of order, bad arguments, NULL and freed handles. */
static void bad_use(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_trainer *t = NULL;
  int status = cltrain_trainer_create(ctx, m, "devices=all bogus=1", &t);
  check(status == CLTRAIN_ERR_ARG && t == NULL &&
            starts(cltrain_errmsg(ctx), "cltrain_trainer_create") &&
            strstr(cltrain_errmsg(ctx), "bogus"),
        "an unknown option: %s", cltrain_errmsg(ctx));
  const char *bad[] = {"batch-per-replica=0",
                       "split=nonsense",
                       "optimizer=lbfgs",
                       "optimizer=adam momentum=0.9",
                       "optimizer=sgd nesterov=1",
                       "devices=99",
                       "lr=-1",
                       "seed=x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    status = cltrain_trainer_create(ctx, m, bad[i], &t);
    check(status != CLTRAIN_OK && t == NULL &&
              starts(cltrain_errmsg(ctx), "cltrain_trainer_create"),
          "refused: %s (%s)", bad[i], cltrain_errmsg(ctx));
  }
  check(cltrain_trainer_create(NULL, m, NULL, &t) == CLTRAIN_ERR_ARG &&
            starts(cltrain_errmsg(NULL), "cltrain_trainer_create"),
        "a NULL context: %s", cltrain_errmsg(NULL));
  check(cltrain_trainer_step(NULL, NULL, NULL) == CLTRAIN_ERR_ARG &&
            strstr(cltrain_errmsg(NULL), "cltrain_trainer_step: the trainer is NULL"),
        "a NULL trainer: %s", cltrain_errmsg(NULL));
  status = cltrain_trainer_create(ctx, m, "split=equal batch-per-replica=8 optimizer=sgd lr=0.05",
                                  &t);
  check(status == CLTRAIN_OK, "trainer created (%s)", cltrain_errmsg(ctx));
  if (status) return;
  check(cltrain_trainer_learning_rate(t) == 0.05, "learning rate 0.05");
  check(cltrain_trainer_set_learning_rate(t, 0.01) == CLTRAIN_OK &&
            cltrain_trainer_learning_rate(t) == 0.01,
        "learning rate set to 0.01");
  check(cltrain_trainer_set_learning_rate(t, -1) == CLTRAIN_ERR_ARG, "a negative rate refused");
  status = cltrain_trainer_allreduce(t);
  check(status == CLTRAIN_ERR_STATE && starts(cltrain_errmsg(t), "cltrain_trainer_allreduce: no "),
        "allreduce first: %s", cltrain_errmsg(t));
  status = cltrain_trainer_apply(t);
  check(status == CLTRAIN_ERR_STATE && starts(cltrain_errmsg(t), "cltrain_trainer_apply: no "),
        "apply first: %s", cltrain_errmsg(t));
  status = cltrain_trainer_forward_backward(t, NULL, NULL);
  check(status == CLTRAIN_ERR_STATE && strstr(cltrain_errmsg(t), "no epoch begun"),
        "forward_backward without an epoch: %s", cltrain_errmsg(t));
  uint8_t images[17 * 784] = {0};
  int32_t labels[17] = {0};
  status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 17, NULL, NULL);
  check(status == CLTRAIN_ERR_ARG &&
            starts(cltrain_errmsg(t), "cltrain_trainer_forward_backward_batch") &&
            strstr(cltrain_errmsg(t), "global batch, 16"),
        "a batch over the global batch: %s", cltrain_errmsg(t));
  status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 0, NULL, NULL);
  check(status == CLTRAIN_ERR_ARG, "an empty batch refused");
  labels[3] = 10;
  status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 4, NULL, NULL);
  check(status == CLTRAIN_ERR_ARG && strstr(cltrain_errmsg(t), "labels[3] = 10"),
        "a label out of range: %s", cltrain_errmsg(t));
  labels[3] = 0;
  status = cltrain_trainer_forward_backward_batch(t, images, (cltrain_format)7, labels, 4, NULL,
                                                  NULL);
  check(status == CLTRAIN_ERR_ARG, "an unknown format refused");
  status = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, 4, NULL, NULL);
  check(status == CLTRAIN_OK, "a batch of 4 (%s)", cltrain_errmsg(t));
  status = cltrain_trainer_apply(t);
  check(status == CLTRAIN_ERR_STATE && strstr(cltrain_errmsg(t), "no cltrain_trainer_allreduce"),
        "apply after forward_backward without allreduce: %s", cltrain_errmsg(t));
  const size_t n = cltrain_trainer_floats(t);
  float *g = calloc(n, sizeof *g);
  status = cltrain_trainer_set_gradients(t, g, n);
  check(status == CLTRAIN_ERR_STATE, "set_gradients before the allreduce: %s", cltrain_errmsg(t));
  check(cltrain_trainer_allreduce(t) == CLTRAIN_OK, "allreduce");
  status = cltrain_trainer_allreduce(t);
  check(status == CLTRAIN_ERR_STATE, "a second allreduce: %s", cltrain_errmsg(t));
  status = cltrain_trainer_get_gradients(t, g, n - 1);
  check(status == CLTRAIN_ERR_ARG && strstr(cltrain_errmsg(t), "get_gradients: n = "),
        "a short array: %s", cltrain_errmsg(t));
  check(cltrain_trainer_get_params(t, NULL, n) == CLTRAIN_ERR_ARG, "a NULL array refused");
  check(cltrain_trainer_apply(t) == CLTRAIN_OK && cltrain_trainer_steps_done(t) == 1, "apply");
  check(cltrain_trainer_apply(t) == CLTRAIN_ERR_STATE, "a second apply refused");
  /* Parameters in and out. */
  float *p = params_of(t);
  for (size_t i = 0; i < n && p; i++) p[i] = (float)(i % 7) * 0.01f;
  status = p ? cltrain_trainer_set_params(t, p, n) : CLTRAIN_ERR_INTERNAL;
  float *q = params_of(t);
  check(status == CLTRAIN_OK && same_bits(p, q, n), "set_params then get_params");
  p[5] = NAN;
  check(cltrain_trainer_set_params(t, p, n) == CLTRAIN_ERR_ARG, "a NaN parameter refused");
  free(p);
  free(q);
  free(g);
  cltrain_trainer_free(&t);
  cltrain_trainer_free(&t); /* a no-op */
  check(t == NULL, "a second free is a no-op");
}

/* Checkpoints: the command's eval and export read them, restore gives the state
 * back, another model is refused; evaluate against predict; ONNX export. */
static void checkpoints(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_dataset *d = open_data(ctx, 128, 96);
  cltrain_trainer *t = NULL;
  char dir[4096], cmd[8192], onnx[4096];
  snprintf(dir, sizeof dir, "%s/api-ckpt", scratch);
  int status = cltrain_trainer_create(ctx, m, equal_opts, &t);
  if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
  while (!status && cltrain_trainer_step(t, NULL, NULL) == CLTRAIN_OK) continue;
  check(cltrain_trainer_steps_done(t) == 2, "an epoch of 2 steps");
  status = cltrain_trainer_save(t, dir, 1, 2);
  check(status == CLTRAIN_OK, "saved (%s)", cltrain_errmsg(t));
  snprintf(cmd, sizeof cmd, "%s eval --checkpoint %s --data %s --test-limit 96 >%s/eval.txt",
           cltrain, dir, data_dir, scratch);
  check(run(cmd) == 0, "cltrain eval reads the API's checkpoint");
  snprintf(onnx, sizeof onnx, "%s/model.onnx", scratch);
  snprintf(cmd, sizeof cmd, "%s export --checkpoint %s --onnx %s/cmd.onnx >/dev/null", cltrain, dir,
           scratch);
  check(run(cmd) == 0, "cltrain export reads the API's checkpoint");
  check(cltrain_trainer_export_onnx(t, onnx) == CLTRAIN_OK && access(onnx, R_OK) == 0,
        "export_onnx writes %s", onnx);
  /* evaluate and predict over the 96 test images agree. */
  double loss = 0, acc = 0;
  status = cltrain_trainer_evaluate(t, d, CLTRAIN_TEST, &loss, &acc);
  check(status == CLTRAIN_OK && isfinite(loss) && acc > 0 && acc <= 1,
        "evaluate: loss %.4f accuracy %.4f (%s)", loss, acc, cltrain_errmsg(t));
  char text[4096] = "", want[128];
  snprintf(cmd, sizeof cmd, "%s/eval.txt", scratch);
  FILE *f = fopen(cmd, "r");
  const size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = '\0';
  if (f) fclose(f);
  snprintf(want, sizeof want, "Accuracy: %.2f\nLoss: %.4f", acc * 100, loss);
  check(strstr(text, want) != NULL, "cltrain eval prints the API's accuracy (%s): %s", want, text);
  clt_dataset raw = {0};
  clt_err e = {0};
  if (!clt_idx_load_dir(data_dir, "t10k", &raw, &e)) {
    float *logits = malloc((size_t)96 * 10 * sizeof *logits);
    status = cltrain_trainer_predict(t, raw.pixels, CLTRAIN_U8, 96, logits);
    int right = 0;
    for (int i = 0; i < 96 && !status; i++) {
      int best = 0;
      for (int k = 1; k < 10; k++)
        if (logits[i * 10 + k] > logits[i * 10 + best]) best = k;
      right += best == raw.labels[i];
    }
    check(status == CLTRAIN_OK && right == (int)lround(acc * 96),
          "predict's logits classify %d of 96 as evaluate does (%s)", right, cltrain_errmsg(t));
    free(logits);
    clt_dataset_free(&raw);
  } else {
    check(0, "t10k files: %s", e.msg);
  }
  /* Restore into a fresh trainer. */
  float *saved = params_of(t);
  cltrain_trainer *u = NULL;
  status = cltrain_trainer_create(ctx, m, "split=equal batch-per-replica=16", &u);
  if (!status) status = cltrain_trainer_restore(u, dir);
  float *restored = params_of(u);
  check(status == CLTRAIN_OK && same_bits(saved, restored, cltrain_trainer_floats(t)) &&
            cltrain_trainer_steps_done(u) == 2,
        "restore: the parameters and step count (%s)", cltrain_errmsg(u));
  /* A step from the restored state equals one from the saved one. */
  cltrain_trainer_free(&u);
  status = cltrain_trainer_create(ctx, m, equal_opts, &u);
  if (!status) status = cltrain_trainer_restore(u, dir);
  /* A dataset feeds one trainer at a time: u's epoch holds d until it ends. */
  if (!status) status = cltrain_trainer_begin_epoch(u, d, CLTRAIN_TRAIN, 1, NULL);
  if (!status) status = cltrain_trainer_step(u, NULL, NULL);
  if (!status) {
    status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 1, NULL);
    check(status == CLTRAIN_ERR_STATE && strstr(cltrain_errmsg(t), "in use by another trainer"),
          "a dataset part another trainer is stepping through: %s", cltrain_errmsg(t));
    status = cltrain_trainer_step(u, NULL, NULL);
  }
  if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 1, NULL);
  while (!status && cltrain_trainer_step(t, NULL, NULL) == CLTRAIN_OK) continue;
  float *a = params_of(t), *b = params_of(u);
  check(status == CLTRAIN_OK && same_bits(a, b, cltrain_trainer_floats(t)),
        "an epoch after restore equals the saved trainer's (optimizer state restored)");
  free(a);
  free(b);
  free(saved);
  free(restored);
  cltrain_trainer_free(&u);
  cltrain_model *other = make_model(ctx, "flatten=Flatten() dense=Dense(10)", 1);
  status = cltrain_trainer_create(ctx, other, "split=equal batch-per-replica=8", &u);
  check(status == CLTRAIN_OK, "a trainer of another model (%s)", cltrain_errmsg(ctx));
  status = cltrain_trainer_restore(u, dir);
  check(status != CLTRAIN_OK && starts(cltrain_errmsg(u), "cltrain_trainer_restore"),
        "restoring another model's checkpoint refused: %s", cltrain_errmsg(u));
  check(cltrain_trainer_restore(u, "/nonexistent/ckpt") == CLTRAIN_ERR_IO,
        "a missing checkpoint: %s", cltrain_errmsg(u));
  cltrain_trainer_free(&u);
  free_model(other);
  cltrain_trainer_free(&t);
  free_data(d);
}

/* Steps asked for no figures (loss and correct NULL) leave them on the devices:
 * the epoch's figures, read at the next call needing them, equal those of steps
 * asked for theirs, bit for bit (the fast path and the parts); a non-finite
 * loss is reported by that later call, naming the first bad step, once. */
enum { DEFER_STEPS = 4 };

/* Steps `from` to `to` of the epoch: figures asked (ask), or not; by the parts, or not. */
static int run_steps(cltrain_trainer *t, int from, int to, int ask, int parts) {
  int status = CLTRAIN_OK;
  for (int s = from; s < to && !status; s++) {
    double loss = 0;
    int correct = 0;
    if (parts) {
      status = cltrain_trainer_forward_backward(t, ask ? &loss : NULL, ask ? &correct : NULL);
      if (!status) status = cltrain_trainer_allreduce(t);
      if (!status) status = cltrain_trainer_apply(t);
    } else {
      status = cltrain_trainer_step(t, ask ? &loss : NULL, ask ? &correct : NULL);
    }
  }
  return status;
}

/* The same three figures (finite: equal values are equal bits). */
static int same3(const double *a, const double *b) {
  return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static void deferred(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_dataset *d = open_data(ctx, 64L * DEFER_STEPS, 64);
  /* [ask][parts]: the metrics after 2 steps and after the epoch, and the parameters. */
  double mid[2][2][3], end[2][2][3];
  float *params[2][2] = {{NULL}};
  const size_t n = m->model->param_count;
  for (int ask = 0; ask < 2; ask++) {
    for (int parts = 0; parts < 2; parts++) {
      cltrain_trainer *t = NULL;
      int status = cltrain_trainer_create(ctx, m, equal_opts, &t);
      if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
      long ex = 0;
      double *a = mid[ask][parts], *b = end[ask][parts];
      if (!status) status = run_steps(t, 0, 2, ask, parts);
      if (!status) status = cltrain_trainer_metrics(t, &a[0], &a[1], &ex, NULL);
      a[2] = (double)ex;
      if (!status) status = run_steps(t, 2, DEFER_STEPS, ask, parts);
      if (!status) status = cltrain_trainer_metrics(t, &b[0], &b[1], &ex, NULL);
      b[2] = (double)ex;
      check(status == CLTRAIN_OK, "figures %s, %s: an epoch (%s)", ask ? "asked" : "deferred",
            parts ? "parts" : "step", cltrain_errmsg(t ? (void *)t : (void *)ctx));
      params[ask][parts] = params_of(t);
      cltrain_trainer_free(&t);
    }
  }
  for (int parts = 0; parts < 2; parts++) {
    check(same3(mid[0][parts], mid[1][parts]) && same3(end[0][parts], end[1][parts]) &&
              mid[0][parts][2] == 128 && end[0][parts][2] == 64 * DEFER_STEPS,
          "%s: deferred figures = asked figures bit for bit (loss %.6f, accuracy %.4f)",
          parts ? "parts" : "step", end[0][parts][0], end[0][parts][1]);
    check(same_bits(params[0][parts], params[1][parts], n), "%s: the same parameters",
          parts ? "parts" : "step");
  }
  for (int i = 0; i < 4; i++) free(params[i / 2][i % 2]);

  /* Parameters too large for a finite loss, set after step 1. */
  float *huge = malloc(n * sizeof *huge);
  for (size_t i = 0; i < n; i++) huge[i] = 1e30f;
  const char *const fns[] = {"cltrain_trainer_step", "cltrain_trainer_metrics",
                             "cltrain_trainer_get_params", "cltrain_trainer_step"};
  for (int k = 0; k < 4; k++) {
    /* k: who reports it: 0 the step asking figures, 1 metrics, 2 get_params (deferred
     * steps, more left in the epoch), 3 the epoch's last step (deferred). */
    cltrain_trainer *t = NULL;
    int status = cltrain_trainer_create(ctx, m, equal_opts, &t);
    if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
    if (!status) status = run_steps(t, 0, 1, 0, 0);
    if (!status) status = cltrain_trainer_set_params(t, huge, n);
    check(status == CLTRAIN_OK, "a step, then huge parameters (%s)", cltrain_errmsg(t));
    const int ask = k == 0;
    int later = CLTRAIN_OK, again = CLTRAIN_OK;
    status = run_steps(t, 1, k == 3 ? DEFER_STEPS : 2, ask, 0);
    if (k == 1) later = cltrain_trainer_metrics(t, NULL, NULL, NULL, NULL);
    if (k == 2) later = params_of(t) ? CLTRAIN_OK : CLTRAIN_ERR_NUMERIC;
    const int got = k == 1 || k == 2 ? later : status;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cltrain_errmsg(t));
    check((k == 1 || k == 2 ? status == CLTRAIN_OK : 1) && got == CLTRAIN_ERR_NUMERIC &&
              starts(msg, fns[k]) && strstr(msg, "step 2: non-finite"),
          "a non-finite step 2 reported by %s (%s)", fns[k], msg);
    if (k == 1) again = cltrain_trainer_metrics(t, NULL, NULL, NULL, NULL);
    check(again == CLTRAIN_OK && cltrain_trainer_steps_done(t) == (k == 3 ? DEFER_STEPS : 2),
          "%s: reported once (%s)", fns[k], cltrain_errmsg(t));
    cltrain_trainer_free(&t);
  }
  free(huge);
  free_data(d);
}

/* A replica stalled in the all-reduce (CLTRAIN_FAULT, set by the test's command)
 * during a step: the watchdog reports it, naming the replica, within the timeout;
 * the trainer frees without waiting for it. */
static int stall(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_dataset *d = open_data(ctx, 256, 64);
  cltrain_trainer *t = NULL;
  int status = cltrain_trainer_create(ctx, m, "devices=0 allreduce-timeout=1", &t);
  if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
  const double t0 = clt_now_seconds();
  for (int s = 0; s < 4 && !status; s++) status = cltrain_trainer_step(t, NULL, NULL);
  const double took = clt_now_seconds() - t0;
  check(status == CLTRAIN_ERR_DEVICE && starts(cltrain_errmsg(t), "cltrain_trainer_step") &&
            strstr(cltrain_errmsg(t), "replica 0") && took < 10,
        "a stalled replica reported in %.1f s (%s)", took,
        cltrain_errmsg(t ? (void *)t : (void *)ctx));
  cltrain_trainer_free(&t);
  free_data(d);
  return check_summary();
}

/* A stop asked (cltrain_request_stop, a signal): the step in flight completes, then the stepping
 * calls return CLTRAIN_ERR_STOPPED. */
static void stop(cltrain_ctx *ctx, cltrain_model *m) {
  cltrain_dataset *d = open_data(ctx, 256, 64);
  cltrain_trainer *t = NULL;
  int status = cltrain_trainer_create(ctx, m, equal_opts, &t);
  if (!status) status = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, NULL);
  if (!status) status = cltrain_trainer_step(t, NULL, NULL);
  check(status == CLTRAIN_OK, "a step before the stop (%s)", cltrain_errmsg(t));
  cltrain_request_stop();
  status = cltrain_trainer_step(t, NULL, NULL);
  check(status == CLTRAIN_ERR_STOPPED && starts(cltrain_errmsg(t), "cltrain_trainer_step") &&
            cltrain_trainer_steps_done(t) == 1,
        "after cltrain_request_stop: %s", cltrain_errmsg(t));
  check(cltrain_trainer_forward_backward(t, NULL, NULL) == CLTRAIN_ERR_STOPPED,
        "forward_backward stopped too");
  cltrain_clear_stop();
  status = cltrain_trainer_step(t, NULL, NULL);
  check(status == CLTRAIN_OK && cltrain_trainer_steps_done(t) == 2,
        "after cltrain_clear_stop the steps go on (%s)", cltrain_errmsg(t));
  kill(getpid(), SIGINT);
  for (int i = 0; i < 2000 && !cltrain_stop_requested(); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  status = cltrain_trainer_step(t, NULL, NULL);
  check(status == CLTRAIN_ERR_STOPPED && cltrain_trainer_steps_done(t) == 2,
        "after a signal (cltrain_handle_signals): %s", cltrain_errmsg(t));
  check(cltrain_trainer_save(t, scratch, 0, 0) == CLTRAIN_OK, "a checkpoint saved after the stop");
  cltrain_trainer_free(&t);
  free_data(d);
}

/* images/s of cltrain_trainer_step and of `cltrain train`, alternately. */
static void bench(cltrain_ctx *ctx, cltrain_model *m, int epochs, int batch) {
  cltrain_dataset *d = open_data(ctx, 2048, 64);
  cltrain_trainer *t = NULL;
  char opts[128];
  snprintf(opts, sizeof opts, "split=equal batch-per-replica=%d", batch);
  if (cltrain_trainer_create(ctx, m, opts, &t)) {
    fprintf(stderr, "%s\n", cltrain_errmsg(ctx));
    return;
  }
  for (int e = 0; e < epochs; e++) {
    double ips = 0;
    cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, e, NULL);
    while (cltrain_trainer_step(t, NULL, NULL) == CLTRAIN_OK) continue;
    cltrain_trainer_metrics(t, NULL, NULL, NULL, &ips);
    printf("api epoch %d: %.1f images/s\n", e + 1, ips);
    fflush(stdout);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s train --data %s --epochs 1 --train-limit 2048 --test-limit 64 --split equal "
             "--batch-per-replica %d --log %s/bench.jsonl >/dev/null && grep -o "
             "'\"images_per_second\": *[0-9.]*' %s/bench.jsonl",
             cltrain, data_dir, batch, scratch, scratch);
    run(cmd);
  }
  cltrain_trainer_free(&t);
  free_data(d);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: test_api_trainer CLTRAIN DATA_DIR SCRATCH [--bench N [B]]\n");
    return 2;
  }
  /* Before any thread starts: the stop check's signal. */
  cltrain_handle_signals();
  cltrain = argv[1];
  data_dir = argv[2];
  scratch = argv[3];
  cltrain_ctx *ctx = open_ctx();
  cltrain_model *m = make_model(ctx, "fmnist-cnn", 42);
  if (argc > 4 && strcmp(argv[4], "--stall") == 0) {
    const int rc = stall(ctx, m);
    free_model(m);
    cltrain_close(&ctx);
    return rc;
  }
  if (argc > 5 && strcmp(argv[4], "--bench") == 0) {
    bench(ctx, m, atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 64);
    free_model(m);
    cltrain_close(&ctx);
    return 0;
  }
  const double t0 = clt_now_seconds();
  same_as_command(ctx, m);
  memory_batch(ctx, m);
  bad_use(ctx, m);
  checkpoints(ctx, m);
  deferred(ctx, m);
  stop(ctx, m);
  printf("%.1f s\n", clt_now_seconds() - t0);
  free_model(m);
  cltrain_close(&ctx);
  return check_summary();
}
