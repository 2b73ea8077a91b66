/* `cltrain tune`: the tuner (tuner.h) on each selected device, ahead of
 * training: per Conv2D pass the chosen algorithm, its time and the default's,
 * kept in the device's tuning cache. On cltrain's internals (replicas, the
 * tuner and its cache), not the public API. */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "flags.h"
#include "gemm_tuner.h"
#include "internals.h"
#include "keras.h"
#include "net.h"
#include "rng.h"
#include "select.h"
#include "timing.h"
#include "tuner.h"

/* Lines per layer at most: its forward, backward and weights' passes. */
#define LINES_PER_LAYER 3

static void print_lines(const clt_tune_line *lines, int n) {
  printf("  %-28s %-4s %-10s %10s %-10s %10s %7s  %s\n", "layer", "pass", "chosen", "ms", "default",
         "ms", "speedup", "how");
  for (int i = 0; i < n; i++) {
    const clt_tune_line *t = &lines[i];
    char how[96], rejected[32] = "";
    const char *verdict = t->confirmed ? "confirmed" : "kept default";
    if (t->rejected) snprintf(rejected, sizeof rejected, ", %d rejected", t->rejected);
    if (t->cached) snprintf(how, sizeof how, "cached, %s", verdict);
    else if (t->tuned)
      snprintf(how, sizeof how, "tuned, %d candidates%s, in the step: %s", t->candidates, rejected,
               verdict);
    else if (t->checked && t->nok < 2)
      snprintf(how, sizeof how, "one of %d candidates passed the check", t->candidates);
    else if (t->candidates < 2) snprintf(how, sizeof how, "one algorithm fits");
    else snprintf(how, sizeof how, "not tuned (budget)");
    char ms[32] = "-", dms[32] = "-", gain[32] = "-";
    if (t->ms > 0) snprintf(ms, sizeof ms, "%.3f", t->ms);
    if (t->default_ms > 0) snprintf(dms, sizeof dms, "%.3f", t->default_ms);
    if (t->ms > 0 && t->default_ms > 0) snprintf(gain, sizeof gain, "%.2fx", t->default_ms / t->ms);
    printf("  %-28s %-4s %-10s %10s %-10s %10s %7s  %s\n", t->layer, clt_conv_pass_name(t->pass),
           clt_conv_algo_name(t->algo), ms, clt_conv_algo_name(t->default_algo), dms, gain, how);
  }
}

/* The whole step's verdict: the confirmation's, or the cache's record of it. */
static void print_step(const clt_tune_line *lines, int n, const clt_tune_verdict *v) {
  if (v->over) {
    printf("  step: %s; the defaults and cached choices stay\n", v->why);
    return;
  }
  if (v->probed && v->differs) {
    printf("  step: %.2f ms default, %.2f ms tuned, %.2fx: %s (%s)\n", v->default_ms, v->tuned_ms,
           v->tuned_ms > 0 ? v->default_ms / v->tuned_ms : 0.0,
           v->confirmed ? "confirmed" : "kept default", v->why);
    return;
  }
  if (v->probed) {
    printf("  step: kept default (%s)\n", v->why);
    return;
  }
  for (int i = 0; i < n; i++) {
    const clt_tune_line *t = &lines[i];
    if (!t->cached || t->step_ms <= 0 || t->default_step_ms <= 0) continue;
    printf("  step (cached): %.2f ms default, %.2f ms tuned, %.2fx: %s\n", t->default_step_ms,
           t->step_ms, t->default_step_ms / t->step_ms,
           t->confirmed ? "confirmed" : "kept default");
    return;
  }
  printf("  step: nothing to tune\n");
}

/* A synthetic batch on net: uniform inputs in [0, 1), labels uniform over
 * the classes; the model's own initial weights. */
