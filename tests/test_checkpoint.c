/* Checkpoint saves survive crashes: a failure injected before each file-system
 * step of a save, and kill -9 of a process in the middle of saving, both leave
 * an index that names a complete, loadable checkpoint and no temp files. Also:
 * numbering, --keep pruning, exact round trip, the folder lock (one writer, freed
 * by kill -9) and temp files of other processes, the mid-epoch members, and
 * loading refusing non-finite values, unexpected members and an index naming a
 * file elsewhere (the metadata's own checks: test_checkpoint_meta.c). Host only:
 * no device needed. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "npz.h"

static clt_model model;
static clt_checkpoint state;

/* A state whose every value identifies the save it came from. */
static void fill_state(int tag) {
  for (size_t i = 0; i < model.flat_floats; i++) {
    state.params[i] = (float)tag + (float)i * 1e-6f;
    state.opt_state[0][i] = (float)-tag;
    state.opt_state[1][i] = (float)tag * 0.5f;
  }
  state.iterations = 100 * (int64_t)tag;
  state.epoch = tag;
  state.seed = 42;
}

/* The index resolves to a checkpoint that loads; returns its epoch tag or -1. */
static int newest_tag(const char *dir) {
  char path[4096];
  clt_err e = {0};
  clt_checkpoint got;
  if (clt_checkpoint_resolve(dir, path, sizeof path, &e)) {
    printf("  resolve: %s\n", e.msg);
    return -1;
  }
  if (clt_checkpoint_load(path, &model, 1, &got, &e)) {
    printf("  load: %s\n", e.msg);
    return -1;
  }
  int tag = (int)got.epoch;
  int exact = got.params[7] == (float)tag + 7e-6f && got.opt_state[0][3] == (float)-tag &&
              got.iterations == 100 * (int64_t)tag;
  clt_checkpoint_free(&got);
  return exact ? tag : -1;
}

static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *ent;
  while (d && (ent = readdir(d))) n += strncmp(ent->d_name, prefix, strlen(prefix)) == 0;
  if (d) closedir(d);
  return n;
}

static void test_injected_failures(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/injected", root);
  clt_err e = {0};
  fill_state(1);
  check(clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e) == CLT_OK, "first save succeeds");
  check(newest_tag(dir) == 1, "index names the first save");
  for (int step = 1; step <= 7; step++) {
    fill_state(step + 1);
    clt_checkpoint_fail_before_step = step;
    int status = clt_checkpoint_save(dir, 2, &model, &state, NULL, 0, &e);
    clt_checkpoint_fail_before_step = 0;
    check(status != CLT_OK && strstr(e.msg, "injected failure") != NULL,
          "failure before step %d is reported", step);
    /* Before the index is renamed the previous save stays newest; after it, the
     * new one is complete already. Either way it must load exactly. */
    int tag = newest_tag(dir);
    check(step <= 5 ? tag == step : tag == step + 1,
          "after a failure before step %d the index names a complete checkpoint (tag %d)", step,
          tag);
    check(count_files(dir, ".") == 2, /* "." and ".." only */
          "after a failure before step %d no temp file is left", step);
    /* Bring the folder back to "one newest save with tag step + 1". */
    fill_state(step + 1);
    check(clt_checkpoint_save(dir, 2, &model, &state, NULL, 0, &e) == CLT_OK &&
              newest_tag(dir) == step + 1,
          "a clean save after the failure succeeds");
  }
}

