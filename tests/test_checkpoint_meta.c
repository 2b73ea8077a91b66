/* A checkpoint's metadata (src/formats/checkpoint_meta.c): what cltrain writes
 * reads back the same, a model name and a data path that JSON must escape and
 * numbers that need 17 digits included; the checkpoints an earlier cltrain wrote
 * (tests/checkpoints/) load with every field and save again as the same members; and malformed
 * metadata (not JSON, a wrong type, a value out of range, a missing key) is
 * refused in one line naming the file and the key. Host only: no device needed.
 *   test_checkpoint_meta FIXTURES_DIR */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "npz.h"
#include "text.h"

static char root[] = "/tmp/cltrain-meta-XXXXXX";

/* The data record of the checkpoints save() writes. */
static const clt_checkpoint_data some_data = {.known = 1,
                                              .path = "/data/photos",
                                              .train_limit = 640,
                                              .test_limit = 0,
                                              .validation_split = 0.25,
                                              .global_batch = 64};

/* Saves a checkpoint of m trained with opt on data (zeros everywhere) under root/name. */
static int save(const char *name, const clt_model *m, const clt_optimizer *opt,
                const clt_checkpoint_data *data, char *path, size_t size) {
  char dir[4096];
  clt_err e = {0};
  clt_checkpoint st = {.optimizer = *opt, .seed = 42, .data = *data};
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  st.params = calloc(m->flat_floats, sizeof(float));
  for (int k = 0; k < CLT_OPT_SLOTS; k++) st.opt_state[k] = calloc(m->flat_floats, sizeof(float));
  int status = st.params && st.opt_state[0] && st.opt_state[1]
                   ? clt_checkpoint_save(dir, 0, m, &st, path, size, &e)
                   : CLT_ERR_NOMEM;
  if (status) printf("  save: %s\n", e.msg);
  clt_checkpoint_free(&st);
  return status;
}

/* The text of member "metadata" of checkpoint path, a new string; NULL if unreadable. */
static char *metadata_of(const char *path) {
  clt_err e = {0};
  clt_npz *z = NULL;
  char *text = NULL;
  const clt_npz_array *a = clt_npz_read(path, &z, &e) ? NULL : clt_npz_find(z, "metadata");
  if (a && (text = malloc(a->bytes + 1)) && clt_npz_get_string(a, text, a->bytes + 1) != 0) {
    free(text);
    text = NULL;
  }
  clt_npz_free(z);
  return text;
}

/* Writes checkpoint `in` as `out` with its metadata replaced by text. */
static int with_metadata(const char *in, const char *out, const char *text) {
  clt_err e = {0};
  clt_npz *z = NULL;
  if (clt_npz_read(in, &z, &e)) return -1;
  const int n = clt_npz_count(z);
  clt_npz_array *arrays = calloc((size_t)n, sizeof *arrays);
  uint32_t *buf = calloc(strlen(text) + 1, sizeof *buf);
  int rc = arrays && buf ? 0 : -1;
  for (int i = 0; i < n && !rc; i++) {
    arrays[i] = *clt_npz_at(z, i);
    if (strcmp(arrays[i].name, "metadata") == 0) clt_npz_string(&arrays[i], "metadata", text, buf);
  }
  if (!rc && clt_npz_write(out, arrays, n, &e)) rc = -1;
  free(buf);
  free(arrays);
  clt_npz_free(z);
  return rc;
}

/* A model name JSON must escape, and hyper-parameters whose shortest exact text
 * has 17 digits, come back exactly. */
