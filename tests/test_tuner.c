/* The tuner (src/engine/tuner.c) and the per-layer choice of a convolution's
 * algorithm it makes (gemm.h's clt_conv_choose): a choice holds for its layer
 * and pass on its replica alone, an algorithm that cannot run the geometry is
 * refused, $CLTRAIN_WINOGRAD forces every pass over it; the tuner checks every
 * candidate against its double-precision convolution (all of them pass), a
 * candidate made wrong by the test's hook is rejected and never chosen, the
 * results go to the cache and a second run takes them from there without
 * timing; a budget spent leaves the passes at their defaults, uncached; a net
 * set up after the choices runs them (its loss agrees with the defaults').
 *
 * In the step (clt_tune_net), with a hook that sleeps inside probe steps
 * only (real delays far above a step of this model, so no timing luck): the
 * one forward candidate not slowed is picked and confirmed, and the cache
 * then holds it ("confirmed") and a second run takes it untimed; a
 * candidate slowed in the step is not picked; an assignment whose whole
 * step is slower is not kept ("kept default", the defaults run); one faster
 * in every pair of confirmation steps is kept though the host slows down
 * during them (its median step above the defaults' fastest); one whose
 * median pair meets the bar with too few wins is given as many pairs more
 * and kept when all of them show it, but not when the median fails; an input
 * gradient slowed at its own mark gets the candidate not slowed; a budget
 * shorter than the probes ends them: nothing changes or is cached, within
 * the budget and a step; with the work carried between calls (the trainer's
 * epochs) the same budget finishes over several calls, each resuming, the
 * defaults running and nothing cached until the confirmed verdict; a budget
 * short of the probes left says how much more would hold them; checks
 * longer than the budget go on over calls too, each candidate checked once,
 * and no probe step runs before every pass is checked. Layers of one shape
 * share its candidates out in the probe steps: three layers take four
 * candidates in two steps a round, and the one not slowed, run by one layer
 * alone, is picked for all and confirmed, the confirmation stopping after 4
 * of its 5 pairs, all won, which settle the verdict. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "net.h"
#include "timing.h"
#include "tuner.h"

#define MAX_LINES 16

/* Two 3x3 stride-1 layers (every candidate fits), a stride-2 one (im2col and
 * in place), then the classifier. */
static const char *const DESC =
    "c1=Conv2D(16,3x3,s1,same,relu) c2=Conv2D(16,3x3,s1,same) c3=Conv2D(16,3x3,s2,same,relu) "
    "flat=Flatten dense=Dense(10)";

static clt_model M;

static void test_choice(void) {
  set_case("per-layer choice:");
  const clt_conv_geom g3 = {2, 9, 9, 16, 3, 3, 1, 1, 1, 9, 9},
                      s2 = {2, 9, 9, 16, 3, 3, 2, 1, 1, 5, 5};
  const clt_conv_algos d = clt_conv_algos_for(R, &g3, 16);
  int c[CLT_CONV_MAX_CANDIDATES];
  const int n3 = clt_conv_candidates(R, &g3, 16, CLT_CONV_PASS_FORWARD, c);
  expect("3x3 stride 1: im2col, in place, F(2x2), F(4x4)",
         n3 != 4 || c[0] != CLT_CONV_IM2COL || c[1] != CLT_CONV_IN_PLACE ||
             c[2] != CLT_CONV_WINOGRAD2 || c[3] != CLT_CONV_WINOGRAD4,
         1);
  const int n2 = clt_conv_candidates(R, &s2, 16, CLT_CONV_PASS_FORWARD, c);
  expect("stride 2: no Winograd", n2 != 2, 1);
  expect("a choice for a pass",
         clt_conv_choose(R, "a", &g3, 16, CLT_CONV_PASS_WEIGHT_GRAD, CLT_CONV_WINOGRAD4, &E) != 0,
         1);
  clt_conv_algos a = clt_conv_algos_layer(R, "a", &g3, 16);
  expect("holds for that pass", a.weight_grad != CLT_CONV_WINOGRAD4, 1);
  expect("the other passes keep the default",
         a.forward != d.forward || a.input_grad != d.input_grad, 1);
  a = clt_conv_algos_layer(R, "b", &g3, 16);
  expect("another layer keeps the default", a.weight_grad != d.weight_grad, 1);
  expect("Winograd for stride 2 is refused",
         clt_conv_choose(R, "c", &s2, 16, CLT_CONV_PASS_FORWARD, CLT_CONV_WINOGRAD2, &E) == 0, 1);
  R->winograd = 2;
  a = clt_conv_algos_layer(R, "a", &g3, 16);
  expect("CLTRAIN_WINOGRAD forces every pass", a.weight_grad != 2 || a.forward != 2, 1);
  R->winograd = 0;
  expect("back to the default",
         clt_conv_choose(R, "a", &g3, 16, CLT_CONV_PASS_WEIGHT_GRAD, -1, &E) != 0, 1);
  a = clt_conv_algos_layer(R, "a", &g3, 16);
  expect("the default again", a.weight_grad != d.weight_grad, 1);
  expect("names round-trip", clt_conv_algo_parse(clt_conv_algo_name(CLT_CONV_WINOGRAD4)) != 4, 1);
  case_end();
}

