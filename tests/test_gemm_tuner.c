/* The GEMM tuner (src/engine/gemm_tuner.c) and the tilings it chooses per
 * product shape through the backend's table (src/backend/cpu_gemm.c's
 * register tiles; on the gpu backend, CLTRAIN_KERNELS=gpu, the tiles of
 * cl/gemm_tiled.cl against CLBlast, src/backend/gpu.c): a tiling that does not fit a shape
 * is refused, the candidates all fit and all match the reference, a tiling
 * made wrong by the test's hook is rejected and never chosen, the choices go
 * to the cache and a second run takes them from there without timing, a step
 * on non-default tilings agrees with the defaults' at rounding level and
 * repeats bit for bit; a model's products come from the cache's record of
 * them with no net built (no program, no device memory) until its algorithms
 * change or a product is missing; tilings are kept only where whole probe
 * steps confirm them, and one not judged yet never runs (the cases after the
 * tuner's own run on the cpu backend alone). Small
 * mode (Oclgrind) runs each tiling's kernels once: the forced step and the
 * unhooked tuning. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "gemm_tuner.h"
#include "harness.h"

#define MAX_LINES 32
#define B 4

static const char *const DESC =
    "c1=Conv2D(16,3x3,s1,same,relu) c2=Conv2D(32,3x3,s1,same) flat=Flatten dense=Dense(10)";

static clt_model M;

/* M's net on R with a batch of inputs drawn from `seed` and its labels loaded;
 * NULL when it cannot be made (the failure counted). */
static clt_net *net_with_batch(uint64_t seed) {
  clt_net *net = NULL;
  if (api_failed(clt_net_create(&M, R, B, 1, &net, &E), "net")) return NULL;
  const size_t nin = (size_t)B * clt_shape_size(M.input);
  double *x = dnew(nin);
  rng_seed(seed);
  rand_fill(x, nin, 0, 1);
  upload(net->input, 0, x, nin);
  int labels[B] = {1, 2, 3, 4};
  upload_bytes(net->labels, 0, labels, sizeof labels);
  return net;
}

/* A training step of M on R with whatever tilings R has chosen: the loss and
 * the gradients (grads, M.grad_floats floats). */
static double step(float *grads) {
  double loss = NAN;
  clt_net *net = net_with_batch(77);
  if (!net) return loss;
  float *flat = hnew(M.flat_floats * sizeof *flat);
  for (size_t i = 0; i < M.flat_floats; i++) flat[i] = (float)urand(-0.2, 0.2);
  if (!api_failed(clt_net_write_params(net, flat, &E), "params") &&
      !api_failed(clt_net_forward_backward(net, B, 0.25f, 0, 1, &E), "step")) {
    float m[2];
    download_bytes(net->metrics, 0, m, sizeof m);
    loss = m[0];
    download_bytes(net->grads, 0, grads, M.grad_floats * sizeof *grads);
  }
  clt_net_destroy(net);
  return loss;
}