static void test_round_trip(void) {
  static clt_model m, got;
  clt_err e = {0};
  const char *name = "say \"hi\" \\ bye";
  if (clt_model_parse(name, (clt_shape){6, 6, 1}, 3, CLT_PRE_UNIT,
                      "c=Conv2D(2,3x3,s1,valid) g=GlobalAveragePooling2D d=Dense(3)", &m, &e)) {
    check(0, "building model %s: %s", name, e.msg);
    return;
  }
  clt_optimizer o = clt_optimizer_defaults(CLT_OPT_ADAM);
  o.lr = 0.1 + 0.2;
  o.beta2 = nextafter(0.999, 1);
  o.epsilon = 1e-7 / 3;
  o.weight_decay = 1.0 / 3;
  clt_checkpoint_data data = {.known = 1,
                              .path = "/data/\"odd\" \\ f\xc3\xb6lder \xf0\x9f\x93\xb7",
                              .train_limit = 2147483647,
                              .test_limit = 0,
                              .validation_split = 0.1 + 0.2,
                              .global_batch = 3};
  char path[4200];
  if (save("escaped", &m, &o, &data, path, sizeof path)) return;
  char *text = metadata_of(path);
  const char *shown = text ? text : "(unreadable)";
  check(text && strstr(text, "\"model\": \"say \\\"hi\\\" \\\\ bye\", \"input\": [6, 6, 1]") &&
            strstr(text, "\"learning_rate\": 0.30000000000000004, "),
        "the metadata escapes the name and keeps 17 digits where needed: %s", shown);
  check(text &&
            strstr(text, "\"data\": {\"path\": \"/data/\\\"odd\\\" \\\\ f\\u00f6lder "
                         "\\ud83d\\udcf7\", "
                         "\"train_limit\": 2147483647, \"test_limit\": 0, \"validation_split\": "
                         "0.30000000000000004, \"global_batch\": 3}, \"cltrain_version\""),
        "the data entry before the version, escaped (beyond ASCII as json.dumps), exact: %s",
        shown);
  free(text);
  clt_checkpoint st;
  if (clt_checkpoint_model(path, &got, &e) || clt_checkpoint_load(path, &got, 1, &st, &e)) {
    check(0, "reading it back: %s", e.msg);
    return;
  }
  const clt_optimizer *g = &st.optimizer;
  check(strcmp(got.name, name) == 0 && got.input.h == 6 && got.classes == 3,
        "the model name comes back: %s", got.name);
  check(g->kind == o.kind && g->lr == o.lr && g->beta1 == o.beta1 && g->beta2 == o.beta2 &&
            g->epsilon == o.epsilon && g->weight_decay == o.weight_decay,
        "the hyper-parameters come back exactly (lr %.17g, beta_2 %.17g, epsilon %.17g)", g->lr,
        g->beta2, g->epsilon);
  const clt_checkpoint_data *d = &st.data;
  check(d->known && strcmp(d->path, data.path) == 0 && d->train_limit == data.train_limit &&
            d->test_limit == 0 && d->validation_split == data.validation_split &&
            d->global_batch == 3,
        "the data comes back exactly (%s, %ld, %ld, %.17g, %d)", d->path, d->train_limit,
        d->test_limit, d->validation_split, d->global_batch);
  clt_checkpoint_free(&st);
  clt_checkpoint eval;
  if (clt_checkpoint_load(path, &got, 0, &eval, &e)) {
    check(0, "reading it back for evaluation: %s", e.msg);
    return;
  }
  check(eval.data.known && eval.data.global_batch == 3, "evaluation reads the data too");
  clt_checkpoint_free(&eval);
}

/* Loads path for m expecting refusal, in one line, as "<path>: <want>"; want NULL:
 * expecting it to load. */
static void expect_load(const char *what, const char *path, const clt_model *m, int with_optimizer,
                        const char *want) {
  clt_checkpoint got;
  clt_err e = {0};
  const int st = clt_checkpoint_load(path, m, with_optimizer, &got, &e);
  const size_t n = strlen(path);
  if (!want) {
    check(st == CLT_OK, "%s: loads (%s)", what, st ? e.msg : "ok");
  } else {
    check(st == CLT_ERR_FORMAT && strncmp(e.msg, path, n) == 0 &&
              strncmp(e.msg + n, ": ", 2) == 0 && strcmp(e.msg + n + 2, want) == 0 &&
              !strchr(e.msg, '\n'),
          "%s: refused (%s)", what, st ? e.msg : "loaded");
  }
  if (!st) clt_checkpoint_free(&got);
}

/* Edits of good metadata, each refused naming the key (or loading where the key
 * does not matter). */
