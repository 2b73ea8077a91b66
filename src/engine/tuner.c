/* The tuner (tuner.h): per convolution pass, each candidate algorithm checked
 * against a double-precision convolution, then timed, alone (clt_tune_model)
 * or inside probe steps of a net and confirmed by whole steps (clt_tune_net,
 * at the end of this file); the fastest kept.
 *
 * A layer is tuned on a copy of itself with its parameters at the start of
 * buffers of its own and its ReLU left out (the check compares the
 * convolution alone); the copy keeps the layer's name, which the replica's
 * choices go by. The weight gradient is timed as a backward pass without an
 * input gradient, the input gradient as a backward pass of the copy frozen
 * (no weight gradient): each times its own product. */
#define _POSIX_C_SOURCE 200809L
#include "tuner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"
#include "plan.h"
#include "rng.h"
#include "timing.h"

/* Examples the check runs on (fewer when the batch is smaller). */
#define CHECK_EXAMPLES 2
#define DEFAULT_RUNS 3
#define MAX_RUNS 15

double clt_tune_rel_error(const float *got, const double *ref, size_t n) {
  double scale = 0, worst = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)got[i] - ref[i]);
    /* NaN compares false: count it as the worst error there is. */
    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
  }
  return scale > 0 ? worst / scale : worst;
}

/* ---- the double-precision convolution, from its definition ---------------------------
 * NHWC images, the HWIO kernel [kh][kw][c][filters]; sums in a fixed order. */

/* Input position of output (oy, ox) and tap (ky, kx), or 0 when it is padding. */
static int tap(const clt_conv_geom *g, int oy, int ox, int ky, int kx, size_t *at, int n) {
  const int iy = oy * g->stride - g->pad_top + ky, ix = ox * g->stride - g->pad_left + kx;
  if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) return 0;
  *at = (((size_t)n * g->h + iy) * g->w + ix) * g->c;
  return 1;
}

static void ref_forward(const clt_conv_geom *g, int f, const double *x, const double *w,
                        const double *bias, double *y) {
  for (int n = 0; n < g->batch; n++)
    for (int oy = 0; oy < g->oh; oy++)
      for (int ox = 0; ox < g->ow; ox++) {
        double *out = y + (((size_t)n * g->oh + oy) * g->ow + ox) * f;
        for (int j = 0; j < f; j++) out[j] = bias ? bias[j] : 0.0;
        for (int ky = 0; ky < g->kh; ky++)
          for (int kx = 0; kx < g->kw; kx++) {
            size_t at;
            if (!tap(g, oy, ox, ky, kx, &at, n)) continue;
            for (int c = 0; c < g->c; c++) {
              const double v = x[at + c];
              const double *wr = w + ((size_t)(ky * g->kw + kx) * g->c + c) * f;
              for (int j = 0; j < f; j++) out[j] += v * wr[j];
            }
          }
      }
}

/* dw (kh*kw*c x f) and dx (batch x h x w x c) of dy. */
static void ref_backward(const clt_conv_geom *g, int f, const double *x, const double *w,
                         const double *dy, double *dw, double *dx) {
  memset(dw, 0, (size_t)g->kh * g->kw * g->c * f * sizeof *dw);
  memset(dx, 0, (size_t)g->batch * g->h * g->w * g->c * sizeof *dx);
  for (int n = 0; n < g->batch; n++)
    for (int oy = 0; oy < g->oh; oy++)
      for (int ox = 0; ox < g->ow; ox++) {
        const double *d = dy + (((size_t)n * g->oh + oy) * g->ow + ox) * f;
        for (int ky = 0; ky < g->kh; ky++)
          for (int kx = 0; kx < g->kw; kx++) {
            size_t at;
            if (!tap(g, oy, ox, ky, kx, &at, n)) continue;
            for (int c = 0; c < g->c; c++) {
              const size_t wi = ((size_t)(ky * g->kw + kx) * g->c + c) * f;
              double sum = 0;
              for (int j = 0; j < f; j++) {
                dw[wi + j] += x[at + c] * d[j];
                sum += w[wi + j] * d[j];
              }
              dx[at + c] += sum;
            }
          }
      }
}

/* ---- one layer ------------------------------------------------------------------------ */

typedef struct layer_run {
  clt_replica *r;
  clt_layer *copy, *frozen; /* the layer's copy, and the same frozen */
  clt_conv_geom g;          /* at the batch */
  int filters, batch, check_batch;
  size_t nx, ny, nw, nflat, nscratch;
  cl_mem x, y, dy, dx, params, grads, scratch;
  float *host_x, *host_w, *host_dy, *out; /* out: a pass's result read back */
  double *ref[CLT_CONV_PASSES];           /* the reference's y, dw and dx on the slice */
} layer_run;

static void run_free(layer_run *t) {
  cl_mem *m[] = {&t->x, &t->y, &t->dy, &t->dx, &t->params, &t->grads, &t->scratch};
  for (int i = 0; i < 7; i++)
    if (*m[i]) clReleaseMemObject(*m[i]);
  free(t->copy);
  free(t->frozen);
  free(t->host_x);
  free(t->host_w);
  free(t->host_dy);
  free(t->out);
  for (int p = 0; p < CLT_CONV_PASSES; p++) free(t->ref[p]);
}

static void fill(clt_rng *rng, float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = (float)(2.0 * clt_rng_uniform(rng) - 1.0);
}

static double *to_double(const float *v, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof *d);
  if (d)
    for (size_t i = 0; i < n; i++) d[i] = v[i];
  return d;
}

static int upload(layer_run *t, cl_mem m, const float *v, size_t n, clt_err *e) {
  cl_int rc = clEnqueueWriteBuffer(t->r->queue, m, CL_TRUE, 0, n * sizeof *v, v, 0, NULL, NULL);
  return rc ? clt_replica_fail(t->r, e, rc, "tuning: writing a buffer") : CLT_OK;
}

/* The copy, its buffers and data, and the reference's three results on the
 * check slice. */
