/* Conv2D's passes on one device, direct kernels against Winograd F(2x2,3x3) and
 * F(4x4,3x3) (the replica's winograd tile 0, 2, 4), on the 3x3 stride-1 layers of
 * ResNet50 at 96 px (batch 16) and the reference CNN's second convolution
 * (batch 64): the median over --runs runs of each pass, the three algorithms
 * interleaved within each run (the machine's load falls on all alike).
 *
 *   bench_winograd [--runs N] [--profile] [--layer I]
 *
 * A pass is timed from its launches to clFinish: forward; weight gradient
 * (backward without dx: the ReLU and bias sums ride along); input gradient
 * (backward of the frozen layer: dx alone). Output, a line per layer and pass:
 *   conv2 24x24x64->64 B16 (x3) forward: direct 41.2 ms, F2 30.1 ms (1.37x), F4 25.3 ms (1.63x)
 * --profile adds, per pass and algorithm, the device time of each kernel from
 * the profiling events of `runs` more runs (ms, the least over the runs, summed
 * per kernel name):
 *   profile forward F2: wino_input 3.10, gemm16 9.80 (16 launches), wino_output 2.20
 * and, for each of Winograd's transforms, the bytes it must move (each input
 * read once, each output written once) over its device time:
 *   transforms forward F2: wino_input 7.1 MB 12.3 GB/s, wino_output ...
 * First, the floor those rates are measured against: a plain float8 copy
 * kernel's device time on buffers of 8 and 64 MB (the least over --runs runs):
 *   copy 8 MB: 0.61 ms, 27.5 GB/s (read + write)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

typedef struct bench_layer {
  const char *label, *entry;
  int count; /* layers of this shape in the model */
  int B, H, W, C;
} bench_layer;

static const bench_layer layers[] = {
    {"resnet50 conv2", "c=Conv2D(64,3x3,s1,same,nobias)", 3, 16, 24, 24, 64},
    {"resnet50 conv3", "c=Conv2D(128,3x3,s1,same,nobias)", 4, 16, 12, 12, 128},
    {"resnet50 conv4", "c=Conv2D(256,3x3,s1,same,nobias)", 6, 16, 6, 6, 256},
    {"resnet50 conv5", "c=Conv2D(512,3x3,s1,same,nobias)", 3, 16, 3, 3, 512},
    {"fmnist-cnn conv2d_1", "c=Conv2D(80,3x3,s1,valid,relu)", 1, 64, 13, 13, 64},
};

enum { PASSES = 3, ALGOS = 3, MAX_RUNS = 64 };
static const char *const pass_names[PASSES] = {"forward", "weight grad", "input grad"};
static const int tiles[ALGOS] = {0, 2, 4};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Copy kernels: a work-item copies `per` float8s (1: PoCL vectorises across
 * work-items; more: long runs each). */
static const char *copy_source =
    "__kernel void copy8(__global const float8 *a, __global float8 *b, const int per) {\n"
    "  const size_t i = get_global_id(0) * per;\n"
    "  for (int j = 0; j < per; j++) b[i + j] = a[i + j];\n"
    "}\n";

/* The copy kernel's best device time over `runs` runs of each of its shapes on
 * two buffers of `mb` MB each; prints it with its rate (bytes read plus
 * written). */
static void bench_copy(int mb, int runs) {
  cl_int rc;
  cl_program prog = clCreateProgramWithSource(R->context, 1, &copy_source, NULL, &rc);
  check_cl(rc, "copy program");
  check_cl(clBuildProgram(prog, 1, &R->device.id, "", NULL, NULL), "copy build");
  cl_kernel k = clCreateKernel(prog, "copy8", &rc);
  check_cl(rc, "copy kernel");
  const size_t n = (size_t)mb << 18;
  cl_mem a = dev_new(n), b = dev_new(n);
  dev_fill(a, 0, n, 1.0f);
  dev_fill(b, 0, n, 0.0f);
  check_cl(clSetKernelArg(k, 0, sizeof a, &a), "copy arg");
  check_cl(clSetKernelArg(k, 1, sizeof b, &b), "copy arg");
  static const int pers[] = {1, 8, 64};
  double least = 1e30;
  int least_per = 0;
  for (int v = 0; v < 3; v++) {
    const int per = pers[v];
    const size_t items = n / (8 * (size_t)per), local = per == 1 ? 64 : 16;
    check_cl(clSetKernelArg(k, 2, sizeof per, &per), "copy arg");
    for (int r = -1; r < runs; r++) {
      cl_event ev;
      check_cl(clEnqueueNDRangeKernel(R->queue, k, 1, NULL, &items, &local, 0, NULL, &ev), "copy");
      check_cl(clWaitForEvents(1, &ev), "copy wait");
      cl_ulong t0, t1;
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
      clReleaseEvent(ev);
      const double t = 1e-9 * (double)(t1 - t0);
      if (r >= 0 && t < least) {
        least = t;
        least_per = per;
      }
    }
  }
  printf("copy %d MB: %.2f ms, %.1f GB/s (read + write; %d float8 a work-item)\n", mb, 1e3 * least,
         2e-9 * (double)(n * sizeof(float)) / least, least_per);
  case_end();
  clReleaseKernel(k);
  clReleaseProgram(prog);
}

