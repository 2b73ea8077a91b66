/* The GEMM tuner (gemm_tuner.h): per product shape, each tiling checked
 * against a double-precision product, then timed; the fastest kept. */
#define _POSIX_C_SOURCE 200809L
#include "gemm_tuner.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "layer.h"
#include "rng.h"
#include "timing.h"
#include "tuner.h"

#define DEFAULT_RUNS 3
#define MAX_RUNS 15
/* Rows of C checked at each end (the first and last row blocks). */
#define CHECK_ROWS 8
/* A tiling is taken over the default when at most this fraction of its time. */
#define WIN_MARGIN 0.97
/* Rounds for products whose default takes under SHORT_MS milliseconds. */
#define SHORT_MS 1.0
#define SHORT_RUNS 9

void clt_gemm_tune_key(const clt_replica *r, const clt_gemm_shape *s, char *out, size_t size) {
  const int m = s->trans_a ? (int)s->m : clt_tune_batch_bucket((int)s->m);
  const int k = s->trans_a ? clt_tune_batch_bucket((int)s->k) : (int)s->k;
  snprintf(out, size, "gemm %s tA%d tB%d m%d n%zu k%d", r->backend->name, s->trans_a, s->trans_b, m,
           s->n, k);
}

/* A shape's operands (plain matrices, A as the kernel reads it) and the
 * double-precision rows of C the check compares. */
typedef struct shape_run {
  clt_replica *r;
  clt_gemm_shape s;
  cl_mem a, b, c;
  float *out;  /* the checked rows of C, as the product left them */
  double *ref; /* rows[0 .. nrows) of C */
  size_t rows[2 * CHECK_ROWS];
  int nrows;
} shape_run;

static void shape_free(shape_run *t) {
  cl_mem *m[] = {&t->a, &t->b, &t->c};
  for (int i = 0; i < 3; i++)
    if (*m[i]) clReleaseMemObject(*m[i]);
  free(t->out);
  free(t->ref);
}

static int upload_random(clt_replica *r, clt_rng *rng, cl_mem m, size_t n, clt_err *e,
                         float **keep) {
  float *v = calloc(n ? n : 1, sizeof *v);
  if (!v) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning a GEMM");
  for (size_t i = 0; i < n; i++) v[i] = (float)(2.0 * clt_rng_uniform(rng) - 1.0);
  cl_int rc = clEnqueueWriteBuffer(r->queue, m, CL_TRUE, 0, n * sizeof *v, v, 0, NULL, NULL);
  *keep = v;
  return rc ? clt_replica_fail(r, e, rc, "GEMM tuning: writing a buffer") : CLT_OK;
}

/* The operands of s (lda, ldb, ldc packed; B^T stored [N][K], as the
 * product reads it: its tilings differ in how) and the check's reference rows. */
static int shape_init(shape_run *t, clt_replica *r, const clt_gemm_shape *s, int index,
                      clt_err *e) {
  memset(t, 0, sizeof *t);
  if (!s->m || !s->n || !s->k)
    return clt_fail(e, CLT_ERR_INTERNAL, "GEMM tuning: a product of an empty shape");
  t->r = r;
  t->s = *s;
  t->s.lda = s->trans_a ? s->m : s->k;
  t->s.ldb = s->trans_b ? s->k : s->n;
  t->s.ldc = s->n;
  const size_t na = s->m * s->k, nb = s->k * s->n, nc = s->m * s->n;
  int status = clt_replica_alloc(r, na * sizeof(float), "GEMM tuning A", &t->a, e);
  if (!status) status = clt_replica_alloc(r, nb * sizeof(float), "GEMM tuning B", &t->b, e);
  if (!status) status = clt_replica_alloc(r, nc * sizeof(float), "GEMM tuning C", &t->c, e);
  if (!status) status = clt_gemm_reserve(r, &t->s, e);
  if (status) return status;
  clt_rng rng;
  clt_rng_seed(&rng, 0x67656d6du, (uint64_t)index);
  float *ha = NULL, *hb = NULL;
  status = upload_random(r, &rng, t->a, na, e, &ha);
  if (!status) status = upload_random(r, &rng, t->b, nb, e, &hb);
  for (size_t i = 0; i < s->m && i < CHECK_ROWS; i++) t->rows[t->nrows++] = i;
  const size_t last = s->m > (size_t)2 * CHECK_ROWS ? s->m - CHECK_ROWS : (size_t)CHECK_ROWS;
  for (size_t i = last; i < s->m; i++) t->rows[t->nrows++] = i;
  t->out = malloc((size_t)t->nrows * s->n * sizeof *t->out);
  t->ref = malloc((size_t)t->nrows * s->n * sizeof *t->ref);
  if (!status && (!t->out || !t->ref))
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning a GEMM");
  for (int q = 0; q < t->nrows && !status; q++) {
    const size_t i = t->rows[q];
    double *row = t->ref + (size_t)q * s->n;
    for (size_t j = 0; j < s->n; j++) row[j] = 0;
    for (size_t p = 0; p < s->k; p++) {
      const double av = s->trans_a ? ha[p * s->m + i] : ha[i * s->k + p];
      for (size_t j = 0; j < s->n; j++)
        row[j] += av * (s->trans_b ? hb[j * s->k + p] : hb[p * s->n + j]);
    }
  }
  free(ha);
  free(hb);
  return status;
}

