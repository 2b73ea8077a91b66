/* Test support shared by the device tests (test_kernels, test_layers2): pass/fail
 * reporting, deterministic random numbers, per-case host and device memory, blocking
 * transfers and the one replica the checks run on.
 *
 * Output: "ok: <case> <what> ..." per passed check, "FAIL: <case> <what> ..." per
 * failed one, and "N passed, M failed" last (summary()). Infrastructure failures
 * (allocation, transfers) end the test through fatal(): nothing after them can be
 * trusted. Names are short and unprefixed: this is test code, called on every line,
 * and never linked into the library. */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "layer.h"

/* Pre-fill value of outputs and scratch: finite (CLBlast may compute beta * C with
 * beta = 0, and 0 * NaN would poison a correct result) but far from any real value,
 * so an entry a kernel fails to write (or accumulates into) shows as a huge error. */
#define GARBAGE 12345.0f

/* Floats of GARBAGE past the end of every output and scratch buffer: at least one
 * 64-wide work-group, so a missing or off-by-one tail guard writes into it. */
#define TAIL 64

/* The error of the call under test, and the replica (NULL until replica_open()). */
extern clt_err E;
extern clt_replica *R;

/* ---- reporting ---------------------------------------------------------------------- */

/* Names the case being run; prefixes every report until the next call. */
void set_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One check of an error against a tolerance; NaN fails (`!(err <= tol)`). `detail`
 * (NULL or "" for none) is appended on failure: where and what. */
void report(const char *what, double err, double tol, const char *detail);

/* An exact check: `bad` of `total` entries are wrong. */
void expect(const char *what, size_t bad, size_t total);

/* max |got - want| / max(max |want|, 1e-6) over n entries against tol; on failure
 * names the worst index and both values there. */
void check(const char *what, const double *got, const double *want, size_t n, double tol);

/* The larger of two errors, NaN counting as the largest. */
double worse(double a, double b);

/* A failed API call under test (status != CLT_OK): reported with E's message, and
 * the caller skips the rest of its case. Returns whether it failed. */
int api_failed(int status, const char *what);

/* Infrastructure failing: reports E's message, prints the summary and exits 1. */
void fatal(const char *what) __attribute__((noreturn));

/* An OpenCL call of the harness or a test failing: fatal. */
void check_cl(cl_int rc, const char *what);

/* Prints "N passed, M failed"; returns the exit status (non-zero if anything failed). */
int summary(void);

/* ---- deterministic random numbers (splitmix64) --------------------------------------- */

/* Each test seeds once, first thing in main, so its inputs stay the same. */
void rng_seed(uint64_t seed);
uint64_t rng_next(void);
/* Uniform in [lo, hi), rounded to float so the device sees exactly the same value. */
double urand(double lo, double hi);
int irand(int n); /* uniform in [0, n) */
void rand_fill(double *p, size_t n, double lo, double hi);
void shuffle(int *p, int n);

/* ---- per-case host and device memory, released by case_end() ------------------------- */

/* Zeroed host memory; fatal if exhausted. */
void *hnew(size_t bytes);
double *dnew(size_t n);
int *inew(size_t n);

/* A device buffer of n floats (or ints) on R, pre-filled with GARBAGE. */
cl_mem dev_new(size_t n);

/* Waits for R's queue and releases everything hnew and dev_new handed out. */
void case_end(void);

/* ---- transfers (blocking; offsets and counts in floats unless _bytes) ----------------- */

void dev_fill(cl_mem m, size_t off, size_t n, float v);
void upload(cl_mem m, size_t off, const double *src, size_t n); /* rounded to float */
void download(cl_mem m, size_t off, double *dst, size_t n);
void download_f(cl_mem m, size_t off, float *dst, size_t n);
void upload_bytes(cl_mem m, size_t off_bytes, const void *src, size_t bytes);
void download_bytes(cl_mem m, size_t off_bytes, void *dst, size_t bytes);

/* Checks that floats [off, off + n) of m still hold GARBAGE. */
void check_untouched(const char *what, cl_mem m, size_t off, size_t n);

/* ---- layers ------------------------------------------------------------------------- */

/* Zeroes dy where the layer's own output y is not positive: what a fused ReLU's
 * backward does. The mask comes from the device's y (checked separately) so that an
 * output within rounding of 0 cannot make the reference take the other branch. */
void relu_mask(double *dy, const double *y, size_t n);

/* Places a layer's parameters in a flat buffer the way the model does (each 32-float
 * aligned), but starting at offset 32 so that a layer ignoring offsets fails. Returns
 * the buffer's length, leaving 32 floats of tail. */
size_t place_params(clt_layer *l);

/* A layer call's buffers on R, as the tests pass them: `batch` examples in
 * training mode, the slice the whole global batch (stat_weight 1); x, y, dy, dx,
 * the flat parameters and gradients, scratch and the layer's state, any of them
 * NULL. The caller sets what else its case needs (x2, dx2, fusion, ...). */
clt_layer_io layer_io(int batch, cl_mem x, cl_mem y, cl_mem dy, cl_mem dx, cl_mem params,
                      cl_mem grads, cl_mem scratch, cl_mem state);

/* Checks that the entries of a flat buffer laid out by place_params outside
 * parameters first..last (none if last < first) still hold GARBAGE. */
void check_flat(const char *what, cl_mem m, const clt_layer *l, size_t flat, int first, int last);

/* ---- small mode (tests/oclgrind.sh) -------------------------------------------------- */

/* Whether $CLT_TEST_SMALL is set: the tests then skip their large cases, which would
 * take minutes each in Oclgrind's simulator, and keep every code path on small ones. */
int small_mode(void);

/* Whether R runs on Oclgrind's simulator. It runs a kernel's work-items one at a
 * time in a fixed order, so a case run twice there can differ only through the
 * host, which the same tests check on PoCL: the tests leave out their
 * bit-for-bit repeats on it. */
int simulated(void);

/* In small mode, whether a case of `work` (its largest count of multiply-adds or
 * elements) is too large: it is then announced as skipped. Never in normal mode. */
int skip_large(double work);
/* The same with a case's own limit. */
int skip_above(double work, double limit);

/* ---- the replica -------------------------------------------------------------------- */

/* Creates R on device 0 of clt_devices_enumerate, or the index in $CLT_TEST_DEVICE,
 * and prints which. With no OpenCL device (or a bad index) it reports a failure and
 * exits 1: the test must not pass vacuously. */
void replica_open(void);
void replica_close(void);

#endif
