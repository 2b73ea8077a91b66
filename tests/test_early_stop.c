/* Early stopping (src/engine/early_stop.c) against Keras: every case of
 * tests/early_stopping/keras.json (made by make_fixture.py with Keras 3's
 * keras.callbacks.EarlyStopping) fed through cltrain's rule, epoch by epoch:
 * the same wait, best and best epoch after each epoch, the same stop, and the
 * same weights restored at the end. Each case again stopped halfway and resumed
 * from a checkpoint saved then, as --resume continues it: the same decisions.
 * Then --early-stopping's text: Keras' defaults, and bad keys and values refused
 * in one line naming the flag. Host only: no device needed.
 *   test_early_stop tests/early_stopping/keras.json */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "early_stop.h"

static char root[] = "/tmp/cltrain-es-XXXXXX";
static clt_model model;

/* The file's text, a new string; NULL if unreadable. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1))) {
      text[fread(text, 1, (size_t)n, f)] = '\0';
    }
  }
  fclose(f);
  return text;
}

/* The case's Keras arguments as --early-stopping takes them. */
static void flag_text(const cJSON *args, char *buf, size_t size) {
  size_t len = 0;
  const cJSON *a;
  buf[0] = '\0';
  cJSON_ArrayForEach(a, args) {
    char value[64];
    if (cJSON_IsString(a)) snprintf(value, sizeof value, "%s", a->valuestring);
    else if (cJSON_IsBool(a))
      snprintf(value, sizeof value, "%s", cJSON_IsTrue(a) ? "true" : "false");
    else if (cJSON_IsNull(a)) snprintf(value, sizeof value, "none");
    else snprintf(value, sizeof value, "%.17g", a->valuedouble);
    len += (size_t)snprintf(buf + len, size - len, "%s%s=%s", len ? "," : "", a->string, value);
  }
}

/* es through a checkpoint saved and loaded again, as --resume takes it. */
static int through_checkpoint(clt_early_stop *es, const char *name) {
  char dir[4200];
  clt_err e = {0};
  clt_checkpoint st = {.optimizer = clt_optimizer_defaults(CLT_OPT_SGD), .early_stop = *es};
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  st.params = calloc(model.flat_floats, sizeof(float));
  for (int k = 0; k < CLT_OPT_SLOTS; k++)
    st.opt_state[k] = calloc(model.flat_floats, sizeof(float));
  char path[4300];
  int status = clt_checkpoint_save(dir, 0, &model, &st, path, sizeof path, &e);
  clt_checkpoint_free(&st);
  if (!status) status = clt_checkpoint_load(path, &model, 1, &st, &e);
  if (status) {
    check(0, "%s: checkpoint round trip: %s", name, e.msg);
    return status;
  }
  *es = st.early_stop;
  clt_checkpoint_free(&st);
  return CLT_OK;
}

/* One case from epoch 0, resumed from a checkpoint after `pause` epochs (0: not
 * paused); returns whether every epoch and the end agree with Keras. */
static int run_case(int index, const cJSON *c, int pause, const char *flag) {
  const cJSON *values = cJSON_GetObjectItem(c, "values"),
              *epochs = cJSON_GetObjectItem(c, "epochs");
  const cJSON *weights = cJSON_GetObjectItem(c, "weights_epoch");
  clt_err e = {0};
  clt_early_stop es;
  char what[600];
  snprintf(what, sizeof what, "case %d (%s)%s", index, flag, pause ? ", resumed" : "");
  if (clt_early_stop_parse("--early-stopping", flag, &es, &e)) {
    check(0, "%s: %s", what, e.msg);
    return 0;
  }
  const int n = cJSON_GetArraySize(epochs);
  int ran = 0, stopped = 0, same = 1;
  for (int epoch = 0; epoch < cJSON_GetArraySize(values) && !stopped && same; epoch++) {
    if (pause && epoch == pause) {
      char name[32];
      snprintf(name, sizeof name, "case%d", index);
      if (through_checkpoint(&es, name)) return 0;
    }
    int improved;
    stopped = clt_early_stop_update(&es, epoch, cJSON_GetArrayItem(values, epoch)->valuedouble,
                                    &improved);
    ran++;
    const cJSON *k = cJSON_GetArrayItem(epochs, epoch);
    const cJSON *best = k ? cJSON_GetObjectItem(k, "best") : NULL;
    same = k && es.wait == cJSON_GetObjectItem(k, "wait")->valueint &&
           es.has_best == !cJSON_IsNull(best) && (!es.has_best || es.best == best->valuedouble) &&
           es.best_epoch == cJSON_GetObjectItem(k, "best_epoch")->valueint &&
           stopped == cJSON_IsTrue(cJSON_GetObjectItem(k, "stop"));
    if (!same)
      check(0, "%s: epoch %d: wait %d, best %.17g (%s), best epoch %d, stop %d; Keras: %s", what,
            epoch, es.wait, es.best, es.has_best ? "set" : "none", es.best_epoch, stopped,
            k ? cJSON_PrintUnformatted(k) : "(no epoch)");
  }
  if (!same) return 0;
  /* Keras' on_train_end: the best's weights whenever it kept them. */
  const int restored = es.restore_best_weights && es.has_best ? es.best_epoch : -1;
  const int want_restored = cJSON_IsNull(weights) ? -1 : weights->valueint;
  if (ran != n || es.stopped_epoch != cJSON_GetObjectItem(c, "stopped_epoch")->valueint ||
      restored != want_restored) {
    check(0, "%s: ran %d epochs, stopped at %d, restored epoch %d; Keras %d, %d, %d", what, ran,
          es.stopped_epoch, restored, n, cJSON_GetObjectItem(c, "stopped_epoch")->valueint,
          want_restored);
    return 0;
  }
  return 1;
}