static int marker(clt_replica *r, cl_event *ev, clt_err *e) {
  cl_int rc = clEnqueueMarkerWithWaitList(r->queue, 0, NULL, ev);
  return rc ? clt_replica_fail(r, e, rc, "GEMM tuning: a marker") : CLT_OK;
}

/* Runs the product once: *ms its device milliseconds. */
static int time_tiling(shape_run *t, double *ms, clt_err *e) {
  cl_event ev[2] = {NULL, NULL};
  int status = marker(t->r, &ev[0], e);
  if (!status) status = clt_gemm(t->r, &t->s, 1.0f, t->a, 0, t->b, 0, 0.0f, t->c, 0, e);
  if (!status) status = marker(t->r, &ev[1], e);
  cl_ulong end[2] = {0, 0};
  cl_int rc = status ? CL_SUCCESS : clWaitForEvents(2, ev);
  for (int k = 0; k < 2 && !status && !rc; k++)
    rc = clGetEventProfilingInfo(ev[k], CL_PROFILING_COMMAND_END, sizeof end[k], &end[k], NULL);
  if (!status && rc) status = clt_replica_fail(t->r, e, rc, "GEMM tuning: profiling a product");
  for (int k = 0; k < 2; k++)
    if (ev[k]) clReleaseEvent(ev[k]);
  *ms = end[1] > end[0] ? (double)(end[1] - end[0]) * 1e-6 : 0.0;
  return status;
}

/* Runs tiling `t` (NULL: the default) once, timed (*ms: the first of its
 * timed runs), and compares the checked rows: *error gets the relative
 * error. */
static int check_tiling(shape_run *t, const clt_gemm_tuner_opts *o, const char *tl, double *ms,
                        double *error, clt_err *e) {
  const clt_gemm_shape *s = &t->s;
  int status = time_tiling(t, ms, e);
  if (status) return status;
  if (o->after_check) o->after_check(o->hook_ctx, t->r, s, tl, t->c, s->m * s->n);
  /* Only the checked rows come back. */
  const size_t row = s->n * sizeof(float);
  cl_int rc = CL_SUCCESS;
  for (int q = 0; q < t->nrows && !rc; q++)
    rc = clEnqueueReadBuffer(t->r->queue, t->c, CL_FALSE, t->rows[q] * row, row,
                             t->out + (size_t)q * s->n, 0, NULL, NULL);
  if (!rc) rc = clFinish(t->r->queue);
  if (rc) return clt_replica_fail(t->r, e, rc, "GEMM tuning: reading a result");
  *error = 0;
  for (int q = 0; q < t->nrows; q++) {
    const double err = clt_tune_rel_error(t->out + (size_t)q * s->n, t->ref + (size_t)q * s->n,
                                          s->n);
    if (!(err <= *error)) *error = err;
  }
  return CLT_OK;
}

/* Tunes shape s: the default and each candidate checked, those that pass
 * timed in rounds (each round runs every one once, so a change in the load
 * falls on all alike; the checks' runs, timed too, are the first), the one
 * with the fastest round taken and cached. *over: the budget ran out first
 * (the default stays, nothing cached). */