/* One pass of l on io with R's winograd tile `tile`, seconds. */
static double time_pass(clt_layer *l, clt_layer_io *io, int pass, int tile) {
  R->winograd = tile;
  clt_layer_io run = *io;
  l->frozen = pass == 2;
  if (pass == 1) run.dx = NULL;
  clFinish(R->queue);
  const double t0 = now();
  const int status = pass == 0 ? l->ops->forward(l, &run, &E) : l->ops->backward(l, &run, &E);
  clFinish(R->queue);
  const double t = now() - t0;
  l->frozen = 0;
  if (status) {
    fprintf(stderr, "bench_winograd: %s\n", E.msg);
    exit(1);
  }
  return t;
}

/* The profile's device time per kernel name (the scope left out) in one run,
 * kept as the least over runs in best[] (index: the table's name), and the
 * table emptied. */
static double best[CLT_PROFILE_MAX_NAMES];
static long best_calls[CLT_PROFILE_MAX_NAMES];

static void profile_run(int first) {
  clt_profile *p = R->profile;
  if (clt_replica_profile_collect(R, &E)) fatal("profile");
  for (int i = 0; i < p->nnames; i++) {
    if (first || (p->calls[i] && (best_calls[i] == 0 || p->seconds[i] < best[i]))) {
      best[i] = p->seconds[i];
      best_calls[i] = p->calls[i];
    }
    p->seconds[i] = 0;
    p->calls[i] = 0;
  }
}

/* The bytes Winograd's transform `name` moves in pass `pass` with tile m of the
 * convolution of B images h x w x c into oh x ow x co (each value read once and
 * written once), or 0 for another kernel. dx's pass runs over dy's tiles of dx:
 * its "input" is dy and its "output" dx. */
static double transform_bytes(const char *name, int pass, int m, int B, int h, int w, int c, int oh,
                              int ow, int co) {
  const double t = (double)(m + 2) * (m + 2);
  if (pass == 2) {
    int s = h;
    h = oh;
    oh = s;
    s = w;
    w = ow;
    ow = s;
    s = c;
    c = co;
    co = s;
  }
  const int th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  const double tiles = (double)B * th * tw;
  double floats = 0;
  if (!strcmp(name, "wino_flip_taps")) floats = 18.0 * c * co;
  else if (!strcmp(name, "wino_filter") || !strcmp(name, "wino_filter_flip") ||
           !strcmp(name, "wino_filter_grad"))
    floats = (9 + t) * c * co;
  else if (!strcmp(name, "wino_input")) floats = (double)B * h * w * c + t * tiles * c;
  else if (!strcmp(name, "wino_output")) floats = t * tiles * co + (double)B * oh * ow * co;
  else if (!strcmp(name, "wino_grad_output")) floats = (double)B * oh * ow * co + t * tiles * co;
  return 4 * floats;
}

/* Prints best[] summed per kernel name, ms, in the order the kernels first ran. */
static void print_profile(const char *pass, int tile, int pass_index, const bench_layer *b,
                          const clt_layer *l) {
  const clt_profile *p = R->profile;
  printf("  profile %s %s:", pass, tile ? (tile == 2 ? "F2" : "F4") : "direct");
  double total = 0;
  for (int i = 0; i < p->nnames; i++) {
    const char *name = p->names[i] + p->kernel_at[i];
    if (best_calls[i] == 0) continue; /* not this pass's */
    int first = 1;
    for (int j = 0; j < i && first; j++)
      first = best_calls[j] == 0 || strcmp(name, p->names[j] + p->kernel_at[j]) != 0;
    if (!first) continue;
    double s = 0;
    long calls = 0;
    for (int j = i; j < p->nnames; j++)
      if (best_calls[j] && strcmp(name, p->names[j] + p->kernel_at[j]) == 0) {
        s += best[j];
        calls += best_calls[j];
      }
    total += s;
    printf(" %s %.2f", name, 1e3 * s);
    if (calls > 1) printf(" (%ld launches)", calls);
    printf(",");
  }
  printf(" total %.2f ms\n", 1e3 * total);
  /* The direct input gradient's flipped kernel (cl/flip.cl, as wino_flip_taps). */
  for (int i = 0; i < p->nnames && !tile; i++) {
    if (best_calls[i] == 0 || strcmp(p->names[i] + p->kernel_at[i], "conv kernel flip") != 0)
      continue;
    const double bytes = 4 * 18.0 * b->C * l->out.c;
    printf("  flip %s direct: conv kernel flip %.2f MB %.2f ms %.1f GB/s\n", pass, 1e-6 * bytes,
           1e3 * best[i], 1e-9 * bytes / best[i]);
  }
  if (!tile) return;
  printf("  transforms %s F%d:", pass, tile);
  for (int i = 0; i < p->nnames; i++) {
    const char *name = p->names[i] + p->kernel_at[i];
    const double bytes = transform_bytes(name, pass_index, tile, b->B, b->H, b->W, b->C, l->out.h,
                                         l->out.w, l->out.c);
    if (best_calls[i] == 0 || bytes == 0) continue;
    printf(" %s %.2f MB %.2f ms %.1f GB/s,", name, 1e-6 * bytes, 1e3 * best[i],
           1e-9 * bytes / best[i]);
  }
  printf("\n");
}