static int synthetic_batch(clt_net *net, int batch, clt_err *e) {
  const clt_model *m = net->model;
  const size_t nin = (size_t)batch * clt_shape_size(m->input);
  float *x = malloc(nin * sizeof *x), *flat = malloc(m->flat_floats * sizeof *flat);
  int32_t *labels = malloc((size_t)batch * sizeof *labels);
  int status = CLT_OK;
  if (!x || !flat || !labels) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status) {
    clt_rng rng;
    clt_rng_seed(&rng, 0x73796e74u, 0);
    for (size_t i = 0; i < nin; i++) x[i] = (float)clt_rng_uniform(&rng);
    for (int i = 0; i < batch; i++)
      labels[i] = (int32_t)(clt_rng_uniform(&rng) * m->classes) % m->classes;
    clt_model_init_params(m, 1, flat);
    status = clt_net_write_params(net, flat, e);
  }
  cl_command_queue q = net->replica->queue;
  cl_int rc = status ? CL_SUCCESS
                     : clEnqueueWriteBuffer(q, net->input, CL_TRUE, 0, nin * sizeof *x, x, 0, NULL,
                                            NULL);
  if (!status && !rc)
    rc = clEnqueueWriteBuffer(q, net->labels, CL_TRUE, 0, (size_t)batch * sizeof *labels, labels, 0,
                              NULL, NULL);
  if (!status && rc) status = clt_replica_fail(net->replica, e, rc, "writing the synthetic batch");
  free(x);
  free(flat);
  free(labels);
  return status;
}

/* The algorithms the probes picked, for the GEMM stage's steps to judge. */
typedef struct picks_ctx {
  clt_net *net;
  const clt_tune_line *lines;
  int n;
} picks_ctx;

static int put_picks(void *ctx, int on, clt_err *e) {
  const picks_ctx *p = ctx;
  return clt_tune_put_side(p->net, p->lines, p->n, on, e);
}

/* The products' lines: each tiled GEMM's chosen tiling against the default. */
static void print_gemm_lines(const clt_gemm_tune_line *lines, int n) {
  printf("  %-26s %-28s %10s %10s %7s  %s\n", "GEMM (M x N x K)", "tiling", "ms", "default ms",
         "speedup", "how");
  for (int i = 0; i < n; i++) {
    const clt_gemm_tune_line *t = &lines[i];
    char shape[64], how[128], ms[32] = "-", dms[32] = "-", gain[32] = "-";
    snprintf(shape, sizeof shape, "%zux%zux%zu%s%s", t->shape.m, t->shape.n, t->shape.k,
             t->shape.trans_a ? " At" : "", t->shape.trans_b ? " Bt" : "");
    char rejected[32] = "", step[48] = "";
    if (t->rejected) snprintf(rejected, sizeof rejected, ", %d rejected", t->rejected);
    if (t->instep)
      snprintf(step, sizeof step, ", in the step: %s", t->confirmed ? "confirmed" : "kept default");
    if (t->cached) snprintf(how, sizeof how, "cached%s", step);
    else if (t->tuned)
      snprintf(how, sizeof how, "tuned, %d candidates%s%s", t->candidates, rejected, step);
    else if (t->candidates < 2) snprintf(how, sizeof how, "one tiling fits");
    else snprintf(how, sizeof how, "not tuned (budget)");
    if (t->ms > 0) snprintf(ms, sizeof ms, "%.3f", t->ms);
    if (t->default_ms > 0) snprintf(dms, sizeof dms, "%.3f", t->default_ms);
    if (t->ms > 0 && t->default_ms > 0) snprintf(gain, sizeof gain, "%.2fx", t->default_ms / t->ms);
    printf("  %-26s %-28s %10s %10s %7s  %s\n", shape, t->chosen, ms, dms, gain, how);
  }
}

/* The tiled products of m's net on r, as the chosen algorithms run them, tuned
 * with what is left of the budget on net (NULL: one built when needed; all
 * cached: from the cache, no net run); with `below`, the algorithms the
 * probes picked (lines, n) are judged in the same steps, their verdict in
 * *below. */
static int tune_gemms(const clt_model *m, clt_replica *r, clt_net *net, const clt_tune_opts *o,
                      clt_tune_cache *cache, double t0, clt_tune_line *alines, int an,
                      clt_tune_verdict *below, clt_gemm_tune_line *lines, int *n, int *built,
                      clt_err *e) {
  *n = *built = 0;
  if (!r->backend->tilings) return CLT_OK;
  const double left = o->budget > 0 ? o->budget - (clt_now_seconds() - t0) : 0;
  /* The tilings picked are confirmed by whole steps on a synthetic batch. */
  const clt_step_opts so = {.count = o->batch, .loss_scale = 1.0f / (float)o->batch};
  picks_ctx pc = {.net = net, .lines = alines, .n = an};
  const clt_gemm_tuner_opts go = {.tune = 1,
                                  .budget_s = o->budget > 0 && left <= 0 ? 1e-9 : left,
                                  .cache = cache,
                                  .step = &so,
                                  .load = synthetic_batch,
                                  .net = net,
                                  .below = below ? put_picks : NULL,
                                  .below_ctx = &pc,
                                  .below_verdict = below};
  int status = below ? put_picks(&pc, 1, e) : CLT_OK;
  if (!status)
    status = clt_gemm_tune_model(m, r, o->batch, &go, lines, CLT_GEMM_MAX_SHAPES, n, built, e);
  return status;
}