static void test_tilings(void) {
  set_case("tilings:");
  const clt_gemm_shape fwd = {0, 0, 576, 32, 144, 144, 32, 32};
  const clt_gemm_shape at = {1, 0, 144, 32, 2304, 144, 32, 32};
  clt_gemm_tiling c[CLT_GEMM_MAX_TILINGS];
  int bad = 0;
  const int n = clt_cpu_gemm_candidates(R, &fwd, c);
  for (int i = 0; i < n; i++) bad += !clt_cpu_gemm_tiling_valid(R, &fwd, &c[i]);
  expect("forward: 1 to 5 candidates, each fits", n < 1 || n > 5 || bad, 1);
  const int na = clt_cpu_gemm_candidates(R, &at, c);
  bad = 0;
  for (int i = 0; i < na; i++) bad += !clt_cpu_gemm_tiling_valid(R, &at, &c[i]);
  expect("A^T: 1 to 5 candidates, each fits", na < 1 || na > 5 || bad, 1);
  const clt_gemm_tiling three = {4, 3, 384, 12, 0, 0}, long_pack = {4, 2, 512, 12, 1, 0};
  expect("3 blocks of 16 across N = 32 refused", clt_cpu_gemm_choose(R, &fwd, &three, &E) == 0, 1);
  expect("PACK_B past its private chunk refused", clt_cpu_gemm_choose(R, &fwd, &long_pack, &E) == 0,
         1);
  /* B^T: candidates that read it as stored (pack 2), refused past gemm16's
   * private chunk and for products without B^T. */
  const clt_gemm_shape bt = {0, 1, 576, 256, 1024, 1024, 1024, 256};
  const int nbt = clt_cpu_gemm_candidates(R, &bt, c);
  int in_place = -1; /* a candidate reading B in place */
  bad = 0;
  for (int i = 0; i < nbt; i++) {
    bad += !clt_cpu_gemm_tiling_valid(R, &bt, &c[i]);
    if (c[i].pack == 2) in_place = i;
  }
  expect("B^T: 1 to 5 candidates, each fits, some read B in place",
         nbt < 1 || nbt > 5 || bad || in_place < 0, 1);
  if (in_place >= 0) {
    clt_gemm_tiling bt_long = c[in_place];
    bt_long.kc = 512;
    clt_gemm_shape plain = bt;
    plain.trans_b = 0;
    plain.ldb = plain.n;
    expect("B^T read in place past its private chunk refused",
           clt_cpu_gemm_tiling_valid(R, &bt, &bt_long), 0);
    expect("B read in place without B^T refused",
           clt_cpu_gemm_tiling_valid(R, &plain, &c[in_place]), 0);
  }
  const clt_gemm_tiling at_kc = {4, 2, 128, 4, 0, 0};
  expect("A^T past its K chunk refused", clt_cpu_gemm_choose(R, &at, &at_kc, &E) == 0, 1);
  char name[64];
  clt_gemm_tiling back;
  clt_cpu_gemm_tiling_name(&c[0], name, sizeof name);
  expect("names round-trip",
         clt_cpu_gemm_tiling_parse(name, &back) != 0 || memcmp(&back, &c[0], sizeof back) != 0, 1);
  expect("a malformed name refused", clt_cpu_gemm_tiling_parse("6x4 kc384", &back) == 0, 1);
  clt_gemm_shape smaller = fwd, other = fwd;
  smaller.m = 600; /* the same bucket as 576: 1024 */
  other.m = 400;
  expect("M in the same bucket matches, another does not",
         !clt_gemm_shapes_match(&fwd, &smaller) || clt_gemm_shapes_match(&fwd, &other), 1);
  char key[160];
  clt_gemm_tune_key(R, &at, key, sizeof key);
  expect("the key buckets A^T's K", strcmp(key, "gemm cpu tA1 tB0 m144 n32 k4096") != 0, 1);
  case_end();
}

/* The hook: each shape's first candidate made wrong by 1% of C's largest value. */
static int hook_calls;
static void corrupt_first(void *ctx, clt_replica *r, const clt_gemm_shape *s, const char *t,
                          cl_mem c, size_t floats) {
  (void)ctx;
  char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
  if (!t || r->backend->tilings->candidates(r, s, cand) < 1 || strcmp(t, cand[0]) != 0) return;
  float *v = hnew(floats * sizeof *v);
  check_cl(clEnqueueReadBuffer(r->queue, c, CL_TRUE, 0, floats * sizeof *v, v, 0, NULL, NULL),
           "reading");
  float big = 0;
  for (size_t i = 0; i < floats; i++) big = fmaxf(big, fabsf(v[i]));
  v[0] += 0.01f * big; /* in the first row block, which the check reads */
  check_cl(clEnqueueWriteBuffer(r->queue, c, CL_TRUE, 0, floats * sizeof *v, v, 0, NULL, NULL),
           "writing");
  hook_calls++;
}

/* The hook: each shape's second candidate fails as a kernel that does not
 * build on the device would. */
static int fail_second(void *ctx, clt_replica *r, const clt_gemm_shape *s, const char *t,
                       clt_err *e) {
  (void)ctx;
  char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
  if (r->backend->tilings->candidates(r, s, cand) < 2 || strcmp(t, cand[1]) != 0) return CLT_OK;
  hook_calls++;
  return clt_fail(e, CL_BUILD_PROGRAM_FAILURE, "%s: the build failed (the test's hook)", t);
}

