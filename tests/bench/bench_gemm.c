/* GEMM benchmark: times clt_gemm (A^T and B^T products: gradients) and
 * clt_gemm_bias_act (plain products: a layer's forward, bias and ReLU fused)
 * on device 0 for the Fashion-MNIST CNN's and ResNet50's shapes, and checks
 * every result against a double-precision product on the host.
 *
 *   bench_gemm [--repeats R] [--only SUBSTRING] [--quick] [--peak] [--chains C]
 *              [--tiling "6x4 kc128 rb24 pack2 cb0"]
 *
 * First measures the device's single-precision FMA peak (see peak_source) and
 * prints it as "FMA peak: ... GFLOP/s (...)"; then prints per shape the median
 * time over R repetitions (after one warm-up), GFLOP/s (2mnk / time; also at
 * the fastest repetition), that median rate as a percentage of the peak, and
 * the largest error relative to sum |a_ik b_kj|.
 * --quick keeps the shapes under 1 GFLOP.
 * --peak measures only the peak.
 * --tiling T (cpu backend): runs each shape T fits with that GEMM tiling
 * (src/backend/cpu.h) in place of the tuner's default, "6x4 kc384 rb12 pack2
 * cb0" B^T read as stored; the shapes it does not fit are left out.
 * --chains C overrides the peak kernel's number of independent FMA chains per
 * work-item (for tuning it on a new device). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu.h"
#include "gemm.h"
#include "median.h"
#include "timing.h"

/* The FMA peak kernel. Each work-item runs CHAINS independent chains
 * c = fma(c, m, a) on vectors of WIDTH floats: an FMA's result is needed only
 * by the next FMA of its chain, so with CHAINS at least the FMA latency times
 * the FMA units (4 cycles x 2 ports on AVX-512 cores: 8) every unit starts an
 * FMA each cycle. The chains are explicit vector variables: with local size 1
 * PoCL has no work-items to vectorise across, and a private array might not
 * be promoted to registers. Chains from CHAINS on are dead code the compiler
 * drops, so one source serves -DCHAINS up to 24 and -DWIDTH 1 to 16.
 * m and a come from a buffer, so the compiler can neither fold nor shorten the
 * loop; every chain converges to a / (1 - m) = 1, away from overflow and
 * denormals (which would be slow); the sum of the chains goes out, so none is
 * dead, and the host checks it. fma() rather than a * b + c: the fused
 * instruction whether or not the compiler contracts (PoCL does). */
static const char peak_source[] =
    "#if WIDTH == 1\n"
    "typedef float vec;\n"
    "#define STORE(v, i, p) ((p)[i] = (v))\n"
    "#else\n"
    "#define CAT(a, b) a##b\n"
    "#define XCAT(a, b) CAT(a, b)\n"
    "typedef XCAT(float, WIDTH) vec;\n"
    "#define STORE(v, i, p) XCAT(vstore, WIDTH)(v, i, p)\n"
    "#endif\n"
    "#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) \\\n"
    "  X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)\n"
    "#define INIT(i) vec c##i = (vec)(start + 0.01f * i);\n"
    "#define STEP(i) if (i < CHAINS) c##i = fma(c##i, m, a);\n"
    "#define SUM(i) if (i < CHAINS) s += c##i;\n"
    "__kernel void fma_peak(__global const float *seed, __global float *out, uint iters) {\n"
    "  const vec m = (vec)(seed[0]), a = (vec)(seed[1]);\n"
    "  const float start = seed[2] + 0.001f * (float)get_global_id(0);\n"
    "  EACH(INIT)\n"
    "  for (uint i = 0; i < iters; i++) {\n"
    "    EACH(STEP)\n"
    "  }\n"
    "  vec s = (vec)(0.0f);\n"
    "  EACH(SUM)\n"
    "  STORE(s, get_global_id(0), out);\n"
    "}\n";
#define PEAK_MAX_CHAINS 24
/* Work-items per compute unit: a few, so that the cores stay busy to the end
 * of a run even when one of them is briefly taken by another process. */