static int tune_shape(clt_replica *r, const clt_gemm_tuner_opts *o, const clt_gemm_shape *s,
                      int index, const char *key, double deadline, clt_gemm_tune_line *line,
                      int *over, char *won, int *pending, clt_err *e) {
  const clt_gemm_tilings *tt = r->backend->tilings;
  int runs = o->runs > 0 ? (o->runs < MAX_RUNS ? o->runs : MAX_RUNS) : DEFAULT_RUNS;
  char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
  const int ncand = tt->candidates(r, s, cand);
  line->candidates = ncand + 1;
  *over = 0;
  if (ncand == 0) return CLT_OK;
  shape_run t;
  int status = shape_init(&t, r, s, index, e);
  /* Slot 0: the default; slot i + 1: cand[i]. */
  int passed[CLT_GEMM_MAX_TILINGS + 1], npassed = 0;
  double times[CLT_GEMM_MAX_TILINGS + 1][MAX_RUNS] = {{0}};
  for (int i = -1; i < ncand && !status && !*over; i++) {
    if (deadline > 0 && clt_now_seconds() > deadline) {
      *over = 1;
      break;
    }
    const char *tl = i < 0 ? NULL : cand[i];
    clt_err ce = {0};
    status = tl && o->before_check ? o->before_check(o->hook_ctx, r, s, tl, &ce) : CLT_OK;
    if (!status) status = tt->choose(r, s, tl, &ce);
    if (!status) status = clt_gemm_reserve(r, &t.s, &ce); /* builds the tiling's kernels */
    double error = 0;
    if (!status) status = check_tiling(&t, o, tl, &times[i + 1][0], &error, &ce);
    if (status && tl) {
      /* A candidate that does not build or run on this device is not taken. */
      line->rejected++;
      status = tt->choose(r, s, NULL, e);
      continue;
    }
    if (status) {
      *e = ce;
      break;
    }
    if (error <= CLT_TUNE_TOL) passed[npassed++] = i + 1;
    else line->rejected++;
  }
  for (int round = 1; round < runs && !status && !*over; round++) {
    if (deadline > 0 && clt_now_seconds() > deadline) {
      *over = 1;
      break;
    }
    for (int q = 0; q < npassed && !status; q++) {
      const int slot = passed[q];
      status = tt->choose(r, s, slot ? cand[slot - 1] : NULL, e);
      if (!status) status = time_tiling(&t, &times[slot][round], e);
    }
    /* Short products (launch-bound, the noisiest) get more rounds; the
     * default's check, the first run into fresh memory, may be slow. */
    if (round == 1 && o->runs <= 0 && npassed && passed[0] == 0 &&
        (times[0][0] < SHORT_MS || times[0][1] < SHORT_MS))
      runs = SHORT_RUNS;
  }
  shape_free(&t);
  int best = -1; /* a slot */
  double best_ms = 0;
  for (int q = 0; q < npassed && !status && !*over; q++) {
    const int slot = passed[q];
    /* The fastest round: other jobs' load only ever adds time. */
    double ms = times[slot][0];
    for (int k = 1; k < runs; k++) ms = times[slot][k] < ms ? times[slot][k] : ms;
    if (slot == 0) line->default_ms = ms;
    /* A tiling displaces the default only when clearly faster (timing noise
     * must not swap kernels); among the others, the fastest. */
    const double bar = best == 0 ? best_ms * WIN_MARGIN : best_ms;
    if (best < 0 || ms < bar) best = slot, best_ms = ms;
  }
  if (!status && !*over && best < 0)
    status = clt_fail(e, CLT_ERR_INTERNAL,
                      "GEMM %zux%zux%zu%s: no tiling matched the reference product", s->m, s->n,
                      s->k, s->trans_a ? " At" : "");
  /* A tiling to confirm in the step stays off until its verdict. */
  *pending = !status && !*over && best > 0 && o->step;
  if (*pending) snprintf(won, CLT_GEMM_TILING_NAME, "%s", cand[best - 1]);
  const int s2 = tt->choose(r, s, status || *over || best <= 0 || *pending ? NULL : cand[best - 1],
                            e);
  if (status || *over) return status ? status : s2;
  if (best > 0) snprintf(line->chosen, sizeof line->chosen, "%s", cand[best - 1]);
  line->ms = best_ms;
  line->tuned = 1;
  if (!s2 && o->cache)
    status = clt_tune_put(o->cache, key, line->chosen, best_ms, line->default_ms, e);
  return status ? status : s2;
}

