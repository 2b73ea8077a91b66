/* Test support shared by the device tests: see harness.h. */
#include "harness.h"

#include "kernels_used.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clt_err E;
clt_replica *R;

/* ---- reporting ---------------------------------------------------------------------- */

static int n_passed, n_failed;
static char case_label[200];

void set_case(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(case_label, sizeof case_label, fmt, ap);
  va_end(ap);
}

void report(const char *what, double err, double tol, const char *detail) {
  int ok = err <= tol;
  ok ? n_passed++ : n_failed++;
  printf("%s: %s %s max_err=%.3g (tol %.0e)%s\n", ok ? "ok" : "FAIL", case_label, what, err, tol,
         ok || !detail ? "" : detail);
}

void expect(const char *what, size_t bad, size_t total) {
  if (bad == 0) {
    n_passed++;
    printf("ok: %s %s\n", case_label, what);
  } else {
    n_failed++;
    printf("FAIL: %s %s max_err=%zu wrong of %zu\n", case_label, what, bad, total);
  }
}

double worse(double a, double b) { return isnan(a) || a > b ? a : b; }

void check(const char *what, const double *got, const double *want, size_t n, double tol) {
  double big = 0.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
  const double denom = fmax(big, 1e-6);
  for (size_t i = 0; i < n; i++) {
    const double err = fabs(got[i] - want[i]) / denom;
    if (!(err <= worst)) { /* larger, or NaN: the first NaN is kept as the worst */
      worst = err;
      at = i;
      if (isnan(err)) break;
    }
  }
  char detail[160];
  snprintf(detail, sizeof detail, " at [%zu]: got %.9g want %.9g", at, n ? got[at] : 0.0,
           n ? want[at] : 0.0);
  report(what, worst, tol, detail);
}

int api_failed(int status, const char *what) {
  if (status == CLT_OK) return 0;
  n_failed++;
  printf("FAIL: %s %s: %s\n", case_label, what, E.msg);
  return 1;
}

void fatal(const char *what) {
  n_failed++;
  printf("FAIL: %s %s: %s\n", case_label, what, E.msg);
  summary();
  exit(1);
}

void check_cl(cl_int rc, const char *what) {
  if (rc != CL_SUCCESS) {
    clt_replica_fail(R, &E, rc, what);
    fatal(what);
  }
}

int summary(void) {
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}

/* ---- deterministic random numbers (splitmix64) --------------------------------------- */

static uint64_t rng_state;

void rng_seed(uint64_t seed) { rng_state = seed; }

uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

double urand(double lo, double hi) {
  return (float)(lo + (hi - lo) * (double)(rng_next() >> 11) * 0x1.0p-53);
}

int irand(int n) { return (int)(rng_next() % (uint64_t)n); }

void rand_fill(double *p, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) p[i] = urand(lo, hi);
}

void shuffle(int *p, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = irand(i + 1), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

/* ---- per-case host and device memory ------------------------------------------------ */

#define MAX_ALLOCS 64
static void *host_allocs[MAX_ALLOCS];
static int n_host;
static cl_mem dev_allocs[MAX_ALLOCS];
static int n_dev;

void *hnew(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p || n_host == MAX_ALLOCS) {
    free(p);
    clt_fail(&E, CLT_ERR_NOMEM, "out of host memory");
    fatal("allocating host memory");
  }
  host_allocs[n_host++] = p;
  return p;
}

double *dnew(size_t n) { return hnew(n * sizeof(double)); }
int *inew(size_t n) { return hnew(n * sizeof(int)); }

cl_mem dev_new(size_t n) {
  cl_mem m = NULL;
  if (n_dev == MAX_ALLOCS) clt_fail(&E, CLT_ERR_INTERNAL, "too many test buffers");
  if (n_dev == MAX_ALLOCS || clt_replica_alloc(R, n * sizeof(float), "test buffer", &m, &E)) {
    fatal("allocating a device buffer");
  }
  dev_allocs[n_dev++] = m;
  dev_fill(m, 0, n, GARBAGE);
  return m;
}

static clt_device_list devices;
static int device_index;

void case_end(void) {
  if (R) clFinish(R->queue); /* NULL in tests of host code only */
  while (n_dev) clReleaseMemObject(dev_allocs[--n_dev]);
  while (n_host) free(host_allocs[--n_host]);
  /* Under Oclgrind (small mode) each case gets a fresh replica: Oclgrind 21.10's
   * --uninitialized reports a case's valid inputs as uninitialised once the same
   * replica has run other cases (every case alone is clean; seen with CLBlast and
   * with cl/conv2d.cl kernels whose objects an earlier case created). */
  if (R && small_mode()) {
    log_kernels_used(R);
    clt_backend_destroy_replica(R);
    R = NULL;
    if (clt_backend_create_replica(&devices.devices[device_index], &R, &E))
      fatal("recreating the replica");
  }
}

/* ---- transfers ---------------------------------------------------------------------- */

void dev_fill(cl_mem m, size_t off, size_t n, float v) {
  /* Written from the host: Oclgrind 21.10's --uninitialized counts neither
   * clEnqueueFillBuffer nor, once a replica has run other cases, fill-kernel
   * stores as initialising (a tool limit, checked: each case alone is clean). */
  if (n == 0) return;
  float *h = malloc(n * sizeof *h);
  if (!h) fatal("allocating a fill pattern");
  for (size_t i = 0; i < n; i++) h[i] = v;
  upload_bytes(m, off * sizeof *h, h, n * sizeof *h);
  free(h);
}

