/* Checkpoint saves survive crashes: a failure injected before each file-system
 * step of a save, and kill -9 of a process in the middle of saving, both leave
 * an index that names a complete, loadable checkpoint and no temp files. Also:
 * numbering, --keep pruning, exact round trip. Host only: no device needed. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  fill_state(999);
  check(clt_checkpoint_save(dir, 3, &model, &state, NULL, 0, &e) == CLT_OK &&
            newest_tag(dir) == 999 && count_files(dir, ".") == 2,
        "a save after the kills cleans temp files and succeeds");
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
  test_optimizers(root);
  clt_checkpoint_free(&state);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("note: could not remove %s\n", root);
  return check_summary();
}