static void test_tuner(const char *dir) {
  set_case("GEMM tuner:");
  const clt_shape in = {12, 12, 3};
  if (api_failed(clt_model_parse("tiny", in, 10, CLT_PRE_UNIT, DESC, &M, &E), "model")) return;
  float *g_default = hnew(M.grad_floats * sizeof(float)), *g1 = hnew(M.grad_floats * sizeof(float)),
        *g2 = hnew(M.grad_floats * sizeof(float));
  const double loss_default = step(g_default);
  clt_net *net = NULL;
  if (api_failed(clt_net_create(&M, R, B, 1, &net, &E), "net")) return;
  clt_gemm_tune_line lines[MAX_LINES];
  int n = 0;
  /* Every product's tiling away from the default (gpu: cl/gemm_tiled.cl's in
   * place of CLBlast's): a step agrees with the defaults' and repeats bit for
   * bit. */
  const clt_gemm_tilings *tt = R->backend->tilings;
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  const int ns = tt->shapes(R, shapes, NULL, CLT_GEMM_MAX_SHAPES);
  int forced = 0;
  for (int i = 0; i < ns; i++) {
    char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
    if (tt->candidates(R, &shapes[i], cand) > 0 &&
        !api_failed(tt->choose(R, &shapes[i], cand[0], &E), "choose"))
      forced++;
  }
  expect("the net's products: forward, weight and input gradients", ns < 5 || forced < 4, 1);
  /* Small mode (Oclgrind): each tiling's kernels once, no repeats. */
  const double loss1 = step(g1), loss2 = small_mode() ? loss1 : step(g2);
  if (small_mode()) memcpy(g2, g1, M.grad_floats * sizeof *g1);
  char detail[96];
  snprintf(detail, sizeof detail, "(%.7g against %.7g)", loss1, loss_default);
  report("a step's loss on other tilings against the defaults'",
         fabs(loss1 - loss_default) / fabs(loss_default), 1e-5, detail);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < M.grad_floats; i++) {
    worst = fmax(worst, fabs((double)g1[i] - g_default[i]));
    scale = fmax(scale, fabs((double)g_default[i]));
  }
  report("its gradients against the defaults'", worst / scale, 1e-4, "");
  expect("a repeat on the same tilings: the same bits",
         loss1 != loss2 || memcmp(g1, g2, M.grad_floats * sizeof *g1) != 0, 1);
  for (int i = 0; i < ns; i++) (void)tt->choose(R, &shapes[i], NULL, &E);

  /* Unhooked: every candidate matches the reference. */
  clt_gemm_tuner_opts o = {.tune = 1, .runs = 1};
  if (api_failed(clt_gemm_tune_net(net, &o, lines, MAX_LINES, &n, &E), "tune, unhooked")) return;
  int rejected = 0, tuned = 0, several = 0;
  for (int i = 0; i < n; i++) {
    rejected += lines[i].rejected, tuned += lines[i].tuned;
    several += lines[i].candidates > 1;
    printf("  %zux%zux%zu%s: %d candidates, %s\n", lines[i].shape.m, lines[i].shape.n,
           lines[i].shape.k, lines[i].shape.trans_a ? " At" : "", lines[i].candidates,
           lines[i].chosen);
  }
  expect("every shape with candidates tuned", several < 4 || tuned != several, 1);
  expect("no correct tiling rejected", rejected != 0, 1);

  if (small_mode()) {
    clt_net_destroy(net);
    case_end();
    return;
  }
  /* A candidate that fails to build: rejected, the tuning goes on. */
  hook_calls = 0;
  clt_gemm_tuner_opts failing = {.tune = 1, .runs = 1, .before_check = fail_second};
  const int failed_status = clt_gemm_tune_net(net, &failing, lines, MAX_LINES, &n, &E);
  int unbuilt = 0, two = 0;
  for (int i = 0; i < n && !failed_status; i++) {
    char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
    if (tt->candidates(R, &lines[i].shape, cand) < 2) continue;
    two++;
    unbuilt += lines[i].rejected == 1 && lines[i].tuned && strcmp(lines[i].chosen, cand[1]) != 0;
  }
  expect("a candidate that fails to build: rejected, never chosen, the tuning goes on",
         failed_status != CLT_OK || two == 0 || unbuilt != two || hook_calls != two, 1);
  for (int i = 0; i < n; i++) (void)tt->choose(R, &lines[i].shape, NULL, &E);
  hook_calls = 0;
  /* Hooked, into the cache: the wrong tiling rejected and never chosen. */

  clt_tune_ident id;
  clt_tune_cache *cache = NULL;
  if (api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
      api_failed(clt_tune_open(dir, NULL, &id, NULL, &cache, &E), "open"))
    return;
  o.cache = cache;
  o.after_check = corrupt_first;
  if (api_failed(clt_gemm_tune_net(net, &o, lines, MAX_LINES, &n, &E), "tune, hooked")) return;
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    char cand[CLT_GEMM_MAX_TILINGS][CLT_GEMM_TILING_NAME];
    if (tt->candidates(R, &lines[i].shape, cand) < 1) continue;
    wrong += lines[i].rejected != 1 || strcmp(lines[i].chosen, cand[0]) == 0;
  }
  expect("the hook ran for every shape with candidates", hook_calls != several, 1);
  expect("each wrong tiling rejected and not chosen", wrong != 0, (size_t)n);
  clt_gemm_tune_line first[MAX_LINES];
  memcpy(first, lines, sizeof first);
  const int nfirst = n;

  /* The cache, read by a new handle: nothing timed, the same tilings. */
  clt_tune_close(cache);
  cache = NULL;
  for (int i = 0; i < nfirst; i++) (void)tt->choose(R, &first[i].shape, NULL, &E);
  if (api_failed(clt_tune_open(dir, NULL, &id, NULL, &cache, &E), "reopen")) return;
  const clt_gemm_tuner_opts cached = {.tune = 0, .cache = cache};
  if (api_failed(clt_gemm_tune_net(net, &cached, lines, MAX_LINES, &n, &E), "cached")) return;
  int same = n == nfirst;
  for (int i = 0; i < n && same; i++)
    same = (lines[i].cached || lines[i].candidates < 2) && !lines[i].tuned &&
           strcmp(lines[i].chosen, first[i].chosen) == 0;
  expect("a second run takes every shape from the cache", !same, 1);
  /* A spent budget times nothing: shapes of another batch stay at the default. */
  clt_tune_close(cache);
  clt_net_destroy(net);
  case_end();
}