static void test_malformed(void) {
  static clt_model m;
  clt_err e = {0};
  if (clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &e)) {
    check(0, "building fmnist-cnn: %s", e.msg);
    return;
  }
  clt_optimizer rms = clt_optimizer_defaults(CLT_OPT_RMSPROP),
                sgd = clt_optimizer_defaults(CLT_OPT_SGD);
  rms.momentum = 0.5;
  sgd.momentum = 0.9;
  sgd.nesterov = 1;
  char good[2][4200], bad[4200];
  snprintf(bad, sizeof bad, "%s/bad.npz", root);
  if (save("rmsprop", &m, &rms, &some_data, good[0], sizeof good[0]) ||
      save("sgd", &m, &sgd, &some_data, good[1], sizeof good[1]))
    return;
  const struct {
    int sgd, with_optimizer;
    const char *from, *to; /* from NULL: the whole text is `to` */
    const char *want;      /* NULL: it loads */
  } cases[] = {
      {0, 0, "\"format\": 1", "\"format\": 99999999999999999999",
       "checkpoint format 1e+20 is not a number this cltrain reads (it reads 1)"},
      {0, 0, "\"format\": 1", "\"format\": 4294967297",
       "checkpoint format 4294967297 is not a number this cltrain reads (it reads 1)"},
      {0, 0, "\"format\": 1", "\"format\": -99999999999999999999",
       "checkpoint format -1e+20 is not a number this cltrain reads (it reads 1)"},
      {0, 0, "\"format\": 1", "\"format\": 1.5",
       "checkpoint format 1.5 is not a number this cltrain reads (it reads 1)"},
      {0, 0, "\"format\": 1", "\"format\": 7",
       "unknown checkpoint format version 7 (this cltrain reads 1)"},
      {0, 0, "\"format\": 1", "\"format\": \"1\"", "metadata key format is a string, not a number"},
      {0, 0, "\"format\": 1", "\"formats\": 1", "metadata lacks key format"},
      {0, 0, "\"format\": 1", "\"format\": 1x",
       "metadata is not valid JSON (at character 13: x, \"model\": \"fmnist-...)"},
      {0, 0, NULL, "{} x", "metadata is not valid JSON (at character 4: x)"},
      {0, 0, NULL, "{\"format\": 1", "metadata is not valid JSON (it ends early)"},
      {0, 0, NULL, "[1, 2]", "metadata is an array, not a JSON object"},
      {0, 0, "\"model\": \"fmnist-cnn\"", "\"model\": null",
       "metadata key model is null, not a string"},
      {0, 0, "\"model\": \"fmnist-cnn\"", "\"model\": \"fmnist\\u0001cnn\"",
       "metadata key model holds a control character"},
      {0, 0, "\"input\": [28, 28, 1]", "\"input\": [28, 28]",
       "metadata key input is not [height, width, channels], 3 integers"},
      {0, 0, "\"input\": [28, 28, 1]", "\"input\": [28, 28, 1.5]",
       "metadata key input is not [height, width, channels], 3 integers"},
      {0, 0, "\"input\": [28, 28, 1]", "\"input\": {\"h\": 28}",
       "metadata key input is an object, not an array"},
      {0, 0, "\"classes\": 10", "\"classes\": \"10\"",
       "metadata key classes is a string, not a number"},
      {0, 0, "\"classes\": 10", "\"classes\": 2.5", "metadata key classes is 2.5, not an integer"},
      {0, 0, "\"architecture\"", "\"architectures\"", "metadata lacks key architecture"},
      {0, 0, "\"optimizer\": {", "\"optimizer\": [], \"other\": {",
       "metadata key optimizer is an array, not an object"},
      {0, 1, "\"name\": \"rmsprop\"", "\"name\": \"adagrad\"",
       "metadata names no optimizer cltrain knows: \"adagrad\" (it knows adam, sgd or rmsprop)"},
      {0, 1, "\"name\": \"rmsprop\"", "\"name\": 3",
       "metadata key optimizer.name is a number, not a string"},
      {0, 1, "\"learning_rate\": 0.001, ", "", "metadata lacks key optimizer.learning_rate"},
      {0, 1, "\"learning_rate\": 0.001", "\"learning_rate\": \"0.001\"",
       "metadata key optimizer.learning_rate is a string, not a number"},
      {0, 1, "\"learning_rate\": 0.001", "\"learning_rate\": 0",
       "metadata key optimizer.learning_rate is 0, outside (0, 1e+06]"},
      {0, 1, "\"rho\": 0.9", "\"rho\": 1", "metadata key optimizer.rho is 1, outside [0, 1)"},
      {0, 1, "\"momentum\": 0.5", "\"momentum\": -0.5",
       "metadata key optimizer.momentum is -0.5, outside [0, 1]"},
      {0, 1, "\"epsilon\": 1e-07", "\"epsilon\": 0",
       "metadata key optimizer.epsilon is 0, outside (0, 1]"},
      {1, 1, "\"nesterov\": true", "\"nesterov\": 1",
       "metadata key optimizer.nesterov is a number, not true or false"},
      {0, 0, "\"data\": {", "\"data\": [], \"other\": {",
       "metadata key data is an array, not an object"},
      {0, 0, "\"path\": \"/data/photos\", ", "", "metadata lacks key data.path"},
      {0, 0, "\"path\": \"/data/photos\"", "\"path\": \"\"", "metadata key data.path is empty"},
      {0, 0, "\"path\": \"/data/photos\"", "\"path\": \"/data/\\nphotos\"",
       "metadata key data.path holds a control character"},
      {0, 0, "\"train_limit\": 640", "\"train_limit\": -1",
       "metadata key data.train_limit is -1, not an integer of at least 0"},
      {0, 0, "\"test_limit\": 0", "\"test_limit\": \"0\"",
       "metadata key data.test_limit is a string, not a number"},
      {0, 0, "\"test_limit\": 0", "\"test_limit\": 2.5",
       "metadata key data.test_limit is 2.5, not an integer of at least 0"},
      {0, 0, "\"validation_split\": 0.25", "\"validation_split\": 1.5",
       "metadata key data.validation_split is 1.5, outside [0, 0.99]"},
      {0, 0, "\"global_batch\": 64", "\"global_batch\": 0",
       "metadata key data.global_batch is 0, not an integer of at least 1"},
      {0, 0, ", \"global_batch\": 64", "", "metadata lacks key data.global_batch"},
      {0, 0, "\"architecture\"", "\"frozen\": 3, \"architecture\"",
       "metadata key frozen is a number, not an array"},
      {0, 0, "\"architecture\"", "\"frozen\": [\"conv2d\", 1], \"architecture\"",
       "metadata key frozen holds a number, not a layer name (a string of at most 63 "
       "characters)"},
      {0, 0, "\"architecture\"", "\"frozen\": [\"conv2d\", \"conv3d\"], \"architecture\"",
       "metadata key frozen names no layer of model fmnist-cnn: \"conv3d\""},
      /* A layer recorded frozen has no optimizer slots, but evaluation reads none. */
      {0, 1, "\"architecture\"", "\"frozen\": [\"conv2d\"], \"architecture\"",
       "unexpected member optimizer/conv2d/kernel/velocity (not part of a checkpoint of model "
       "fmnist-cnn trained with rmsprop)"},
      {0, 0, "\"architecture\"", "\"frozen\": [\"conv2d\"], \"architecture\"", NULL},
      /* A checkpoint without data (an older cltrain) loads. */
      {0, 1, "\"data\": {", "\"unused\": {", NULL},
      /* What evaluation does not read, or no kind uses, does not matter. */
      {0, 0, "\"rho\": 0.9", "\"rho\": 1", NULL},
      {1, 1, "\"nesterov\": true", "\"nesterov\": true, \"epsilon\": \"x\", \"clipnorm\": null",
       NULL},
      {0, 1, "\"format\": 1", "\"format\": 1, \"comment\": [{}]", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = metadata_of(good[cases[i].sgd]), *edited = NULL, what[200];
    const char *at = text && cases[i].from ? strstr(text, cases[i].from) : NULL;
    const size_t size = (text ? strlen(text) : 0) + strlen(cases[i].to) + 1;
    if ((at || !cases[i].from) && (edited = malloc(size))) {
      if (!cases[i].from) snprintf(edited, size, "%s", cases[i].to);
      else
        snprintf(edited, size, "%.*s%s%s", (int)(at - text), text, cases[i].to,
                 at + strlen(cases[i].from));
    }
    snprintf(what, sizeof what, "%s -> %s%s", cases[i].from ? cases[i].from : "(all)", cases[i].to,
             cases[i].with_optimizer ? "" : " (evaluation)");
    if (!edited || with_metadata(good[cases[i].sgd], bad, edited)) check(0, "%s: editing", what);
    else expect_load(what, bad, &m, cases[i].with_optimizer, cases[i].want);
    free(text);
    free(edited);
  }
}

