/* BatchNormalization's and Add's passes at the shapes ResNet50 gives them (batch
 * 16, 96 or 224 px): each kernel's device time (the least over --runs profiled
 * runs), the bytes it moves and so its GB/s, beside the device's own copy of a
 * buffer of the layer's size (clEnqueueCopyBuffer, read + write bytes).
 *
 *   bench_bn [--runs N] [--size 96|224] [--add-in-place] [--bias-pass]
 *
 * Kinds: "relu" (BatchNormalization with its ReLU: the 1x1 and 3x3 of each
 * block, conv1), "plain" (the projection shortcut's), "add" (a block's last,
 * with the Add and its ReLU fused into bn_apply; its line includes the Add's
 * backward: its input gradients in their own buffers, or with --add-in-place
 * in dy's buffer, as the gradient plan gives a residual block's Add, see
 * src/engine/net.c). Each also gives the bias gradient of the Conv2D before it
 * (ResNet50's convolutions have biases): summed in bn_dx_sums' pass over dx as
 * the fusion plan runs it (fusion.sums_input_bias), or with --bias-pass in the
 * Conv2D's own pass over dx (bias_grad_partial, as without that fusion); both
 * end in bias_grad_final. A line per shape, then the sums per kernel over the model's
 * layers (each shape times its count):
 *   conv2 24x24x64 relu (x6): bn_partial_stats 0.21 ms 11.2 GB/s, ... copy 30.1 GB/s
 *   total per step: bn_partial_stats 12.1 ms (16.3 GB/s), ...
 * Bytes: what the kernel must read and write of the activations (per-channel
 * vectors and partial sums left out). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

typedef struct bn_shape {
  const char *stage;
  int div;   /* the image size over this stage's H and W */
  int C;     /* channels */
  int kind;  /* 0 relu, 1 plain, 2 add */
  int count; /* layers of this shape */
} bn_shape;

static const bn_shape shapes[] = {
    {"conv1", 2, 64, 0, 1},    {"conv2", 4, 64, 0, 6},    {"conv2", 4, 256, 1, 1},
    {"conv2", 4, 256, 2, 3},   {"conv3", 8, 128, 0, 8},   {"conv3", 8, 512, 1, 1},
    {"conv3", 8, 512, 2, 4},   {"conv4", 16, 256, 0, 12}, {"conv4", 16, 1024, 1, 1},
    {"conv4", 16, 1024, 2, 6}, {"conv5", 32, 512, 0, 6},  {"conv5", 32, 2048, 1, 1},
    {"conv5", 32, 2048, 2, 3},
};
static const char *const kind_names[] = {"relu", "plain", "add"};

enum { MAX_KERNELS = 16 };
typedef struct kernel_sum {
  char name[64];
  double ms, mb; /* per step: device time, megabytes moved */
} kernel_sum;
static kernel_sum totals[MAX_KERNELS];
static int ntotals;
static double copy_ms_total, copy_mb_total;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Floats of the activations a kernel reads and writes, per element (the ReLU's
 * mask comes from x, not y). */
static double streams(const char *kernel, int kind) {
  if (strcmp(kernel, "bn_partial_stats") == 0) return 1;
  if (strcmp(kernel, "bn_apply") == 0) return kind == 2 ? 3 : 2;
  if (strcmp(kernel, "bn_partial_grad") == 0) return 2;
  if (strcmp(kernel, "bn_dx") == 0 || strcmp(kernel, "bn_dx_sums") == 0) return 3;
  if (strcmp(kernel, "bias_grad_partial") == 0) return 1;
  if (strcmp(kernel, "add_backward") == 0) return 4;
  if (strcmp(kernel, "add_backward_in_place") == 0) return 3;
  return 0; /* per-channel passes */
}

/* The least device time per kernel name over the runs (names in first-run order). */
static char run_names[MAX_KERNELS][64];
static double run_best[MAX_KERNELS];
static int run_n;

static void collect(int first) {
  clt_profile *p = R->profile;
  if (clt_replica_profile_collect(R, &E)) fatal("profile");
  double s[MAX_KERNELS] = {0};
  for (int i = 0; i < p->nnames; i++) {
    const char *name = p->names[i] + p->kernel_at[i];
    if (!p->calls[i] || strcmp(name, "fill") == 0) continue; /* another shape's; dev_new's */
    int j = 0;
    while (j < run_n && strcmp(run_names[j], name) != 0) j++;
    if (j == run_n && run_n < MAX_KERNELS) {
      snprintf(run_names[run_n], sizeof run_names[0], "%s", name);
      run_best[run_n++] = 0;
    }
    if (j < MAX_KERNELS && p->calls[i]) s[j] += p->seconds[i];
    p->seconds[i] = 0;
    p->calls[i] = 0;
  }
  for (int j = 0; j < run_n; j++)
    if (first || s[j] < run_best[j]) run_best[j] = s[j];
}

static void add_total(const char *name, double ms, double mb) {
  int j = 0;
  while (j < ntotals && strcmp(totals[j].name, name) != 0) j++;
  if (j == ntotals) {
    if (ntotals == MAX_KERNELS) return;
    snprintf(totals[ntotals++].name, sizeof totals[0].name, "%s", name);
  }
  totals[j].ms += ms;
  totals[j].mb += mb;
}

