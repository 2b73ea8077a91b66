/* The learning-rate schedules and ReduceLROnPlateau (src/engine/schedule.c)
 * against Keras' (the JSON files of tests/schedules/, made by make_fixtures.py
 * with Keras 3): each schedule's rate at chosen steps equal to the one Keras' SGD
 * applies, exactly or within 1 ulp of float32; the plateau's rate, wait,
 * cooldown and best after every epoch of a sequence of monitored values; the
 * texts written into checkpoints read back the same; bad arguments refused in
 * one line naming the flag and the argument. Host only.
 *   test_schedules FIXTURES_DIR */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule.h"

/* The JSON array in dir/name, or NULL (a failed check). */
static cJSON *load(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  char *text = NULL;
  long size = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (text = calloc((size_t)size + 1, 1)) && fread(text, 1, (size_t)size, f) != (size_t)size) {
    free(text);
    text = NULL;
  }
  if (f) fclose(f);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  check(cJSON_IsArray(root), "%s reads as a JSON array", path);
  return cJSON_IsArray(root) ? root : (cJSON_Delete(root), NULL);
}

/* The distance of two non-negative floats in units in the last place. */
static long ulps(float a, float b) {
  uint32_t x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  return x > y ? (long)(x - y) : (long)(y - x);
}

static void schedules(const char *dir) {
  cJSON *all = load(dir, "schedules.json"), *c;
  int cases = 0, steps = 0, exact = 0;
  cJSON_ArrayForEach(c, all) {
    const char *text = cJSON_GetObjectItem(c, "schedule")->valuestring;
    const double lr = cJSON_GetObjectItem(c, "lr")->valuedouble;
    const cJSON *st = cJSON_GetObjectItem(c, "steps"), *rates = cJSON_GetObjectItem(c, "rates");
    clt_schedule s, back;
    clt_err e = {0};
    int status = clt_schedule_parse(text, "--lr-schedule", &s, &e);
    check(status == CLT_OK, "--lr-schedule %s parses (%s)", text, status ? e.msg : "ok");
    if (status) continue;
    /* The checkpoint's text of it reads back as the same schedule. */
    char written[1024], again[1024] = "";
    clt_schedule_format(&s, written, sizeof written);
    status = clt_schedule_parse(written, "--lr-schedule", &back, &e);
    if (!status) clt_schedule_format(&back, again, sizeof again);
    check(!status && strcmp(written, again) == 0, "%s is written as %s and reads back the same",
          text, written);
    long worst = 0;
    const int n = cJSON_GetArraySize(st);
    for (int i = 0; i < n; i++) {
      const long long step = (long long)cJSON_GetArrayItem(st, i)->valuedouble;
      const float want = (float)cJSON_GetArrayItem(rates, i)->valuedouble;
      const float got = clt_schedule_lr(&s, lr, step);
      const long d = ulps(got, want);
      exact += d == 0;
      if (d > worst) worst = d;
      if (d > 1) printf("  step %lld: cltrain %.9g, Keras %.9g\n", step, got, want);
    }
    check(worst <= 1, "%s from %g: %d steps within 1 ulp of Keras' (the farthest %ld)", text, lr, n,
          worst);
    cases++;
    steps += n;
  }
  check(cases >= 16,
        "%d schedules, %d steps: %d equal to Keras' bit for bit, the rest within 1 ulp", cases,
        steps, exact);
  cJSON_Delete(all);
}