#define PEAK_ITEMS_PER_CU 4
/* Seconds per timed run: long against the launch (~0.1 ms on PoCL), short
 * enough for a shared machine. */
#define PEAK_RUN_SECONDS 0.3

typedef struct peak_result {
  double gflops; /* median over the runs */
  int width;     /* floats per vector */
  int chains;    /* independent FMA chains per work-item */
} peak_result;

/* Enqueues one launch of `items` work-items (local size 1: on PoCL CPU every
 * work-group is a task for a core) of `iters` loop turns and waits for it;
 * *seconds: host time from enqueue to the end. */
static int peak_run(clt_replica *r, cl_kernel k, size_t items, cl_uint iters, double *seconds) {
  const size_t local = 1;
  double t0 = clt_now_seconds();
  if (clSetKernelArg(k, 2, sizeof iters, &iters) != CL_SUCCESS ||
      clEnqueueNDRangeKernel(r->queue, k, 1, NULL, &items, &local, 0, NULL, NULL) != CL_SUCCESS ||
      clFinish(r->queue) != CL_SUCCESS) {
    fprintf(stderr, "bench_gemm: peak kernel: launch failed\n");
    return 1;
  }
  *seconds = clt_now_seconds() - t0;
  return 0;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times the built kernel k (its buffers set; dout: items x WIDTH floats)
 * `repeats` times and checks its sums into `out`. times, sums: scratch of
 * repeats and items x width. */
static int peak_time(clt_replica *r, cl_kernel k, cl_mem dout, size_t items, int repeats,
                     double *times, float *sums, peak_result *out) {
  /* A warm-up (the first launch starts PoCL's threads), then a short run that
   * sets the loop count for PEAK_RUN_SECONDS. */
  const cl_uint probe = 1u << 14;
  double t = 0;
  if (peak_run(r, k, items, probe, &t) || peak_run(r, k, items, probe, &t)) return 1;
  const double scaled = probe * PEAK_RUN_SECONDS / (t > 1e-6 ? t : 1e-6);
  const cl_uint iters = scaled > UINT_MAX ? UINT_MAX : scaled < probe ? probe : (cl_uint)scaled;
  double wall = 0, cpu = cpu_seconds();
  for (int rep = 0; rep < repeats; rep++) {
    if (peak_run(r, k, items, iters, &times[rep])) return 1;
    wall += times[rep];
  }
  cpu = cpu_seconds() - cpu;
  /* A CPU device runs in this process (PoCL's threads): CPU time well short
   * of wall time x compute units means that other processes had some of the
   * cores and the peak is low. Said on stderr, the peak line stays the same. */
  if ((r->device.type & CL_DEVICE_TYPE_CPU) && cpu < 0.9 * wall * r->device.compute_units)
    fprintf(stderr, "bench_gemm: note: the peak runs had %.1f of %u cores (machine busy?)\n",
            cpu / wall, r->device.compute_units);
  /* Every lane of every work-item's sum is CHAINS (each chain at its fixed
   * point 1): anything else means the kernel did not run the chains. */
  const size_t n = items * (size_t)out->width;
  if (clEnqueueReadBuffer(r->queue, dout, CL_TRUE, 0, sizeof(float) * n, sums, 0, NULL, NULL) !=
      CL_SUCCESS) {
    fprintf(stderr, "bench_gemm: peak kernel: reading its result failed\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (!(fabsf(sums[i] - (float)out->chains) <= 1e-3f * (float)out->chains)) {
      fprintf(stderr, "bench_gemm: peak kernel: lane %zu sums to %g, not %d\n", i, sums[i],
              out->chains);
      return 1;
    }
  }
  const double flop = 2.0 * (double)items * out->chains * out->width * (double)iters;
  out->gflops = flop / median(times, repeats) / 1e9;
  return 0;
}

/* Measures the single-precision FMA peak of r's device: the median over
 * `repeats` runs of ~PEAK_RUN_SECONDS, 2 FLOP per FMA lane. chains: 0 picks
 * by the vector width. Prints its own errors. The launch shape (a few
 * work-items per compute unit, local size 1) is for CPU devices; on a GPU it
 * would measure far below the peak. */
static int measure_peak(clt_replica *r, int repeats, int chains, peak_result *out) {
  /* Vectors as wide as the FMA units: what the device calls native (the
   * hardware's width: 16 on AVX-512, 8 on AVX2), or CLTRAIN_CPU_VECTOR_WIDTH
   * when set (devices/device.c: PoCL compiling for a narrower CPU than the host). */
  const cl_uint want = r->device.float_vector_width;
  out->width = 1;
  while (out->width < 16 && (cl_uint)out->width * 2 <= want) out->width *= 2;
  /* Enough chains to cover FMA latency x units twice over, few enough to stay
   * in registers with m and a: AVX-512 cores have 32 zmm registers and 2 FMA
   * ports of latency 4 (8 chains would do; 16 leave a margin), AVX2 16 ymm
   * (about 10 float8 chains). */
  out->chains = chains > 0 ? chains : out->width >= 16 ? 16 : 10;
  if (out->chains > PEAK_MAX_CHAINS) out->chains = PEAK_MAX_CHAINS;
  const size_t items = (size_t)(r->device.compute_units ? r->device.compute_units : 1) *
                       PEAK_ITEMS_PER_CU;
  char options[64];
  snprintf(options, sizeof options, "-DWIDTH=%d -DCHAINS=%d", out->width, out->chains);

  const char *src = peak_source;
  const float seed[3] = {0.99f, 0.01f, 1.0f}; /* m, a, start: see peak_source */
  float *sums = malloc(sizeof(float) * items * (size_t)out->width);
  double *times = malloc(sizeof(double) * (size_t)repeats);
  cl_int err = CL_OUT_OF_HOST_MEMORY;
  cl_program prog = NULL;
  cl_kernel k = NULL;
  cl_mem dseed = NULL, dout = NULL;
  int said = 0; /* the error is reported */
  if (sums && times) prog = clCreateProgramWithSource(r->context, 1, &src, NULL, &err);
  if (prog && (err = clBuildProgram(prog, 1, &r->device.id, options, NULL, NULL)) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(prog, r->device.id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "bench_gemm: peak kernel (%s): build failed (%d):\n%s\n", options, (int)err,
            log);
    said = 1;
  }
  if (err == CL_SUCCESS) k = clCreateKernel(prog, "fma_peak", &err);
  if (err == CL_SUCCESS)
    dseed = clCreateBuffer(r->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof seed,
                           (void *)seed, &err);
  if (err == CL_SUCCESS)
    dout = clCreateBuffer(r->context, CL_MEM_WRITE_ONLY, sizeof(float) * items * (size_t)out->width,
                          NULL, &err);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof dseed, &dseed);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof dout, &dout);
  if (err != CL_SUCCESS && !said)
    fprintf(stderr, "bench_gemm: peak kernel: set-up failed (OpenCL error %d)\n", (int)err);
  const int error = err != CL_SUCCESS || peak_time(r, k, dout, items, repeats, times, sums, out);
  if (dout) clReleaseMemObject(dout);
  if (dseed) clReleaseMemObject(dseed);
  if (k) clReleaseKernel(k);
  if (prog) clReleaseProgram(prog);
  free(times);
  free(sums);
  return error;
}

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
    /* ResNet50 at 96x96, batch 16: short sums in the weight gradients, few rows. */
    {"resnet96", 576, 256, 2304, 0, 0},
    {"resnet96", 576, 2304, 256, 0, 1},
    {"resnet96", 2304, 256, 576, 1, 0},
    {"resnet96", 1024, 256, 576, 1, 0},
    {"resnet96", 256, 1024, 576, 1, 0},
    {"resnet96", 144, 512, 4608, 0, 0},
    {"resnet96", 144, 4608, 512, 0, 1},
    {"resnet96", 4608, 512, 144, 1, 0},
    /* Its B^T products (input gradients of 1x1 convolutions and of Winograd's
     * products) and A^T ones (weight gradients). */
    {"resnet96 Bt", 576, 256, 1024, 0, 1},
    {"resnet96 Bt", 576, 1024, 256, 0, 1},
    {"resnet96 Bt", 9216, 64, 256, 0, 1},
    {"resnet96 Bt", 144, 512, 2048, 0, 1},
    {"resnet96 Bt", 2304, 128, 512, 0, 1},
    {"resnet96 Bt", 144, 2048, 512, 0, 1},
    {"resnet96 At", 64, 256, 9216, 1, 0},
    {"resnet96 At", 128, 512, 2304, 1, 0},
    {"resnet96 At", 512, 2048, 144, 1, 0},
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
  int repeats = 7, quick = 0, peak_only = 0, chains = 0;
  const char *only = NULL, *tiling_name = NULL;
  clt_gemm_tiling tiling;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = atoi(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--peak") == 0) peak_only = 1;
    else if (strcmp(argv[i], "--chains") == 0 && i + 1 < argc) chains = atoi(argv[++i]);
    else if (strcmp(argv[i], "--tiling") == 0 && i + 1 < argc) tiling_name = argv[++i];
    else {
      fprintf(stderr, "bench_gemm: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (repeats < 1) repeats = 1;
  if (tiling_name && clt_cpu_gemm_tiling_parse(tiling_name, &tiling)) {
    fprintf(stderr,
            "bench_gemm: --tiling %s: expected a tiling such as \"6x4 kc384 rb12 pack0 cb0\"\n",
            tiling_name);
    return 2;
  }
  clt_err e = {0};
  clt_device_list list;
  clt_replica *r;
  if (clt_devices_enumerate(&list, &e) || list.count < 1) {
    fprintf(stderr, "bench_gemm: no OpenCL device %s\n", e.msg);
    clt_devices_free(&list);
    return 1;
  }
  if (clt_backend_create_replica(&list.devices[0], &r, &e)) {
    fprintf(stderr, "bench_gemm: %s\n", e.msg);
    clt_devices_free(&list);
    return 1;
  }
  /* The peak first: the GEMM rates below are read as fractions of it. */
  peak_result peak = {0};
  if (measure_peak(r, repeats, chains, &peak)) {
    clt_backend_destroy_replica(r);
    clt_devices_free(&list);
    return 1;
  }
  printf("FMA peak: %.1f GFLOP/s (device 0: %s, %u compute units, float%d FMA chains, median of %d "
         "runs)\n",
         peak.gflops, r->device.name, r->device.compute_units, peak.width, repeats);
  fflush(stdout);
  if (peak_only) {
    clt_backend_destroy_replica(r);
    clt_devices_free(&list);
    return 0;
  }
  printf("device 0: %s, median of %d\n", r->device.name, repeats);
  printf("%-18s %-22s %9s %9s %9s %9s %10s\n", "shape", "MxNxK", "ms", "GFLOP/s", "best",
         "% of peak", "rel.err");
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
    if (tiling_name) { /* gemm16's columns take the tiling; other shapes are left out */
      clt_gemm_shape blocks = g;
      blocks.n -= s->n % 16;
      if (r->backend != &clt_backend_cpu || !clt_cpu_gemm_tiling_valid(r, &blocks, &tiling))
        continue;
      (void)clt_cpu_gemm_choose(r, &blocks, NULL, &e);
      if (clt_cpu_gemm_choose(r, &blocks, &tiling, &e)) {
        fprintf(stderr, "bench_gemm: %s\n", e.msg);
        error = 1;
        break;
      }
    }
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
      printf("%-18s %-22s %9.3f %9.1f %9.1f %9.1f %10.2e%s\n", s->model, dims, t * 1e3,
             flop / t / 1e9, flop / best / 1e9, 100.0 * flop / t / 1e9 / peak.gflops, err,
             bad ? "  WRONG" : "");
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
  clt_backend_destroy_replica(r);
  clt_devices_free(&list);
  return error ? 1 : failed;
}
