/* The trainer's convolution algorithms (trainer.h): each replica's from its
 * device's tuning results and a checkpoint's record, reserved on its net. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_tuner.h"
#include "layer.h"
#include "timing.h"
#include "trainer_impl.h"
#include "tuner.h"

/* The record's lines for replica `index` applied to r (a layer or algorithm
 * this replica cannot run keeps its default). */
static void apply_record(const clt_model *m, clt_replica *r, int index, int batch,
                         const char *record) {
  const char *line = record;
  while (line && *line) {
    const char *end = strchr(line, '\n');
    char text[256];
    const size_t len = end ? (size_t)(end - line) : strlen(line);
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), line);
    line = end ? end + 1 : NULL;
    int at = -1;
    char layer[64], algo[CLT_CONV_PASSES][16];
    if (sscanf(text, "%d %63s %15s %15s %15s", &at, layer, algo[0], algo[1], algo[2]) != 5 ||
        at != index)
      continue;
    const int i = clt_model_find(m, layer);
    clt_conv_geom g;
    int filters;
    if (i < 0 || !clt_conv2d_tunable(&m->layers[i], batch, &g, &filters)) continue;
    for (int p = 0; p < CLT_CONV_PASSES; p++) {
      clt_err ignored = {0};
      const int a = clt_conv_algo_parse(algo[p]);
      if (a >= 0) (void)clt_conv_choose(r, layer, &g, filters, p, a, &ignored);
    }
  }
}