/* The hook: F(2x2)'s forward result made wrong by 1% of its first value. */
static int hook_calls;
static void corrupt_f2_forward(void *ctx, clt_replica *r, const clt_layer *l, int pass, int algo,
                               cl_mem out, size_t offset, size_t floats) {
  (void)ctx;
  (void)l;
  if (pass != CLT_CONV_PASS_FORWARD || algo != CLT_CONV_WINOGRAD2 || floats == 0) return;
  float *v = hnew(floats * sizeof *v);
  check_cl(clEnqueueReadBuffer(r->queue, out, CL_TRUE, offset * sizeof *v, floats * sizeof *v, v, 0,
                               NULL, NULL),
           "reading");
  float big = 0;
  for (size_t i = 0; i < floats; i++) big = fmaxf(big, fabsf(v[i]));
  v[floats / 2] += 0.01f * big;
  check_cl(clEnqueueWriteBuffer(r->queue, out, CL_TRUE, offset * sizeof *v, floats * sizeof *v, v,
                                0, NULL, NULL),
           "writing");
  hook_calls++;
}

static const clt_tune_line *find(const clt_tune_line *lines, int n, const char *layer, int pass) {
  for (int i = 0; i < n; i++)
    if (strcmp(lines[i].layer, layer) == 0 && lines[i].pass == pass) return &lines[i];
  return NULL;
}

/* The loss of one training step of M on R, with whatever R has chosen. */
static double step_loss(void) {
  clt_net *net = NULL;
  double loss = NAN;
  if (api_failed(clt_net_create(&M, R, 4, 1, &net, &E), "net")) return loss;
  const size_t nin = (size_t)4 * clt_shape_size(M.input);
  double *x = dnew(nin);
  rng_seed(77);
  rand_fill(x, nin, 0, 1);
  upload(net->input, 0, x, nin);
  int labels[4] = {1, 2, 3, 4};
  upload_bytes(net->labels, 0, labels, sizeof labels);
  float *flat = hnew(M.flat_floats * sizeof *flat);
  for (size_t i = 0; i < M.flat_floats; i++) flat[i] = (float)urand(-0.2, 0.2);
  if (!api_failed(clt_net_write_params(net, flat, &E), "params") &&
      !api_failed(clt_net_forward_backward(net, 4, 0.25f, 0, 1, &E), "step")) {
    float m[2];
    download_bytes(net->metrics, 0, m, sizeof m);
    loss = m[0];
  }
  clt_net_destroy(net);
  return loss;
}

