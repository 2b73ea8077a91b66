/* clt_gemm_batched (gemm.h): strided batches of one GEMM shape in one launch,
 * against a double-precision product per batch entry, on the backend the test
 * runs with (CLTRAIN_KERNELS). Each transpose (cpu: gemm16, the A^T kernels,
 * A^T laid out as rows for a short K, B^T transposed first, the gemm_tail
 * columns), beta 0 and 1, operands at odd offsets and strides with gaps
 * between them that must stay untouched, a count of 1 (cpu: a split K), and
 * the Winograd passes' shapes; on gpu the same cases again with each tiling
 * of cltrain's own GEMM (cl/gemm_tiled.cl) chosen in place of CLBlast's. A
 * batch run twice gives the same bits. Small mode (tests/oclgrind.sh) keeps
 * the cases of every kernel and tile that fit. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include <clblast_c.h>

#include "backend.h"
#include "cpu.h"
#include "gemm.h"
#include "harness.h"

#define TOL 1e-4

typedef struct batch_case {
  int trans_a, trans_b, m, n, k, count;
  int ldb_pad, ldc_pad; /* floats past a row of B and C */
  int a_off, b_off, c_off;
  int a_gap, b_gap, c_gap; /* floats between one product's operand and the next */
  float beta;
  double small_limit; /* small mode runs it up to this many multiply-adds */
} batch_case;

/* Floats one operand of `rows` x `ld` takes, and the buffer of `count` of them. */
static size_t buffer_floats(size_t off, size_t stride, int count, size_t one) {
  return off + (size_t)(count - 1) * stride + one;
}

/* 1 where float i of a buffer belongs to a product's rows x cols block. */
static void mark(unsigned char *in, size_t off, size_t stride, int count, size_t rows, size_t cols,
                 size_t ld) {
  for (int z = 0; z < count; z++)
    for (size_t i = 0; i < rows; i++) memset(in + off + z * stride + i * ld, 1, cols);
}

/* The batch ran as one launch of the product (cpu: with at most a transpose
 * and the tail columns' launch; gpu: CLBlast's direct kernel, which it takes
 * for small products), not one per product; on gpu a product large enough for
 * CLBlast's indirect kernel (which would allocate in its batched routine) goes
 * one at a time. */
static int indirect; /* CLBlast's indirect kernel forced */

static long launches(void) {
  long calls = 0;
  for (int i = 0; i < R->profile->nnames; i++) calls += R->profile->calls[i];
  return calls;
}

/* Launches of B's transpose into the scratch so far. */
static long transposes(void) {
  long calls = 0;
  for (int i = 0; i < R->profile->nnames; i++)
    if (strstr(R->profile->names[i], "gemm transpose") &&
        !strstr(R->profile->names[i], "gemm transpose A"))
      calls += R->profile->calls[i];
  return calls;
}

static void one_launch(const batch_case *t, const clt_gemm_tiling *in_place, const char *tiled,
                       long before, long transposed) {
  const long calls = launches() - before;
  /* cpu: B^T with its in-place tiling read as stored, not transposed first. */
  if (in_place)
    expect("B^T read in place, not transposed first", (size_t)(transposes() - transposed), 1);
  const double mnk = (double)t->m * t->n * t->k;
  if (t->count < 2) return;
  if (tiled) {
    expect("one launch of the tiled kernel for the batch", calls != 1, 1);
  } else if (strcmp(R->backend->name, "gpu") == 0) {
    if (indirect)
      expect("one launch per product (CLBlast's indirect kernel)", calls != t->count, 1);
    else
      expect("one launch for the batch (CLBlast's direct kernel), or one per large product",
             calls != 1 && !(mnk > 32768.0 && calls == t->count), 1);
  } else {
    expect("one launch for the batch, not one per product", calls > 3, 1);
  }
}

/* in_place (cpu, B^T): this tiling, reading B as stored, chosen for the case;
 * tiled (gpu): this tiling of cl/gemm_tiled.cl chosen for it. */