/* A model's products from the cache's record (clt_gemm_tune_model): the first
 * run builds a net, tunes and records; a second, on a fresh replica, takes
 * every line from the cache and builds no program and allocates nothing
 * (no net); other convolution algorithms or a product missing from the
 * cache build the net again. */
static void test_record(const char *dir) {
  set_case("the products' record:");
  char folder[256];
  snprintf(folder, sizeof folder, "%s/record", dir);
  clt_tune_ident id;
  clt_tune_cache *cache = NULL, *partial = NULL;
  clt_replica *r1 = NULL, *r2 = NULL;
  if (api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
      api_failed(clt_tune_open(folder, NULL, &id, NULL, &cache, &E), "open") ||
      api_failed(clt_backend_create_replica(&R->device, &r1, &E), "replica") ||
      api_failed(clt_backend_create_replica(&R->device, &r2, &E), "replica"))
    return;
  r1->winograd = r2->winograd = 0;
  clt_gemm_tune_line lines[MAX_LINES], first[MAX_LINES];
  int n = 0, nfirst = 0, built = 0;
  const clt_gemm_tuner_opts o = {.tune = 1, .runs = 1, .cache = cache};
  if (api_failed(clt_gemm_tune_model(&M, r1, B, &o, first, MAX_LINES, &nfirst, &built, &E),
                 "first"))
    return;
  int tuned = 0;
  for (int i = 0; i < nfirst; i++) tuned += first[i].tuned;
  expect("the first run builds a net and tunes its products", !built || nfirst < 4 || !tuned, 1);
  const clt_program_entry *programs = r2->programs;
  const size_t bytes = r2->allocated_bytes;
  if (api_failed(clt_gemm_tune_model(&M, r2, B, &o, lines, MAX_LINES, &n, &built, &E), "second"))
    return;
  int same = n == nfirst;
  for (int i = 0; i < n && same; i++)
    same = (lines[i].cached || lines[i].candidates < 2) && !lines[i].tuned &&
           lines[i].shape.m == first[i].shape.m && lines[i].shape.n == first[i].shape.n &&
           lines[i].shape.k == first[i].shape.k &&
           lines[i].shape.trans_a == first[i].shape.trans_a &&
           lines[i].shape.trans_b == first[i].shape.trans_b &&
           strcmp(lines[i].chosen, first[i].chosen) == 0;
  expect("a second run: every product from the cache, as the first chose", !same, 1);
  expect("and no net: nothing built, nothing allocated on the device",
         built || r2->programs != programs || r2->allocated_bytes != bytes, 1);
  /* c2's forward on F(2x2): other products, the net built again. */
  clt_conv_geom g;
  int f;
  clt_conv2d_tunable(&M.layers[1], B, &g, &f);
  if (api_failed(clt_conv_choose(r2, "c2", &g, f, CLT_CONV_PASS_FORWARD, CLT_CONV_WINOGRAD2, &E),
                 "choose") ||
      api_failed(clt_gemm_tune_model(&M, r2, B, &o, lines, MAX_LINES, &n, &built, &E), "other"))
    return;
  expect("other algorithms: the net built again", !built, 1);
  (void)clt_conv_choose(r2, "c2", &g, f, CLT_CONV_PASS_FORWARD, -1, &E);
  /* A file holding the record but no product's result (a run that timed
   * nothing wrote it): the net built again. */
  char pfolder[256];
  snprintf(pfolder, sizeof pfolder, "%s/partial", dir);
  if (api_failed(clt_tune_open(pfolder, NULL, &id, NULL, &partial, &E), "open partial")) return;
  const clt_gemm_tuner_opts look = {.cache = partial};
  int built2 = 0;
  if (api_failed(clt_gemm_tune_model(&M, r2, B, &look, lines, MAX_LINES, &n, &built, &E),
                 "untimed") ||
      api_failed(clt_gemm_tune_model(&M, r2, B, &look, lines, MAX_LINES, &n, &built2, &E),
                 "untimed again"))
    return;
  expect("a product missing from the cache: the net built again", !built || !built2, 1);
  clt_tune_close(partial);
  clt_tune_close(cache);
  clt_backend_destroy_replica(r1);
  clt_backend_destroy_replica(r2);
  case_end();
}