/* A learning-rate schedule and ReduceLROnPlateau's arguments and state come back
 * exactly, evaluation skips them, and a bad one is refused naming the key. */
static void test_lr_control(void) {
  static clt_model m;
  clt_err e = {0};
  if (clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &e)) {
    check(0, "building fmnist-cnn: %s", e.msg);
    return;
  }
  clt_checkpoint st = {.optimizer = clt_optimizer_defaults(CLT_OPT_SGD), .seed = 1};
  char dir[4096], path[4200], bad[4200];
  snprintf(dir, sizeof dir, "%s/lr", root);
  snprintf(bad, sizeof bad, "%s/bad-lr.npz", root);
  st.optimizer.lr = 0.1 + 0.2;
  int status =
      clt_schedule_parse("piecewise:boundaries=100/200,values=0.1/0.30000000000000004/1e-3",
                         "--lr-schedule", &st.optimizer.schedule, &e);
  if (!status)
    status = clt_plateau_parse("monitor=val_accuracy,factor=0.5,patience=3,cooldown=2", "flag",
                               &st.plateau, &e);
  st.plateau.wait = 2;
  st.plateau.cooldown_counter = 1;
  st.plateau.monitor.has_best = 1;
  st.plateau.monitor.best = 1.0 / 3;
  st.params = calloc(m.flat_floats, sizeof(float));
  for (int k = 0; k < CLT_OPT_SLOTS; k++) st.opt_state[k] = calloc(m.flat_floats, sizeof(float));
  if (!status) status = clt_checkpoint_save(dir, 0, &m, &st, path, sizeof path, &e);
  if (status) {
    check(0, "saving a schedule and a plateau: %s", e.msg);
    clt_checkpoint_free(&st);
    return;
  }
  char *text = metadata_of(path);
  const char *shown = text ? text : "(unreadable)";
  check(text && strstr(text, "\"learning_rate_schedule\": \"piecewise:boundaries=100/200,"
                             "values=0.1/0.30000000000000004/0.001\"}, \"reduce_lr_on_plateau\": "
                             "{\"config\": \"monitor=val_accuracy,factor=0.5,patience=3,mode=auto,"
                             "min_delta=0.0001,cooldown=2,min_lr=0\", \"wait\": 2, "
                             "\"cooldown_counter\": 1, \"best\": 0.33333333333333331}"),
        "the schedule in the optimizer's entry, the plateau beside it: %s", shown);
  clt_checkpoint got, eval;
  if (clt_checkpoint_load(path, &m, 1, &got, &e)) {
    check(0, "reading them back: %s", e.msg);
  } else {
    char want[1024], back[1024];
    clt_schedule_format(&st.optimizer.schedule, want, sizeof want);
    clt_schedule_format(&got.optimizer.schedule, back, sizeof back);
    check(strcmp(want, back) == 0 && got.optimizer.lr == st.optimizer.lr,
          "the schedule comes back exactly: %s", back);
    clt_plateau_format(&st.plateau, want, sizeof want);
    clt_plateau_format(&got.plateau, back, sizeof back);
    const clt_plateau *p = &got.plateau;
    check(p->active && strcmp(want, back) == 0 && p->wait == 2 && p->cooldown_counter == 1 &&
              p->monitor.has_best && p->monitor.best == 1.0 / 3,
          "the plateau's arguments and state come back exactly (%s; wait %d, cooldown %d, best "
          "%.17g)",
          back, p->wait, p->cooldown_counter, p->monitor.best);
    clt_checkpoint_free(&got);
  }
  if (clt_checkpoint_load(path, &m, 0, &eval, &e)) {
    check(0, "reading it for evaluation: %s", e.msg);
  } else {
    check(!eval.plateau.active && eval.optimizer.schedule.kind == CLT_SCHED_NONE,
          "evaluation reads neither");
    clt_checkpoint_free(&eval);
  }
  const struct {
    const char *from, *to, *want;
  } cases[] = {
      {"\"best\": 0.33333333333333331", "\"best\": null", NULL},
      {"\"best\": 0.33333333333333331", "\"best\": \"NaN\"", NULL},
      {"\"best\": 0.33333333333333331", "\"best\": \"big\"",
       "metadata key reduce_lr_on_plateau.best is a string other than NaN, Infinity or -Infinity"},
      {"\"best\": 0.33333333333333331", "\"best\": []",
       "metadata key reduce_lr_on_plateau.best is an array, not a number or null"},
      {"\"wait\": 2", "\"wait\": -2",
       "metadata key reduce_lr_on_plateau.wait is -2, not an integer of at least 0"},
      {", \"cooldown_counter\": 1", "", "metadata lacks key reduce_lr_on_plateau.cooldown_counter"},
      {"factor=0.5", "factor=5",
       "metadata key reduce_lr_on_plateau.config: factor=5: expected a number in (0, 1)"},
      {"\"config\": \"", "\"config\": 1, \"x\": \"",
       "metadata key reduce_lr_on_plateau.config is a number, not a string"},
      {"values=0.1/", "values=",
       "metadata key optimizer.learning_rate_schedule piecewise: 2 boundaries need 3 values (one "
       "more), not 2"},
      {"\"piecewise:", "\"stepwise:",
       "metadata key optimizer.learning_rate_schedule: unknown schedule 'stepwise' (expected "
       "cosine, exponential, piecewise, polynomial or inverse_time, or Keras' CosineDecay, "
       "ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay or InverseTimeDecay)"},
      {"\"learning_rate_schedule\": \"", "\"learning_rate_schedule\": false, \"x\": \"",
       "metadata key optimizer.learning_rate_schedule is false, not a string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *at = text ? strstr(text, cases[i].from) : NULL;
    const size_t size = (text ? strlen(text) : 0) + strlen(cases[i].to) + 1;
    char *edited = at ? malloc(size) : NULL, what[200];
    if (edited)
      snprintf(edited, size, "%.*s%s%s", (int)(at - text), text, cases[i].to,
               at + strlen(cases[i].from));
    snprintf(what, sizeof what, "%s -> %s", cases[i].from, cases[i].to);
    if (!edited || with_metadata(path, bad, edited)) check(0, "%s: editing", what);
    else expect_load(what, bad, &m, 1, cases[i].want);
    free(edited);
  }
  free(text);
  clt_checkpoint_free(&st);
}

