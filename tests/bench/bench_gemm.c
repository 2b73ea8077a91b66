/* GEMM benchmark: times clt_gemm (A^T and B^T products: gradients) and
 * clt_gemm_bias_act (plain products: a layer's forward, bias and ReLU fused)
 * on device 0 for the Fashion-MNIST CNN's and ResNet50's shapes, and checks
 * every result against a double-precision product on the host.
 *
 *   bench_gemm [--repeats R] [--only SUBSTRING] [--quick]
 *
 * Prints per shape the median time over R repetitions (after one warm-up),
 * GFLOP/s (2mnk / time; also at the fastest repetition) and the largest error relative to sum |a_ik
 * b_kj|.
 * --quick keeps the shapes under 1 GFLOP. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "median.h"
#include "timing.h"

typedef struct shape {
  const char *model;
  size_t m, n, k;
  int ta, tb;
} shape;

static const shape shapes[] = {
    {"fmnist conv2 fwd", 7744, 80, 576, 0, 0},
    {"fmnist conv2 dW", 576, 80, 7744, 1, 0},
    {"fmnist conv2 dcol", 7744, 576, 80, 0, 1},
    {"fmnist conv1 fwd", 43264, 64, 9, 0, 0},
    {"fmnist conv1 dW", 9, 64, 43264, 1, 0},
    {"fmnist dense fwd", 64, 64, 2000, 0, 0},
    {"fmnist dense dW", 2000, 64, 64, 1, 0},
    {"fmnist dense dx", 64, 2000, 64, 0, 1},
    {"resnet", 1568, 256, 2304, 0, 0},
    {"resnet", 1568, 2304, 256, 0, 1},
    {"resnet", 2304, 256, 1568, 1, 0},
    {"resnet", 64, 256, 25088, 1, 0},
    {"resnet", 25088, 64, 576, 0, 0},
    {"resnet", 25088, 576, 64, 0, 1},
    {"resnet", 6272, 128, 1152, 0, 0},
    {"resnet", 6272, 1152, 128, 0, 1},
    {"resnet", 1152, 128, 6272, 1, 0},
    {"resnet", 392, 512, 4608, 0, 0},
    {"resnet", 392, 4608, 512, 0, 1},
    {"resnet", 4608, 512, 392, 1, 0},
    {"resnet", 1568, 1024, 256, 0, 0},
    {"resnet", 25088, 256, 64, 0, 0},
    {"resnet", 100352, 64, 147, 0, 0},
    {"resnet", 147, 64, 100352, 1, 0},
    /* Tails: K not a multiple of 16 (transpose), of the K chunk or of a split. */
    {"edge", 37, 48, 1000, 0, 1},
    {"edge", 13, 32, 3001, 1, 0},
    {"edge", 50, 96, 1030, 1, 1},
};