static void test_keep_and_numbering(const char *root) {
  char dir[4096], path[4096];
  snprintf(dir, sizeof dir, "%s/keep", root);
  clt_err e = {0};
  for (int k = 1; k <= 6; k++) {
    fill_state(k);
    if (clt_checkpoint_save(dir, 3, &model, &state, path, sizeof path, &e)) printf("  %s\n", e.msg);
  }
  char want[4200];
  snprintf(want, sizeof want, "%s/ckpt-6.npz", dir);
  check(strcmp(path, want) == 0, "saves are numbered ckpt-1, ckpt-2, ... (sixth is ckpt-6)");
  check(state.save_counter == 6, "save_counter is the number");
  check(count_files(dir, "ckpt-") == 3, "--keep 3 leaves three files");
  snprintf(want, sizeof want, "%s/ckpt-3.npz", dir);
  check(access(want, F_OK) != 0, "the oldest kept is ckpt-4");
  char index[4200], text[1024] = "";
  snprintf(index, sizeof index, "%s/checkpoint", dir);
  FILE *f = fopen(index, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[n] = '\0';
  if (f) fclose(f);
  check(strcmp(text, "model_checkpoint_path: \"ckpt-6\"\n"
                     "all_model_checkpoint_paths: \"ckpt-4\"\n"
                     "all_model_checkpoint_paths: \"ckpt-5\"\n"
                     "all_model_checkpoint_paths: \"ckpt-6\"\n") == 0,
        "index in TensorFlow's format");
  check(newest_tag(dir) == 6, "newest loads exactly");
}

/* A child saves in a loop; the parent kills it with SIGKILL at a random moment,
 * many times. Every time the index must name a complete checkpoint. */
static void test_kill(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/kill", root);
  clt_err e = {0};
  fill_state(1);
  clt_checkpoint_save(dir, 3, &model, &state, NULL, 0, &e);
  srand(12345);
  int good = 0, rounds = 25;
  for (int round = 0; round < rounds; round++) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int k = 2;; k++) {
        fill_state(k);
        clt_checkpoint_save(dir, 3, &model, &state, NULL, 0, &e);
      }
    }
    struct timespec d = {0, (rand() % 40 + 1) * 1000000L};
    nanosleep(&d, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    good += newest_tag(dir) >= 1;
  }
  check(good == rounds, "after %d kill -9 mid-save the index names a complete checkpoint (%d ok)",
        rounds, good);
  /* The killed savers' temp files are another process's: only the folder's lock
   * holder may take them for dead and remove them. */
  int fd = -1;
  fill_state(999);
  check(clt_checkpoint_lock(dir, &fd, &e) == CLT_OK &&
            clt_checkpoint_save(dir, 3, &model, &state, NULL, 0, &e) == CLT_OK &&
            newest_tag(dir) == 999 && count_files(dir, ".ckpt-") == 0 &&
            count_files(dir, ".checkpoint.tmp-") == 0,
        "a save under the lock after the kills cleans temp files and succeeds");
  clt_checkpoint_unlock(fd);
}

static void touch(const char *dir, const char *name) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
}

static int exists(const char *dir, const char *name) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* One writer per folder: a second locker is refused naming the holder's PID; the
 * lock goes with the holder, kill -9 included. */