static void test_tuner(const char *dir) {
  set_case("tuner:");
  const clt_shape in = {12, 12, 3};
  if (api_failed(clt_model_parse("tiny", in, 10, CLT_PRE_UNIT, DESC, &M, &E), "model")) return;
  rng_seed(5);
  const double loss_default = step_loss();
  clt_tune_ident id;
  clt_tune_cache *cache = NULL;
  if (api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
      api_failed(clt_tune_open(dir, NULL, &id, NULL, &cache, &E), "open"))
    return;
  clt_tune_line lines[MAX_LINES];
  int n = 0;
  /* Without the hook every candidate matches the reference. */
  clt_tuner_opts o = {.batch = 4, .tune = 1, .runs = 1};
  if (api_failed(clt_tune_model(&M, R, &o, lines, MAX_LINES, &n, &E), "tune, unhooked")) return;
  int rejected = 0, tuned = 0;
  for (int i = 0; i < n; i++) rejected += lines[i].rejected, tuned += lines[i].tuned;
  /* c1 reads the model's input: no input gradient; c3's strided input gradient
   * has one algorithm. */
  expect("8 passes, 7 tuned", n != 8 || tuned != 7, 1);
  expect("no correct candidate rejected", rejected != 0, 1);

  R->nconv_choices = 0;
  o.cache = cache;
  o.after_check = corrupt_f2_forward;
  if (api_failed(clt_tune_model(&M, R, &o, lines, MAX_LINES, &n, &E), "tune, hooked")) return;
  expect("the hook ran for each 3x3 stride-1 forward", hook_calls != 2, 1);
  for (int k = 0; k < 2; k++) {
    const char *name = k ? "c2" : "c1";
    const clt_tune_line *t = find(lines, n, name, CLT_CONV_PASS_FORWARD);
    char what[96];
    snprintf(what, sizeof what, "%s forward: the wrong F(2x2) rejected, not chosen", name);
    expect(what, !t || t->rejected != 1 || t->algo == CLT_CONV_WINOGRAD2, 1);
    const clt_layer *l = &M.layers[k];
    clt_conv_geom g;
    int f;
    clt_conv2d_tunable(l, 4, &g, &f);
    const clt_conv_algos a = clt_conv_algos_layer(R, name, &g, f);
    snprintf(what, sizeof what, "%s: the replica runs what was chosen", name);
    expect(what, !t || a.forward != t->algo, 1);
  }
  const clt_tune_line *s2 = find(lines, n, "c3", CLT_CONV_PASS_FORWARD);
  expect("stride 2: two candidates", !s2 || s2->candidates != 2, 1);
  clt_tune_line first[MAX_LINES];
  memcpy(first, lines, sizeof first);
  const int nfirst = n;
  const double loss_tuned = step_loss();
  char detail[96];
  snprintf(detail, sizeof detail, "(%.7g against %.7g)", loss_tuned, loss_default);
  report("a step's loss with the tuned choices against the defaults'",
         fabs(loss_tuned - loss_default) / fabs(loss_default), 1e-4, detail);
  /* Every algorithm in one net, reserved at its set-up: c1 im2col, c2 F(4x4)
   * and F(2x2), c3 in place. */
  clt_conv_geom g;
  int f;
  const int pick[3][3] = {{CLT_CONV_IM2COL, CLT_CONV_IM2COL, -1},
                          {CLT_CONV_WINOGRAD4, CLT_CONV_WINOGRAD2, CLT_CONV_WINOGRAD4},
                          {CLT_CONV_IN_PLACE, CLT_CONV_IN_PLACE, -1}};
  clt_conv_choice saved[3];
  memcpy(saved, R->conv_choices, sizeof saved);
  const int nsaved = R->nconv_choices;
  for (int k = 0; k < 3; k++) {
    clt_conv2d_tunable(&M.layers[k], 4, &g, &f);
    for (int p = 0; p < 3; p++)
      if (api_failed(clt_conv_choose(R, M.layers[k].name, &g, f, p, pick[k][p], &E), "choose"))
        return;
  }
  const double loss_mixed = step_loss();
  snprintf(detail, sizeof detail, "(%.7g against %.7g)", loss_mixed, loss_default);
  report("a step's loss with every algorithm against the defaults'",
         fabs(loss_mixed - loss_default) / fabs(loss_default), 1e-4, detail);
  expect("a finite loss", !isfinite(loss_default) || loss_default <= 0, 1);
  memcpy(R->conv_choices, saved, sizeof saved);
  R->nconv_choices = nsaved;

  /* The cache, read by a new handle: nothing timed, the same choices. */
  clt_tune_close(cache);
  cache = NULL;
  R->nconv_choices = 0;
  if (api_failed(clt_tune_open(dir, NULL, &id, NULL, &cache, &E), "reopen")) return;
  const clt_tuner_opts cached = {.batch = 4, .tune = 0, .cache = cache};
  if (api_failed(clt_tune_model(&M, R, &cached, lines, MAX_LINES, &n, &E), "cached")) return;
  int same = n == nfirst;
  for (int i = 0; i < n && same; i++)
    same = (lines[i].cached || lines[i].candidates < 2) && !lines[i].tuned &&
           lines[i].algo == first[i].algo;
  expect("a second run takes every pass from the cache", !same, 1);
  /* Batch 5 falls in batch 8's bucket: nothing cached for it; a budget already
   * spent times nothing and caches nothing. */
  R->nconv_choices = 0;
  const clt_tuner_opts spent = {.batch = 5, .tune = 1, .budget_s = 1e-9, .cache = cache};
  if (api_failed(clt_tune_model(&M, R, &spent, lines, MAX_LINES, &n, &E), "budget")) return;
  int untouched = 1;
  for (int i = 0; i < n; i++)
    untouched &= !lines[i].tuned && !lines[i].cached && lines[i].algo == lines[i].default_algo;
  expect("a spent budget leaves every pass at its default", !untouched, 1);
  clt_conv_geom g2;
  int f2;
  clt_conv2d_tunable(&M.layers[1], 5, &g2, &f2);
  const clt_conv_algos now = clt_conv_algos_layer(R, "c2", &g2, f2),
                       def = clt_conv_algos_for(R, &g2, f2);
  expect("and the replica runs the defaults", memcmp(&now, &def, sizeof now) != 0, 1);
  clt_tune_close(cache);
  case_end();
}

/* ---- in the step ---------------------------------------------------------------------- */

/* The hook's orders: in the phases of `phases` (bit per phase), sleep when c2's
 * forward runs `slow` (-1: any but `keep`), or at the loss in phase 2 (late). */
typedef struct slow_hook {
  int phases, slow, keep, late;
  double sleep_s; /* at every scope when > 0 */
  double drift_s; /* at the loss of both steps of the confirmation's k-th pair: k times this */
  int dx;         /* slow c2's input gradient (at its mark) instead of its forward */
  double build_s; /* at the loss of a probe step whose c2 forward ran first: as a build */
  unsigned lose;  /* the picked side's step of the confirmation's k-th pair slowed: bit k */
  int picked_steps;
  int calls, pair, built;
} slow_hook;