/* The step hook's orders: slow c1's forward in phase `phase` by 20 ms, and
 * the picked side's step of the confirmation's k-th pair by 100 ms (bit k of
 * lose). */
typedef struct slow_hook {
  int phase;
  unsigned lose;
  int picked_steps;
} slow_hook;

static void slow_phase(void *ctx, clt_replica *r, const char *what, const char *pass, int phase) {
  (void)r;
  slow_hook *h = ctx;
  if (phase == 2 && strcmp(what, "c1") == 0 && strcmp(pass, "forward") == 0 &&
      ((h->lose >> h->picked_steps++) & 1)) {
    struct timespec ts = {0, 100000000L};
    nanosleep(&ts, NULL);
  }
  if (phase != h->phase || strcmp(what, "c1") != 0 || strcmp(pass, "forward") != 0) return;
  struct timespec ts = {0, 20000000L};
  nanosleep(&ts, NULL);
}

/* The tilings judged by whole steps: a cache holding a timed but unjudged
 * tiling for every product (what a run whose budget ended before the
 * verdict leaves) runs none of them untuned; tuning confirms them in
 * alternating probe steps, and a hook that slows the picked side's steps
 * gets them rejected (the defaults run, the cache says "kept default"),
 * one that slows the defaults' gets them kept ("confirmed"), and so does
 * one whose first pair the picked side lost (2 wins of 3: as many pairs
 * more, then 5 of 6); tilings whose times alone save under 2% of the step
 * are not kept, after one pair, though the defaults' steps are slowed. */