static void test_lock(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/lock", root);
  clt_err e = {0};
  int fd = -1;
  check(clt_checkpoint_prepare_dir(dir, &e) == CLT_OK &&
            clt_checkpoint_lock(dir, &fd, &e) == CLT_OK,
        "the first process takes the lock (%s)", e.msg);
  char want[4400];
  snprintf(want, sizeof want,
           "%s: in use by another cltrain (pid %ld); wait for it or choose another "
           "--checkpoint-dir",
           dir, (long)getpid());
  int pipefd[2];
  if (pipe(pipefd) != 0) return;
  pid_t pid = fork();
  if (pid == 0) { /* another process: refused, its message sent back */
    clt_err ce = {0};
    int cfd = -1;
    int st = clt_checkpoint_lock(dir, &cfd, &ce);
    if (write(pipefd[1], ce.msg, strlen(ce.msg)) < 0) _exit(3);
    _exit(st == CLT_OK ? 1 : 0);
  }
  char got[4400] = "";
  close(pipefd[1]);
  ssize_t n = read(pipefd[0], got, sizeof got - 1);
  got[n > 0 ? n : 0] = '\0';
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strcmp(got, want) == 0,
        "a second process is refused naming the holder (%s)", got);
  clt_checkpoint_unlock(fd);

  /* A holder killed with SIGKILL leaves the folder free. */
  if (pipe(pipefd) != 0) return;
  pid = fork();
  if (pid == 0) {
    clt_err ce = {0};
    int cfd = -1;
    char c = clt_checkpoint_lock(dir, &cfd, &ce) == CLT_OK ? 'y' : 'n';
    if (write(pipefd[1], &c, 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  close(pipefd[1]);
  char c = 0;
  if (read(pipefd[0], &c, 1) != 1) c = 0;
  close(pipefd[0]);
  check(c == 'y' && clt_checkpoint_lock(dir, &fd, &e) != CLT_OK && strstr(e.msg, "in use by"),
        "a child holds the lock (%s)", e.msg);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  check(clt_checkpoint_lock(dir, &fd, &e) == CLT_OK,
        "after kill -9 of the holder the lock is free (%s)", e.msg);
  clt_checkpoint_unlock(fd);
  clt_checkpoint_unlock(-1); /* no lock: nothing to do */
}

/* A save removes its own temp files; another process's only while holding the
 * lock, since without it that process may be saving right now. */
static void test_foreign_temps(const char *root) {
  char dir[4096], own[64], own_index[64];
  snprintf(dir, sizeof dir, "%s/temps", root);
  snprintf(own, sizeof own, ".ckpt-7.npz.tmp-%ld", (long)getpid());
  snprintf(own_index, sizeof own_index, ".checkpoint.tmp-%ld", (long)getpid());
  clt_err e = {0};
  clt_checkpoint_prepare_dir(dir, &e);
  touch(dir, own);
  touch(dir, own_index);
  touch(dir, ".ckpt-3.npz.tmp-999999999"); /* another process's save in flight */
  touch(dir, ".checkpoint.tmp-999999999");
  touch(dir, ".ckpt-4.npz.tmp-junk");
  fill_state(5);
  check(clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e) == CLT_OK && !exists(dir, own) &&
            !exists(dir, own_index),
        "a save removes this process's stale temp files");
  check(exists(dir, ".ckpt-3.npz.tmp-999999999") && exists(dir, ".checkpoint.tmp-999999999") &&
            exists(dir, ".ckpt-4.npz.tmp-junk"),
        "without the lock, other processes' temp files are left alone");
  int fd = -1;
  check(clt_checkpoint_lock(dir, &fd, &e) == CLT_OK &&
            clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e) == CLT_OK &&
            count_files(dir, ".ckpt-") == 0 && count_files(dir, ".checkpoint.tmp-") == 0,
        "with the lock held, every stale temp file is removed");
  /* The lock is found by the folder's identity, whatever the path's spelling. */
  clt_checkpoint_unlock(fd);
  touch(dir, ".ckpt-9.npz.tmp-999999999");
  char other[4200];
  snprintf(other, sizeof other, "%s/../temps/", dir);
  check(clt_checkpoint_lock(other, &fd, &e) == CLT_OK &&
            clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e) == CLT_OK &&
            count_files(dir, ".ckpt-") == 0,
        "a lock taken through another spelling of the path counts");
  clt_checkpoint_unlock(fd);
}

/* Each optimizer's kind, hyper-parameters and slot variables come back exactly, under
 * their member names; slots it does not keep are not saved and load as zeros. A state
 * whose learning rate is 0 (not recorded) saves no optimizer and loads as Adam. */