static int run_init(layer_run *t, clt_replica *r, const clt_layer *l, int batch, int index,
                    clt_err *e) {
  memset(t, 0, sizeof *t);
  t->r = r;
  t->batch = batch;
  t->check_batch = batch < CHECK_EXAMPLES ? batch : CHECK_EXAMPLES;
  if (!clt_conv2d_tunable(l, batch, &t->g, &t->filters))
    return clt_fail(e, CLT_ERR_INTERNAL, "%s: not a tunable convolution", l->name);
  t->copy = malloc(sizeof *t->copy);
  t->frozen = malloc(sizeof *t->frozen);
  if (!t->copy || !t->frozen) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  *t->copy = *l;
  clt_layer_hp(t->copy, clt_conv_hp)->relu = 0;
  t->copy->frozen = 0;
  t->nw = (size_t)t->g.kh * t->g.kw * t->g.c * t->filters;
  t->copy->params[0].offset = 0;
  size_t bias_at = (t->nw + 31) / 32 * 32;
  if (t->copy->nparams > 1) t->copy->params[1].offset = bias_at;
  t->nflat = bias_at + (size_t)t->filters;
  *t->frozen = *t->copy;
  t->frozen->frozen = 1;
  const clt_conv_geom *g = &t->g;
  t->nx = (size_t)batch * g->h * g->w * g->c;
  t->ny = (size_t)batch * g->oh * g->ow * t->filters;
  t->nscratch = clt_layer_scratch_floats(t->copy, batch);
  int status = CLT_OK;
  struct {
    cl_mem *m;
    size_t n;
    const char *what;
  } b[] = {{&t->x, t->nx, "tuning input"},
           {&t->y, t->ny, "tuning output"},
           {&t->dy, t->ny, "tuning output gradient"},
           {&t->dx, t->nx, "tuning input gradient"},
           {&t->params, t->nflat, "tuning parameters"},
           {&t->grads, t->nflat, "tuning gradients"},
           {&t->scratch, t->nscratch ? t->nscratch : 1, "tuning scratch"}};
  for (int i = 0; i < 7 && !status; i++)
    status = clt_replica_alloc(r, b[i].n * sizeof(float), b[i].what, b[i].m, e);
  if (status) return status;
  t->host_x = malloc(t->nx * sizeof *t->host_x);
  t->host_w = malloc(t->nflat * sizeof *t->host_w);
  t->host_dy = malloc(t->ny * sizeof *t->host_dy);
  const size_t nout = t->nx > t->ny ? (t->nx > t->nw ? t->nx : t->nw)
                                    : (t->ny > t->nw ? t->ny : t->nw);
  t->out = malloc(nout * sizeof *t->out);
  if (!t->host_x || !t->host_w || !t->host_dy || !t->out)
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning %s", l->name);
  clt_rng rng;
  clt_rng_seed(&rng, 0x74756e65u, (uint64_t)index);
  fill(&rng, t->host_x, t->nx);
  fill(&rng, t->host_w, t->nflat);
  fill(&rng, t->host_dy, t->ny);
  status = upload(t, t->x, t->host_x, t->nx, e);
  if (!status) status = upload(t, t->params, t->host_w, t->nflat, e);
  if (status) return status;
  /* The reference on the slice (its examples are the first in every buffer). */
  clt_conv_geom s = *g;
  s.batch = t->check_batch;
  const size_t sx = (size_t)s.batch * g->h * g->w * g->c;
  const size_t sy = (size_t)s.batch * g->oh * g->ow * t->filters;
  double *x = to_double(t->host_x, sx), *w = to_double(t->host_w, t->nflat);
  double *dy = to_double(t->host_dy, sy);
  t->ref[CLT_CONV_PASS_FORWARD] = malloc(sy * sizeof(double));
  t->ref[CLT_CONV_PASS_WEIGHT_GRAD] = malloc(t->nw * sizeof(double));
  t->ref[CLT_CONV_PASS_INPUT_GRAD] = malloc(sx * sizeof(double));
  if (x && w && dy && t->ref[0] && t->ref[1] && t->ref[2]) {
    ref_forward(&s, t->filters, x, w, t->copy->nparams > 1 ? w + bias_at : NULL,
                t->ref[CLT_CONV_PASS_FORWARD]);
    ref_backward(&s, t->filters, x, w, dy, t->ref[CLT_CONV_PASS_WEIGHT_GRAD],
                 t->ref[CLT_CONV_PASS_INPUT_GRAD]);
  } else {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning %s", l->name);
  }
  free(x);
  free(w);
  free(dy);
  return status;
}

/* Enqueues pass `pass` of the layer for `batch` examples. */
static int run_pass(layer_run *t, int pass, int batch, clt_err *e) {
  clt_layer_io io = {.replica = t->r,
                     .batch = batch,
                     .train = 1,
                     .stat_weight = 1.0f,
                     .x = t->x,
                     .y = t->y,
                     .dy = t->dy,
                     .params = t->params,
                     .grads = t->grads,
                     .scratch = t->scratch};
  if (pass == CLT_CONV_PASS_FORWARD) return t->copy->ops->forward(t->copy, &io, e);
  if (pass == CLT_CONV_PASS_WEIGHT_GRAD) return t->copy->ops->backward(t->copy, &io, e);
  io.dx = t->dx;
  return t->frozen->ops->backward(t->frozen, &io, e);
}

/* Runs the pass on the check slice and compares it with the reference:
 * *error gets the relative error. */