static void run_case(const batch_case *t, const clt_gemm_tiling *in_place, const char *tiled) {
  const size_t M = (size_t)t->m, N = (size_t)t->n, K = (size_t)t->k;
  set_case("gemm batched %s%s %zux%zux%zu x %d, beta %g, offsets %d/%d/%d, gaps %d/%d/%d%s%s:",
           t->trans_a ? "At" : "A", t->trans_b ? "Bt" : "B", M, N, K, t->count, (double)t->beta,
           t->a_off, t->b_off, t->c_off, t->a_gap, t->b_gap, t->c_gap, tiled ? ", " : "",
           tiled ? tiled : "");
  const double work = (double)t->count * (double)(M * N * K);
  if (t->small_limit > 0 ? skip_above(work, t->small_limit) : skip_large(work)) {
    case_end();
    return;
  }
  const clt_gemm_shape s = {t->trans_a,
                            t->trans_b,
                            M,
                            N,
                            K,
                            t->trans_a ? M : K,
                            (t->trans_b ? K : N) + (size_t)t->ldb_pad,
                            N + (size_t)t->ldc_pad};
  const size_t a_one = t->trans_a ? K * s.lda : M * s.lda;
  const size_t b_one = t->trans_b ? N * s.ldb : K * s.ldb, c_one = M * s.ldc;
  const clt_gemm_batch bt = {(size_t)t->count, a_one + (size_t)t->a_gap, b_one + (size_t)t->b_gap,
                             c_one + (size_t)t->c_gap};
  const size_t na = buffer_floats((size_t)t->a_off, bt.a_stride, t->count, a_one);
  const size_t nb = buffer_floats((size_t)t->b_off, bt.b_stride, t->count, b_one);
  const size_t nc = buffer_floats((size_t)t->c_off, bt.c_stride, t->count, c_one);
  double *a = dnew(na), *b = dnew(nb), *c = dnew(nc);
  rand_fill(a, na, -1, 1);
  rand_fill(b, nb, -1, 1);
  rand_fill(c, nc, -4, 4);
  /* The products' entries of C, in order, and which floats of C they are. */
  double *want = dnew((size_t)t->count * M * N), *got = dnew((size_t)t->count * M * N);
  unsigned char *in_c = hnew(nc);
  mark(in_c, (size_t)t->c_off, bt.c_stride, t->count, M, N, s.ldc);
  for (int z = 0; z < t->count; z++) {
    const double *az = a + t->a_off + z * bt.a_stride, *bz = b + t->b_off + z * bt.b_stride;
    const double *cz = c + t->c_off + z * bt.c_stride;
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++) {
        double sum = t->beta * cz[i * s.ldc + j];
        for (size_t p = 0; p < K; p++)
          sum += az[t->trans_a ? p * s.lda + i : i * s.lda + p] *
                 bz[t->trans_b ? j * s.ldb + p : p * s.ldb + j];
        want[(z * M + i) * N + j] = sum;
      }
  }
  /* The tiling applies to gemm16's columns (N less the tail). */
  clt_gemm_shape blocks = s;
  blocks.n -= N % 16;
  /* A tile past the device's registers (AVX2's float8 code): 6 x 1. */
  clt_gemm_tiling tl = in_place ? *in_place : (clt_gemm_tiling){0, 0, 0, 0, 0, 0};
  if (in_place && !clt_cpu_gemm_tiling_valid(R, &blocks, &tl)) {
    tl.tm = 6;
    tl.nb = 1;
  }
  if (in_place)
    expect("the in-place tiling taken",
           (size_t)(clt_cpu_gemm_choose(R, &blocks, &tl, &E) != CLT_OK), 1);
  if (tiled)
    expect("the tiling taken", (size_t)(R->backend->tilings->choose(R, &s, tiled, &E) != CLT_OK),
           1);
  cl_mem A = dev_new(na), B = dev_new(nb), C1 = dev_new(nc + TAIL), C2 = dev_new(nc + TAIL);
  upload(A, 0, a, na);
  upload(B, 0, b, nb);
  /* C's products' rows only (the gaps keep GARBAGE), from offset 0 up
   * (Oclgrind's uninitialised-value check ignores write offsets). */
  float *cf = hnew((nc + TAIL) * sizeof *cf), *first = hnew((nc + TAIL) * sizeof *first);
  for (size_t i = 0; i < nc + TAIL; i++) cf[i] = i < nc && in_c[i] ? (float)c[i] : GARBAGE;
  upload_bytes(C1, 0, cf, (nc + TAIL) * sizeof *cf);
  upload_bytes(C2, 0, cf, (nc + TAIL) * sizeof *cf);
  int ok = !api_failed(clt_gemm_batched_reserve(R, &s, bt.count, &E), "reserve") &&
           !api_failed(clt_replica_enable_profiling(R, &E), "profiling") &&
           !api_failed(clt_replica_profile_collect(R, &E), "profile");
  const long before = ok ? launches() : 0, transposed = ok ? transposes() : 0;
  ok = ok &&
       !api_failed(clt_gemm_batched(R, &s, &bt, 1.0f, A, (size_t)t->a_off, B, (size_t)t->b_off,
                                    t->beta, C1, (size_t)t->c_off, &E),
                   "batched gemm") &&
       !api_failed(clt_replica_profile_collect(R, &E), "profile");
  if (ok) one_launch(t, in_place, tiled, before, transposed);
  ok = ok && !api_failed(clt_gemm_batched(R, &s, &bt, 1.0f, A, (size_t)t->a_off, B,
                                          (size_t)t->b_off, t->beta, C2, (size_t)t->c_off, &E),
                         "batched gemm again");
  if (in_place) /* back to the default */
    (void)clt_cpu_gemm_choose(R, &blocks, NULL, &E);
  if (tiled) (void)R->backend->tilings->choose(R, &s, NULL, &E);
  if (!ok) {
    case_end();
    return;
  }
  download_f(C1, 0, first, nc + TAIL);
  size_t n = 0, outside = 0;
  for (size_t i = 0; i < nc + TAIL; i++) {
    if (i < nc && in_c[i]) got[n++] = first[i];
    else outside += first[i] != GARBAGE;
  }
  check("C", got, want, n, TOL);
  expect("C's gaps, padding and tail untouched", outside, nc + TAIL - n);
  float *again = hnew((nc + TAIL) * sizeof *again);
  download_f(C2, 0, again, nc + TAIL);
  expect("again, bit for bit", memcmp(again, first, (nc + TAIL) * sizeof *again) != 0, 1);
  case_end();
}