static void test_optimizers(const char *root) {
  const struct {
    clt_optimizer_kind kind;
    int nesterov;
    double lr, momentum, rho, weight_decay;
  } cases[] = {{CLT_OPT_ADAM, 0, 0, 0, 0.9, 0},         {CLT_OPT_ADAM, 0, 3e-4, 0, 0.9, 0.004},
               {CLT_OPT_SGD, 0, 0.1, 0, 0.9, 0},        {CLT_OPT_SGD, 1, 0.05, 0.9, 0.9, 1e-4},
               {CLT_OPT_RMSPROP, 0, 1e-3, 0, 0.8, 0.1}, {CLT_OPT_RMSPROP, 0, 0.002, 0.5, 0.95, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char dir[4096], path[4200];
    clt_err e = {0};
    snprintf(dir, sizeof dir, "%s/optimizer-%zu", root, c);
    fill_state((int)c + 1);
    clt_optimizer *o = &state.optimizer;
    *o = clt_optimizer_defaults(cases[c].kind);
    o->lr = cases[c].lr;
    o->momentum = cases[c].momentum;
    o->nesterov = cases[c].nesterov;
    o->rho = cases[c].rho;
    o->weight_decay = cases[c].weight_decay;
    o->epsilon = 1.5e-7;
    const char *name = clt_optimizer_name(o->kind);
    clt_checkpoint got = {0};
    if (clt_checkpoint_save(dir, 0, &model, &state, path, sizeof path, &e) ||
        clt_checkpoint_load(path, &model, 1, &got, &e)) {
      check(0, "%s %zu: save and load: %s", name, c, e.msg);
      continue;
    }
    const clt_optimizer *g = &got.optimizer;
    const int unrecorded = o->lr == 0;
    check(unrecorded ? g->kind == CLT_OPT_ADAM && g->lr == 0
                     : g->kind == o->kind && g->lr == o->lr && g->momentum == o->momentum &&
                           g->nesterov == o->nesterov && g->weight_decay == o->weight_decay &&
                           (o->kind == CLT_OPT_SGD || g->epsilon == o->epsilon) &&
                           (o->kind != CLT_OPT_RMSPROP || g->rho == o->rho),
          "%s %zu (lr %g, momentum %g): the optimizer's kind and hyper-parameters come back", name,
          c, o->lr, o->momentum);
    clt_npz *z = NULL;
    if (clt_npz_read(path, &z, &e)) check(0, "reading %s: %s", path, e.msg);
    for (int k = 0; k < CLT_OPT_SLOTS && z; k++) {
      const char *slot = clt_optimizer_slot(o, k);
      size_t wrong = 0;
      for (int l = 0; l < model.nlayers; l++) { /* the parameters, not the gaps between */
        for (int p = 0; p < model.layers[l].nparams; p++) {
          const clt_param *par = &model.layers[l].params[p];
          for (size_t i = par->offset; i < par->offset + par->size && !par->non_trainable; i++) {
            wrong += got.opt_state[k][i] != (slot ? state.opt_state[k][i] : 0.0f);
          }
        }
      }
      /* Without momentum SGD's slot 0 and RMSprop's slot 1 would be "momentum". */
      const int sgd = o->kind == CLT_OPT_SGD;
      char member[128];
      snprintf(member, sizeof member, "optimizer/dense_1/bias/%s",
               slot                      ? slot
               : (sgd ? k == 0 : k == 1) ? "momentum"
                                         : "none");
      check(wrong == 0 && (clt_npz_find(z, member) != NULL) == (slot != NULL),
            "%s %zu: slot %d %s%s", name, c, k, slot ? "saved as " : "neither saved nor needed",
            slot ? member : "");
    }
    clt_npz_free(z);
    clt_checkpoint_free(&got);
  }
  state.optimizer = (clt_optimizer){0};
}

/* Writes checkpoint `in` to `out` without member `drop`, with `add` appended and
 * float `at` of member `poison` set to v (each NULL: nothing). 0 on success. */
static int rewrite(const char *in, const char *out, const char *drop, const clt_npz_array *add,
                   const char *poison, size_t at, float v) {
  clt_err e = {0};
  clt_npz *z = NULL;
  if (clt_npz_read(in, &z, &e)) {
    printf("  %s\n", e.msg);
    return -1;
  }
  int n = clt_npz_count(z), m = 0, rc = 0;
  clt_npz_array *arrays = calloc((size_t)n + 1, sizeof *arrays);
  float *copy = NULL;
  for (int i = 0; arrays && i < n; i++) {
    clt_npz_array a = *clt_npz_at(z, i);
    if (drop && strcmp(a.name, drop) == 0) continue;
    if (poison && strcmp(a.name, poison) == 0 && (copy = malloc(a.bytes))) {
      memcpy(copy, a.data, a.bytes);
      copy[at] = v;
      a.data = copy;
    }
    arrays[m++] = a;
  }
  if (arrays && add) arrays[m++] = *add;
  if (!arrays || clt_npz_write(out, arrays, m, &e)) {
    printf("  %s\n", arrays ? e.msg : "out of memory");
    rc = -1;
  }
  free(copy);
  free(arrays);
  clt_npz_free(z);
  return rc;
}

/* Loads path for model m expecting refusal with a message equal to `want` after
 * the path and ": " (want_contains: containing it). */
static void expect_refused(const char *what, const char *path, const clt_model *m,
                           int with_optimizer, const char *want) {
  clt_checkpoint got;
  clt_err e = {0};
  const int st = clt_checkpoint_load(path, m, with_optimizer, &got, &e);
  const size_t n = strlen(path);
  const int ok = st == CLT_ERR_FORMAT && strncmp(e.msg, path, n) == 0 &&
                 strncmp(e.msg + n, ": ", 2) == 0 && strcmp(e.msg + n + 2, want) == 0 &&
                 got.params == NULL;
  check(ok, "%s: refused (%s)", what, st ? e.msg : "loaded");
  if (!st) clt_checkpoint_free(&got);
}

static int loads(const char *path, const clt_model *m, int with_optimizer) {
  clt_checkpoint got;
  clt_err e = {0};
  if (clt_checkpoint_load(path, m, with_optimizer, &got, &e)) {
    printf("  %s\n", e.msg);
    return 0;
  }
  clt_checkpoint_free(&got);
  return 1;
}

/* The steps into an unfinished epoch and their sums come back; a checkpoint of
 * an older cltrain, without them, loads as 0 steps. */
static void test_epoch_step(const char *root) {
  char dir[4096], path[4200], old[4200];
  snprintf(dir, sizeof dir, "%s/epoch_step", root);
  snprintf(old, sizeof old, "%s/old.npz", root);
  clt_err e = {0};
  double sums[3][2] = {{2.25, 40}, {1.5, 51}, {0.75, 60}};
  fill_state(4);
  state.epoch_step = 3;
  state.epoch_sums = malloc(sizeof sums);
  memcpy(state.epoch_sums, sums, sizeof sums);
  clt_checkpoint got = {0};
  int st = clt_checkpoint_save(dir, 0, &model, &state, path, sizeof path, &e);
  if (!st) st = clt_checkpoint_load(path, &model, 1, &got, &e);
  int same = !st && got.epoch_step == 3 && got.epoch_sums;
  for (int i = 0; same && i < 6; i++) same = got.epoch_sums[i] == sums[i / 2][i % 2];
  check(same, "data/epoch_step and data/epoch_sums round trip (%s)", st ? e.msg : "");
  clt_checkpoint_free(&got);
  clt_npz *z = NULL;
  const clt_npz_array *a = clt_npz_read(path, &z, &e) ? NULL : clt_npz_find(z, "data/epoch_sums");
  check(a && strcmp(a->dtype, "<f8") == 0 && a->rank == 2 && a->dims[0] == 3 && a->dims[1] == 2,
        "data/epoch_sums is float64 of shape (3, 2)");
  clt_npz_free(z);

  char sums_wrong[4200], nonfinite[4200], nosums[4200];
  snprintf(sums_wrong, sizeof sums_wrong, "%s/sums_wrong.npz", root);
  snprintf(nonfinite, sizeof nonfinite, "%s/sums_nan.npz", root);
  snprintf(nosums, sizeof nosums, "%s/nosums.npz", root);
  rewrite(path, nosums, "data/epoch_sums", NULL, NULL, 0, 0);
  expect_refused("epoch_step without epoch_sums", nosums, &model, 1,
                 "missing member data/epoch_sums");
  clt_npz_array two = {.name = "data/epoch_sums",
                       .dtype = "<f8",
                       .rank = 2,
                       .dims = {2, 2},
                       .data = sums,
                       .bytes = 4 * sizeof(double)};
  rewrite(path, sums_wrong, "data/epoch_sums", &two, NULL, 0, 0);
  expect_refused("epoch_sums of another shape", sums_wrong, &model, 1,
                 "member data/epoch_sums should be <f8 of shape (3, 2), as data/epoch_step says");
  double bad[3][2] = {{2.25, 40}, {NAN, 51}, {0.75, 60}};
  clt_npz_array nan_sums = {.name = "data/epoch_sums",
                            .dtype = "<f8",
                            .rank = 2,
                            .dims = {3, 2},
                            .data = bad,
                            .bytes = sizeof bad};
  rewrite(path, nonfinite, "data/epoch_sums", &nan_sums, NULL, 0, 0);
  expect_refused("a NaN epoch sum", nonfinite, &model, 0,
                 "member data/epoch_sums holds a non-finite value (NaN at index 2)");
  int64_t too_many = 401; /* more than the 400 steps taken */
  clt_npz_array step = {.name = "data/epoch_step", .dtype = "<i8", .data = &too_many, .bytes = 8};
  rewrite(nosums, sums_wrong, "data/epoch_step", &step, NULL, 0, 0);
  expect_refused("epoch_step beyond the steps taken", sums_wrong, &model, 1,
                 "member data/epoch_step is 401, outside 0..400 (the steps taken)");

  /* At an epoch boundary: data/epoch_step 0 and no sums. */
  free(state.epoch_sums);
  state.epoch_sums = NULL;
  state.epoch_step = 0;
  st = clt_checkpoint_save(dir, 0, &model, &state, path, sizeof path, &e);
  a = NULL;
  z = NULL;
  int64_t zero = -1;
  if (!st && !clt_npz_read(path, &z, &e) && (a = clt_npz_find(z, "data/epoch_step")))
    memcpy(&zero, a->data, 8);
  check(a && zero == 0 && !clt_npz_find(z, "data/epoch_sums"),
        "at an epoch boundary: data/epoch_step 0, no data/epoch_sums");
  clt_npz_free(z);
  rewrite(path, old, "data/epoch_step", NULL, NULL, 0, 0);
  st = clt_checkpoint_load(old, &model, 1, &got, &e);
  check(!st && got.epoch_step == 0 && !got.epoch_sums && got.epoch == 4,
        "a checkpoint without data/epoch_step (older cltrain) loads as 0 steps (%s)",
        st ? e.msg : "");
  clt_checkpoint_free(&got);
  rewrite(path, sums_wrong, NULL, &nan_sums, NULL, 0, 0);
  expect_refused("epoch_sums with epoch_step 0", sums_wrong, &model, 1,
                 "unexpected member data/epoch_sums (not part of a checkpoint of model "
                 "fmnist-cnn trained with adam)");
  state.epoch_step = 2;
  check(clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e) == CLT_ERR_INTERNAL,
        "a save of steps without their sums is a bug, refused (%s)", e.msg);
  state.epoch_step = 0;
}