/* The tilings awaiting the whole step's verdict. */
typedef struct pending_set {
  clt_replica *r;
  const clt_gemm_tuner_opts *o; /* its below: the change under them */
  int n;
  struct {
    clt_gemm_shape shape;
    char tiling[CLT_GEMM_TILING_NAME];
    char key[160];
    double ms, default_ms;
    int uses;                 /* products of the shape a step runs */
    clt_gemm_tune_line *line; /* NULL: none kept */
  } at[CLT_GEMM_MAX_SHAPES];
} pending_set;

/* Adds shape s's tiling t (its times in line, which is kept unless scratch;
 * `uses` products a step) to the set awaiting the verdict. */
static void push_pending(pending_set *p, const clt_gemm_shape *s, const char *t, int uses,
                         const char *key, clt_gemm_tune_line *line, int scratch) {
  p->at[p->n].uses = uses;
  p->at[p->n].shape = *s;
  snprintf(p->at[p->n].tiling, sizeof p->at[p->n].tiling, "%s", t);
  snprintf(p->at[p->n].key, sizeof p->at[p->n].key, "%s", key);
  p->at[p->n].ms = line->ms;
  p->at[p->n].default_ms = line->default_ms;
  p->at[p->n++].line = scratch ? NULL : line;
  snprintf(line->chosen, sizeof line->chosen, "default"); /* until the verdict */
}

/* clt_tune_confirm's sides: 0 the defaults, 1 the tilings picked. */
static int set_pending(void *ctx, int side, clt_err *e) {
  const pending_set *p = ctx;
  int status = CLT_OK;
  for (int i = 0; i < p->n && !status; i++)
    status = p->r->backend->tilings->choose(p->r, &p->at[i].shape, side ? p->at[i].tiling : NULL,
                                            e);
  return status;
}

/* clt_tune_confirm_stacked's sides: 0 neither the change below nor the
 * tilings, 1 the change, 2 both. */
static int set_stacked(void *ctx, int side, clt_err *e) {
  const pending_set *p = ctx;
  int status = p->o->below(p->o->below_ctx, side > 0, e);
  return status ? status : set_pending(ctx, side == 2, e);
}

/* clt_tune_confirm's sides for the change below alone. */
static int set_below(void *ctx, int side, clt_err *e) {
  const pending_set *p = ctx;
  return p->o->below(p->o->below_ctx, side, e);
}

/* The whole step's verdict on the pending tilings (with the change below,
 * stacked), kept in the cache. */
static int confirm_pending(clt_net *net, const clt_gemm_tuner_opts *o, pending_set *p,
                           double deadline, clt_err *e) {
  clt_tune_verdict v, both[2];
  /* What the tilings save a step, timed alone. */
  double gain_ms = 0;
  for (int i = 0; i < p->n; i++) gain_ms += (p->at[i].default_ms - p->at[i].ms) * p->at[i].uses;
  int status;
  if (o->below) {
    status = clt_tune_confirm_stacked(net, o->step, set_stacked, p, gain_ms, deadline, both, e);
    *o->below_verdict = both[0];
    v = both[1];
  } else {
    status = clt_tune_confirm(net, o->step, set_pending, p, gain_ms, deadline, &v, e);
  }
  /* Not judged (the change below was not kept): they wait, at the default. */
  for (int i = 0; i < p->n && !status && !v.over && v.probed; i++) {
    const char *name = v.confirmed ? p->at[i].tiling : "default";
    const double ms = v.confirmed ? p->at[i].ms : p->at[i].default_ms;
    clt_gemm_tune_line *line = p->at[i].line;
    if (line) {
      snprintf(line->chosen, sizeof line->chosen, "%s", name);
      line->ms = ms;
      line->instep = 1;
      line->confirmed = v.confirmed;
      line->step_ms = v.tuned_ms;
      line->default_step_ms = v.default_ms;
      snprintf(line->why, sizeof line->why, "%s", v.why);
    }
    if (o->cache)
      status = clt_tune_put_step(o->cache, p->at[i].key, name, ms, p->at[i].default_ms,
                                 v.confirmed ? "confirmed" : "kept default", v.why, v.tuned_ms,
                                 v.default_ms, e);
  }
  return status;
}