static const batch_case cases[] = {
    /* Small mode's: each kernel and tile (cpu: NB 1, 2, 4) once. */
    {0, 0, 7, 37, 11, 3, 0, 0, 5, 3, 7, 3, 5, 1, 0.0f, 0}, /* gemm16 NB 2 + gemm_tail */
    {0, 0, 5, 64, 9, 2, 3, 5, 1, 0, 9, 0, 17, 2, 1.0f, 0}, /* NB 4, C += (accumulate), ld pads */
    {0, 1, 6, 20, 13, 3, 0, 0, 2, 9, 4, 1, 2, 3, 0.0f, 0}, /* B^T transposed per product */
    {1, 0, 9, 32, 14, 3, 0, 0, 3, 1, 2, 7, 1, 4, 0.0f, 0}, /* A^T, short K: laid out as rows */
    {1, 0, 3, 16, 520, 2, 0, 0, 1, 2, 3, 5, 6, 7, 0.0f, 60000}, /* the A^T kernels */
    {1, 1, 3, 21, 513, 2, 0, 0, 2, 2, 2, 1, 1, 1, 0.0f, 70000}, /* A^T, B^T, a tail */
    {0, 0, 5, 21, 8, 1, 0, 0, 3, 1, 2, 0, 0, 0, 0.0f, 0},       /* a count of 1 */
    /* Larger: more row blocks and chunks, a split K for a count of 1 (cpu),
     * the A^T kernels' 128-column copies, and the Winograd passes' products
     * of the reference CNN's second convolution (F(4x4): 36 positions of
     * 576 tiles, 64 channels, 80 filters; 16 floats between them). */
    {0, 0, 200, 96, 300, 4, 0, 0, 1, 5, 3, 11, 13, 17, 0.0f, 0},
    {1, 0, 9, 64, 2100, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0.0f, 0},
    {1, 0, 40, 261, 600, 3, 0, 0, 2, 3, 1, 5, 2, 9, 0.0f, 0},
    {0, 0, 576, 80, 64, 36, 0, 0, 0, 0, 0, 16, 16, 16, 0.0f, 0},
    {1, 0, 64, 80, 576, 36, 0, 0, 0, 0, 0, 16, 16, 16, 0.0f, 0},
};

