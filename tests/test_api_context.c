/* The public API's context, options and stop requests (cltrain.h):
 * - cltrain_open/close, rank and processes of a lone process, the device
 *   accessors against clt_devices_enumerate;
 * - bad use (a NULL or wrong handle, a bad device index, an unknown or bad open
 *   option, options set or parsed wrong, options of another command) fails with a
 *   message that names the function and the cause;
 * - cltrain_request_stop, cltrain_stop_requested, cltrain_clear_stop;
 * - a stop requested from a signal handler ends a cltrain_fit run with
 *   CLTRAIN_ERR_STOPPED and a checkpoint, which resume continues.
 * Trains a few steps of the Fashion-MNIST CNN on the default data folder.
 *   test_api_context */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cltrain.h"
#include "device.h"

/* Whether s begins with prefix and contains part. */
static int says(const char *s, const char *prefix, const char *part) {
  return s && strncmp(s, prefix, strlen(prefix)) == 0 && strstr(s, part) != NULL;
}

static void test_context(void) {
  cltrain_ctx *ctx = NULL;
  int rc = cltrain_open(NULL, &ctx);
  check(rc == CLTRAIN_OK && ctx, "cltrain_open (%s)", cltrain_errmsg(NULL));
  if (!ctx) return;
  check(cltrain_rank(ctx) == 0 && cltrain_processes(ctx) == 1, "a lone process: rank 0 of 1");

  clt_device_list list;
  clt_err e = {0};
  if (clt_devices_enumerate(&list, &e)) {
    check(0, "clt_devices_enumerate: %s", e.msg);
  } else {
    int same = cltrain_device_count(ctx) == list.count && list.count > 0;
    for (int i = 0; same && i < list.count; i++) {
      const clt_device *d = &list.devices[i];
      char type[16];
      snprintf(type, sizeof type, "%s", clt_device_type_name(d->type));
      for (char *c = type; *c; c++) *c = (char)tolower((unsigned char)*c);
      same = strcmp(cltrain_device_name(ctx, i), d->name) == 0 &&
             strcmp(cltrain_device_platform(ctx, i), d->platform_name) == 0 &&
             strcmp(cltrain_device_type(ctx, i), type) == 0 &&
             cltrain_device_compute_units(ctx, i) == d->compute_units &&
             cltrain_device_memory(ctx, i) == (double)d->global_mem_bytes;
    }
    check(same, "%d devices, each's name, platform, type, units and memory as enumerated",
          list.count);
    const int n = list.count;
    check(cltrain_device_name(ctx, n) == NULL &&
              says(cltrain_errmsg(ctx), "cltrain_device_name: ", "no device"),
          "a device index past the last: NULL, and why (%s)", cltrain_errmsg(ctx));
    check(cltrain_device_memory(ctx, -1) == 0 && cltrain_device_compute_units(ctx, -1) == 0 &&
              says(cltrain_errmsg(ctx), "cltrain_device_compute_units: ", "no device -1"),
          "a negative device index: 0, and why (%s)", cltrain_errmsg(ctx));
    clt_devices_free(&list);
  }

  /* NULL and wrong handles: the message is the thread's. */
  check(cltrain_device_count(NULL) == -1 &&
            says(cltrain_errmsg(NULL), "cltrain_device_count: ", "the context is NULL"),
        "a NULL context is refused (%s)", cltrain_errmsg(NULL));
  check(cltrain_rank(NULL) == -1 && cltrain_processes(NULL) == -1 &&
            cltrain_device_type(NULL, 0) == NULL,
        "rank, processes and device type of a NULL context");
  cltrain_options *o = NULL;
  cltrain_options_create("train", &o);
  check(cltrain_device_count((const cltrain_ctx *)o) == -1 &&
            says(cltrain_errmsg(NULL), "cltrain_device_count: ", "not a context handle"),
        "options passed as a context are refused (%s)", cltrain_errmsg(NULL));
  check(cltrain_fit(NULL, o, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(NULL), "cltrain_fit: ", "the context is NULL"),
        "cltrain_fit without a context (%s)", cltrain_errmsg(NULL));
  check(cltrain_fit(ctx, NULL, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(NULL), "cltrain_fit: ", "the options is NULL"),
        "cltrain_fit without options (%s)", cltrain_errmsg(NULL));
  check(cltrain_evaluate(ctx, o, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_evaluate: ", "options for cltrain train, not eval"),
        "cltrain_evaluate with train's options (%s)", cltrain_errmsg(o));
  cltrain_options_free(&o);
  check(o == NULL, "cltrain_options_free NULLs the handle");
  cltrain_options_free(&o); /* a no-op */
  cltrain_options_free(NULL);

  cltrain_close(&ctx);
  check(ctx == NULL, "cltrain_close NULLs the handle");
  cltrain_close(&ctx); /* a no-op */
  cltrain_abort(&ctx);
  cltrain_close(NULL);

  /* Bad options to open, and a good one. */
  check(cltrain_open("colour=1", &ctx) == CLTRAIN_ERR_ARG && !ctx &&
            says(cltrain_errmsg(NULL),
                 "cltrain_open: ", "unknown option 'colour' (known: verbose)"),
        "cltrain_open: an unknown option (%s)", cltrain_errmsg(NULL));
  check(cltrain_open("verbose=2", &ctx) == CLTRAIN_ERR_ARG && !ctx &&
            says(cltrain_errmsg(NULL), "cltrain_open: ", "option verbose=2: expected an integer"),
        "cltrain_open: a bad value (%s)", cltrain_errmsg(NULL));
  check(cltrain_open(NULL, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(NULL), "cltrain_open: ", "out is NULL"),
        "cltrain_open without a place for the handle");
  check(cltrain_open("verbose=1", &ctx) == CLTRAIN_OK && ctx, "cltrain_open(\"verbose=1\")");
  cltrain_close(&ctx);
}

static void test_options(void) {
  cltrain_options *o = NULL;
  check(cltrain_options_create("fit", &o) == CLTRAIN_ERR_ARG && !o &&
            says(cltrain_errmsg(NULL), "cltrain_options_create: ", "command 'fit': expected"),
        "options for an unknown command (%s)", cltrain_errmsg(NULL));
  check(cltrain_options_create(NULL, &o) == CLTRAIN_ERR_ARG && !o, "options for command NULL");
  if (cltrain_options_create("train", &o)) {
    check(0, "cltrain_options_create(train): %s", cltrain_errmsg(NULL));
    return;
  }
  check(cltrain_options_set(o, "epochs", "3") == CLTRAIN_OK &&
            cltrain_options_set(o, "resume", NULL) == CLTRAIN_OK &&
            cltrain_options_set(o, "resume", "false") == CLTRAIN_OK &&
            cltrain_options_set(o, "lr", "0.01") == CLTRAIN_OK &&
            cltrain_options_set(o, "data", "/nowhere") == CLTRAIN_OK,
        "set: a number, a switch on and off, a string");
  check(cltrain_options_set(o, "epochs", "x") == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_set: ",
                 "cltrain train: --epochs: expected an integer in [1, 1000000], got 'x'"),
        "set: a value out of the flag's range (%s)", cltrain_errmsg(o));
  check(cltrain_options_set(o, "epoch", "3") == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_set: ", "unknown option 'epoch'"),
        "set: an unknown name (%s)", cltrain_errmsg(o));
  check(cltrain_options_set(o, "epochs", NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_set: ", "--epochs needs a value"),
        "set: a flag without its value (%s)", cltrain_errmsg(o));
  check(cltrain_options_set(o, "resume", "yes") == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_set: ", "--resume is a switch"),
        "set: a switch with a value (%s)", cltrain_errmsg(o));
  check(cltrain_options_set(o, "path", "a.jpg") == CLTRAIN_ERR_ARG, "set: path is predict's alone");
  check(cltrain_options_set(NULL, "epochs", "3") == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(NULL), "cltrain_options_set: ", "the options is NULL"),
        "set on NULL options (%s)", cltrain_errmsg(NULL));

  char *bad[] = {"--epochs", "0"};
  check(cltrain_options_parse(o, 2, bad, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_parse: ",
                 "cltrain train: --epochs: expected an integer in [1, 1000000], got '0'"),
        "parse: a bad value (%s)", cltrain_errmsg(o));
  char *unknown[] = {"--bogus"};
  check(cltrain_options_parse(o, 1, unknown, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_parse: ", "unknown option --bogus"),
        "parse: an unknown flag (%s)", cltrain_errmsg(o));
  check(cltrain_options_parse(o, 1, NULL, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(o), "cltrain_options_parse: ", "argv NULL"),
        "parse: argc 1 with argv NULL (%s)", cltrain_errmsg(o));
  char good[] = "--checkpoint-every=5", keep[] = "--keep", two[] = "2";
  char *args[] = {good, keep, two};
  check(cltrain_options_parse(o, 3, args, NULL) == CLTRAIN_OK, "parse: good flags");
  good[2] = 'X'; /* the options hold copies */
  char *help[] = {"--help"};
  FILE *f = tmpfile();
  char text[64] = "";
  const int rc = f ? cltrain_options_parse(o, 1, help, f) : 0;
  if (f) {
    rewind(f);
    if (!fgets(text, sizeof text, f)) text[0] = '\0';
    text[strcspn(text, "\n")] = '\0';
    fclose(f);
  }
  check(rc == -1 && strncmp(text, "usage: cltrain train", 20) == 0,
        "parse: --help returns -1 and prints the usage to out (%s)", text);
  cltrain_options_free(&o);

  /* predict's images, by name and by argument. */
  cltrain_options *p = NULL;
  cltrain_options_create("predict", &p);
  char img[] = "b.png", topk[] = "--top-k", three[] = "3";
  char *pargs[] = {img, topk, three};
  check(p && cltrain_options_set(p, "path", "a.jpg") == CLTRAIN_OK &&
            cltrain_options_parse(p, 3, pargs, NULL) == CLTRAIN_OK &&
            cltrain_options_set(p, "format", "csv") == CLTRAIN_OK,
        "predict: a path set, one parsed, flags after them");
  check(cltrain_options_set(p, "path", "") == CLTRAIN_ERR_ARG, "predict: an empty path");
  cltrain_options_free(&p);

  cltrain_options *d = NULL;
  cltrain_options_create("devices", &d);
  char *extra[] = {"x"};
  check(d && cltrain_options_parse(d, 1, extra, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(d),
                 "cltrain_options_parse: ", "cltrain devices: unexpected argument 'x'"),
        "devices takes no argument (%s)", cltrain_errmsg(d));
  cltrain_options_free(&d);
}

static void test_stop_flags(void) {
  cltrain_clear_stop();
  check(!cltrain_stop_requested() && cltrain_stop_signal() == 0, "no stop asked at first");
  cltrain_request_stop();
  check(cltrain_stop_requested() && cltrain_stop_signal() == 0,
        "cltrain_request_stop: asked, by no signal");
  cltrain_clear_stop();
  check(!cltrain_stop_requested(), "cltrain_clear_stop forgets it");
}

/* ---- a stop asked by a signal handler ends cltrain_fit ------------------------ */

static void on_alarm(int sig) {
  (void)sig;
  cltrain_request_stop();
}

typedef struct watcher {
  pthread_t main;
  char log[512];
  int sent;
} watcher;

/* Waits for the first epoch's log line, then signals the training thread. */
static void *watch(void *arg) {
  watcher *w = arg;
  for (int i = 0; i < 24000; i++) { /* 4 minutes at most */
    FILE *f = fopen(w->log, "r");
    int lines = 0;
    for (int c; f && (c = fgetc(f)) != EOF;) lines += c == '\n';
    if (f) fclose(f);
    if (lines >= 1) {
      w->sent = pthread_kill(w->main, SIGALRM) == 0;
      return NULL;
    }
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  return NULL;
}

static int has_checkpoint(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *ent; d && (ent = readdir(d));)
    n += strncmp(ent->d_name, "ckpt-", 5) == 0 && strstr(ent->d_name, ".npz") != NULL;
  if (d) closedir(d);
  return n;
}

/* The other high-level calls on the checkpoint cltrain_fit saved. */
static void test_checkpoint_calls(cltrain_ctx *ctx, const char *ckpt, const char *dir) {
  cltrain_options *v = NULL, *x = NULL, *p = NULL;
  char onnx[700], text[256] = "";
  snprintf(onnx, sizeof onnx, "%s/m.onnx", dir);
  FILE *f = tmpfile();
  int rc = cltrain_options_create("eval", &v);
  if (!rc) rc = cltrain_options_set(v, "checkpoint", ckpt);
  if (!rc) rc = cltrain_evaluate(ctx, v, f);
  int found = 0;
  if (f) {
    rewind(f);
    while (!found && fgets(text, sizeof text, f)) found = strncmp(text, "Accuracy: ", 10) == 0;
    fclose(f);
  }
  text[strcspn(text, "\n")] = '\0';
  check(rc == CLTRAIN_OK && found, "cltrain_evaluate prints the checkpoint's accuracy to out (%s)",
        rc ? cltrain_errmsg(NULL) : text);

  rc = cltrain_options_create("export", &x);
  if (!rc) rc = cltrain_options_set(x, "checkpoint", ckpt);
  check(!rc && cltrain_export(ctx, x, NULL) == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(ctx), "cltrain_export: ", "--onnx FILE is required"),
        "cltrain_export without onnx (%s)", cltrain_errmsg(ctx));
  if (!rc) rc = cltrain_options_set(x, "onnx", onnx);
  if (!rc) rc = cltrain_export(ctx, x, NULL);
  check(rc == CLTRAIN_OK && access(onnx, F_OK) == 0, "cltrain_export writes %s (%s)", onnx,
        rc ? cltrain_errmsg(NULL) : "ok");

  rc = cltrain_options_create("predict", &p);
  if (!rc) rc = cltrain_options_set(p, "checkpoint", ckpt);
  if (!rc) rc = cltrain_options_set(p, "path", "/nonexistent/a.png");
  if (!rc) rc = cltrain_predict(ctx, p, NULL, NULL);
  check(rc == CLTRAIN_ERR_ARG &&
            says(cltrain_errmsg(p), "cltrain_predict: ", "every path given was skipped"),
        "cltrain_predict: the path set reaches it (%s)", cltrain_errmsg(p));
  cltrain_options_free(&v);
  cltrain_options_free(&x);
  cltrain_options_free(&p);
}