int clt_gemm_tune_net(clt_net *net, const clt_gemm_tuner_opts *o, clt_gemm_tune_line *lines,
                      int max_lines, int *nlines, clt_err *e) {
  clt_replica *r = net->replica;
  const clt_gemm_tilings *tt = r->backend->tilings;
  if (nlines) *nlines = 0;
  if (!tt) return CLT_OK;
  if (o->below && (!o->below_verdict || !o->step))
    return clt_fail(e, CLT_ERR_ARG, "GEMM tuning: a change below needs whole steps and a verdict");
  /* The shapes the net runs now (not those of algorithms tried and left). */
  tt->shapes_clear(r);
  int status = clt_net_prepare(net, e);
  clt_gemm_shape *shapes = malloc(CLT_GEMM_MAX_SHAPES * sizeof *shapes);
  int uses[CLT_GEMM_MAX_SHAPES] = {0};
  pending_set *pend = o->step ? calloc(1, sizeof *pend) : NULL;
  if (!shapes || (o->step && !pend)) {
    free(shapes);
    free(pend);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning GEMMs");
  }
  if (pend) {
    pend->r = r;
    pend->o = o;
  }
  if (o->below) memset(o->below_verdict, 0, sizeof *o->below_verdict);
  const int n = status ? 0 : tt->shapes(r, shapes, uses, CLT_GEMM_MAX_SHAPES);
  clt_profile *profile = r->profile; /* the tuner's launches stay out of the profile */
  r->profile = NULL;
  const double deadline = o->tune && o->budget_s > 0 ? clt_now_seconds() + o->budget_s : 0;
  int over = 0;
  for (int i = 0; i < n && !status; i++) {
    const clt_gemm_shape *s = &shapes[i];
    if (!tt->tunable(s)) continue;
    clt_gemm_tune_line scratch, *line = &scratch;
    if (lines && nlines && *nlines < max_lines) line = &lines[(*nlines)++];
    memset(line, 0, sizeof *line);
    line->shape = *s;
    snprintf(line->chosen, sizeof line->chosen, "default");
    char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
    line->candidates = tt->candidates(r, s, cand) + 1;
    char key[160];
    clt_gemm_tune_key(r, s, key, sizeof key);
    double ms = 0, dms = 0;
    const char *hit = o->cache ? clt_tune_get(o->cache, key, &ms, &dms) : NULL;
    char tl[CLT_GEMM_TILING_NAME] = "";
    clt_err ignored = {0};
    const int is_default = hit && strcmp(hit, "default") == 0;
    const int parsed = hit && !is_default && tt->valid(r, s, hit);
    if (parsed) snprintf(tl, sizeof tl, "%s", hit);
    /* With whole-step confirmation a tiling runs only once confirmed; one
     * timed but not yet judged waits for the verdict, at the default. */
    const int decided = !hit || !o->step || is_default ||
                        clt_tune_get_decision(o->cache, key, NULL, NULL) != NULL;
    if (parsed && !decided) {
      line->ms = ms;
      line->default_ms = dms;
      line->cached = 1;
      (void)tt->choose(r, s, NULL, &ignored);
      if (o->tune && pend) push_pending(pend, s, tl, uses[i], key, line, line == &scratch);
      continue;
    }
    if (hit && (is_default || (parsed && tt->choose(r, s, tl, &ignored) == CLT_OK))) {
      if (is_default) (void)tt->choose(r, s, NULL, &ignored);
      snprintf(line->chosen, sizeof line->chosen, "%s", hit);
      line->ms = ms;
      line->default_ms = dms;
      line->cached = 1;
      continue;
    }
    if (!o->tune || over) continue;
    int pending = 0;
    status = tune_shape(r, o, s, i, key, deadline, line, &over, tl, &pending, e);
    if (!status && pending && pend) push_pending(pend, s, tl, uses[i], key, line, line == &scratch);
  }
  r->profile = profile;
  free(shapes);
  /* Every product timed: the picked tilings against the defaults, in whole
   * steps (the budget ended first: they wait, at the default). */
  if (!status && pend && pend->n && !over) status = confirm_pending(net, o, pend, deadline, e);
  else if (!status && o->below && !over)
    status = clt_tune_confirm(net, o->step, set_below, pend, 0, deadline, o->below_verdict, e);
  if (!status && o->below && over) {
    o->below_verdict->over = 1;
    snprintf(o->below_verdict->why, sizeof o->below_verdict->why,
             "the budget ended while the GEMM tilings were timed");
  }
  free(pend);
  /* The chosen tilings' kernels, before the next step. */
  if (!status) status = clt_net_prepare(net, e);
  return status;
}