/* The products' table, their counts and the tilings' whole-step verdict. */
static void print_gemms(const clt_gemm_tune_line *lines, int n, int built, double t0) {
  int tuned = 0, cached = 0;
  for (int i = 0; i < n; i++) {
    tuned += lines[i].tuned;
    cached += lines[i].cached;
  }
  print_gemm_lines(lines, n);
  printf("  %d GEMM shapes: %d tuned, %d cached, %d at the default%s; %.1f s\n", n, tuned, cached,
         n - tuned - cached, built ? "" : " (no net built)", clt_now_seconds() - t0);
  /* When one was taken now. */
  for (int i = 0; i < n; i++) {
    if (!lines[i].instep) continue;
    printf("  tilings' step: %.2f ms default, %.2f ms tuned: %s (%s)\n", lines[i].default_step_ms,
           lines[i].step_ms, lines[i].confirmed ? "confirmed" : "kept default", lines[i].why);
    break;
  }
}

/* Tunes m on one device: in the step, on a synthetic batch through the
 * training net, as cltrain train does between epochs. */
static int tune_device(const clt_model *m, const clt_device *d, int index, const clt_tune_opts *o,
                       clt_tune_line *lines, clt_err *e) {
  clt_replica *r = NULL;
  clt_tune_cache *cache = NULL;
  clt_net *net = NULL;
  clt_tune_ident ident;
  int status = clt_backend_create_replica(d, &r, e);
  if (!status) status = clt_tune_ident_of(&r->device, r->defines, &ident, e);
  if (!status) status = clt_tune_open(NULL, o->tune_file, &ident, stderr, &cache, e);
  if (status) {
    if (r) clt_backend_destroy_replica(r);
    return status;
  }
  printf("Device %d: %s (%s kernels), batch %d; results in %s%s\n", index, r->device.name,
         r->variant, o->batch, clt_tune_path(cache),
         clt_tune_persistent(cache) ? "" : " (in memory only)");
  fflush(stdout);
  /* A pick of the probes is judged with the GEMM tilings, in the same steps. */
  const int stacked = r->backend->tilings != NULL;
  const clt_tuner_opts to = {
      .batch = o->batch, .tune = 1, .budget_s = o->budget, .cache = cache, .defer = stacked};
  const clt_step_opts so = {.count = o->batch, .loss_scale = 1.0f / (float)o->batch};
  int n = 0;
  clt_tune_verdict v;
  const double t0 = clt_now_seconds();
  /* The cache first: with every pass in it, no net is built and nothing runs. */
  const clt_tuner_opts look = {.batch = o->batch, .check_only = 1, .cache = cache};
  memset(&v, 0, sizeof v);
  status = clt_tune_model(m, r, &look, lines, LINES_PER_LAYER * m->nlayers, &n, e);
  int todo = 0;
  for (int i = 0; i < n; i++) todo |= !lines[i].cached && lines[i].candidates > 1;
  if (!status && todo) status = clt_net_create(m, r, o->batch, 1, &net, e);
  if (!status && todo) status = synthetic_batch(net, o->batch, e);
  if (!status && todo)
    status = clt_tune_net(net, &to, &so, lines, LINES_PER_LAYER * m->nlayers, &n, &v, e);
  clt_gemm_tune_line *glines = malloc(CLT_GEMM_MAX_SHAPES * sizeof *glines);
  int gn = 0, built = 0, gemms_done = 0;
  if (!status && !glines) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status && v.deferred) {
    clt_tune_verdict below = {0};
    status = tune_gemms(m, r, net, o, cache, t0, lines, n, &below, glines, &gn, &built, e);
    if (!status) status = clt_tune_settle(net, &to, lines, n, &below, e);
    v = below;
    /* Tilings timed for algorithms not kept: tuned again for the defaults'. */
    gemms_done = !status && (below.confirmed || below.over);
  }
  if (!status) {
    int tuned = 0, cached = 0, left = 0;
    for (int i = 0; i < n; i++) {
      tuned += lines[i].tuned;
      cached += lines[i].cached;
      left += !lines[i].tuned && !lines[i].cached && lines[i].candidates > 1 &&
              !(lines[i].checked && lines[i].nok < 2);
    }
    print_lines(lines, n);
    printf("  %d passes: %d tuned, %d cached, %d left at the default (budget), %d with one "
           "algorithm; %.1f s\n",
           n, tuned, cached, left, n - tuned - cached - left, clt_now_seconds() - t0);
    print_step(lines, n, &v);
  }
  /* Then the products, as the algorithms chosen run them, on the same net. */
  if (!status && !gemms_done)
    status = tune_gemms(m, r, net, o, cache, t0, NULL, 0, NULL, glines, &gn, &built, e);
  if (!status && r->backend->tilings) print_gemms(glines, gn, built, t0);
  free(glines);
  clt_net_destroy(net);
  clt_tune_close(cache);
  clt_backend_destroy_replica(r);
  return status;
}