static void plateaus(const char *dir) {
  cJSON *all = load(dir, "plateau.json"), *c;
  int cases = 0;
  cJSON_ArrayForEach(c, all) {
    const char *text = cJSON_GetObjectItem(c, "plateau")->valuestring;
    double lr = cJSON_GetObjectItem(c, "lr")->valuedouble;
    const cJSON *values = cJSON_GetObjectItem(c, "values"),
                *rates = cJSON_GetObjectItem(c, "rates");
    const cJSON *waits = cJSON_GetObjectItem(c, "wait");
    const cJSON *cools = cJSON_GetObjectItem(c, "cooldown_counter");
    const cJSON *bests = cJSON_GetObjectItem(c, "best");
    clt_plateau p, back;
    clt_err e = {0};
    int status = clt_plateau_parse(text, "--reduce-lr-on-plateau", &p, &e);
    check(status == CLT_OK, "--reduce-lr-on-plateau %s parses (%s)", text, status ? e.msg : "ok");
    if (status) continue;
    char written[512], again[512] = "";
    clt_plateau_format(&p, written, sizeof written);
    status = clt_plateau_parse(written, "--reduce-lr-on-plateau", &back, &e);
    if (!status) clt_plateau_format(&back, again, sizeof again);
    check(!status && strcmp(written, again) == 0, "%s is written as %s and reads back the same",
          text, written);
    int n = cJSON_GetArraySize(values), first_bad = -1, zero_kept = 0;
    for (int i = 0; i < n && first_bad < 0; i++) {
      const double before = lr;
      clt_plateau_epoch_end(&p, cJSON_GetArrayItem(values, i)->valuedouble, &lr);
      float want = (float)cJSON_GetArrayItem(rates, i)->valuedouble;
      int wait = cJSON_GetArrayItem(waits, i)->valueint;
      int cool = cJSON_GetArrayItem(cools, i)->valueint;
      /* Keras lets the rate reach 0 (and counts that as a reduction); cltrain
       * keeps its last rate above 0, as when min_lr stops it. */
      if (want == 0.0f && lr == before && lr > 0) {
        want = (float)lr;
        wait = p.wait;
        cool = p.cooldown_counter;
        zero_kept = 1;
      }
      const cJSON *best = cJSON_GetArrayItem(bests, i);
      const int best_ok = cJSON_IsNull(best)
                              ? !p.monitor.has_best
                              : p.monitor.has_best && p.monitor.best == best->valuedouble;
      if ((float)lr != want || p.wait != wait || p.cooldown_counter != cool || !best_ok) {
        first_bad = i;
        printf("  epoch %d: cltrain rate %.9g wait %d cooldown %d best %.9g; Keras %.9g %d %d\n",
               i + 1, lr, p.wait, p.cooldown_counter, p.monitor.best, want, wait, cool);
      }
    }
    check(first_bad < 0, "%s from %g: %d epochs' rate, wait, cooldown and best as Keras'%s", text,
          cJSON_GetObjectItem(c, "lr")->valuedouble, n,
          zero_kept ? " (where Keras' rate reaches 0, cltrain keeps its last above 0)" : "");
    cases++;
  }
  check(cases >= 9, "%d ReduceLROnPlateau sequences", cases);
  cJSON_Delete(all);
}

/* A bad --lr-schedule or --reduce-lr-on-plateau: refused with a message holding `want`. */
static void refused(int plateau, const char *text, const char *want) {
  clt_err e = {0};
  clt_schedule s;
  clt_plateau p;
  const int status = plateau ? clt_plateau_parse(text, "--reduce-lr-on-plateau", &p, &e)
                             : clt_schedule_parse(text, "--lr-schedule", &s, &e);
  check(status == CLT_ERR_ARG && strstr(e.msg, want) && !strchr(e.msg, '\n'), "%s '%s' refused: %s",
        plateau ? "--reduce-lr-on-plateau" : "--lr-schedule", text, e.msg);
}