/* --early-stopping's entry: written with Keras' names and epochs from 1, read
 * back exactly (a best of 17 digits, no baseline), absent in a checkpoint
 * without it, and refused naming the key when malformed. */
static void test_early_stopping(void) {
  static clt_model m;
  clt_err e = {0};
  if (clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &e)) {
    check(0, "building fmnist-cnn: %s", e.msg);
    return;
  }
  clt_checkpoint st = {.optimizer = clt_optimizer_defaults(CLT_OPT_ADAM),
                       .seed = 42,
                       .data = some_data,
                       .early_stop = {.enabled = 1,
                                      .monitor = CLT_MONITOR_VAL_ACCURACY,
                                      .min_delta = 0.001,
                                      .patience = 5,
                                      .mode = CLT_ES_MAX,
                                      .restore_best_weights = 1,
                                      .start_from_epoch = 2,
                                      .wait = 3,
                                      .has_best = 1,
                                      .best = 0.1 + 0.2,
                                      .best_epoch = 6,
                                      .stopped_epoch = 9}};
  char dir[4200], path[4300], bad[4300];
  snprintf(dir, sizeof dir, "%s/early", root);
  snprintf(bad, sizeof bad, "%s/early-bad.npz", root);
  st.params = calloc(m.flat_floats, sizeof(float));
  for (int k = 0; k < CLT_OPT_SLOTS; k++) st.opt_state[k] = calloc(m.flat_floats, sizeof(float));
  const int status = clt_checkpoint_save(dir, 0, &m, &st, path, sizeof path, &e);
  const clt_early_stop want = st.early_stop;
  clt_checkpoint_free(&st);
  if (status) {
    check(0, "saving with early stopping: %s", e.msg);
    return;
  }
  char *text = metadata_of(path);
  check(text && strstr(text, "\"early_stopping\": {\"monitor\": \"val_accuracy\", \"min_delta\": "
                             "0.001, \"patience\": 5, \"mode\": \"max\", \"baseline\": null, "
                             "\"restore_best_weights\": true, \"start_from_epoch\": 2, \"wait\": "
                             "3, \"best\": 0.30000000000000004, \"best_epoch\": 7, "
                             "\"stopped_epoch\": 10}, \"cltrain_version\""),
        "early stopping's entry: Keras' names, epochs from 1, 17 digits: %s",
        text ? text : "(unreadable)");
  if (!clt_checkpoint_load(path, &m, 0, &st, &e)) {
    const clt_early_stop *g = &st.early_stop;
    check(g->enabled && clt_early_stop_same_args(g, &want) && g->wait == 3 && g->has_best &&
              g->best == want.best && g->best_epoch == 6 && g->stopped_epoch == 9,
          "early stopping's arguments and state come back exactly");
    clt_checkpoint_free(&st);
  } else {
    check(0, "loading it back: %s", e.msg);
  }
  const struct {
    const char *from, *to, *want; /* want NULL: it loads */
  } cases[] = {
      {"\"monitor\": \"val_accuracy\"", "\"monitor\": \"val_acc\"",
       "metadata key early_stopping.monitor is \"val_acc\", which cltrain does not know"},
      {"\"mode\": \"max\"", "\"mode\": 1",
       "metadata key early_stopping.mode is a number, not a string"},
      {"\"patience\": 5", "\"patience\": -1",
       "metadata key early_stopping.patience is -1, not an integer in [0, 1000000]"},
      {"\"baseline\": null", "\"baseline\": \"x\"",
       "metadata key early_stopping.baseline is a string, not a number or null"},
      {"\"restore_best_weights\": true", "\"restore_best_weights\": 1",
       "metadata key early_stopping.restore_best_weights is a number, not true or false"},
      {", \"wait\": 3", "", "metadata lacks key early_stopping.wait"},
      {"\"stopped_epoch\": 10", "\"stopped_epoch\": 1",
       "metadata key early_stopping.stopped_epoch is 1, impossible"},
      {"\"best\": 0.30000000000000004, \"best_epoch\": 7", "\"best\": null, \"best_epoch\": 7",
       "metadata key early_stopping.best_epoch is 7, impossible"},
      {"\"best\": 0.30000000000000004, \"best_epoch\": 7", "\"best\": 0.3, \"best_epoch\": 0",
       "metadata key early_stopping.best_epoch is 0, not an integer in [1, 2147483647]"},
      {"\"early_stopping\": {", "\"early_stopping\": [], \"x\": {",
       "metadata key early_stopping is an array, not an object"},
      {"\"baseline\": null", "\"baseline\": 0.5", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *at = text ? strstr(text, cases[i].from) : NULL;
    char edited[8192], what[300];
    snprintf(what, sizeof what, "%s -> %s", cases[i].from, cases[i].to);
    if (!at) {
      check(0, "%s: editing", what);
      continue;
    }
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - text), text, cases[i].to,
             at + strlen(cases[i].from));
    if (with_metadata(path, bad, edited)) check(0, "%s: editing", what);
    else expect_load(what, bad, &m, 0, cases[i].want);
  }
  free(text);
}