static void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static void in_step_hook(void *ctx, clt_replica *r, const char *what, const char *pass, int phase) {
  slow_hook *h = ctx;
  h->calls++;
  if (h->sleep_s > 0) nap(h->sleep_s);
  if (h->late && phase == 2 && strcmp(what, "loss") == 0) nap(0.03);
  if (h->drift_s > 0 && phase > 0 && strcmp(what, "loss") == 0) {
    nap(h->drift_s * h->pair);
    h->pair += phase == 2; /* a pair: the current side's step, then the picked one's */
  }
  if (phase == 2 && strcmp(what, "loss") == 0 && ((h->lose >> h->picked_steps++) & 1)) nap(0.1);
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&M.layers[1], 4, &g, &f);
  if (h->build_s > 0 && phase == 0 && strcmp(what, "loss") == 0) {
    const int algo = clt_conv_algos_layer(r, "c2", &g, f).forward;
    if (algo >= 0 && algo < 30 && !((h->built >> algo) & 1)) nap(h->build_s);
    if (algo >= 0 && algo < 30) h->built |= 1 << algo;
  }
  if (h->dx) {
    if (((h->phases >> phase) & 1) && strcmp(what, "c2") == 0 &&
        strcmp(pass, "input gradient") == 0 &&
        clt_conv_algos_layer(r, "c2", &g, f).input_grad != h->keep)
      nap(0.03);
    return;
  }
  if (!((h->phases >> phase) & 1) || strcmp(what, "c2") != 0 || strcmp(pass, "forward") != 0)
    return;
  const int algo = clt_conv_algos_layer(r, "c2", &g, f).forward;
  if (h->slow >= 0 ? algo == h->slow : algo != h->keep) nap(0.03);
}

/* A training net of m on R with a loaded batch of 4. */
static clt_net *net_of(const clt_model *m) {
  clt_net *net = NULL;
  if (api_failed(clt_net_create(m, R, 4, 1, &net, &E), "net")) return NULL;
  const size_t nin = (size_t)4 * clt_shape_size(m->input);
  double *x = dnew(nin);
  rand_fill(x, nin, 0, 1);
  upload(net->input, 0, x, nin);
  int labels[4] = {1, 2, 3, 4};
  upload_bytes(net->labels, 0, labels, sizeof labels);
  float *flat = hnew(m->flat_floats * sizeof *flat);
  for (size_t i = 0; i < m->flat_floats; i++) flat[i] = (float)urand(-0.2, 0.2);
  if (api_failed(clt_net_write_params(net, flat, &E), "params")) {
    clt_net_destroy(net);
    return NULL;
  }
  return net;
}

static clt_net *probe_net(void) { return net_of(&M); }

/* A check hook that sleeps after each candidate's check and counts the
 * checks per layer, pass and algorithm. */
typedef struct check_hook {
  double sleep_s;
  int counts[8][CLT_CONV_PASSES][16];
} check_hook;

static void count_check(void *ctx, clt_replica *r, const clt_layer *l, int pass, int algo,
                        cl_mem out, size_t offset, size_t floats) {
  (void)r, (void)out, (void)offset, (void)floats;
  check_hook *h = ctx;
  const long layer = l - M.layers;
  if (layer >= 0 && layer < 8 && pass >= 0 && pass < CLT_CONV_PASSES && algo >= 0 && algo < 16)
    h->counts[layer][pass][algo]++;
  nap(h->sleep_s);
}

static check_hook *checks_hook; /* in_step_with's check hook, NULL: none */
static int confirm_pairs;       /* in_step_with's pairs (0: the tuner's choice) */

/* Opens R's tuning cache in folder dir/sub (1: it failed, reported). */
static int open_in(const char *dir, const char *sub, clt_tune_cache **cache) {
  char folder[256];
  snprintf(folder, sizeof folder, "%s/%s", dir, sub);
  clt_tune_ident id;
  return api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
         api_failed(clt_tune_open(folder, NULL, &id, NULL, cache, &E), "open");
}

/* Tunes net in the step with hook h into cache folder dir/sub (with
 * progress: work carried between calls). */
static int in_step_with(clt_net *net, const char *dir, const char *sub, slow_hook *h, double budget,
                        clt_tune_progress *progress, clt_tune_line *lines, int *n,
                        clt_tune_verdict *v, clt_tune_cache **cache) {
  if (open_in(dir, sub, cache)) return 1;
  const clt_tuner_opts o = {.batch = 4,
                            .tune = 1,
                            .budget_s = budget,
                            .cache = *cache,
                            .progress = progress,
                            .after_check = checks_hook ? count_check : NULL,
                            .hook_ctx = checks_hook};
  const clt_step_opts so = {.count = 4,
                            .loss_scale = 0.25f,
                            .confirm = confirm_pairs,
                            .in_step = in_step_hook,
                            .hook_ctx = h};
  return api_failed(clt_tune_net(net, &o, &so, lines, MAX_LINES, n, v, &E), sub);
}

static int in_step(clt_net *net, const char *dir, const char *sub, slow_hook *h, double budget,
                   clt_tune_line *lines, int *n, clt_tune_verdict *v, clt_tune_cache **cache) {
  return in_step_with(net, dir, sub, h, budget, NULL, lines, n, v, cache);
}

static int c2_forward(void) {
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&M.layers[1], 4, &g, &f);
  return clt_conv_algos_layer(R, "c2", &g, f).forward;
}

/* The backend's default for c2's forward. */
static int c2_default(void) {
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&M.layers[1], 4, &g, &f);
  return clt_conv_algos_for(R, &g, f).forward;
}