static void bench(const bn_shape *b, int size, int runs, int in_place, int bias_pass) {
  const int B = 16, H = size / b->div, W = H, C = b->C;
  char entry[96];
  snprintf(entry, sizeof entry, "bn=BatchNormalization(eps1.001e-05,m0.99%s)",
           b->kind == 0 ? ",relu" : "");
  clt_layer l, add;
  if (clt_layer_init(&l, entry, &E)) fatal("init");
  if (clt_layer_init(&add, "a=Add(relu)", &E)) fatal("init");
  const clt_shape in[2] = {{H, W, C}, {H, W, C}};
  if (l.ops->setup(&l, in, &E) || add.ops->setup(&add, in, &E)) fatal("setup");
  const size_t n = clt_shape_size(l.in) * B, flat = place_params(&l);
  double *params = dnew(flat), *x = dnew(n);
  rand_fill(params, flat, 0.5, 1.5);
  rand_fill(x, n, -1, 1);
  /* The Conv2D's bias gradient goes after the layer's gradients. */
  const clt_fusion sums = {.sums_input_bias = !bias_pass, .input_bias = flat};
  if (clt_layer_prepare(&l, R, B, &sums, &E) || clt_layer_prepare(&add, R, B, NULL, &E))
    fatal("prepare");
  cl_mem X = dev_new(n), Y = dev_new(n), DY = dev_new(n), DX = dev_new(n), RES = dev_new(n);
  cl_mem DX2 = dev_new(n), P = dev_new(flat), G = dev_new(flat + (size_t)C);
  const size_t ns = clt_layer_scratch_floats(&l, B);
  cl_mem S = dev_new(ns), ST = dev_new(clt_layer_state_floats(&l));
  upload(X, 0, x, n);
  upload(RES, 0, x, n);
  upload(DY, 0, x, n);
  upload(P, 0, params, flat);
  clt_layer_io io = layer_io(B, X, Y, DY, DX, P, G, S, ST);
  io.fusion = sums;
  if (b->kind == 2) {
    io.fusion.adds = 1;
    io.residual = RES;
    io.residual_relu = 1;
  }
  clt_layer_io aio = layer_io(B, X, Y, DY, DX, NULL, NULL, NULL, NULL);
  aio.x2 = RES, aio.dx2 = DX2;
  if (in_place) aio.dx = aio.dx2 = DY;
  run_n = 0;
  double copy = 0;
  for (int r = -1; r < runs; r++) {
    if (l.ops->forward(&l, &io, &E) || l.ops->backward(&l, &io, &E)) fatal("bn");
    if (bias_pass && clt_bias_grad(&io, DX, NULL, S, 0, B * H * W, C, flat, &E)) fatal("bias");
    if (b->kind == 2 && add.ops->backward(&add, &aio, &E)) fatal("add");
    collect(r <= 0);
    /* The device's copy of the same bytes, unprofiled. */
    clFinish(R->queue);
    const double t0 = now();
    check_cl(clEnqueueCopyBuffer(R->queue, X, DX, 0, 0, n * sizeof(float), 0, NULL, NULL), "copy");
    clFinish(R->queue);
    const double t = now() - t0;
    if (r == 0 || (r > 0 && t < copy)) copy = t;
  }
  const double mb = 4e-6 * (double)n, copy_gbs = 2e-3 * mb / copy;
  printf("%s %dx%dx%d %s (x%d):", b->stage, H, W, C, kind_names[b->kind], b->count);
  for (int j = 0; j < run_n; j++) {
    const double ms = 1e3 * run_best[j], moved = streams(run_names[j], b->kind) * mb;
    printf(" %s %.3f ms", run_names[j], ms);
    if (moved > 0) printf(" %.1f GB/s", moved / ms);
    printf(",");
    add_total(run_names[j], b->count * ms, b->count * moved);
  }
  printf(" copy %.1f GB/s\n", copy_gbs);
  copy_ms_total += b->count * 1e3 * copy;
  copy_mb_total += b->count * 2 * mb;
  fflush(stdout);
  case_end();
}

int main(int argc, char **argv) {
  int runs = 5, size = 96, in_place = 0, bias_pass = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--add-in-place") == 0) {
      in_place = 1;
    } else if (strcmp(argv[i], "--bias-pass") == 0) {
      bias_pass = 1;
    } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      size = atoi(argv[++i]);
    } else {
      fprintf(stderr,
              "usage: bench_bn [--runs N] [--size 96|224] [--add-in-place] [--bias-pass]\n");
      return 2;
    }
  }
  if (runs < 1 || size < 32 || size % 32) {
    fprintf(stderr, "bench_bn: --runs must be positive, --size a multiple of 32\n");
    return 2;
  }
  rng_seed(0x5eed);
  replica_open();
  if (clt_replica_enable_profiling(R, &E)) fatal("profiling");
  clt_replica_profile_kind(R, CLT_PROFILE_COMPUTE);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    bench(&shapes[i], size, runs, in_place, bias_pass);
  printf("total per step (%d px, batch 16):", size);
  double ms = 0;
  for (int j = 0; j < ntotals; j++) {
    printf(" %s %.2f ms", totals[j].name, totals[j].ms);
    if (totals[j].mb > 0) printf(" (%.1f GB/s)", totals[j].mb / totals[j].ms);
    printf(",");
    ms += totals[j].ms;
  }
  printf(" all %.2f ms; copies of the layers' sizes %.1f GB/s\n", ms,
         copy_mb_total / copy_ms_total);
  replica_close();
  return 0;
}