static void bad_input(void) {
  refused(0, "linear:decay_steps=10", "--lr-schedule: unknown schedule 'linear' (expected cosine");
  refused(0, "", "unknown schedule ''");
  refused(0, "cosine", "--lr-schedule cosine: decay_steps is required");
  refused(0, "cosine:decay_steps=0",
          "--lr-schedule cosine: decay_steps=0: expected an integer in (0,");
  refused(0, "cosine:decay_steps=1.5", "decay_steps=1.5: expected an integer");
  refused(0, "cosine:decay_steps=-3", "decay_steps=-3: expected an integer");
  refused(0, "cosine:decay_steps=10,alpha=2", "alpha=2: expected a number in [0, 1]");
  refused(0, "cosine:decay_steps=10,warmup_steps=5", "warmup_steps needs warmup_target");
  refused(0, "cosine:decay_steps=10,warmup_target=0", "warmup_target=0: expected a number in (0,");
  refused(0, "cosine:decay_steps=10,decay_rate=0.5",
          "--lr-schedule cosine: unknown argument 'decay_rate' (it takes decay_steps, alpha, "
          "warmup_target, warmup_steps)");
  refused(0, "cosine:decay_steps=10,decay_steps=20", "decay_steps is given twice");
  refused(0, "cosine:decay_steps", "'decay_steps' is not name=value");
  refused(0, "cosine:decay_steps=10,", "'' is not name=value");
  refused(0, "exponential:decay_steps=10", "--lr-schedule exponential: decay_rate is required");
  refused(0, "ExponentialDecay:decay_steps=10,decay_rate=0",
          "decay_rate=0: expected a number in (0,");
  refused(0, "exponential:decay_steps=10,decay_rate=0.5,staircase=yes",
          "staircase=yes: expected true or false");
  refused(0, "inverse_time:decay_steps=nan,decay_rate=1", "decay_steps=nan: expected an integer");
  refused(0, "polynomial:decay_steps=10,power=-1", "power=-1: expected a number in [0,");
  refused(0, "polynomial:decay_steps=10,end_learning_rate=-0.1", "end_learning_rate=-0.1");
  refused(0, "piecewise:values=0.1/0.01", "--lr-schedule piecewise: boundaries is required");
  refused(0, "piecewise:boundaries=100,values=0.1", "1 boundary need 2 values (one more), not 1");
  refused(0, "piecewise:boundaries=200/100,values=0.1/0.01/0.001", "boundaries must increase");
  refused(0, "piecewise:boundaries=100/100,values=0.1/0.01/0.001", "boundaries must increase");
  refused(0, "piecewise:boundaries=100/x,values=0.1/0.01/0.001",
          "boundaries=100/x: expected an integer");
  refused(0, "piecewise:boundaries=100//200,values=0.1/0.01/0.001", "boundaries=100//200");
  refused(0, "piecewise:boundaries=100,values=0.1/0", "values=0.1/0: expected a number in (0,");
  refused(1, "factor=1", "--reduce-lr-on-plateau: factor=1: expected a number in (0, 1)");
  refused(1, "factor=0", "factor=0: expected a number in (0, 1)");
  refused(1, "patience=-1", "patience=-1: expected an integer in [0,");
  refused(1, "cooldown=0.5", "cooldown=0.5: expected an integer");
  refused(1, "min_lr=-1", "min_lr=-1: expected a number in [0,");
  refused(1, "monitor=val_acc",
          "monitor=val_acc: expected loss, accuracy, val_loss or val_accuracy");
  refused(1, "mode=up", "mode=up: expected auto, min or max");
  refused(1, "baseline=0.5", "unknown argument 'baseline' (it takes monitor, factor, patience");
  refused(1, "patience", "'patience' is not name=value");

  /* Keras' defaults; an empty text takes them all. */
  clt_plateau p;
  clt_err e = {0};
  char text[512];
  int status = clt_plateau_parse(" ", "--reduce-lr-on-plateau", &p, &e);
  clt_plateau_format(&p, text, sizeof text);
  check(!status &&
            strcmp(text, "monitor=val_loss,factor=0.1,patience=10,mode=auto,min_delta=0.0001,"
                         "cooldown=0,min_lr=0") == 0,
        "ReduceLROnPlateau's defaults are Keras': %s", text);
  clt_schedule s;
  status = clt_schedule_parse("polynomial: decay_steps = 10 ", "--lr-schedule", &s, &e);
  clt_schedule_format(&s, text, sizeof text);
  check(!status && strcmp(text, "polynomial:decay_steps=10,end_learning_rate=0.0001,power=1,"
                                "cycle=false") == 0,
        "PolynomialDecay's defaults are Keras' (spaces around names and values ignored): %s", text);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_schedules FIXTURES_DIR\n");
    return 2;
  }
  schedules(argv[1]);
  plateaus(argv[1]);
  bad_input();
  return check_summary();
}