/* Members a and b (of checkpoints pa, pb) hold the same: byte for byte, but for
 * the metadata, equal once parsed up to the cltrain version that wrote it. */
static int same_member(const clt_npz_array *a, const clt_npz_array *b, const char *pa,
                       const char *pb) {
  if (!b || strcmp(a->dtype, b->dtype) != 0 || a->rank != b->rank || a->bytes != b->bytes) return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return 0;
  if (strcmp(a->name, "metadata") != 0) return memcmp(a->data, b->data, a->bytes) == 0;
  char *ta = metadata_of(pa), *tb = metadata_of(pb);
  cJSON *ja = ta ? cJSON_Parse(ta) : NULL, *jb = tb ? cJSON_Parse(tb) : NULL;
  cJSON_DeleteItemFromObjectCaseSensitive(ja, "cltrain_version");
  cJSON_DeleteItemFromObjectCaseSensitive(jb, "cltrain_version");
  const int same = ja && jb && cJSON_Compare(ja, jb, 1);
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  free(ta);
  free(tb);
  return same;
}

/* The checkpoints of tests/checkpoints/ (an earlier cltrain's, see its README):
 * the model, the optimizer and the counters as that run had them, for training
 * and for evaluation; saved again, the same members. */
static void test_fixtures(const char *dir) {
  const struct {
    const char *file;
    clt_optimizer_kind kind;
    double lr, momentum, weight_decay;
    int nesterov;
  } fixtures[] = {{"adam.npz", CLT_OPT_ADAM, 0.003, 0, 0.004, 0},
                  {"sgd.npz", CLT_OPT_SGD, 0.01, 0.9, 0, 1},
                  {"rmsprop.npz", CLT_OPT_RMSPROP, 0.001, 0.5, 0.01, 0}};
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    char path[4200], dir_again[4200], again[4300];
    clt_err e = {0};
    static clt_model m;
    clt_checkpoint st, eval;
    snprintf(path, sizeof path, "%s/v0.1.0-cefb85f/%s", dir, fixtures[f].file);
    if (clt_checkpoint_model(path, &m, &e) || clt_checkpoint_load(path, &m, 1, &st, &e)) {
      check(0, "%s loads: %s", fixtures[f].file, e.msg);
      continue;
    }
    clt_optimizer want = clt_optimizer_defaults(fixtures[f].kind);
    want.lr = fixtures[f].lr;
    want.momentum = fixtures[f].momentum;
    want.weight_decay = fixtures[f].weight_decay;
    want.nesterov = fixtures[f].nesterov;
    const clt_optimizer *g = &st.optimizer;
    check(g->kind == want.kind && g->lr == want.lr && g->momentum == want.momentum &&
              g->nesterov == want.nesterov && g->weight_decay == want.weight_decay &&
              g->rho == want.rho && g->epsilon == want.epsilon && g->beta1 == want.beta1 &&
              g->beta2 == want.beta2,
          "%s: the optimizer as trained (%s lr %g)", fixtures[f].file,
          clt_optimizer_name(st.optimizer.kind), st.optimizer.lr);
    check(strcmp(m.name, "tiny_cnn.json") == 0 && m.input.h == 28 && m.input.w == 28 &&
              m.input.c == 1 && m.classes == 10 && m.preprocess == CLT_PRE_RAW &&
              st.iterations == 2 && st.epoch == 1 && st.save_counter == 1 && st.seed == 42 &&
              st.epoch_step == 0 && st.keras_json && !st.class_names,
          "%s: the model and counters as trained", fixtures[f].file);
    if (clt_checkpoint_load(path, &m, 0, &eval, &e)) check(0, "%s for evaluation: %s", path, e.msg);
    else clt_checkpoint_free(&eval);
    snprintf(dir_again, sizeof dir_again, "%s/fixture-%zu", root, f);
    clt_npz *za = NULL, *zb = NULL;
    if (clt_checkpoint_save(dir_again, 0, &m, &st, again, sizeof again, &e) ||
        clt_npz_read(path, &za, &e) || clt_npz_read(again, &zb, &e)) {
      check(0, "%s saved again: %s", fixtures[f].file, e.msg);
    } else {
      int same = clt_npz_count(za) == clt_npz_count(zb);
      for (int i = 0; i < clt_npz_count(za) && same; i++) {
        const clt_npz_array *a = clt_npz_at(za, i);
        same = same_member(a, clt_npz_find(zb, a->name), path, again);
        if (!same) printf("  member %s differs\n", a->name);
      }
      check(same, "%s saved again: the same members and values, the same metadata",
            fixtures[f].file);
    }
    clt_npz_free(za);
    clt_npz_free(zb);
    clt_checkpoint_free(&st);
  }
}