/* A NaN or infinity in a weight, a slot variable or a moving statistic: refused
 * naming the member and the index, with or without the optimizer. */
static void test_nonfinite(const char *root) {
  char dir[4096], good[4200], bad[4200];
  snprintf(dir, sizeof dir, "%s/nonfinite", root);
  snprintf(bad, sizeof bad, "%s/nonfinite.npz", root);
  clt_err e = {0};
  fill_state(3);
  if (clt_checkpoint_save(dir, 0, &model, &state, good, sizeof good, &e)) {
    check(0, "save: %s", e.msg);
    return;
  }
  const struct {
    const char *member;
    size_t at;
    float v;
    const char *want;
  } cases[] = {
      {"dense/bias", 7, NAN, "member dense/bias holds a non-finite value (NaN at index 7)"},
      {"conv2d/kernel", 0, INFINITY,
       "member conv2d/kernel holds a non-finite value (+Inf at index 0)"},
      {"dense_1/kernel", 639, -INFINITY,
       "member dense_1/kernel holds a non-finite value (-Inf at index 639)"},
      {"optimizer/conv2d_1/kernel/m", 5, NAN,
       "member optimizer/conv2d_1/kernel/m holds a non-finite value (NaN at index 5)"},
      {"optimizer/dense/bias/v", 63, INFINITY,
       "member optimizer/dense/bias/v holds a non-finite value (+Inf at index 63)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rewrite(good, bad, NULL, NULL, cases[i].member, cases[i].at, cases[i].v);
    char what[200];
    snprintf(what, sizeof what, "%s[%zu] = %g, for training", cases[i].member, cases[i].at,
             cases[i].v);
    expect_refused(what, bad, &model, 1, cases[i].want);
    snprintf(what, sizeof what, "%s[%zu] = %g, for evaluation", cases[i].member, cases[i].at,
             cases[i].v);
    expect_refused(what, bad, &model, 0, cases[i].want);
  }

  /* Moving statistics (BatchNormalization) are parameters too. */
  static clt_model rn;
  clt_checkpoint rs = {0};
  if (clt_model_build("resnet-small", (clt_shape){32, 32, 3}, 3, &rn, &e)) {
    check(0, "resnet-small: %s", e.msg);
    return;
  }
  rs.params = calloc(rn.flat_floats, sizeof(float));
  rs.opt_state[0] = calloc(rn.flat_floats, sizeof(float));
  rs.opt_state[1] = calloc(rn.flat_floats, sizeof(float));
  rs.save_counter = 1;
  snprintf(dir, sizeof dir, "%s/nonfinite-bn", root);
  if (clt_checkpoint_save(dir, 0, &rn, &rs, good, sizeof good, &e)) {
    check(0, "save: %s", e.msg);
  } else {
    check(loads(good, &rn, 1), "a resnet-small checkpoint loads");
    check(clt_checkpoint_extra_member(&rn, "optimizer/conv1_bn/gamma/m") &&
              !clt_checkpoint_extra_member(&rn, "optimizer/conv1_bn/moving_mean/m"),
          "moving statistics have no slot variables");
    rewrite(good, bad, NULL, NULL, "conv1_bn/moving_variance", 2, NAN);
    expect_refused("a NaN moving variance", bad, &rn, 0,
                   "member conv1_bn/moving_variance holds a non-finite value (NaN at index 2)");
    rewrite(good, bad, NULL, NULL, "conv1_bn/moving_mean", 0, -INFINITY);
    expect_refused("a -Inf moving mean", bad, &rn, 1,
                   "member conv1_bn/moving_mean holds a non-finite value (-Inf at index 0)");
  }
  clt_checkpoint_free(&rs);
}

/* Exactly the members a checkpoint of the model holds: anything else refused;
 * the optional ones accepted. */
static void test_members(const char *root) {
  char dir[4096], good[4200], bad[4200];
  snprintf(dir, sizeof dir, "%s/members", root);
  snprintf(bad, sizeof bad, "%s/members.npz", root);
  clt_err e = {0};
  fill_state(2);
  if (clt_checkpoint_save(dir, 0, &model, &state, good, sizeof good, &e)) {
    check(0, "save: %s", e.msg);
    return;
  }
  float junk[3] = {0};
  clt_npz_array extra = {.name = "extra/unused",
                         .dtype = "<f4",
                         .rank = 1,
                         .dims = {3},
                         .data = junk,
                         .bytes = sizeof junk};
  rewrite(good, bad, NULL, &extra, NULL, 0, 0);
  expect_refused("an extra member, for training", bad, &model, 1,
                 "unexpected member extra/unused (not part of a checkpoint of model fmnist-cnn "
                 "trained with adam)");
  expect_refused("an extra member, for evaluation", bad, &model, 0,
                 "unexpected member extra/unused (not part of a checkpoint of model fmnist-cnn)");
  clt_npz_array slot = {.name = "optimizer/dense/bias/momentum",
                        .dtype = "<f4",
                        .rank = 1,
                        .dims = {64},
                        .data = state.params,
                        .bytes = 64 * sizeof(float)};
  rewrite(good, bad, NULL, &slot, NULL, 0, 0);
  expect_refused("a slot variable Adam does not keep", bad, &model, 1,
                 "unexpected member optimizer/dense/bias/momentum (not part of a checkpoint of "
                 "model fmnist-cnn trained with adam)");
  clt_npz_array biasless = {.name = "optimizer/dense/kernel2/m",
                            .dtype = "<f4",
                            .rank = 1,
                            .dims = {64},
                            .data = state.params,
                            .bytes = 64 * sizeof(float)};
  rewrite(good, bad, NULL, &biasless, NULL, 0, 0);
  expect_refused("a slot variable of no parameter, for evaluation", bad, &model, 0,
                 "unexpected member optimizer/dense/kernel2/m (not part of a checkpoint of model "
                 "fmnist-cnn)");
  /* Optional members: class names and a model file's text. */
  uint32_t text[64];
  clt_npz_array names;
  clt_npz_string(&names, "data/class_names", "a\nb\nc", text);
  rewrite(good, bad, NULL, &names, NULL, 0, 0);
  check(loads(bad, &model, 1) && loads(bad, &model, 0), "data/class_names is accepted");
  clt_npz_string(&names, "model/keras_json", "{}", text);
  rewrite(good, bad, NULL, &names, NULL, 0, 0);
  check(loads(bad, &model, 1), "model/keras_json is accepted");
  /* Evaluation needs no optimizer state: a slot variable may be missing. */
  rewrite(good, bad, "optimizer/dense/bias/v", NULL, NULL, 0, 0);
  check(loads(bad, &model, 0), "for evaluation a missing slot variable is fine");
  expect_refused("a missing slot variable, for training", bad, &model, 1,
                 "missing member optimizer/dense/bias/v");
  /* What an older cltrain wrote (no optimizer in the metadata, no epoch_step):
   * Adam's m and v. */
  clt_optimizer saved = state.optimizer;
  state.optimizer = (clt_optimizer){0};
  check(clt_checkpoint_save(dir, 0, &model, &state, good, sizeof good, &e) == CLT_OK &&
            rewrite(good, bad, "data/epoch_step", NULL, NULL, 0, 0) == 0 && loads(bad, &model, 1) &&
            loads(bad, &model, 0),
        "an older cltrain's checkpoint (Adam, no data/epoch_step) loads");
  state.optimizer = saved;
  /* --weights takes a checkpoint and ignores its other members, but not junk. */
  check(clt_checkpoint_extra_member(&model, "optimizer/conv2d/kernel/velocity") &&
            clt_checkpoint_extra_member(&model, "data/epoch_sums") &&
            !clt_checkpoint_extra_member(&model, "dense/kernel") &&
            !clt_checkpoint_extra_member(&model, "optimizer/conv9/kernel/m") &&
            !clt_checkpoint_extra_member(&model, "extra/unused"),
        "clt_checkpoint_extra_member knows a checkpoint's members");
}

/* The index names a file of its own folder or nothing. */
static void test_index(const char *root) {
  char dir[4096], index[4200], path[4200];
  snprintf(dir, sizeof dir, "%s/index", root);
  snprintf(index, sizeof index, "%s/checkpoint", dir);
  clt_err e = {0};
  fill_state(1);
  clt_checkpoint_save(dir, 0, &model, &state, NULL, 0, &e);
  char elsewhere[4200];
  snprintf(elsewhere, sizeof elsewhere, "%s/ckpt-1.npz", root); /* a real file outside */
  clt_checkpoint_save(root, 0, &model, &state, NULL, 0, &e);
  const char *names[] = {
      "../ckpt-1",    "index/../../index/ckpt-1", "sub/../../ckpt-1", "/tmp/ckpt-1", "..", ".",
      "a\\..\\ckpt-1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    FILE *f = fopen(index, "w");
    if (!f) continue;
    fprintf(f, "model_checkpoint_path: \"%s\"\n", names[i]);
    fclose(f);
    int st = clt_checkpoint_resolve(dir, path, sizeof path, &e);
    char want[4400];
    snprintf(want, sizeof want,
             "%s: the index names \"%s\", which is not a file of this folder (only a bare "
             "file name, without '/', is accepted)",
             index, names[i]);
    check(st == CLT_ERR_FORMAT && strcmp(e.msg, want) == 0, "index naming \"%s\" refused (%s)",
          names[i], st ? e.msg : path);
  }
  FILE *f = fopen(index, "w");
  if (f) {
    fprintf(f, "model_checkpoint_path: \"ckpt-1\"\n");
    fclose(f);
  }
  char want[4200];
  snprintf(want, sizeof want, "%s/ckpt-1.npz", dir);
  check(clt_checkpoint_resolve(dir, path, sizeof path, &e) == CLT_OK && strcmp(path, want) == 0,
        "index naming ckpt-1 resolves to %s", path);
}

int main(void) {
  clt_err e = {0};
  char root[] = "/tmp/cltrain-ckpt-XXXXXX";
  if (!mkdtemp(root) || clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &model, &e)) {
    check(0, "setup: %s", e.msg);
    return check_summary();
  }
  state.params = malloc(model.flat_floats * sizeof(float));
  state.opt_state[0] = malloc(model.flat_floats * sizeof(float));
  state.opt_state[1] = malloc(model.flat_floats * sizeof(float));
  test_injected_failures(root);
  test_keep_and_numbering(root);
  test_kill(root);
  test_lock(root);
  test_foreign_temps(root);
  test_optimizers(root);
  test_epoch_step(root);
  test_nonfinite(root);
  test_members(root);
  test_index(root);
  clt_checkpoint_free(&state);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("note: could not remove %s\n", root);
  return check_summary();
}