static void bench(const bench_layer *b, int runs, int profile) {
  clt_layer l;
  if (clt_layer_init(&l, b->entry, &E)) fatal("init");
  const clt_shape in[1] = {{b->H, b->W, b->C}};
  if (l.ops->setup(&l, in, &E)) fatal("setup");
  const size_t nx = clt_shape_size(l.in) * b->B, ny = clt_shape_size(l.out) * b->B;
  const size_t flat = place_params(&l);
  double *params = dnew(flat), *x = dnew(nx), *dy = dnew(ny);
  rand_fill(params, flat, -0.1, 0.1);
  rand_fill(x, nx, -1, 1);
  rand_fill(dy, ny, -1, 1);
  /* Every algorithm's kernels and GEMM scratch, before the first timing. */
  for (int a = 0; a < ALGOS; a++) {
    R->winograd = tiles[a];
    if (clt_layer_prepare(&l, R, b->B, NULL, &E)) fatal("prepare");
  }
  cl_mem X = dev_new(nx), Y = dev_new(ny), DY = dev_new(ny), DX = dev_new(nx);
  cl_mem P = dev_new(flat), G = dev_new(flat), S = dev_new(clt_layer_scratch_floats(&l, b->B));
  upload(X, 0, x, nx);
  upload(P, 0, params, flat);
  upload(DY, 0, dy, ny);
  clt_layer_io io = layer_io(b->B, X, Y, DY, DX, P, G, S, NULL);
  static double t[ALGOS][PASSES][MAX_RUNS];
  /* A warm-up run (PoCL's first launches), then the timed ones, interleaved. */
  for (int r = -1; r < runs; r++)
    for (int a = 0; a < ALGOS; a++)
      for (int p = 0; p < PASSES; p++) {
        const double s = time_pass(&l, &io, p, tiles[a]);
        if (r >= 0) t[a][p][r] = s;
      }
  for (int p = 0; p < PASSES; p++) {
    double med[ALGOS];
    for (int a = 0; a < ALGOS; a++) med[a] = median(t[a][p], runs);
    printf("%s %dx%dx%d->%d B%d (x%d) %s: direct %.2f ms, F2 %.2f ms (%.2fx), F4 %.2f ms (%.2fx)\n",
           b->label, b->H, b->W, b->C, l.out.c, b->B, b->count, pass_names[p], 1e3 * med[0],
           1e3 * med[1], med[0] / med[1], 1e3 * med[2], med[0] / med[2]);
  }
  /* Profiled runs after the timed ones; the table is kept aside in between so
   * the next layer's timings run without events. */
  static clt_profile *kept;
  if (profile) {
    R->profile = kept;
    if (clt_replica_enable_profiling(R, &E)) fatal("profiling");
    clt_replica_profile_kind(R, CLT_PROFILE_COMPUTE);
    for (int p = 0; p < PASSES; p++)
      for (int a = 0; a < ALGOS; a++) {
        for (int r = 0; r < runs; r++) {
          time_pass(&l, &io, p, tiles[a]);
          profile_run(r == 0);
        }
        print_profile(pass_names[p], tiles[a], p, b, &l);
      }
    kept = R->profile;
    R->profile = NULL;
  }
  fflush(stdout);
  case_end();
}

int main(int argc, char **argv) {
  int runs = 5, profile = 0, only = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--profile") == 0) {
      profile = 1;
    } else if (strcmp(argv[i], "--layer") == 0 && i + 1 < argc) {
      only = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_winograd [--runs N] [--profile] [--layer I]\n");
      return 2;
    }
  }
  if (runs < 1 || runs > MAX_RUNS) {
    fprintf(stderr, "bench_winograd: --runs must be 1 to %d\n", MAX_RUNS);
    return 2;
  }
  /* The layers' scratch holds Winograd's room only where it is asked for. */
  setenv("CLTRAIN_WINOGRAD", "2", 1);
  rng_seed(0x5eed);
  replica_open();
  bench_copy(8, runs);
  bench_copy(64, runs);
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
    if (only < 0 || (size_t)only == i) bench(&layers[i], runs, profile);
  replica_close();
  return 0;
}