/* ---- a model's products, from the cache's record of them --------------------------- */

/* Integers per product in the record: M, N, K, A^T, B^T, candidates (under
 * 2: nothing to tune, none cached). */
#define RECORD_FIELDS 6

/* FNV-1a over an int's four bytes, low byte first whatever the host's order. */
static uint64_t fnv1a_int(uint64_t h, int v) {
  const unsigned u = (unsigned)v;
  const unsigned char bytes[4] = {u & 0xffu, (u >> 8) & 0xffu, (u >> 16) & 0xffu, u >> 24};
  return clt_fnv1a(h, bytes, sizeof bytes);
}

/* The record's key: the model (its description, input, classes and frozen
 * layers), the batch and the convolution algorithms r runs for it, each of
 * which changes the products the net runs; 0 out of memory. */
static int record_key(const clt_model *m, const clt_replica *r, int batch, char *out, size_t size) {
  const size_t room = clt_describe_max(m->nlayers);
  char *text = malloc(room);
  if (!text) return 0;
  text[0] = '\0';
  clt_model_describe(m, text, room);
  uint64_t hm = clt_fnv1a(CLT_FNV_START, text, strlen(text) + 1);
  free(text);
  const int dims[4] = {m->input.h, m->input.w, m->input.c, m->classes};
  for (int i = 0; i < 4; i++) hm = fnv1a_int(hm, dims[i]);
  uint64_t ha = CLT_FNV_START;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    hm = fnv1a_int(hm, l->frozen);
    clt_conv_geom g;
    int filters;
    if (!clt_conv2d_tunable(l, batch, &g, &filters)) continue;
    const clt_conv_algos a = clt_conv_algos_layer(r, l->name, &g, filters);
    const int v[4] = {i, a.forward, a.weight_grad, a.input_grad};
    for (int k = 0; k < 4; k++) ha = fnv1a_int(ha, v[k]);
  }
  snprintf(out, size, "gemm shapes %s model %016llx b%d algorithms %016llx", r->backend->name,
           (unsigned long long)hm, batch, (unsigned long long)ha);
  return 1;
}

/* Fills lines from the record under key when it and every product's result
 * are cached (with confirming, every tiling judged by the whole step): 1,
 * else 0 (nothing filled that counts). */
static int from_record(const clt_replica *r, const clt_tune_cache *cache, const char *key,
                       int confirming, clt_gemm_tune_line *lines, int max_lines, int *nlines) {
  long v[CLT_GEMM_MAX_SHAPES * RECORD_FIELDS];
  const int n = clt_tune_get_list(cache, key, v, CLT_GEMM_MAX_SHAPES * RECORD_FIELDS);
  if (n < 0 || n % RECORD_FIELDS || n / RECORD_FIELDS > max_lines) return 0;
  for (int i = 0; i < n / RECORD_FIELDS; i++) {
    const long *f = v + (size_t)i * RECORD_FIELDS;
    if (f[0] <= 0 || f[1] <= 0 || f[2] <= 0 || (f[3] & ~1L) || (f[4] & ~1L) || f[5] < 0 ||
        f[5] > CLT_GEMM_MAX_TILINGS + 1)
      return 0;
    clt_gemm_tune_line *line = &lines[i];
    memset(line, 0, sizeof *line);
    line->shape = (clt_gemm_shape){.trans_a = (int)f[3],
                                   .trans_b = (int)f[4],
                                   .m = (size_t)f[0],
                                   .n = (size_t)f[1],
                                   .k = (size_t)f[2]};
    snprintf(line->chosen, sizeof line->chosen, "default");
    line->candidates = (int)f[5];
    if (f[5] < 2) continue;
    char gkey[160];
    clt_gemm_tune_key(r, &line->shape, gkey, sizeof gkey);
    const char *hit = clt_tune_get(cache, gkey, &line->ms, &line->default_ms);
    if (!hit || (confirming && strcmp(hit, "default") != 0 &&
                 !clt_tune_get_decision(cache, gkey, NULL, NULL)))
      return 0;
    snprintf(line->chosen, sizeof line->chosen, "%s", hit);
    line->cached = 1;
  }
  *nlines = n / RECORD_FIELDS;
  return 1;
}