static void test_in_step(const char *dir) {
  set_case("in the step:");
  clt_net *net = probe_net();
  if (!net) return;
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&M.layers[1], 4, &g, &f);
  const int def = c2_default();
  clt_tune_line lines[MAX_LINES];
  int n = 0;
  clt_tune_verdict v;
  clt_tune_cache *cache = NULL;
  const clt_tune_line *c2;

  /* Every c2 forward but F(4x4) slowed, in every phase. */
  R->nconv_choices = 0;
  slow_hook only = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4};
  if (in_step(net, dir, "only", &only, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  expect("the hook ran inside the probe steps", only.calls < 20, 1);
  expect("the one candidate not slowed in the step is picked",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4, 1);
  expect("and confirmed by the whole step", !v.probed || !v.differs || !v.confirmed, 1);
  expect("the replica runs it", c2_forward() != CLT_CONV_WINOGRAD4, 1);
  const char *d = c2 ? clt_tune_get_decision(cache, c2->key, NULL, NULL) : NULL;
  const char *var = c2 ? clt_tune_get(cache, c2->key, NULL, NULL) : NULL;
  expect("the cache says confirmed",
         !d || strcmp(d, "confirmed") != 0 || !var || strcmp(var, "winograd4") != 0, 1);
  clt_tune_close(cache);
  /* Again from the cache: nothing probed. */
  R->nconv_choices = 0;
  only.calls = 0;
  if (in_step(net, dir, "only", &only, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  expect("a second run takes it from the cache, no probe step",
         !c2 || !c2->cached || v.probe_steps != 0 || only.calls != 0 ||
             c2_forward() != CLT_CONV_WINOGRAD4,
         1);
  clt_tune_close(cache);

  /* F(4x4) alone slowed in the step: never picked. */
  R->nconv_choices = 0;
  slow_hook one = {.phases = 7, .slow = CLT_CONV_WINOGRAD4};
  if (in_step(net, dir, "one", &one, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  expect("a candidate slowed in the step alone is not picked",
         !c2 || !c2->instep || c2->picked == CLT_CONV_WINOGRAD4 ||
             c2_forward() == CLT_CONV_WINOGRAD4,
         1);
  clt_tune_close(cache);

  /* The default slowed while probing, the picked whole step in the confirmation. */
  R->nconv_choices = 0;
  slow_hook late = {.phases = 1, .slow = def, .late = 1};
  if (in_step(net, dir, "late", &late, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  char detail[224];
  snprintf(detail, sizeof detail, "(%s)", v.why);
  expect("probing picked another forward for c2", !c2 || c2->picked == def || !v.differs, 1);
  expect("the confirmation rejects the slower step", v.confirmed || !v.probed, 1);
  expect("the replica is back on the default", c2_forward() != def, 1);
  d = c2 ? clt_tune_get_decision(cache, c2->key, NULL, NULL) : NULL;
  var = c2 ? clt_tune_get(cache, c2->key, NULL, NULL) : NULL;
  expect("the cache says kept default, with the default",
         !d || strcmp(d, "kept default") != 0 || !var || clt_conv_algo_parse(var) != def, 1);
  if (strstr(v.why, "short of the bar") == NULL) printf("  verdict %s\n", detail);
  clt_tune_close(cache);

  /* A host that slows down while confirming (each pair 10 ms slower than the
   * last, both sides alike), F(4x4) faster by 30 ms in every step: each pair
   * shows the gain, so it is kept, though its median step is slower than the
   * defaults' fastest. */
  R->nconv_choices = 0;
  slow_hook drift = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4, .drift_s = 0.01};
  if (in_step(net, dir, "drift", &drift, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  snprintf(detail, sizeof detail, "(%s; %.1f ms default, %.1f ms tuned)", v.why, v.default_ms,
           v.tuned_ms);
  expect("a drifting host: the faster assignment picked, and kept by its pairs",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4 || !v.confirmed || v.wins != v.pairs ||
             c2_forward() != CLT_CONV_WINOGRAD4,
         1);
  printf("  drift %s\n", detail);
  clt_tune_close(cache);

  /* A noisy host: F(4x4) faster by 30 ms, but its steps of the 1st and 3rd
   * of 5 pairs 100 ms slower. The median pair meets the bar, the wins (3 of
   * 5) do not: 5 pairs more, all won, and it is kept (8 of 10). With the 1st
   * to 3rd pairs lost, the median fails too: kept default after 5. */
  R->nconv_choices = 0;
  confirm_pairs = 5;
  slow_hook noisy = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4, .lose = 5};
  if (in_step(net, dir, "noisy", &noisy, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  printf("  noisy: %s\n", v.why);
  expect("a median under the bar with 3 wins of 5: 5 pairs more, then kept",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4 || !v.confirmed || v.pairs != 10 || v.wins != 8 ||
             c2_forward() != CLT_CONV_WINOGRAD4,
         1);
  clt_tune_close(cache);
  R->nconv_choices = 0;
  slow_hook lost = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4, .lose = 7};
  if (in_step(net, dir, "lost", &lost, 0, lines, &n, &v, &cache)) return;
  printf("  lost: %s\n", v.why);
  expect("3 pairs of 5 lost: kept default, no pairs added",
         v.confirmed || v.pairs != 5 || c2_forward() == CLT_CONV_WINOGRAD4, 1);
  clt_tune_close(cache);
  confirm_pairs = 0;

  /* The first round's steps slow, as when they build their kernels: the
   * budget, ample for the later steps, is not judged at the first round's pace,
   * and F(4x4) is confirmed. */
  R->nconv_choices = 0;
  slow_hook builds = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4, .build_s = 0.5};
  if (in_step(net, dir, "builds", &builds, 6, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  expect("slow first launches: the budget holds the rest", v.over, 1);
  if (v.over) printf("  builds: %s\n", v.why);
  expect("and F(4x4) is confirmed and run",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4 || !v.confirmed ||
             c2_forward() != CLT_CONV_WINOGRAD4,
         1);
  clt_tune_close(cache);

  /* Every c2 input gradient but F(4x4)'s slowed, at the mark where it begins
   * inside the backward: timed apart from the weight gradient, F(4x4) is
   * picked for it, confirmed and run. */
  R->nconv_choices = 0;
  slow_hook dxh = {.phases = 7, .keep = CLT_CONV_WINOGRAD4, .dx = 1};
  if (in_step(net, dir, "dx", &dxh, 0, lines, &n, &v, &cache)) return;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_INPUT_GRAD);
  expect("the input gradient timed apart: the one not slowed is picked, confirmed and run",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4 || !v.confirmed ||
             clt_conv_algos_layer(R, "c2", &g, f).input_grad != CLT_CONV_WINOGRAD4,
         1);
  clt_tune_close(cache);

  /* Probe steps far longer than the budget. */
  R->nconv_choices = 0;
  slow_hook all = {.sleep_s = 0.01};
  const double budget = 0.3, t0 = clt_now_seconds();
  if (in_step(net, dir, "budget", &all, budget, lines, &n, &v, &cache)) return;
  const double took = clt_now_seconds() - t0;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  snprintf(detail, sizeof detail, "(%.2f s)", took);
  printf("  short budget: %s\n", v.why);
  expect("a short budget ends the probes", !v.over || v.confirmed, 1);
  expect("nothing cached", !c2 || clt_tune_get(cache, c2->key, NULL, NULL) != NULL, 1);
  expect("the defaults run", c2_forward() != def, 1);
  report("within the budget and a probe step (seconds over)", took - budget, 0.5, detail);
  clt_tune_close(cache);

  /* A budget that holds the first round but not the rest: judged after the
   * second round's first step, it says how much more would hold them. The
   * steps take 0.12 s or more (the hook's sleeps), so the judgement comes 5
   * steps in and the 13 left need 1.5 s more, for steps up to 0.3 s. */
  R->nconv_choices = 0;
  slow_hook judged = {.sleep_s = 0.01};
  if (in_step(net, dir, "judged", &judged, 1.7, lines, &n, &v, &cache)) return;
  double more = 0;
  const char *hint = strstr(v.why, "(about ");
  if (hint) more = atof(hint + 7);
  printf("  judged: %s\n", v.why);
  expect("a budget short of the rest: it says how much more would hold it",
         !v.over || !hint || !(more >= 1), 1);
  clt_tune_close(cache);

  /* The same short budget, with the work carried between calls (as between
   * epochs), and every c2 forward but F(4x4) slowed: each call goes on where
   * the last stopped; until the verdict nothing changes and nothing is
   * cached; then F(4x4) is picked, confirmed and run. */
  R->nconv_choices = 0;
  clt_tune_progress *progress = clt_tune_progress_new();
  slow_hook resume = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4, .sleep_s = 0.005};
  int calls = 0, early = 0, resumed = 0, steps = 0;
  for (; calls < 200; calls++) {
    if (in_step_with(net, dir, "resume", &resume, budget, progress, lines, &n, &v, &cache)) break;
    steps += v.probe_steps;
    resumed += v.resumed;
    c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
    if (v.pending)
      early += c2_forward() != def || !c2 || clt_tune_get(cache, c2->key, NULL, NULL) != NULL ||
               !clt_tune_progress_pending(progress);
    clt_tune_close(cache);
    if (!v.pending) break;
  }
  snprintf(detail, sizeof detail, "(%d calls, %d probe steps)", calls + 1, steps);
  expect("a budget shorter than the work: it goes on over several calls", calls < 2, 1);
  expect("each call after the first resumes", resumed != calls, 1);
  expect("until the verdict: the defaults run, nothing cached", early != 0, 1);
  expect("then the one forward not slowed is picked and confirmed",
         !c2 || c2->picked != CLT_CONV_WINOGRAD4 || !v.confirmed || v.all_steps != steps, 1);
  printf("  resumed %s\n", detail);
  expect("the replica runs it, and the work is done",
         c2_forward() != CLT_CONV_WINOGRAD4 || clt_tune_progress_pending(progress), 1);
  clt_tune_progress_free(progress);

  /* Checks longer than the budget (each candidate's check sleeps), the work
   * carried between calls: no probe step runs on the part checked so far;
   * each call checks only what is left, each candidate once in all; once
   * every pass is checked the whole model is probed and judged. */
  R->nconv_choices = 0;
  progress = clt_tune_progress_new();
  static check_hook slow_checks = {.sleep_s = 0.08};
  checks_hook = &slow_checks;
  slow_hook keep4 = {.phases = 7, .slow = -1, .keep = CLT_CONV_WINOGRAD4};
  int checking = 0, probed_early = 0, twice = 0, unchecked = 0;
  for (calls = 0; calls < 200; calls++) {
    if (in_step_with(net, dir, "checks", &keep4, budget, progress, lines, &n, &v, &cache)) break;
    clt_tune_close(cache);
    int left = 0;
    for (int i = 0; i < n; i++)
      left |= lines[i].candidates > 1 && !lines[i].cached && !lines[i].checked;
    if (left) {
      checking++;
      probed_early += v.probe_steps != 0 || !v.pending || c2_forward() != def;
    }
    if (!v.pending) break;
  }
  checks_hook = NULL;
  for (int l = 0; l < 8; l++)
    for (int p = 0; p < CLT_CONV_PASSES; p++)
      for (int a = 0; a < 16; a++) twice += slow_checks.counts[l][p][a] > 1;
  for (int i = 0; i < n; i++) unchecked += lines[i].candidates > 1 && !lines[i].checked;
  c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
  snprintf(detail, sizeof detail, "(%d calls, %d of them checking)", calls + 1, checking);
  expect("checks longer than the budget go on over several calls", checking < 2, 1);
  expect("no probe step until every pass is checked; the defaults run", probed_early != 0, 1);
  expect("each candidate checked once in all the calls", twice != 0, 1);
  expect("then every pass is probed and judged, F(4x4) for c2's forward",
         unchecked != 0 || v.pending || !c2 || c2->picked != CLT_CONV_WINOGRAD4, 1);
  printf("  checks %s\n", detail);
  clt_tune_progress_free(progress);
  R->nconv_choices = 0;
  clt_net_destroy(net);
  case_end();
}

/* ---- layers of one shape share the probes --------------------------------------------- */

/* Three 3x3 stride-1 layers of one shape (the first reads the input: no
 * input gradient), then the classifier. */
static const char *const SHARED =
    "a=Conv2D(16,3x3,s1,same) b=Conv2D(16,3x3,s1,same) c=Conv2D(16,3x3,s1,same) "
    "flat=Flatten dense=Dense(10)";

static clt_model S;

/* Sleeps in every phase when layer a, b or c runs a forward other than *keep. */
static void keep_hook(void *ctx, clt_replica *r, const char *what, const char *pass, int phase) {
  (void)phase;
  const int *keep = ctx;
  if (strcmp(pass, "forward") != 0 || strlen(what) != 1 || what[0] < 'a' || what[0] > 'c') return;
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&S.layers[what[0] - 'a'], 4, &g, &f);
  if (clt_conv_algos_layer(r, what, &g, f).forward != *keep) nap(0.02);
}

typedef struct picks_ctx {
  clt_net *net;
  const clt_tune_line *lines;
  int n;
} picks_ctx;

static int set_picks(void *ctx, int side, clt_err *e) {
  const picks_ctx *p = ctx;
  return clt_tune_put_side(p->net, p->lines, p->n, side, e);
}

/* A deferred verdict (cltrain tune's, whose GEMM stage judges the
 * algorithms with its tilings): the probes pick F(4x4) for c2, but the
 * replica stays on the default and nothing is cached until the caller's
 * steps judge it; clt_tune_settle then records the verdict and runs what it
 * kept: F(4x4) when the current side's steps are slower, else the default. */
static void test_deferred(const char *dir) {
  set_case("a deferred verdict:");
  clt_net *net = probe_net();
  if (!net) return;
  const int def = c2_default();
  for (int run = 0; run < 2; run++) {
    char sub[32];
    snprintf(sub, sizeof sub, "deferred%d", run);
    clt_tune_cache *cache = NULL;
    if (open_in(dir, sub, &cache)) break;
    R->nconv_choices = 0;
    const clt_tuner_opts o = {.batch = 4, .tune = 1, .cache = cache, .defer = 1};
    slow_hook probing = {.phases = 1, .slow = -1, .keep = CLT_CONV_WINOGRAD4};
    const clt_step_opts so = {.count = 4,
                              .loss_scale = 0.25f,
                              .confirm = 3,
                              .in_step = in_step_hook,
                              .hook_ctx = &probing};
    clt_tune_line lines[MAX_LINES];
    int n = 0;
    clt_tune_verdict v;
    if (api_failed(clt_tune_net(net, &o, &so, lines, MAX_LINES, &n, &v, &E), "tune")) {
      clt_tune_close(cache);
      break;
    }
    const clt_tune_line *c2 = find(lines, n, "c2", CLT_CONV_PASS_FORWARD);
    expect("picked, the default still runs, nothing cached",
           !v.deferred || v.confirmed || !c2 || c2->picked != CLT_CONV_WINOGRAD4 || c2->instep ||
               c2_forward() != def || clt_tune_get(cache, c2->key, NULL, NULL) != NULL,
           1);
    /* The caller's steps: the current side's slowed (phase 1), or the picked one's. */
    slow_hook judging = {.phases = 2, .slow = -1, .keep = CLT_CONV_WINOGRAD4};
    slow_hook late = {.late = 1};
    const clt_step_opts js = {.count = 4,
                              .loss_scale = 0.25f,
                              .confirm = 3,
                              .in_step = in_step_hook,
                              .hook_ctx = run == 0 ? &judging : &late};
    picks_ctx pc = {.net = net, .lines = lines, .n = n};
    clt_tune_verdict jv = {0};
    if (api_failed(clt_tune_confirm(net, &js, set_picks, &pc, 0, 0, &jv, &E), "confirm") ||
        api_failed(clt_tune_settle(net, &o, lines, n, &jv, &E), "settle")) {
      clt_tune_close(cache);
      break;
    }
    const char *d = c2 ? clt_tune_get_decision(cache, c2->key, NULL, NULL) : NULL;
    const char *var = c2 ? clt_tune_get(cache, c2->key, NULL, NULL) : NULL;
    printf("  run %d: %s\n", run, jv.why);
    if (run == 0)
      expect("the picked side faster: kept, cached as confirmed, and run",
             !jv.confirmed || !c2 || !c2->instep || !c2->confirmed || !d ||
                 strcmp(d, "confirmed") != 0 || !var || strcmp(var, "winograd4") != 0 ||
                 c2_forward() != CLT_CONV_WINOGRAD4,
             1);
    else
      expect("the picked side slower: the default kept, cached so, and run",
             jv.confirmed || !c2 || !c2->instep || c2->confirmed || !d ||
                 strcmp(d, "kept default") != 0 || c2_forward() != def,
             1);
    clt_tune_close(cache);
  }
  R->nconv_choices = 0;
  clt_net_destroy(net);
  case_end();
}

/* The three layers of one key take its 4 candidates in 2 probe steps a round
 * (a, b, c on the 1st, 2nd, 3rd, then on the 4th, 1st, 2nd): F(2x2) runs on
 * c alone, F(4x4) on a alone, and either, the one not slowed, is still
 * picked for all three and confirmed. */
static void test_shared(const char *dir) {
  set_case("layers of one shape share the probes:");
  const clt_shape in = {12, 12, 16};
  if (api_failed(clt_model_parse("shared", in, 10, CLT_PRE_UNIT, SHARED, &S, &E), "model")) return;
  clt_net *net = net_of(&S);
  if (!net) return;
  /* The third time as if the steps were long: 3 pairs, all won. */
  const int keeps[3] = {CLT_CONV_WINOGRAD2, CLT_CONV_WINOGRAD4, CLT_CONV_WINOGRAD4};
  for (int t = 0; t < 3; t++) {
    int keep = keeps[t];
    char sub[32];
    snprintf(sub, sizeof sub, "shared%d", t);
    clt_tune_cache *cache = NULL;
    if (open_in(dir, sub, &cache)) break;
    const clt_tuner_opts o = {.batch = 4, .tune = 1, .cache = cache};
    const clt_step_opts so = {.count = 4,
                              .loss_scale = 0.25f,
                              .confirm = t < 2 ? 5 : 0,
                              .long_ms = t < 2 ? 0 : 1,
                              .in_step = keep_hook,
                              .hook_ctx = &keep};
    clt_tune_line lines[MAX_LINES];
    int n = 0, picked = 0, runs = 0;
    clt_tune_verdict v;
    R->nconv_choices = 0;
    const int failed = api_failed(clt_tune_net(net, &o, &so, lines, MAX_LINES, &n, &v, &E), "tune");
    clt_tune_close(cache);
    if (failed) break;
    clt_conv_geom g;
    int f;
    for (int l = 0; l < 3; l++) {
      const clt_tune_line *line = find(lines, n, S.layers[l].name, CLT_CONV_PASS_FORWARD);
      picked += line && line->nok == 4 && line->picked == keep && line->ms > 0 &&
                line->ms < line->default_ms;
      clt_conv2d_tunable(&S.layers[l], 4, &g, &f);
      runs += clt_conv_algos_layer(R, S.layers[l].name, &g, f).forward == keep;
    }
    printf("  %s kept: %d steps, %d of them the confirmation's\n", clt_conv_algo_name(keep),
           v.probe_steps, 2 * v.pairs);
    expect("two rounds of two probe steps, not of four", v.probe_steps - 2 * v.pairs != 4, 1);
    expect("the candidate not slowed is picked for the three layers", picked != 3, 1);
    expect("confirmed, and the three run it", !v.confirmed || runs != 3, 1);
    if (t < 2)
      expect("won in every pair: settled after 4 of the 5 pairs", v.pairs != 4 || v.wins != 4, 1);
    else expect("long steps: 3 pairs, all won", v.pairs != 3 || v.wins != 3, 1);
  }
  R->nconv_choices = 0;
  clt_net_destroy(net);
  clt_model_free(&S);
  case_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  char dir[] = "/tmp/cltrain_tuner_XXXXXX";
  if (!mkdtemp(dir)) fatal("mkdtemp");
  replica_open();
  R->winograd = 0;
  test_choice();
  test_tuner(dir);
  test_in_step(dir);
  test_shared(dir);
  test_deferred(dir);
  replica_close();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
  return summary();
}