/* Copies `from` into `to` (both of its size), enqueued. */
static int copy_buffer(clt_replica *r, cl_mem from, cl_mem to, clt_err *e) {
  size_t bytes = 0;
  cl_int rc = clGetMemObjectInfo(from, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
  if (!rc) rc = clEnqueueCopyBuffer(r->queue, from, to, 0, 0, bytes, 0, NULL, NULL);
  return rc ? clt_replica_fail(r, e, rc, "tuning: copying a batch") : CLT_OK;
}

int clt_trainer_keep_probe_batch(clt_trainer *t, clt_err *e) {
  int status = CLT_OK;
  for (int i = 0; i < t->n && !status; i++) {
    trainer_replica *l = &t->local[i];
    cl_mem from[2] = {l->net->input, l->net->labels}, *to[2] = {&l->probe_input, &l->probe_labels};
    for (int k = 0; k < 2 && !status; k++) {
      size_t bytes = 0;
      if (!*to[k]) {
        cl_int rc = clGetMemObjectInfo(from[k], CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        status = rc ? clt_replica_fail(l->replica, e, rc, "tuning: a batch's size")
                    : clt_replica_alloc(l->replica, bytes, "the tuning's batch", to[k], e);
      }
      if (!status) status = copy_buffer(l->replica, from[k], *to[k], e);
    }
  }
  return status;
}

static void report_verdict(FILE *out, int replica, const clt_tune_verdict *v, double seconds) {
  if (!out) return;
  if (v->pending)
    fprintf(out,
            "Replica %d: tuning in the step: %s; the algorithms stay until it is done, after "
            "the next epoch (%d probe steps so far, %.1f s)\n",
            replica, v->why, v->all_steps, seconds);
  else if (v->over)
    fprintf(out, "Replica %d: tuning in the step: %s; the algorithms stay (%.1f s)\n", replica,
            v->why, seconds);
  else if (v->probed && v->differs)
    fprintf(out,
            "Replica %d: tuning in the step: step %.2f ms default, %.2f ms tuned: %s (%s; %d "
            "probe steps, %.1f s%s)\n",
            replica, v->default_ms, v->tuned_ms, v->confirmed ? "confirmed" : "kept default",
            v->why, v->all_steps, seconds, v->calls > 1 ? " in this call" : "");
  else if (v->probed)
    fprintf(out, "Replica %d: tuning in the step: kept default (%s; %d probe steps, %.1f s)\n",
            replica, v->why, v->probe_steps, seconds);
}

static int tune_replica(clt_trainer *t, int i, const clt_trainer_tuning *cfg, double budget_s,
                        int *over, clt_err *e) {
  trainer_replica *l = &t->local[i];
  clt_replica *r = l->replica;
  int status = CLT_OK;
  const double start = clt_now_seconds();
  /* The probes run on the kept training batch, whole slices, into the spare
   * metrics slot; the next step loads its own batch over it. */
  const clt_step_opts so = {.count = l->cap,
                            .loss_scale = 1.0f / (float)t->global,
                            .metric_slot = l->net->metric_slots - 1};
  if (cfg->tune) {
    clt_tune_ident ident;
    clt_tune_cache *cache = NULL;
    status = clt_tune_ident_of(&r->device, r->defines, &ident, e);
    if (!status) status = clt_tune_open(NULL, cfg->file, &ident, stderr, &cache, e);
    const int max_lines = CLT_CONV_PASSES * t->model->nlayers + 1;
    clt_tune_line *lines = status ? NULL : malloc((size_t)max_lines * sizeof *lines);
    if (!status && !lines) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
    if (!status && budget_s > 0 && !l->tune_progress &&
        !(l->tune_progress = clt_tune_progress_new()))
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
    const clt_tuner_opts o = {.batch = l->cap,
                              .tune = budget_s > 0,
                              .budget_s = budget_s,
                              .cache = cache,
                              .progress = l->tune_progress};
    if (!status && o.tune && l->probe_input) {
      status = copy_buffer(r, l->probe_input, l->net->input, e);
      if (!status) status = copy_buffer(r, l->probe_labels, l->net->labels, e);
    }
    int n = 0;
    clt_tune_verdict v;
    const double t0 = clt_now_seconds();
    if (!status) status = clt_tune_net(l->net, &o, &so, lines, max_lines, &n, &v, e);
    if (!status && o.tune) report_verdict(cfg->verbose, t->base + i, &v, clt_now_seconds() - t0);
    if (!status && o.tune && v.over) *over = 1;
    free(lines);
    clt_tune_close(cache);
  }
  if (!status && cfg->recorded) apply_record(t->model, r, t->base + i, l->cap, cfg->recorded);
  if (!status) status = clt_net_prepare(l->net, e);
  /* Then the products' tilings, as the chosen algorithms run them, once those
   * are settled. */
  if (!status && cfg->tune) {
    /* What the algorithms left of the budget; none left: the cache only. */
    const double left = budget_s > 0 ? budget_s - (clt_now_seconds() - start) : 0;
    const int settled = !clt_tune_progress_pending(l->tune_progress);
    status = clt_gemm_tune_trainer_net(l->net, cfg->file, left > 0 && settled, left, &so,
                                       cfg->verbose, e);
  }
  return status;
}

int clt_trainer_tune(clt_trainer *t, const clt_trainer_tuning *cfg, double budget_s, double *spent,
                     int *over, clt_err *e) {
  const double t0 = clt_now_seconds();
  int status = CLT_OK, ran_over = 0;
  for (int i = 0; i < t->n && !status; i++) {
    /* The budget is the run's: each replica gets what the others left. */
    double left = budget_s > 0 ? budget_s - (clt_now_seconds() - t0) : 0;
    if (budget_s > 0 && left <= 0) left = 1e-9;
    status = tune_replica(t, i, cfg, left, &ran_over, e);
  }
  if (spent) *spent = clt_now_seconds() - t0;
  if (over) *over = ran_over;
  return status;
}

char *clt_trainer_conv_record(const clt_trainer *t) {
  size_t size = 1, used = 0;
  char *out = NULL;
  /* Twice: the size, then the text. */
  for (int round = 0; round < 2; round++) {
    if (round == 1 && !(out = malloc(size))) return NULL;
    for (int i = 0; i < t->n; i++) {
      const clt_replica *r = t->local[i].replica;
      const clt_plan *plan = &t->local[i].net->plan;
      for (int k = 0; k < plan->nsteps; k++) {
        const clt_layer *l = &t->model->layers[plan->steps[k].layer];
        clt_conv_geom g;
        int filters;
        if (plan->steps[k].fusion.pools || !clt_conv2d_tunable(l, t->local[i].cap, &g, &filters))
          continue;
        const clt_conv_algos a = clt_conv_algos_layer(r, l->name, &g, filters);
        char line[256];
        const int n = snprintf(line, sizeof line, "%d %s %s %s %s\n", t->base + i, l->name,
                               clt_conv_algo_name(a.forward), clt_conv_algo_name(a.weight_grad),
                               clt_conv_algo_name(a.input_grad));
        if (n < 0) continue;
        if (round == 0) size += (size_t)n;
        else {
          memcpy(out + used, line, (size_t)n);
          used += (size_t)n;
        }
      }
    }
  }
  out[used] = '\0';
  return out;
}