/* cpu: B^T read as stored (gemm16's TRANS_B), its tiling chosen: 16 x 16
 * blocks of K in chunks of 128 (the last 19 values one at a time) over NB 5
 * and 2 sub-blocks of 4 rows, chunks of 384 over NB 4 with 5 tail columns read
 * strided and C += the product, and a K shorter than a block; padded rows of B
 * throughout. */
static const batch_case in_place_cases[] = {
    {0, 1, 70, 80, 403, 3, 3, 1, 2, 7, 1, 5, 3, 2, 0.0f, 0},
    {0, 1, 37, 69, 50, 2, 5, 2, 0, 1, 3, 1, 9, 4, 1.0f, 0},
    {0, 1, 6, 20, 13, 3, 1, 0, 2, 9, 4, 1, 2, 3, 0.0f, 0},
};
static const clt_gemm_tiling in_place_tilings[] = {{4, 5, 128, 2, 2, 0},
                                                   {6, 4, 384, 12, 2, 0},
                                                   {6, 1, 384, 12, 2, 0}};

/* gpu: cl/gemm_tiled.cl's tiles, from one work-item's 2 x 2 outputs to 8 x 8
 * (a K tile of 8), each on every case; in small mode (Oclgrind simulates each
 * of a group's 256 work-items) each on a short case of its own transposes:
 * a tail of K, M and N in every tile, C += the product in one. */
static const char *const gpu_tilings[] = {"tiled 32x32 k16 2x2", "tiled 64x64 k16 4x4",
                                          "tiled 32x64 k16 2x4", "tiled 128x128 k8 8x8"};
static const batch_case gpu_small_cases[] = {
    {0, 0, 7, 37, 19, 2, 0, 0, 5, 3, 7, 3, 5, 1, 0.0f, 0},
    {0, 1, 6, 20, 13, 2, 1, 0, 2, 9, 4, 1, 2, 3, 1.0f, 0},
    {1, 0, 9, 33, 14, 2, 0, 2, 3, 1, 2, 7, 1, 4, 0.0f, 0},
    {1, 1, 5, 9, 10, 2, 0, 0, 2, 2, 2, 1, 1, 1, 0.0f, 0},
};

/* gpu: CLBlast's indirect kernel (forced: every GEMM from here on), for which
 * the batch goes one product at a time through the reserved scratch. */
static const batch_case indirect_cases[] = {
    {0, 0, 7, 37, 11, 3, 0, 0, 5, 3, 7, 3, 5, 1, 0.0f, 0},
    {1, 0, 9, 32, 14, 3, 0, 0, 3, 1, 2, 7, 1, 4, 0.0f, 0},
};

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rng_seed(0xba7c4);
  replica_open();
  const int gpu = strcmp(R->backend->name, "gpu") == 0;
  int seen[2][2] = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* Under Oclgrind the gpu backend's batches are CLBlast's one program (rebuilt
     * for each case's fresh replica): one case each of the transposes Winograd
     * runs (A B and A^T B). */
    int *done = &seen[cases[i].trans_a][cases[i].trans_b];
    if (gpu && small_mode() && (*done || cases[i].trans_b)) continue;
    *done = 1;
    run_case(&cases[i], NULL, NULL);
  }
  if (strcmp(R->backend->name, "cpu") == 0)
    for (size_t i = 0; i < sizeof in_place_cases / sizeof in_place_cases[0]; i++)
      run_case(&in_place_cases[i], &in_place_tilings[i], NULL);
  for (int g = 0; gpu && g < 4; g++) {
    if (small_mode()) {
      run_case(&gpu_small_cases[g], NULL, gpu_tilings[g]);
      continue;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      run_case(&cases[i], NULL, gpu_tilings[g]);
  }
  /* The indirect kernels are CLBlast's plain GEMM's, which Oclgrind sees in
   * test_kernels: not again in small mode. */
  if (gpu && !small_mode()) {
    const char *names[] = {"XGEMM_MIN_INDIRECT_SIZE"};
    const size_t values[] = {0};
    if (CLBlastOverrideParameters(R->device.id, "GemmRoutine", CLBlastPrecisionSingle, 1, names,
                                  values) != CLBlastSuccess)
      fatal("forcing CLBlast's indirect GEMM");
    indirect = 1;
    for (size_t i = 0; i < sizeof indirect_cases / sizeof indirect_cases[0]; i++)
      run_case(&indirect_cases[i], NULL, NULL);
  }
  replica_close();
  return summary();
}