static void test_confirm(const char *dir) {
  set_case("tilings in the step:");
  clt_net *net = net_with_batch(78);
  if (!net) return;
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  R->backend->tilings->shapes_clear(R);
  if (api_failed(clt_net_prepare(net, &E), "prepare")) return;
  const int ns = R->backend->tilings->shapes(R, shapes, NULL, CLT_GEMM_MAX_SHAPES);
  /* 2: the defaults slowed, the picked side's first pair slowed more (a noisy
   * host): 2 wins of 3, 3 pairs more, kept. 3: the defaults slowed, but the
   * tilings' times alone save next to nothing: judged after one pair, not
   * kept. */
  for (int run = 0; run < 4; run++) {
    const int side = run > 0;
    char folder[256];
    snprintf(folder, sizeof folder, "%s/%s", dir,
             run == 3   ? "gated"
             : run == 2 ? "noisy"
             : side     ? "confirmed"
                        : "rejected");
    clt_tune_ident id;
    clt_tune_cache *cache = NULL;
    if (api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
        api_failed(clt_tune_open(folder, NULL, &id, NULL, &cache, &E), "open"))
      return;
    int picked = 0;
    for (int i = 0; i < ns; i++) {
      clt_gemm_tiling cand[CLT_GEMM_MAX_TILINGS];
      char key[160], name[64];
      if (clt_cpu_gemm_candidates(R, &shapes[i], cand) < 1) continue;
      clt_gemm_tune_key(R, &shapes[i], key, sizeof key);
      clt_cpu_gemm_tiling_name(&cand[0], name, sizeof name);
      /* Timed alone: 49 ms saved (a gain any step shows), or 1 us. */
      const double dms = run == 3 ? 1.000001 : 50.0;
      if (api_failed(clt_tune_put(cache, key, name, 1.0, dms, &E), "put")) return;
      picked++;
    }
    /* The defaults' steps slowed, or the picked. */
    slow_hook slowed = {.phase = side ? 1 : 2, .lose = run == 2 ? 1 : 0};
    const clt_step_opts so = {
        .count = B, .loss_scale = 0.25f, .confirm = 3, .in_step = slow_phase, .hook_ctx = &slowed};
    clt_gemm_tune_line lines[MAX_LINES];
    int n = 0;
    clt_gemm_tuner_opts o = {.tune = 0, .cache = cache, .step = &so};
    if (api_failed(clt_gemm_tune_net(net, &o, lines, MAX_LINES, &n, &E), "cache only")) return;
    expect("unjudged tilings in the cache: none runs before its verdict",
           picked < 3 || cpu_state(R)->ntilings != 0, 1);
    o.tune = 1;
    o.runs = 1;
    if (api_failed(clt_gemm_tune_net(net, &o, lines, MAX_LINES, &n, &E), "confirm")) return;
    int judged = 0, kept = 0, in_cache = 0;
    for (int i = 0; i < n; i++) {
      if (!lines[i].instep) continue;
      judged++;
      kept += lines[i].confirmed && strcmp(lines[i].chosen, "default") != 0;
      char key[160];
      clt_gemm_tune_key(R, &lines[i].shape, key, sizeof key);
      const char *d = clt_tune_get_decision(cache, key, NULL, NULL);
      const char *v = clt_tune_get(cache, key, NULL, NULL);
      in_cache += d && v &&
                  (side ? strcmp(d, "confirmed") == 0 && strcmp(v, "default") != 0
                        : strcmp(d, "kept default") == 0 && strcmp(v, "default") == 0);
    }
    expect("every picked tiling judged by the whole step", judged != picked, 1);
    if (run == 3) {
      const char *why = "";
      for (int i = n - 1; i >= 0; i--)
        if (lines[i].instep) why = lines[i].why;
      const int said = strstr(why, "timed alone") != NULL;
      printf("  gated: %d pairs: %s\n", slowed.picked_steps, why);
      expect("a gain timed alone under 2% of the step: judged after one pair, none kept",
             slowed.picked_steps != 1 || kept != 0 || cpu_state(R)->ntilings != 0 || !said, 1);
    } else if (run == 2) {
      printf("  noisy host: %d pairs\n", slowed.picked_steps);
      expect("a noisy host's first pair lost: 3 pairs more, every tiling kept, and run",
             slowed.picked_steps != 6 || kept != picked || cpu_state(R)->ntilings != picked, 1);
    } else if (side) {
      expect("the picked side faster: every tiling kept, and run",
             kept != picked || cpu_state(R)->ntilings != picked, 1);
      expect("the cache says confirmed, with the tiling", in_cache != picked, 1);
    } else {
      expect("the picked side slower: none kept, the defaults run",
             kept != 0 || cpu_state(R)->ntilings != 0, 1);
      expect("the cache says kept default, with the default", in_cache != picked, 1);
    }
    for (int i = 0; i < ns; i++) (void)clt_cpu_gemm_choose(R, &shapes[i], NULL, &E);
    clt_tune_close(cache);
  }
  clt_net_destroy(net);
  case_end();
}