void upload_bytes(cl_mem m, size_t off_bytes, const void *src, size_t bytes) {
  if (bytes == 0) return;
  if (off_bytes == 0) {
    check_cl(clEnqueueWriteBuffer(R->queue, m, CL_TRUE, 0, bytes, src, 0, NULL, NULL),
             "clEnqueueWriteBuffer");
    return;
  }
  /* Oclgrind 21.10's --uninitialized ignores a write's offset (it marks the bytes
   * from 0 as written): the buffer's head is read back and written with the data,
   * from offset 0. */
  unsigned char *whole = malloc(off_bytes + bytes);
  if (!whole) fatal("allocating an upload buffer");
  download_bytes(m, 0, whole, off_bytes);
  memcpy(whole + off_bytes, src, bytes);
  check_cl(clEnqueueWriteBuffer(R->queue, m, CL_TRUE, 0, off_bytes + bytes, whole, 0, NULL, NULL),
           "clEnqueueWriteBuffer");
  free(whole);
}

void download_bytes(cl_mem m, size_t off_bytes, void *dst, size_t bytes) {
  if (bytes == 0) return;
  check_cl(clEnqueueReadBuffer(R->queue, m, CL_TRUE, off_bytes, bytes, dst, 0, NULL, NULL),
           "clEnqueueReadBuffer");
}

void download_f(cl_mem m, size_t off, float *dst, size_t n) {
  download_bytes(m, off * sizeof(float), dst, n * sizeof(float));
}

/* A float staging buffer of n (at least 1) entries; fatal if there is no memory. */
static float *staging(size_t n) {
  float *tmp = malloc((n ? n : 1) * sizeof *tmp);
  if (!tmp) fatal("allocating a staging buffer");
  return tmp;
}

void upload(cl_mem m, size_t off, const double *src, size_t n) {
  float *tmp = staging(n);
  for (size_t i = 0; i < n; i++) tmp[i] = (float)src[i];
  upload_bytes(m, off * sizeof(float), tmp, n * sizeof(float));
  free(tmp);
}

void download(cl_mem m, size_t off, double *dst, size_t n) {
  float *tmp = staging(n);
  download_f(m, off, tmp, n);
  for (size_t i = 0; i < n; i++) dst[i] = tmp[i];
  free(tmp);
}

void check_untouched(const char *what, cl_mem m, size_t off, size_t n) {
  float *tmp = staging(n);
  download_f(m, off, tmp, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += tmp[i] != GARBAGE;
  free(tmp);
  expect(what, bad, n);
}

/* ---- layers ------------------------------------------------------------------------- */

void relu_mask(double *dy, const double *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(y[i] > 0.0)) dy[i] = 0.0;
}

static size_t align32(size_t n) { return (n + 31) / 32 * 32; }

clt_layer_io layer_io(int batch, cl_mem x, cl_mem y, cl_mem dy, cl_mem dx, cl_mem params,
                      cl_mem grads, cl_mem scratch, cl_mem state) {
  return (clt_layer_io){.replica = R,
                        .batch = batch,
                        .train = 1,
                        .stat_weight = 1.0f,
                        .x = x,
                        .y = y,
                        .dy = dy,
                        .dx = dx,
                        .params = params,
                        .grads = grads,
                        .scratch = scratch,
                        .state = state};
}

size_t place_params(clt_layer *l) {
  size_t off = 32;
  for (int i = 0; i < l->nparams; i++) {
    l->params[i].offset = off;
    off += align32(l->params[i].size);
  }
  return off + 32;
}

void check_flat(const char *what, cl_mem m, const clt_layer *l, size_t flat, int first, int last) {
  float *tmp = staging(flat);
  download_f(m, 0, tmp, flat);
  size_t bad = 0, n = 0;
  for (size_t i = 0; i < flat; i++) {
    int inside = 0;
    for (int p = first; p <= last; p++)
      inside |= i >= l->params[p].offset && i < l->params[p].offset + l->params[p].size;
    if (inside) continue;
    n++;
    bad += tmp[i] != GARBAGE;
  }
  free(tmp);
  expect(what, bad, n);
}

/* ---- the replica -------------------------------------------------------------------- */

int small_mode(void) {
  const char *v = getenv("CLT_TEST_SMALL");
  return v && *v && strcmp(v, "0") != 0;
}

int simulated(void) { return R && strstr(R->device.platform_name, "Oclgrind") != NULL; }

/* A few seconds of Oclgrind's simulator with its checks on and optimisation off
 * (CLBlast's GEMM there: about 0.4 ms per multiply-add). */
#define SMALL_WORK 45000.0

int skip_above(double work, double limit) {
  if (!small_mode() || work <= limit) return 0;
  printf("skipped (small mode): %s work %.0f\n", case_label, work);
  return 1;
}

int skip_large(double work) { return skip_above(work, SMALL_WORK); }

void replica_open(void) {
  set_case("setup:");
  if (clt_devices_enumerate(&devices, &E)) fatal("enumerating OpenCL devices");
  int index = 0;
  const char *env = getenv("CLT_TEST_DEVICE");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    index = *end || v < 0 || v > 1000 ? -1 : (int)v;
  }
  if (devices.count == 0 || index < 0 || index >= devices.count) {
    if (devices.count == 0) {
      printf("FAIL: no OpenCL device found: install an OpenCL driver (e.g. PoCL)\n");
    } else {
      printf("FAIL: CLT_TEST_DEVICE=%s is not a device index 0..%d (see `cltrain devices`)\n", env,
             devices.count - 1);
    }
    n_failed++;
    summary();
    clt_devices_free(&devices);
    exit(1);
  }
  device_index = index;
  if (clt_backend_create_replica(&devices.devices[index], &R, &E)) fatal("creating the replica");
  printf("device %d: %s (%s)\n", index, R->device.name, R->device.platform_name);
}

void replica_close(void) {
  log_kernels_used(R);
  clt_backend_destroy_replica(R);
  R = NULL;
  clt_devices_free(&devices);
}