/* A Keras model file at its declared input (--image-size where the file leaves
 * the side open, or to change it) with its own classes unless --classes says. */
static int keras_file(const clt_tune_opts *o, clt_shape *input, clt_model *m, clt_err *e) {
  clt_shape s;
  int status = clt_keras_input_shape(o->model, &s, e);
  if (status) return status;
  *input = (clt_shape){o->image_size_given ? o->image_size : s.h,
                       o->image_size_given ? o->image_size : s.w, s.c ? s.c : 3};
  if (input->h == 0 || input->w == 0)
    return clt_fail(e, CLT_ERR_ARG,
                    "cltrain tune: %s leaves the image size open: give --image-size", o->model);
  /* Weights do not matter to timing, so any initializer is taken. */
  const clt_keras_opts ko = {.data = *input,
                             .classes = o->classes_given ? o->classes : 0,
                             .preprocess = CLT_PRE_RAW,
                             .weights_given = 1};
  return clt_keras_load(o->model, &ko, m, NULL, e);
}

static int run(const clt_tune_opts *o, clt_err *e) {
  static clt_model m; /* large: not on the stack */
  clt_preprocess pre;
  clt_shape input;
  int status;
  if (clt_keras_is_file(o->model)) {
    status = keras_file(o, &input, &m, e);
  } else if (!clt_model_is_builtin(o->model, &pre)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "cltrain tune: --model %s: expected a built-in model (%s) or a Keras model "
                    "file (.json)",
                    o->model, clt_model_names);
  } else {
    const int cnn = strcmp(o->model, "fmnist-cnn") == 0;
    const int side = o->image_size_given ? o->image_size : cnn ? 28 : 224;
    input = (clt_shape){side, side, cnn ? 1 : 3};
    status = clt_model_build(o->model, input, o->classes, &m, e);
  }
  if (status) {
    clt_model_free(&m);
    return status;
  }
  clt_device_list list = {0};
  const clt_device *chosen[CLT_MAX_SELECTED];
  int n = 0;
  status = clt_devices_enumerate(&list, e);
  if (!status && list.count == 0) status = clt_fail(e, CLT_ERR_DEVICE, "no OpenCL device found");
  if (!status) status = clt_select_listed(o->devices, "--devices", &list, chosen, &n, e);
  clt_tune_line *lines = status
                             ? NULL
                             : malloc((size_t)LINES_PER_LAYER * (size_t)m.nlayers * sizeof *lines);
  if (!status && !lines) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status) printf("Tuning %s at %dx%dx%d\n", o->model, input.h, input.w, input.c);
  for (int i = 0; i < n && !status; i++) status = tune_device(&m, chosen[i], i, o, lines, e);
  free(lines);
  clt_devices_free(&list);
  clt_model_free(&m);
  return status;
}

int cmd_tune(int argc, char **argv) {
  clt_err e = {0};
  clt_tune_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_tune, argc, argv, &o);
  if (rc >= 0) return rc;
  return clt_cli_finish(NULL, run(&o, &e), &e);
}