int clt_gemm_tune_model(const clt_model *m, clt_replica *r, int batch, const clt_gemm_tuner_opts *o,
                        clt_gemm_tune_line *lines, int max_lines, int *nlines, int *built,
                        clt_err *e) {
  *nlines = 0;
  *built = 0;
  if (!r->backend->tilings) return CLT_OK;
  char key[192];
  if (!record_key(m, r, batch, key, sizeof key))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning GEMMs");
  /* A change below to judge takes the steps, whatever the cache holds. */
  if (o->cache && !o->below &&
      from_record(r, o->cache, key, o->step != NULL, lines, max_lines, nlines))
    return CLT_OK;
  *nlines = 0;
  clt_net *net = o->net;
  int status = net ? CLT_OK : clt_net_create(m, r, batch, 2, &net, e);
  *built = !status;
  if (!status && o->load && !o->net) status = o->load(net, batch, e);
  if (!status) status = clt_gemm_tune_net(net, o, lines, max_lines, nlines, e);
  if (net != o->net) clt_net_destroy(net);
  /* Every product's shape, for the next run (complete: the lines hold all). */
  if (!status && o->cache && *nlines < max_lines) {
    long v[CLT_GEMM_MAX_SHAPES * RECORD_FIELDS];
    int n = 0;
    for (int i = 0; i < *nlines && i < CLT_GEMM_MAX_SHAPES; i++) {
      const clt_gemm_shape *s = &lines[i].shape;
      const long f[RECORD_FIELDS] = {(long)s->m, (long)s->n, (long)s->k,
                                     s->trans_a, s->trans_b, lines[i].candidates};
      memcpy(v + n, f, sizeof f);
      n += RECORD_FIELDS;
    }
    status = clt_tune_put_list(o->cache, key, "products", v, n, e);
  }
  return status;
}

int clt_gemm_tune_trainer_net(clt_net *net, const char *file, int tune, double budget_s,
                              const clt_step_opts *step, FILE *verbose, clt_err *e) {
  clt_replica *r = net->replica;
  if (!r->backend->tilings) return CLT_OK;
  if (tune && budget_s <= 0) budget_s = 1e-9; /* spent: nothing more is timed */
  clt_tune_ident ident;
  clt_tune_cache *cache = NULL;
  int status = clt_tune_ident_of(&r->device, r->defines, &ident, e);
  if (!status) status = clt_tune_open(NULL, file, &ident, stderr, &cache, e);
  const clt_gemm_tuner_opts o = {.tune = tune, .budget_s = budget_s, .cache = cache, .step = step};
  clt_gemm_tune_line *lines = malloc(CLT_GEMM_MAX_SHAPES * sizeof *lines);
  int n = 0;
  if (!status && !lines) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning GEMMs");
  if (!status) status = clt_gemm_tune_net(net, &o, lines, CLT_GEMM_MAX_SHAPES, &n, e);
  /* What tuning did now, when it did anything. */
  int tuned = 0;
  const clt_gemm_tune_line *judged = NULL;
  for (int i = 0; i < n && !status; i++) {
    tuned += lines[i].tuned;
    if (lines[i].instep && !judged) judged = &lines[i];
  }
  if (!status && verbose && tune && judged)
    fprintf(verbose,
            "Replica %d: GEMM tilings: %d of %d products timed now; in the step: %.2f ms "
            "default, %.2f ms tuned: %s (%s)\n",
            r->index, tuned, n, judged->default_step_ms, judged->step_ms,
            judged->confirmed ? "confirmed" : "kept default", judged->why);
  else if (!status && verbose && tune && tuned)
    fprintf(verbose, "Replica %d: GEMM tilings: %d of %d products timed now\n", r->index, tuned, n);
  free(lines);
  clt_tune_close(cache);
  return status;
}