/* Fixed pseudo-random values in [-1, 1): runs see the same operands. */
static void fill(float *v, size_t n, unsigned seed) {
  unsigned x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    v[i] = (float)((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

/* Largest |C - ref| / sum |a b| over the checked entries: every entry of a
 * small product, a fixed sample of rows (all columns) of a large one. */
static double check(const shape *s, const float *a, const float *b, const float *bias, int relu,
                    const float *c) {
  const size_t m = s->m, n = s->n, k = s->k;
  const size_t step = m * n * k > 200000000u ? m / 64 + 1 : 1;
  double worst = 0;
  for (size_t i = 0; i < m; i += step) {
    for (size_t j = 0; j < n; j++) {
      double sum = 0, mag = 0;
      for (size_t p = 0; p < k; p++) {
        double x = s->ta ? a[p * m + i] : a[i * k + p];
        double y = s->tb ? b[j * k + p] : b[p * n + j];
        sum += x * y;
        mag += fabs(x * y);
      }
      if (bias) {
        sum += bias[j];
        mag += fabs(bias[j]);
      }
      if (relu && sum < 0) sum = 0;
      double err = fabs((double)c[i * n + j] - sum) / (mag > 0 ? mag : 1);
      if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
    }
  }
  return worst;
}

int main(int argc, char **argv) {
  int repeats = 7, quick = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = atoi(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else {
      fprintf(stderr, "bench_gemm: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (repeats < 1) repeats = 1;
  clt_err e = {0};
  clt_device_list list;
  clt_replica *r;
  if (clt_devices_enumerate(&list, &e) || list.count < 1) {
    fprintf(stderr, "bench_gemm: no OpenCL device %s\n", e.msg);
    clt_devices_free(&list);
    return 1;
  }
  if (clt_replica_create(&list.devices[0], &r, &e)) {
    fprintf(stderr, "bench_gemm: %s\n", e.msg);
    clt_devices_free(&list);
    return 1;
  }
  printf("device 0: %s, median of %d\n", r->device.name, repeats);
  printf("%-18s %-22s %9s %9s %9s %10s\n", "shape", "MxNxK", "ms", "GFLOP/s", "best", "rel.err");
  double *times = malloc(sizeof(double) * (size_t)repeats);
  int failed = 0, error = !times;
  if (error) fprintf(stderr, "bench_gemm: out of host memory\n");
  double total_s = 0, total_flop = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !error; si++) {
    const shape *s = &shapes[si];
    char dims[48];
    snprintf(dims, sizeof dims, "%zux%zux%zu%s%s", s->m, s->n, s->k, s->ta ? " At" : "",
             s->tb ? " Bt" : "");
    if (only && !strstr(dims, only) && !strstr(s->model, only)) continue;
    const double flop = 2.0 * s->m * s->n * s->k;
    if (quick && flop > 1e9) continue;
    clt_gemm_shape g = {s->ta, s->tb, s->m, s->n, s->k, s->ta ? s->m : s->k, s->tb ? s->k : s->n,
                        s->n};
    /* Plain products run as a layer's forward (bias, and ReLU for the CNN). */
    const int fused = !s->ta && !s->tb, relu = fused && s->model[0] == 'f';
    float *a = malloc(sizeof(float) * s->m * s->k), *b = malloc(sizeof(float) * s->k * s->n),
          *c = malloc(sizeof(float) * s->m * s->n), *bias = malloc(sizeof(float) * s->n);
    cl_mem da = NULL, db = NULL, dc = NULL, dbias = NULL;
    if (!a || !b || !c || !bias) {
      fprintf(stderr, "bench_gemm: %s: out of host memory\n", dims);
      error = 1;
    } else if (clt_replica_alloc(r, sizeof(float) * s->m * s->k, "A", &da, &e) ||
               clt_replica_alloc(r, sizeof(float) * s->k * s->n, "B", &db, &e) ||
               clt_replica_alloc(r, sizeof(float) * s->m * s->n, "C", &dc, &e) ||
               clt_replica_alloc(r, sizeof(float) * s->n, "bias", &dbias, &e) ||
               clt_gemm_reserve(r, &g, &e)) {
      fprintf(stderr, "bench_gemm: %s\n", e.msg);
      error = 1;
    }
    if (!error) {
      fill(a, s->m * s->k, 1 + (unsigned)si);
      fill(b, s->k * s->n, 101 + (unsigned)si);
      fill(bias, s->n, 7);
      clEnqueueWriteBuffer(r->queue, da, CL_TRUE, 0, sizeof(float) * s->m * s->k, a, 0, NULL, NULL);
      clEnqueueWriteBuffer(r->queue, db, CL_TRUE, 0, sizeof(float) * s->k * s->n, b, 0, NULL, NULL);
      clEnqueueWriteBuffer(r->queue, dbias, CL_TRUE, 0, sizeof(float) * s->n, bias, 0, NULL, NULL);
    }
    for (int rep = -1; rep < repeats && !error; rep++) {
      double t0 = clt_now_seconds();
      int status = fused ? clt_gemm_bias_act(r, &g, da, 0, db, 0, dc, 0, dbias, 0, relu, &e)
                         : clt_gemm(r, &g, 1.0f, da, 0, db, 0, 0.0f, dc, 0, &e);
      if (status || clFinish(r->queue) != CL_SUCCESS) {
        fprintf(stderr, "bench_gemm: %s: %s\n", dims, e.msg);
        error = 1;
      } else if (rep >= 0) {
        times[rep] = clt_now_seconds() - t0;
      }
    }
    if (!error) {
      clEnqueueReadBuffer(r->queue, dc, CL_TRUE, 0, sizeof(float) * s->m * s->n, c, 0, NULL, NULL);
      double t = median(times, repeats), best = times[0]; /* sorted by median() */
      double err = check(s, a, b, fused ? bias : NULL, relu, c);
      /* float sums of up to 10^5 terms: far below 1e-4 of sum |ab| unless wrong */
      int bad = !(err < 1e-4);
      failed |= bad;
      total_s += t;
      total_flop += flop;
      printf("%-18s %-22s %9.3f %9.1f %9.1f %10.2e%s\n", s->model, dims, t * 1e3, flop / t / 1e9,
             flop / best / 1e9, err, bad ? "  WRONG" : "");
      fflush(stdout);
    }
    if (da) clReleaseMemObject(da);
    if (db) clReleaseMemObject(db);
    if (dc) clReleaseMemObject(dc);
    if (dbias) clReleaseMemObject(dbias);
    free(a);
    free(b);
    free(c);
    free(bias);
  }
  if (!error)
    printf("total %.1f ms, %.1f GFLOP/s overall\n", total_s * 1e3, total_flop / total_s / 1e9);
  free(times);
  clt_replica_destroy(r);
  clt_devices_free(&list);
  return error ? 1 : failed;
}