static void test_fit_stop(void) {
  char dir[] = "/tmp/cltrain-api-XXXXXX";
  if (!mkdtemp(dir)) {
    check(0, "mkdtemp");
    return;
  }
  char ckpt[600];
  watcher w = {.main = pthread_self()};
  snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
  snprintf(w.log, sizeof w.log, "%s/log.jsonl", dir);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);

  cltrain_ctx *ctx = NULL;
  cltrain_options *o = NULL;
  int rc = cltrain_open(NULL, &ctx);
  if (!rc) rc = cltrain_options_create("train", &o);
  /* Far more epochs than run: only the stop ends it; checkpoints only from it. */
  const char *const set[][2] = {{"train-limit", "256"},         {"test-limit", "64"},
                                {"batch-per-replica", "32"},    {"epochs", "100000"},
                                {"checkpoint-every", "100000"}, {"seed", "3"},
                                {"checkpoint-dir", ckpt},       {"log", w.log}};
  for (size_t i = 0; i < sizeof set / sizeof set[0] && !rc; i++)
    rc = cltrain_options_set(o, set[i][0], set[i][1]);
  check(rc == CLTRAIN_OK, "a context and train's options (%s)", rc ? cltrain_errmsg(NULL) : "ok");
  pthread_t t;
  if (!rc && pthread_create(&t, NULL, watch, &w) == 0) {
    cltrain_clear_stop();
    rc = cltrain_fit(ctx, o, NULL);
    pthread_join(t, NULL);
    const char *msg = cltrain_errmsg(ctx);
    check(w.sent && rc == CLTRAIN_ERR_STOPPED &&
              says(msg, "cltrain_fit: stopped by a stop request at ", "; saved ") &&
              strcmp(msg, cltrain_errmsg(o)) == 0,
          "a stop asked in a signal handler: CLTRAIN_ERR_STOPPED, on the context and options "
          "(%s: %s)",
          cltrain_status_name(rc), msg);
    check(has_checkpoint(ckpt) == 1, "the stop saved one checkpoint in %s", ckpt);
    check(cltrain_stop_requested() && cltrain_stop_signal() == 0,
          "the request stays until cleared; no signal of cltrain_handle_signals");

    /* resume continues it up to the epoch it stopped in. */
    const char *at = msg ? strstr(msg, "epoch ") : NULL;
    const int epoch = at ? atoi(at + 6) : 0;
    char epochs[16];
    snprintf(epochs, sizeof epochs, "%d", epoch > 0 ? epoch : 1);
    cltrain_clear_stop();
    rc = cltrain_options_set(o, "resume", NULL);
    if (!rc) rc = cltrain_options_set(o, "epochs", epochs);
    if (!rc) rc = cltrain_fit(ctx, o, NULL);
    check(epoch > 0 && rc == CLTRAIN_OK, "resume continues it to epoch %d (%s)", epoch,
          rc ? cltrain_errmsg(ctx) : "ok");
    test_checkpoint_calls(ctx, ckpt, dir);
  }
  cltrain_options_free(&o);
  cltrain_close(&ctx);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
  test_context();
  test_options();
  test_stop_flags();
  test_fit_stop();
  return check_summary();
}