static void test_keras(const char *fixture) {
  char *text = slurp(fixture);
  cJSON *root_json = text ? cJSON_Parse(text) : NULL;
  const cJSON *cases = cJSON_GetObjectItem(root_json, "cases");
  check(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: cases read", fixture);
  int agree = 0, resumed = 0, total = 0, stops = 0, restores = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cases) {
    char flag[512];
    flag_text(cJSON_GetObjectItem(c, "args"), flag, sizeof flag);
    const int n = cJSON_GetArraySize(cJSON_GetObjectItem(c, "epochs"));
    agree += run_case(total, c, 0, flag);
    resumed += n < 2 || run_case(total, c, n / 2, flag);
    stops += cJSON_GetObjectItem(c, "stopped_epoch")->valueint > 0;
    restores += !cJSON_IsNull(cJSON_GetObjectItem(c, "weights_epoch"));
    total++;
  }
  check(agree == total,
        "Keras %s's EarlyStopping: %d of %d cases the same at every epoch (%d "
        "stop early, %d restore weights)",
        cJSON_GetStringValue(cJSON_GetObjectItem(root_json, "keras_version")), agree, total, stops,
        restores);
  check(resumed == total, "... and %d of %d the same when resumed halfway from a checkpoint",
        resumed, total);
  cJSON_Delete(root_json);
  free(text);
}

static void test_flag(void) {
  clt_err e = {0};
  clt_early_stop es;
  char text[512];
  int status = clt_early_stop_parse("--early-stopping", "patience=5", &es, &e);
  clt_early_stop_describe(&es, text, sizeof text);
  check(!status && strcmp(text, "monitor=val_loss,min_delta=0,patience=5,mode=auto,baseline=none,"
                                "restore_best_weights=false,start_from_epoch=0") == 0,
        "Keras' defaults for the arguments left out: %s", status ? e.msg : text);
  status = clt_early_stop_parse("--early-stopping",
                                "start_from_epoch=2,restore_best_weights=True,baseline=0.1,"
                                "mode=max,min_delta=-0.01,monitor=val_accuracy,patience=0",
                                &es, &e);
  clt_early_stop_describe(&es, text, sizeof text);
  check(!status && strcmp(text, "monitor=val_accuracy,min_delta=-0.01,patience=0,mode=max,"
                                "baseline=0.1,restore_best_weights=true,start_from_epoch=2") == 0,
        "every argument in any order: %s", status ? e.msg : text);
  check(clt_early_stop_minimizes(&es) == 0, "mode=max maximizes");
  es.mode = CLT_ES_AUTO;
  check(clt_early_stop_minimizes(&es) == 0, "mode=auto on val_accuracy maximizes");
  es.monitor = CLT_MONITOR_LOSS;
  check(clt_early_stop_minimizes(&es) == 1, "mode=auto on loss minimizes");
  const struct {
    const char *text, *want;
  } bad[] = {
      {"patience=-1", "--early-stopping: patience=-1: expected an integer in [0, 1000000]"},
      {"patience=2.5", "--early-stopping: patience=2.5: expected an integer in [0, 1000000]"},
      {"monitor=val_acc", "--early-stopping: monitor=val_acc: expected val_loss, val_accuracy, "
                          "loss or accuracy"},
      {"mode=up", "--early-stopping: mode=up: expected auto, min or max"},
      {"min_delta=x", "--early-stopping: min_delta=x: expected a number"},
      {"min_delta=nan", "--early-stopping: min_delta=nan: expected a number"},
      {"baseline=", "--early-stopping: baseline=: expected a number, or none"},
      {"restore_best_weights=yes",
       "--early-stopping: restore_best_weights=yes: expected true or false"},
      {"start_from_epoch=", "--early-stopping: start_from_epoch=: expected an integer"},
      {"verbose=1", "--early-stopping: unknown key 'verbose' (Keras' EarlyStopping arguments: "
                    "monitor, min_delta, patience, mode, baseline, restore_best_weights, "
                    "start_from_epoch)"},
      {"patience=1,patience=2", "--early-stopping: patience given twice"},
      {"patience", "--early-stopping patience: 'patience' is not KEY=VALUE"},
      {"patience=1,", "--early-stopping patience=1,: expected KEY=VALUE items separated by commas"},
      {",patience=1", "--early-stopping ,patience=1: expected KEY=VALUE items separated by commas"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    e.msg[0] = '\0';
    status = clt_early_stop_parse("--early-stopping", bad[i].text, &es, &e);
    check(status == CLT_ERR_ARG && strstr(e.msg, bad[i].want) == e.msg && !strchr(e.msg, '\n'),
          "'%s' refused: %s", bad[i].text, e.msg);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_early_stop tests/early_stopping/keras.json\n");
    return 2;
  }
  clt_err e = {0};
  if (!mkdtemp(root) || clt_model_parse("tiny", (clt_shape){4, 4, 1}, 2, CLT_PRE_UNIT,
                                        "g=GlobalAveragePooling2D d=Dense(2)", &model, &e)) {
    printf("FAIL: set-up: %s\n", e.msg[0] ? e.msg : "mkdtemp");
    return 1;
  }
  test_keras(argv[1]);
  test_flag();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("note: could not remove %s\n", root);
  return check_summary();
}