/* The records' lines (src/base/text.h): the last without its newline, an empty
 * line, nothing at the end or in an empty or absent text. */
static void test_record_lines(void) {
  const char *record = "0 conv2d_1 a b c\n\n1 x", *want[] = {"0 conv2d_1 a b c", "", "1 x"};
  const char *p = record, *line = NULL;
  size_t len = 0;
  int n = 0, good = 1;
  while (clt_text_line(&p, &line, &len)) {
    good = good && n < 3 && len == strlen(want[n]) && strncmp(line, want[n], len) == 0;
    n++;
  }
  check(good && n == 3 && p == record + strlen(record), "a record's lines, one by one (%d)", n);
  p = "";
  const char *none = NULL;
  check(!clt_text_line(&p, &line, &len) && !clt_text_line(&none, &line, &len),
        "no line in an empty or absent text");
}

int main(int argc, char **argv) {
  if (argc != 2 || !mkdtemp(root)) {
    fprintf(stderr, "usage: test_checkpoint_meta FIXTURES_DIR (and a writable /tmp)\n");
    return 2;
  }
  test_round_trip();
  test_malformed();
  test_lr_control();
  test_early_stopping();
  test_fixtures(argv[1]);
  test_record_lines();
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("note: could not remove %s\n", root);
  return check_summary();
}