static int check_pass(layer_run *t, const clt_tuner_opts *o, const clt_layer *l, int pass, int algo,
                      double *error, clt_err *e) {
  const clt_conv_geom *g = &t->g;
  int status = upload(t, t->dy, t->host_dy, t->ny, e);
  if (!status) status = run_pass(t, pass, t->check_batch, e);
  if (status) return status;
  cl_mem out = pass == CLT_CONV_PASS_FORWARD       ? t->y
               : pass == CLT_CONV_PASS_WEIGHT_GRAD ? t->grads
                                                   : t->dx;
  const size_t n = pass == CLT_CONV_PASS_FORWARD
                       ? (size_t)t->check_batch * g->oh * g->ow * t->filters
                   : pass == CLT_CONV_PASS_WEIGHT_GRAD
                       ? t->nw
                       : (size_t)t->check_batch * g->h * g->w * g->c;
  if (o->after_check) o->after_check(o->hook_ctx, t->r, l, pass, algo, out, 0, n);
  cl_int rc = clEnqueueReadBuffer(t->r->queue, out, CL_TRUE, 0, n * sizeof(float), t->out, 0, NULL,
                                  NULL);
  if (rc) return clt_replica_fail(t->r, e, rc, "tuning: reading a result");
  *error = clt_tune_rel_error(t->out, t->ref[pass], n);
  return CLT_OK;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Device milliseconds of an enqueued span: between two markers' ends. */
static int marker(clt_replica *r, cl_event *ev, clt_err *e) {
  cl_int rc = clEnqueueMarkerWithWaitList(r->queue, 0, NULL, ev);
  return rc ? clt_replica_fail(r, e, rc, "tuning: a marker") : CLT_OK;
}

/* The median of `runs` timed runs of the pass at the batch, after one untimed. */
static int time_pass(layer_run *t, int pass, int runs, double *ms, clt_err *e) {
  double times[MAX_RUNS];
  int status = run_pass(t, pass, t->batch, e);
  for (int i = 0; i < runs && !status; i++) {
    cl_event ev[2] = {NULL, NULL};
    status = marker(t->r, &ev[0], e);
    if (!status) status = run_pass(t, pass, t->batch, e);
    if (!status) status = marker(t->r, &ev[1], e);
    cl_ulong end[2] = {0, 0};
    cl_int rc = status ? CL_SUCCESS : clWaitForEvents(2, ev);
    for (int k = 0; k < 2 && !status && !rc; k++)
      rc = clGetEventProfilingInfo(ev[k], CL_PROFILING_COMMAND_END, sizeof end[k], &end[k], NULL);
    if (!status && rc) status = clt_replica_fail(t->r, e, rc, "tuning: profiling a pass");
    for (int k = 0; k < 2; k++)
      if (ev[k]) clReleaseEvent(ev[k]);
    times[i] = end[1] > end[0] ? (double)(end[1] - end[0]) * 1e-6 : 0.0;
  }
  if (status) return status;
  qsort(times, (size_t)runs, sizeof times[0], cmp_double);
  *ms = runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
  return CLT_OK;
}

static int pass_of(const clt_conv_algos *a, int pass) {
  return pass == CLT_CONV_PASS_FORWARD       ? a->forward
         : pass == CLT_CONV_PASS_WEIGHT_GRAD ? a->weight_grad
                                             : a->input_grad;
}

/* Tunes one pass: every candidate checked, those that pass timed, the fastest
 * chosen and cached. *over: the budget ran out first (nothing chosen). */
static int tune_pass(layer_run *t, const clt_tuner_opts *o, const clt_layer *l, int pass,
                     const char *key, const int *cand, int ncand, double deadline,
                     clt_tune_line *line, int *over, clt_err *e) {
  const int runs = o->runs > 0 ? (o->runs < MAX_RUNS ? o->runs : MAX_RUNS) : DEFAULT_RUNS;
  int best = -1, status = CLT_OK;
  double best_ms = 0;
  *over = 0;
  for (int i = 0; i < ncand && !status; i++) {
    if (deadline > 0 && clt_now_seconds() > deadline) {
      *over = 1;
      break;
    }
    status = clt_conv_choose(t->r, l->name, &t->g, t->filters, pass, cand[i], e);
    if (!status) status = clt_layer_prepare(t->copy, t->r, t->batch, NULL, e);
    double error = 0, ms = 0;
    if (!status) status = check_pass(t, o, l, pass, cand[i], &error, e);
    if (status) break;
    if (!(error <= CLT_TUNE_TOL)) {
      line->rejected++;
      continue;
    }
    if ((status = time_pass(t, pass, runs, &ms, e))) break;
    if (cand[i] == line->default_algo) line->default_ms = ms;
    if (best < 0 || ms < best_ms) best = cand[i], best_ms = ms;
  }
  if (!status && !*over && best < 0) {
    status = clt_fail(e, CLT_ERR_INTERNAL,
                      "%s: no algorithm of its %s pass matched the reference convolution", l->name,
                      clt_conv_pass_name(pass));
  }
  if (status || *over) {
    const int s = clt_conv_choose(t->r, l->name, &t->g, t->filters, pass, -1, e);
    return status ? status : s;
  }
  status = clt_conv_choose(t->r, l->name, &t->g, t->filters, pass, best, e);
  line->algo = best;
  line->ms = best_ms;
  line->tuned = 1;
  if (!status && o->cache)
    status = clt_tune_put(o->cache, key, clt_conv_algo_name(best), best_ms, line->default_ms, e);
  return status;
}

/* Checks every candidate of one pass (none timed): line->ok gets those that
 * passed; the layer is left on its default. A pass begun before the deadline
 * is checked whole, so checks cut short by a budget resume at a pass. */
static int check_candidates(layer_run *t, const clt_tuner_opts *o, const clt_layer *l, int pass,
                            const int *cand, int ncand, double deadline, clt_tune_line *line,
                            int *over, clt_err *e) {
  int status = CLT_OK;
  *over = deadline > 0 && clt_now_seconds() > deadline;
  for (int i = 0; i < ncand && !status && !*over; i++) {
    status = clt_conv_choose(t->r, l->name, &t->g, t->filters, pass, cand[i], e);
    if (!status) status = clt_layer_prepare(t->copy, t->r, t->batch, NULL, e);
    double error = 0;
    if (!status) status = check_pass(t, o, l, pass, cand[i], &error, e);
    if (status) break;
    if (error <= CLT_TUNE_TOL) line->ok[line->nok++] = cand[i];
    else line->rejected++;
  }
  const int s = clt_conv_choose(t->r, l->name, &t->g, t->filters, pass, -1, e);
  if (status) return status;
  line->checked = !*over;
  if (!*over && line->nok == 0)
    return clt_fail(e, CLT_ERR_INTERNAL,
                    "%s: no algorithm of its %s pass matched the reference convolution", l->name,
                    clt_conv_pass_name(pass));
  return s;
}

int clt_tune_model(const clt_model *m, clt_replica *r, const clt_tuner_opts *o,
                   clt_tune_line *lines, int max_lines, int *nlines, clt_err *e) {
  *nlines = 0;
  clt_plan *plan = calloc(1, sizeof *plan);
  unsigned char *needed = calloc((size_t)m->nlayers + 1, 1);
  if (!plan || !needed) {
    free(plan);
    free(needed);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  }
  int status = clt_plan_build(m, r->backend->name, r->backend->fuses_conv_pool, plan, e);
  if (status) {
    free(plan);
    free(needed);
    return status;
  }
  /* The tuner's launches stay out of the replica's profile (--profile, busy time). */
  clt_profile *profile = r->profile;
  r->profile = NULL;
  clt_model_grads_needed(m, needed);
  const double deadline = o->tune && o->budget_s > 0 ? clt_now_seconds() + o->budget_s : 0;
  int over = 0;
  for (int s = 0; s < plan->nsteps && !status; s++) {
    const clt_plan_step *step = &plan->steps[s];
    const clt_layer *l = &m->layers[step->layer];
    clt_conv_geom g;
    int filters;
    /* A pooling pair runs its own kernels. */
    if (!step->forward || step->fusion.pools || !clt_conv2d_tunable(l, o->batch, &g, &filters))
      continue;
    const int in = l->inputs[0];
    const int runs[CLT_CONV_PASSES] = {1, needed[step->layer] && !l->frozen,
                                       needed[step->layer] && in >= 0 && needed[in]};
    const clt_conv_algos def = clt_conv_algos_for(r, &g, filters);
    const int forced = r->backend->winograd && r->winograd && clt_winograd_fits(&g);
    layer_run t;
    int ready = 0;
    for (int p = 0; p < CLT_CONV_PASSES && !status; p++) {
      if (!runs[p]) continue;
      if (*nlines == max_lines) {
        status = clt_fail(e, CLT_ERR_INTERNAL, "more than %d tuned passes", max_lines);
        break;
      }
      clt_tune_line *line = &lines[(*nlines)++];
      memset(line, 0, sizeof *line);
      snprintf(line->layer, sizeof line->layer, "%s", l->name);
      line->pass = p;
      line->default_algo = line->algo = pass_of(&def, p);
      line->geom = g;
      line->filters = filters;
      int cand[CLT_CONV_MAX_CANDIDATES];
      const int ncand = forced ? 1 : clt_conv_candidates(r, &g, filters, p, cand);
      line->candidates = ncand;
      if (ncand < 2) continue;
      char *key = line->key;
      clt_tune_conv_key(clt_conv_pass_name(p), g.h, g.w, g.c, g.kh, g.kw, g.stride, g.pad_top,
                        g.pad_left, g.oh, g.ow, filters, o->batch, key, sizeof line->key);
      double ms = 0, dms = 0;
      const char *hit = o->cache ? clt_tune_get(o->cache, key, &ms, &dms) : NULL;
      /* In-step tuning takes only what was chosen in the step. */
      const char *decision = hit && o->check_only
                                 ? clt_tune_get_decision(o->cache, key, &line->step_ms,
                                                         &line->default_step_ms)
                                 : NULL;
      const int algo = hit && (decision || !o->check_only) ? clt_conv_algo_parse(hit) : -1;
      if (algo >= 0 && clt_conv_choose(r, l->name, &g, filters, p, algo, e) == CLT_OK) {
        line->algo = algo;
        line->ms = ms;
        line->default_ms = dms;
        line->cached = 1;
        line->confirmed = decision && strcmp(decision, "confirmed") == 0;
        continue;
      }
      if (!o->tune) continue;
      if (o->check_only) {
        /* A shape checked already in this model, now or by an earlier call:
         * its verdicts hold. */
        const clt_tune_line *same = NULL;
        for (int k = 0; k < *nlines - 1 && !same; k++)
          if (lines[k].checked && strcmp(lines[k].key, key) == 0) same = &lines[k];
        for (int k = 0; k < o->nchecked_before && !same; k++)
          if (o->checked_before[k].checked && strcmp(o->checked_before[k].key, key) == 0)
            same = &o->checked_before[k];
        if (same) {
          line->checked = 1;
          line->nok = same->nok;
          memcpy(line->ok, same->ok, sizeof line->ok);
          continue;
        }
      }
      if (over) continue;
      if (!ready) {
        const int b = o->check_only && o->batch > CHECK_EXAMPLES ? CHECK_EXAMPLES : o->batch;
        status = run_init(&t, r, l, b, step->layer, e);
        ready = 1;
      }
      if (!status && o->check_only)
        status = check_candidates(&t, o, l, p, cand, ncand, deadline, line, &over, e);
      else if (!status) status = tune_pass(&t, o, l, p, key, cand, ncand, deadline, line, &over, e);
    }
    if (ready) run_free(&t);
  }
  r->profile = profile;
  clt_plan_free(plan);
  free(plan);
  free(needed);
  return status;
}

/* ---- in the step ------------------------------------------------------------------------ */

#define DEFAULT_ROUNDS 2
#define DEFAULT_CONFIRM 5
#define MIN_CONFIRM 3
#define MAX_CONFIRM 15
/* A side's confirmation steps: short ones get more pairs to fill this... */
#define CONFIRM_MS 500.0
/* ... and long ones fewer, down to MIN_CONFIRM, to fit about this. */
#define LONG_CONFIRM_MS 6000.0
/* The confirmation keeps the picked assignment when its median pair ratio is
 * at most WIN_RATIO and it won at least WIN_PAIRS of every 5 pairs; it stops
 * early once the pairs timed settle that, whatever the rest would show. A
 * median under the bar with too few wins (a noisy host) is judged again
 * once, on as many pairs more and all of them. */
#define WIN_RATIO 0.98
#define WIN_PAIRS 4

typedef struct instep {
  clt_net *net;
  clt_replica *r;
  const clt_step_opts *s;
  clt_scope_marks *marks;
  cl_ulong *end; /* each mark's end, of the latest probe */
  int phase;     /* clt_step_opts.in_step's */
  int steps;
} instep;

static void at_scope(void *ctx, clt_replica *r, const char *what, const char *pass) {
  const instep *in = ctx;
  if (what && in->s->in_step) in->s->in_step(in->s->hook_ctx, r, what, pass, in->phase);
}

/* One probe step: forward and backward of the loaded batch as the step runs
 * them, every scope marked; *ms its host time, from the first launch to the
 * queue's end. */
static int probe(instep *in, int phase, double *ms, clt_err *e) {
  clt_replica *r = in->r;
  clt_scope_marks *m = in->marks;
  m->n = 0;
  m->failed = 0;
  in->phase = phase;
  r->marks = m;
  const double t0 = clt_now_seconds();
  int status = clt_net_forward_backward(in->net, in->s->count, in->s->loss_scale,
                                        in->s->metric_slot, 1, e);
  clt_replica_scope(r, NULL, NULL);
  r->marks = NULL;
  cl_int rc = clFinish(r->queue);
  *ms = (clt_now_seconds() - t0) * 1e3;
  in->steps++;
  if (!status && rc) status = clt_replica_fail(r, e, rc, "tuning: a probe step");
  for (int i = 0; i < m->n; i++) {
    rc = status ? CL_SUCCESS
                : clGetEventProfilingInfo(m->ev[i], CL_PROFILING_COMMAND_END, sizeof in->end[i],
                                          &in->end[i], NULL);
    if (!status && rc) status = clt_replica_fail(r, e, rc, "tuning: profiling a probe step");
    clReleaseEvent(m->ev[i]);
  }
  if (!status && m->failed)
    status = clt_fail(e, CLT_ERR_INTERNAL, "tuning: a step of more than %d scopes",
                      CLT_SCOPE_MARKS_MAX - 1);
  return status;
}

/* Device milliseconds of the layer's pass in the latest probe (-1: it did not
 * run): its forward; its backward up to the input gradient's mark (the bias
 * and weight gradients); the input gradient, from that mark. */
static double span_ms(const instep *in, const clt_tune_line *line) {
  char want[sizeof in->marks->scope[0]];
  snprintf(want, sizeof want, "%s %s", line->layer,
           line->pass == CLT_CONV_PASS_FORWARD       ? "forward"
           : line->pass == CLT_CONV_PASS_WEIGHT_GRAD ? "backward"
                                                     : "input gradient");
  for (int i = 0; i + 1 < in->marks->n; i++)
    if (strcmp(in->marks->scope[i], want) == 0)
      return in->end[i + 1] > in->end[i] ? (double)(in->end[i + 1] - in->end[i]) * 1e-6 : 0.0;
  return -1;
}

/* Puts the lines' passes on algo[] and readies the net for them. */
static int apply(instep *in, const clt_tune_line *lines, int n, const int *algo, clt_err *e) {
  for (int i = 0; i < n; i++) {
    if (lines[i].candidates < 2) continue;
    const int status = clt_conv_choose(in->r, lines[i].layer, &lines[i].geom, lines[i].filters,
                                       lines[i].pass, algo[i], e);
    if (status) return status;
  }
  int status = clt_net_prepare(in->net, e);
  /* What preparing enqueued stays out of the next probe's time. */
  cl_int rc = status ? CL_SUCCESS : clFinish(in->r->queue);
  if (rc) status = clt_replica_fail(in->r, e, rc, "tuning: clFinish");
  return status;
}

/* The probes' schedule. The layers of one shape and pass (one key) share its
 * candidates out: in probe step s of a round, member j of the key's L layers
 * takes candidate (j + s*L) mod nok, so a round covers every candidate in
 * ceil(nok / L) steps rather than nok (a lone layer takes its s-th). Each
 * round repeats the schedule, so a layer's first launch of a candidate,
 * which builds its kernels, is timed again. member[i], size[i]: line i's
 * place in its key's varied lines, and their number. */
static int probe_schedule(const clt_tune_line *lines, int n, const unsigned char *varied,
                          int *member, int *size) {
  int steps = 0;
  for (int i = 0; i < n; i++) {
    member[i] = size[i] = 0;
    if (!varied[i]) continue;
    for (int j = 0; j < n; j++) {
      if (!varied[j] || strcmp(lines[j].key, lines[i].key) != 0) continue;
      member[i] += j < i;
      size[i]++;
    }
    const int need = (lines[i].nok + size[i] - 1) / size[i];
    if (need > steps) steps = need;
  }
  return steps;
}

/* The candidate (an index of ok[]) line i runs in probe step s, or -1: none
 * left to try, it stays on its current one. */
static int probe_slot(const clt_tune_line *lines, const unsigned char *varied, const int *member,
                      const int *size, int i, int s) {
  if (!varied[i] || s * size[i] >= lines[i].nok) return -1;
  return (member[i] + s * size[i]) % lines[i].nok;
}

/* Probe step s's assignment: each varied pass on its slot's candidate (each
 * timed apart: forward, weight and input gradient have spans of their own),
 * the rest as they are. 0 when no pass varies. */
static int assignment(const clt_tune_line *lines, int n, const unsigned char *varied,
                      const int *member, const int *size, const int *cur, int s, int *algo) {
  int any = 0;
  for (int i = 0; i < n; i++) {
    const int k = probe_slot(lines, varied, member, size, i, s);
    algo[i] = k < 0 ? cur[i] : lines[i].ok[k];
    any |= k >= 0;
  }
  return any;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Per shape and pass, the candidate fastest in the step: each candidate's
 * mean over the layers of that shape that ran it (each layer's fastest
 * span), pick[] the current one unless another was faster. */
static void choose(clt_tune_line *lines, int n, const unsigned char *varied, const int *cur,
                   const double *best, int *pick) {
  for (int i = 0; i < n; i++) pick[i] = cur[i];
  unsigned char *done = calloc((size_t)n + 1, 1);
  for (int i = 0; i < n; i++) {
    if (!varied[i] || (done && done[i])) continue;
    double mean[CLT_CONV_MAX_CANDIDATES] = {0};
    for (int k = 0; k < lines[i].nok; k++) {
      double sum = 0;
      int runs = 0;
      for (int j = i; j < n; j++) {
        if (!varied[j] || strcmp(lines[j].key, lines[i].key) != 0) continue;
        const double t = best[(size_t)j * CLT_CONV_MAX_CANDIDATES + k];
        if (k < lines[j].nok && lines[j].ok[k] == lines[i].ok[k] && isfinite(t)) {
          sum += t;
          runs++;
        }
      }
      mean[k] = runs ? sum / runs : INFINITY;
    }
    int kc = -1, kb = -1;
    for (int k = 0; k < lines[i].nok; k++) {
      if (lines[i].ok[k] == cur[i]) kc = k;
      if (isfinite(mean[k]) && (kb < 0 || mean[k] < mean[kb])) kb = k;
    }
    int chosen = cur[i];
    const double dms = kc >= 0 && isfinite(mean[kc]) ? mean[kc] : 0;
    double ms = dms;
    if (kb >= 0 && (kc < 0 || !isfinite(mean[kc]) || mean[kb] < mean[kc])) {
      chosen = lines[i].ok[kb];
      ms = mean[kb];
    }
    for (int j = i; j < n; j++) {
      if (!varied[j] || strcmp(lines[j].key, lines[i].key) != 0) continue;
      pick[j] = chosen;
      lines[j].ms = ms;
      lines[j].default_ms = dms;
      if (done) done[j] = 1;
    }
  }
  free(done);
}

/* Work carried from one call of clt_tune_net to the next (tuner.h). */
struct clt_tune_progress {
  int active;           /* probing or confirming is under way: lines hold the checks */
  int checking;         /* the checks are under way: lines hold those done */
  int n, room;          /* lines, and room for them */
  clt_tune_line *lines; /* as the last call left them */
  double *best;         /* room * CLT_CONV_MAX_CANDIDATES: each candidate's fastest span */
  int *pick;            /* room: the probes' pick, once probed */
  int pos;              /* the next probe: (round, k) in order */
  int probed, differs;
  int confirm, timed; /* confirmation pairs wanted, and timed so far */
  int extended;       /* the confirmation was given more pairs */
  double d[MAX_CONFIRM], t[MAX_CONFIRM];
  double ms;        /* the latest probe step's */
  double slowest;   /* the first round's slowest probe step's */
  int steps, calls; /* in all */
};

clt_tune_progress *clt_tune_progress_new(void) { return calloc(1, sizeof(clt_tune_progress)); }

void clt_tune_progress_free(clt_tune_progress *p) {
  if (!p) return;
  free(p->lines);
  free(p->best);
  free(p->pick);
  free(p);
}

int clt_tune_progress_pending(const clt_tune_progress *p) {
  return p && (p->active || p->checking);
}

/* Room for n lines, the work reset. */
static int progress_start(clt_tune_progress *p, int n, clt_err *e) {
  if (n > p->room) {
    free(p->lines);
    free(p->best);
    free(p->pick);
    p->lines = malloc(((size_t)n + 1) * sizeof *p->lines);
    p->best = malloc(((size_t)n + 1) * CLT_CONV_MAX_CANDIDATES * sizeof *p->best);
    p->pick = malloc(((size_t)n + 1) * sizeof *p->pick);
    p->room = p->lines && p->best && p->pick ? n : 0;
    if (!p->room) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  }
  p->active = p->pos = p->probed = p->differs = p->confirm = p->timed = p->extended = 0;
  p->steps = p->calls = 0;
  p->n = n;
  p->ms = p->slowest = 0;
  for (size_t i = 0; i < (size_t)n * CLT_CONV_MAX_CANDIDATES; i++) p->best[i] = INFINITY;
  return CLT_OK;
}

/* Whether the next probe step may start: before the deadline, and when the
 * work resumes later, only a step that ends before it (at the latest step's
 * pace), though a call always runs its first. */
static int may_step(const clt_tune_progress *p, double deadline, int resumable, int ran) {
  if (deadline <= 0) return 1;
  const double now = clt_now_seconds();
  if (!resumable) return now <= deadline;
  return !ran || now + p->ms * 1e-3 <= deadline;
}

/* The confirmation's verdict on n alternating pairs of whole steps, d[i] of
 * the current assignment and t[i] of the picked one: the picked one is kept
 * when it was the faster in at least WIN_PAIRS of every 5 pairs and by
 * 1 - WIN_RATIO or more in the median pair. Pairs rather than each side's own
 * figures: a host whose speed drifts during the confirmation (other tenants
 * on its cores) slows both steps of a pair alike. */
static void verdict(const double *d, const double *t, int n, clt_tune_verdict *res) {
  double ratio[MAX_CONFIRM] = {0}, dd[MAX_CONFIRM] = {0}, tt[MAX_CONFIRM] = {0};
  int wins = 0;
  for (int i = 0; i < n; i++) {
    ratio[i] = d[i] > 0 ? t[i] / d[i] : INFINITY;
    wins += t[i] < d[i];
    dd[i] = d[i];
    tt[i] = t[i];
  }
  res->default_ms = median(dd, n);
  res->tuned_ms = median(tt, n);
  res->ratio = median(ratio, n);
  res->wins = wins;
  res->pairs = n;
  res->confirmed = res->ratio <= WIN_RATIO && wins * 5 >= WIN_PAIRS * n;
  snprintf(res->why, sizeof res->why, "tuned step faster in %d of %d pairs, median ratio %.3f%s",
           wins, n, res->ratio, res->confirmed ? "" : ": short of the bar");
}

/* The confirmation's pairs: s->confirm (at most MAX_CONFIRM), else
 * DEFAULT_CONFIRM for steps of ms (0: not timed yet), but for short steps as
 * many as hold about CONFIRM_MS of each side, as noise weighs more on each,
 * and for long ones as few as fit about LONG_CONFIRM_MS (s->long_ms), though
 * at least MIN_CONFIRM: all of them must then be won, a bar no looser than 4
 * of 5 for a step that did not change. */
static int pairs_for(const clt_step_opts *s, double ms) {
  int n = s->confirm > 0 ? s->confirm : DEFAULT_CONFIRM;
  const double most = s->long_ms > 0 ? s->long_ms : LONG_CONFIRM_MS;
  if (s->confirm <= 0 && ms > 0 && ms * n > most)
    n = ms * MIN_CONFIRM < most ? (int)(most / ms) : MIN_CONFIRM;
  else if (s->confirm <= 0 && ms > 0 && ms * n < CONFIRM_MS) n = (int)(CONFIRM_MS / ms);
  return n < MAX_CONFIRM ? n : MAX_CONFIRM;
}

/* Whether the first `timed` of n pairs settle the verdict as confirmed
 * whatever the rest show: enough wins already, and more than half of the n
 * pairs under the bar (then the median is too). */
static int settled(const double *d, const double *t, int timed, int n) {
  int wins = 0, under = 0;
  for (int i = 0; i < timed; i++) {
    wins += t[i] < d[i];
    under += d[i] > 0 && t[i] / d[i] <= WIN_RATIO;
  }
  return wins * 5 >= WIN_PAIRS * n && under >= n / 2 + 1;
}

/* The verdict on the n pairs timed, in res; 1 when it gets n pairs more (see
 * WIN_RATIO), *confirm doubled: its median met the bar but its wins did not,
 * it was not *extended before, and the pairs fit MAX_CONFIRM and, at pace ms
 * a step, the deadline (0: none). */
static int judge(const double *d, const double *t, int n, int *confirm, int *extended, double ms,
                 double deadline, clt_tune_verdict *res) {
  verdict(d, t, n, res);
  if (res->confirmed || res->ratio > WIN_RATIO || *extended || 2 * n > MAX_CONFIRM) return 0;
  if (deadline > 0 && clt_now_seconds() + 2.0 * n * ms * 1e-3 > deadline) return 0;
  *extended = 1;
  *confirm *= 2;
  return 1;
}

/* Probes and confirms (see tuner.h), from where p left off; the replica
 * holds the verdict's choices. With resumable, a budget that ends keeps the
 * work done in p for the next call. */
static int in_step(instep *in, clt_tune_line *lines, int n, const unsigned char *varied,
                   const int *cur, double deadline, int resumable, int defer, clt_tune_progress *p,
                   clt_tune_verdict *res, clt_err *e) {
  const clt_step_opts *s = in->s;
  const int rounds = s->rounds > 0 ? s->rounds : DEFAULT_ROUNDS;
  const int confirm = pairs_for(s, 0);
  int *algo = malloc(((size_t)n + 1) * 3 * sizeof *algo);
  if (!algo) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  int *member = algo + n + 1, *size = member + n + 1;
  const int steps = probe_schedule(lines, n, varied, member, size);
  int status = CLT_OK, configs = 0, ran = 0;
  for (int k = 0; k < steps; k++)
    configs += assignment(lines, n, varied, member, size, cur, k, algo);
  /* Every round is timed and a candidate keeps its fastest span: first
   * launches, which build and specialize kernels, only ever add time. */
  const int per_round = steps > 0 ? steps : 1, total = steps > 0 ? rounds * per_round : 0;
  for (; p->pos < total && !status && !res->over; p->pos++) {
    const int k = p->pos % per_round;
    /* What is left must fit the budget (all in one call: judged once, after
     * the second round's first step). The pace is the first round's slowest
     * step, but at most twice the second round's first: the first round's
     * steps built their kernels, which no later step repeats. */
    if (!resumable && p->pos == per_round + 1 && deadline > 0) {
      const double left = (double)(rounds - 1) * configs - 1 + 2.0 * confirm;
      const double pace = p->slowest < 2 * p->ms ? p->slowest : 2 * p->ms;
      const double past = clt_now_seconds() + left * pace * 1e-3 - deadline;
      if (past > 0) {
        res->over = 1;
        snprintf(res->why, sizeof res->why,
                 "the budget is short of the %.0f more probe steps of %.0f ms tuning needs "
                 "(about %.0f s more would hold them)",
                 left, pace, ceil(past));
        break;
      }
    }
    if (!assignment(lines, n, varied, member, size, cur, k, algo)) continue;
    if (!may_step(p, deadline, resumable, ran)) {
      res->over = 1;
      snprintf(res->why, sizeof res->why, "the budget ended during the probe steps");
      break;
    }
    status = apply(in, lines, n, algo, e);
    if (!status) status = probe(in, 0, &p->ms, e);
    if (p->pos < per_round && p->ms > p->slowest) p->slowest = p->ms;
    ran = 1;
    for (int i = 0; i < n && !status; i++) {
      const int slot = probe_slot(lines, varied, member, size, i, k);
      if (slot < 0) continue;
      const double t = span_ms(in, &lines[i]);
      double *b = &p->best[(size_t)i * CLT_CONV_MAX_CANDIDATES + slot];
      if (t >= 0 && t < *b) *b = t;
    }
  }
  if (!status && !res->over && !p->probed) {
    choose(lines, n, varied, cur, p->best, p->pick);
    p->probed = 1;
    for (int i = 0; i < n; i++) p->differs |= p->pick[i] != cur[i];
    p->confirm = pairs_for(s, p->ms);
  }
  res->probed = p->probed;
  res->differs = p->differs;
  if (!status && p->probed && !p->differs)
    snprintf(res->why, sizeof res->why, "the current algorithms were the fastest in the step");
  /* The confirmation: pairs of whole steps, alternating (the probes built
   * every kernel either side runs); deferred, the caller's (clt_tune_settle). */
  res->deferred = !status && defer && p->probed && p->differs && !res->over;
  if (res->deferred)
    snprintf(res->why, sizeof res->why, "picked, awaiting the whole step's verdict");
  while (!res->deferred) {
    while (!status && p->probed && p->differs && !res->over && p->timed < p->confirm &&
           !settled(p->d, p->t, p->timed, p->confirm)) {
      double ms[2] = {0, 0};
      for (int side = 0; side < 2 && !status && !res->over; side++) {
        if (!may_step(p, deadline, resumable, ran)) {
          res->over = 1;
          snprintf(res->why, sizeof res->why, "the budget ended during the confirmation");
          break;
        }
        status = apply(in, lines, n, side ? p->pick : cur, e);
        if (!status) status = probe(in, 1 + side, &ms[side], e);
        ran = 1;
      }
      if (status || res->over) break;
      p->ms = ms[1];
      p->d[p->timed] = ms[0];
      p->t[p->timed++] = ms[1];
    }
    if (status || !p->probed || !p->differs || res->over) break;
    /* A resumed call may end its budget in the pairs added: the next goes on. */
    if (!judge(p->d, p->t, p->timed, &p->confirm, &p->extended, p->ms, resumable ? 0 : deadline,
               res))
      break;
  }
  free(algo);
  return status;
}

/* Whether the first pair shows the gain timed alone (gain_ms a step) too
 * small for the bar: under its margin of the faster step. Then res says so. */
static int gain_short(const double *d, const double *t, double gain_ms, clt_tune_verdict *res) {
  const double step = d[0] < t[0] ? d[0] : t[0];
  if (!(gain_ms > 0) || gain_ms >= (1.0 - WIN_RATIO) * step) return 0;
  verdict(d, t, 1, res);
  res->confirmed = 0;
  snprintf(res->why, sizeof res->why,
           "one pair only: the gain its kernels showed timed alone, %.2f ms a step, is "
           "under %.0f%% of the %.0f ms step: short of the bar",
           gain_ms, (1.0 - WIN_RATIO) * 100, step);
  return 1;
}

/* One verdict of a confirmation: the pairs of its lower and upper side. */
typedef struct pairs {
  double d[MAX_CONFIRM], t[MAX_CONFIRM];
  int timed, confirm, extended, done;
} pairs;

/* Adds a pair (d the lower side's step, t the upper's) to v; once its pairs
 * are all timed or settle it, v is judged into res (done unless it gets
 * more pairs). gain_ms: as clt_tune_confirm's, judged on the first pair. */
static void add_pair(pairs *v, const clt_step_opts *s, double d, double t, double gain_ms,
                     double deadline, clt_tune_verdict *res) {
  v->d[v->timed] = d;
  v->t[v->timed++] = t;
  if (v->timed == 1) {
    v->confirm = pairs_for(s, t);
    if (gain_short(v->d, v->t, gain_ms, res)) {
      v->done = 1;
      return;
    }
  }
  if (v->timed < v->confirm && !settled(v->d, v->t, v->timed, v->confirm)) return;
  v->done = !judge(v->d, v->t, v->timed, &v->confirm, &v->extended, t, deadline, res);
}

/* clt_tune_confirm and clt_tune_confirm_stacked: nsides sides (2 or 3),
 * res[k] the verdict on sides k and k + 1. Each round steps once on every
 * side a verdict still wants, in order, so each pair is of adjacent steps. */
static int confirm_sides(clt_net *net, const clt_step_opts *s, int nsides,
                         int (*set)(void *ctx, int side, clt_err *e), void *ctx, double gain_ms,
                         double deadline, clt_tune_verdict *res, clt_err *e) {
  const int nv = nsides - 1;
  pairs v[2];
  memset(v, 0, sizeof v);
  for (int k = 0; k < nv; k++) memset(&res[k], 0, sizeof res[k]);
  clt_replica *r = net->replica;
  instep in = {.net = net, .r = r, .s = s};
  in.marks = calloc(1, sizeof *in.marks);
  in.end = malloc(CLT_SCOPE_MARKS_MAX * sizeof *in.end);
  if (!in.marks || !in.end) {
    free(in.marks);
    free(in.end);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  }
  clt_profile *profile = r->profile;
  r->profile = NULL; /* the probes stay out of --profile */
  in.marks->at_scope = s->in_step ? at_scope : NULL;
  in.marks->ctx = &in;
  int status = CLT_OK, over = 0;
  for (int k = 0; k < nv; k++) v[k].confirm = pairs_for(s, 0);
  while (!status && !over) {
    /* The verdicts still open, none above one that was not kept. */
    int want[2] = {0, 0}, any = 0;
    for (int k = 0; k < nv; k++) {
      want[k] = !v[k].done && (k == 0 || !v[k - 1].done || res[k - 1].confirmed);
      any |= want[k];
    }
    if (!any) break;
    double ms[3] = {0, 0, 0};
    for (int side = 0; side < nsides && !status; side++) {
      if (!((side < nv && want[side]) || (side > 0 && want[side - 1]))) continue;
      if (deadline > 0 && clt_now_seconds() > deadline) {
        over = 1;
        break;
      }
      status = set(ctx, side, e);
      if (!status) status = clt_net_prepare(net, e);
      cl_int rc = status ? CL_SUCCESS : clFinish(r->queue);
      if (rc) status = clt_replica_fail(r, e, rc, "tuning: clFinish");
      if (!status) status = probe(&in, 1 + side, &ms[side], e);
    }
    for (int k = 0; k < nv && !status && !over; k++)
      if (want[k])
        add_pair(&v[k], s, ms[k], ms[k + 1], k == nv - 1 ? gain_ms : 0, deadline, &res[k]);
  }
  r->profile = profile;
  r->marks = NULL;
  /* A verdict stands only on the changes under it kept (one judged early,
   * after its first pair, has none). */
  int kept_under = 1;
  for (int k = 0; k < nv; k++) {
    const int judged = v[k].done && kept_under;
    res[k].probed = res[k].differs = judged;
    res[k].confirmed &= judged;
    res[k].over = over && !judged;
    if (res[k].over)
      snprintf(res[k].why, sizeof res[k].why, "the budget ended during the confirmation");
    else if (!judged)
      snprintf(res[k].why, sizeof res[k].why, "not judged: the change under it was not kept");
    res[k].probe_steps = res[k].all_steps = in.steps;
    res[k].calls = 1;
    kept_under = res[k].confirmed;
  }
  /* The verdict's side stays: up to the highest change kept. */
  int side = 0;
  while (side < nv && res[side].confirmed) side++;
  if (!status) status = set(ctx, side, e);
  if (!status) status = clt_net_prepare(net, e);
  free(in.marks);
  free(in.end);
  return status;
}

int clt_tune_confirm(clt_net *net, const clt_step_opts *s,
                     int (*set)(void *ctx, int side, clt_err *e), void *ctx, double gain_ms,
                     double deadline, clt_tune_verdict *res, clt_err *e) {
  return confirm_sides(net, s, 2, set, ctx, gain_ms, deadline, res, e);
}

int clt_tune_confirm_stacked(clt_net *net, const clt_step_opts *s,
                             int (*set)(void *ctx, int side, clt_err *e), void *ctx, double gain_ms,
                             double deadline, clt_tune_verdict res[2], clt_err *e) {
  return confirm_sides(net, s, 3, set, ctx, gain_ms, deadline, res, e);
}

/* Whether line i took part in the probes: checked now, with a choice left. */
static int varied_line(const clt_tune_line *l) { return l->checked && l->nok > 1; }

/* The verdict res per varied pass (on its picked) and in the cache once per
 * shape. */
static int record(const clt_tuner_opts *o, clt_tune_line *lines, int n, const clt_tune_verdict *res,
                  clt_err *e) {
  int status = CLT_OK;
  for (int i = 0; i < n && !status; i++) {
    if (!varied_line(&lines[i])) continue;
    lines[i].instep = lines[i].tuned = 1;
    lines[i].confirmed = res->confirmed;
    if (res->confirmed) lines[i].algo = lines[i].picked;
    if (!res->confirmed) lines[i].ms = lines[i].default_ms;
    lines[i].step_ms = res->tuned_ms;
    lines[i].default_step_ms = res->default_ms;
    int first = 1;
    for (int j = 0; j < i && first; j++)
      first = !(varied_line(&lines[j]) && strcmp(lines[j].key, lines[i].key) == 0);
    if (first && o->cache) {
      const double ms = lines[i].algo == lines[i].picked ? lines[i].ms : lines[i].default_ms;
      status = clt_tune_put_step(o->cache, lines[i].key, clt_conv_algo_name(lines[i].algo), ms,
                                 lines[i].default_ms, res->confirmed ? "confirmed" : "kept default",
                                 res->why, res->tuned_ms, res->default_ms, e);
    }
  }
  return status;
}

int clt_tune_put_side(clt_net *net, const clt_tune_line *lines, int n, int picked, clt_err *e) {
  int status = CLT_OK;
  for (int i = 0; i < n && !status; i++) {
    if (lines[i].candidates < 2) continue;
    const int algo = picked && varied_line(&lines[i]) ? lines[i].picked : lines[i].algo;
    status = clt_conv_choose(net->replica, lines[i].layer, &lines[i].geom, lines[i].filters,
                             lines[i].pass, algo, e);
  }
  return status;
}

int clt_tune_settle(clt_net *net, const clt_tuner_opts *o, clt_tune_line *lines, int n,
                    const clt_tune_verdict *v, clt_err *e) {
  int status = v->probed && !v->over ? record(o, lines, n, v, e) : CLT_OK;
  if (!status) status = clt_tune_put_side(net, lines, n, 0, e);
  if (!status) status = clt_net_prepare(net, e);
  return status;
}

int clt_tune_net(clt_net *net, const clt_tuner_opts *o, const clt_step_opts *s,
                 clt_tune_line *lines, int max_lines, int *nlines, clt_tune_verdict *res,
                 clt_err *e) {
  clt_replica *r = net->replica;
  memset(res, 0, sizeof *res);
  const double deadline = o->tune && o->budget_s > 0 ? clt_now_seconds() + o->budget_s : 0;
  clt_tune_progress local = {0}, *p = o->progress ? o->progress : &local;
  const int resumable = o->progress != NULL;
  int status = CLT_OK;
  if (o->tune && p->active) {
    /* Resumed: the lines as the checks left them (their choices held by r). */
    if (p->n > max_lines)
      status = clt_fail(e, CLT_ERR_INTERNAL, "more than %d tuned passes", max_lines);
    else memcpy(lines, p->lines, (size_t)p->n * sizeof *lines);
    *nlines = p->n;
    res->resumed = 1;
  } else {
    clt_tuner_opts checks = *o;
    checks.check_only = 1;
    checks.batch = net->max_batch;
    if (p->checking) {
      checks.checked_before = p->lines;
      checks.nchecked_before = p->n;
    }
    status = clt_tune_model(net->model, r, &checks, lines, max_lines, nlines, e);
    if (!status && o->tune) status = progress_start(p, *nlines, e);
  }
  const int n = *nlines;
  if (status || !o->tune) {
    free(local.lines);
    free(local.best);
    free(local.pick);
    return status == CLT_OK ? clt_net_prepare(net, e) : status;
  }
  p->calls++;
  unsigned char *varied = calloc((size_t)n + 1, 1);
  int *cur = malloc(((size_t)n + 1) * sizeof *cur);
  const int *pick = p->pick;
  clt_conv_choice *saved = malloc(sizeof r->conv_choices);
  instep in = {.net = net, .r = r, .s = s};
  in.marks = calloc(1, sizeof *in.marks);
  in.end = malloc(CLT_SCOPE_MARKS_MAX * sizeof *in.end);
  if (!varied || !cur || !saved || !in.marks || !in.end)
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
  int any = 0, unchecked = 0;
  for (int i = 0; i < n && !status; i++) {
    cur[i] = lines[i].algo;
    varied[i] = varied_line(&lines[i]);
    any |= varied[i];
    unchecked |= lines[i].candidates > 1 && !lines[i].cached && !lines[i].checked;
    /* Checked with one candidate left: nothing to choose, the default stays. */
    if (lines[i].checked && lines[i].nok == 1) lines[i].instep = 1;
  }
  /* Checks the budget cut short: no probes on the part checked (its verdict
   * would be judged without the rest); with a progress the next call checks
   * only what is left, then probes the whole. */
  if (unchecked) any = 0;
  p->checking = !status && unchecked && resumable;
  if (!status && !any && (unchecked || (deadline > 0 && clt_now_seconds() > deadline))) {
    res->over = 1;
    snprintf(res->why, sizeof res->why, "the budget ended during the candidates' checks");
  }
  const int nsaved = r->nconv_choices;
  clt_profile *profile = r->profile;
  if (!status && any) {
    memcpy(saved, r->conv_choices, sizeof r->conv_choices);
    r->profile = NULL; /* the probes stay out of --profile */
    /* Only a test's hook: each call flushes the queue, which the step does not. */
    in.marks->at_scope = s->in_step ? at_scope : NULL;
    in.marks->ctx = &in;
    status = in_step(&in, lines, n, varied, cur, deadline, resumable, o->defer && !resumable, p,
                     res, e);
    r->profile = profile;
    r->marks = NULL;
    /* Nothing unconfirmed stays: a pending or rejected pick is undone. */
    if (!status && !res->confirmed) {
      memcpy(r->conv_choices, saved, sizeof r->conv_choices);
      r->nconv_choices = nsaved;
    } else if (!status) {
      status = apply(&in, lines, n, pick, e);
    }
  }
  res->probe_steps = in.steps;
  p->steps += in.steps;
  res->all_steps = p->steps;
  res->calls = p->calls;
  /* A budget that ended keeps the work for the next call. */
  p->active = !status && any && res->over && resumable;
  res->pending = p->active || p->checking;
  if (res->pending) memcpy(p->lines, lines, (size_t)n * sizeof *lines);
  /* The picks in the lines, for the verdict (deferred: clt_tune_settle's),
   * per pass and in the cache once per shape. */
  const int judged = !status && any && res->probed && !res->over;
  for (int i = 0; i < n && judged; i++)
    if (varied[i]) lines[i].picked = pick[i];
  if (judged && !res->deferred) status = record(o, lines, n, res, e);
  if (!status) status = clt_net_prepare(net, e);
  free(varied);
  free(cur);
  free(saved);
  free(in.marks);
  free(in.end);
  free(local.lines);
  free(local.best);
  free(local.pick);
  return status;
}