/* A step hook that sleeps nap_ms[phase] as c1's forward begins and counts
 * each phase's steps. */
typedef struct phase_hook {
  double nap_ms[4];
  int steps[4];
} phase_hook;

static void nap_phase(void *ctx, clt_replica *r, const char *what, const char *pass, int phase) {
  (void)r;
  phase_hook *h = ctx;
  if (phase < 1 || phase > 3 || strcmp(what, "c1") != 0 || strcmp(pass, "forward") != 0) return;
  h->steps[phase]++;
  const long ns = (long)(h->nap_ms[phase] * 1e6);
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  nanosleep(&ts, NULL);
}

static int toggle(void *ctx, int on, clt_err *e) {
  (void)e;
  *(int *)ctx = on;
  return CLT_OK;
}

/* A change under the tilings judged in the same steps (clt_gemm_tuner_opts'
 * below, as cltrain tune judges its algorithms): steps without it, with it,
 * and with the tilings too, in turn (phases 1 to 3), one verdict on each.
 * Both faster: both kept, each judged in 3 pairs of 9 steps, not 12. The
 * change slower: not kept, and the tilings are not judged (they wait, their
 * timings cached, no verdict). No tiling to judge: the change alone, in
 * pairs. */
static void test_stacked(const char *dir) {
  set_case("tilings stacked on a change:");
  clt_net *net = net_with_batch(78);
  if (!net) return;
  for (int run = 0; run < 3; run++) {
    char folder[256];
    snprintf(folder, sizeof folder, "%s/stacked%d", dir, run);
    clt_tune_ident id;
    clt_tune_cache *cache = NULL;
    if (api_failed(clt_tune_ident_of(&R->device, R->defines, &id, &E), "ident") ||
        api_failed(clt_tune_open(folder, NULL, &id, NULL, &cache, &E), "open"))
      break;
    phase_hook h = {.nap_ms = {0, 40, 20, 0}};
    if (run == 1) h.nap_ms[1] = 0, h.nap_ms[2] = h.nap_ms[3] = 40;
    const clt_step_opts so = {
        .count = B, .loss_scale = 0.25f, .confirm = 3, .in_step = nap_phase, .hook_ctx = &h};
    int on = 0;
    clt_tune_verdict below = {0};
    clt_gemm_tune_line lines[MAX_LINES];
    int n = 0;
    /* Run 2 times nothing: no tiling is pending. */
    const clt_gemm_tuner_opts o = {.tune = run != 2,
                                   .runs = 1,
                                   .cache = cache,
                                   .step = &so,
                                   .below = toggle,
                                   .below_ctx = &on,
                                   .below_verdict = &below};
    const int failed = api_failed(clt_gemm_tune_net(net, &o, lines, MAX_LINES, &n, &E), "tune");
    int judged = 0, kept = 0, decided = 0, timed = 0;
    for (int i = 0; i < n && !failed; i++) {
      judged += lines[i].instep;
      kept += lines[i].confirmed && strcmp(lines[i].chosen, "default") != 0;
      timed += lines[i].tuned;
      char key[160];
      clt_gemm_tune_key(R, &lines[i].shape, key, sizeof key);
      decided += clt_tune_get_decision(cache, key, NULL, NULL) != NULL;
    }
    printf("  run %d: change %s (%s); steps %d, %d, %d; %d tilings judged, %d kept\n", run,
           below.confirmed ? "kept" : "not kept", below.why, h.steps[1], h.steps[2], h.steps[3],
           judged, kept);
    if (failed) break;
    if (run == 0) {
      expect("both faster: the change kept and on", !below.confirmed || on != 1, 1);
      expect("and the tilings kept, and run",
             judged == 0 || kept != judged || cpu_state(R)->ntilings != kept, 1);
      expect("3 pairs each in 9 steps, the middle side's shared",
             below.pairs != 3 || h.steps[1] != 3 || h.steps[2] != 3 || h.steps[3] != 3, 1);
    } else if (run == 1) {
      expect("the change slower: not kept, and off", below.confirmed || !below.probed || on != 0,
             1);
      expect("the tilings not judged, no verdict cached, none run",
             timed == 0 || judged != 0 || decided != 0 || cpu_state(R)->ntilings != 0, 1);
    } else {
      expect("no tiling pending: the change judged alone in pairs, kept and on",
             !below.confirmed || on != 1 || h.steps[3] != 0 || h.steps[2] != 3, 1);
    }
    for (int i = 0; i < n; i++) (void)clt_cpu_gemm_choose(R, &lines[i].shape, NULL, &E);
    clt_tune_close(cache);
  }
  clt_net_destroy(net);
  case_end();
}

/* Two layers of one shape: each product is listed once with its uses, which
 * the whole step's gain counts. Here the forward product also computes each
 * layer's input gradient (in place, flipped: the same shape, 16 channels to
 * 16 filters), so 4 uses; the weight gradient's 2. */
static void test_uses(void) {
  set_case("products a step runs:");
  clt_model two = {0};
  const clt_shape in = {12, 12, 16};
  if (api_failed(clt_model_parse("two", in, 10, CLT_PRE_UNIT,
                                 "a=Conv2D(16,3x3,s1,same,relu) b=Conv2D(16,3x3,s1,same) "
                                 "flat=Flatten dense=Dense(10)",
                                 &two, &E),
                 "model"))
    return;
  clt_net *net = NULL;
  if (api_failed(clt_net_create(&two, R, B, 1, &net, &E), "net")) return;
  R->backend->tilings->shapes_clear(R);
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  int uses[CLT_GEMM_MAX_SHAPES], fwd = -1, dw = -1;
  if (!api_failed(clt_net_prepare(net, &E), "prepare")) {
    const int ns = R->backend->tilings->shapes(R, shapes, uses, CLT_GEMM_MAX_SHAPES);
    for (int i = 0; i < ns; i++) {
      const clt_gemm_shape *s = &shapes[i];
      if (s->trans_b || s->n != 16) continue;
      if (!s->trans_a && s->m == (size_t)B * 144 && s->k == 144) fwd = uses[i];
      if (s->trans_a && s->m == 144 && s->k == (size_t)B * 144) dw = uses[i];
    }
    printf("  forward product: %d uses, weight gradient's: %d\n", fwd, dw);
  }
  expect("each product listed once, with its uses", fwd != 4 || dw != 2, 1);
  clt_net_destroy(net);
  clt_model_free(&two);
  case_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  char dir[] = "/tmp/cltrain_gemm_tuner_XXXXXX";
  if (!mkdtemp(dir)) fatal("mkdtemp");
  replica_open();
  R->winograd = 0;
  if (R->backend == &clt_backend_cpu) test_tilings();
  test_tuner(dir);
  if (R->backend == &clt_backend_cpu && !small_mode()) test_record(dir);
  if (R->backend == &clt_backend_cpu && !small_mode()) test_confirm(dir);
  if (R->backend == &clt_backend_cpu && !small_mode()) test_stacked(dir);
  if (R->backend == &clt_backend_cpu) test_uses();
  replica_close();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
  return summary();
}
