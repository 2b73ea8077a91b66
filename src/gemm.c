#include "gemm.h"

#include <stdio.h>
#include <clblast_c.h>

static CLBlastTranspose tr(int t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }

/* CPU devices run cl/gemm.cl when N is a multiple of 16: CLBlast's default
 * kernels reach 10-22 GFLOP/s on PoCL, explicit float16 ones several times that.
 * GPUs keep CLBlast's tuned kernels. */
static int use_own(const clt_replica *r, const clt_gemm_shape *s) {
  return r->flavor == CLT_KERNELS_CPU && s->n % 16 == 0;
}

/* Work-item block: RB sub-blocks of TM rows by NB 16-wide column blocks (NB
 * divides N/16), K taken in chunks of KC so the B chunk (KC x 16NB floats) is
 * reused from cache by every sub-block. Measured on PoCL with AVX-512
 * (tests/bench/bench_gemm, the CNN's and ResNet50's shapes): TM=6, NB=4 (24
 * float16 accumulators, with the B vectors and the broadcast 29 of the 32
 * registers) beat 8x2, 8x3, 10x2, 12x2, 14x2, 5x5 and 4x4-6 over the set; RB=2
 * with KC=256 beat one sub-block without chunks by 20-30% overall, RB=4 or
 * KC=384-512 by less. N/16 with no divisor up to 4 (N=80, 2000: 5 blocks)
 * takes NB=5 with TM=4. */
static int largest_divisor(size_t blocks, int limit) {
  for (int d = limit; d > 1; d--) {
    if (blocks % (size_t)d == 0) return d;
  }
  return 1;
}

enum { OWN_RB = 2, OWN_KC = 256 };

static void own_blocking(const clt_gemm_shape *s, int *tm, int *nb) {
  const size_t blocks = s->n / 16;
  *nb = largest_divisor(blocks, 4);
  *tm = 6;
  if (*nb == 1 && blocks % 5 == 0) {
    *nb = 5;
    *tm = 4;
  }
}

/* K is split when the output has too few work-items to keep a device's cores
 * busy and the sums are long (the first layer's weight gradient: 9 x 64
 * outputs, K = batch x 676); chunks of at least 512 keep the extra pass small. */
static int own_splits(const clt_gemm_shape *s) {
  int tm, nb;
  own_blocking(s, &tm, &nb);
  const size_t rows = (size_t)tm * OWN_RB;
  const size_t items = s->n / (16 * (size_t)nb) * ((s->m + rows - 1) / rows);
  if (items >= 64 || s->k < 1024 || s->trans_b || s->ldc != s->n) return 1;
  size_t splits = s->k / 512;
  return (int)(splits > 16 ? 16 : splits);
}

static void own_options(const clt_gemm_shape *s, char *buf, size_t size) {
  int tm, nb;
  own_blocking(s, &tm, &nb);
  snprintf(buf, size, "-DTRANS_A=%d -DTM=%d -DNB=%d -DRB=%d -DKC=%d", s->trans_a, tm, nb, OWN_RB,
           OWN_KC);
}

/* bias_offset < 0: no bias. */
static int own_gemm(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                    size_t b_off, cl_mem c, size_t c_off, cl_mem bias, long bias_offset, int relu,
                    clt_err *e) {
  char options[96];
  own_options(s, options, sizeof options);
  cl_kernel k;
  int status = clt_replica_kernel(r, "gemm.cl", options, "gemm16", &k, e);
  if (status) return status;
  int m = (int)s->m, n = (int)s->n, kk = (int)s->k, lda = (int)s->lda, ldb = (int)s->ldb,
      ldc = (int)s->ldc, ao = (int)a_off, bo = (int)b_off, co = (int)c_off;
  if (s->trans_b) {
    /* B is [N][K]: lay it out as [K][N] in the scratch first (weights: small). */
    cl_kernel t;
    if ((status = clt_replica_kernel(r, "gemm.cl", options, "transpose", &t, e))) return status;
    clt_karg targs[] = {CLT_ARG(b),  CLT_ARG(bo), CLT_ARG(ldb),
                        CLT_ARG(kk), CLT_ARG(n),  CLT_ARG(r->gemm_temp)};
    size_t tglobal[2] = {(s->k + 15) / 16, s->n / 16};
    if ((status = clt_launch(r, t, "gemm transpose", targs, 6, 2, tglobal, NULL, e))) return status;
    b = r->gemm_temp;
    bo = 0;
    ldb = n;
  }
  int tm, nb;
  own_blocking(s, &tm, &nb);
  int bias_off = (int)bias_offset;
  if (!bias) bias = c; /* any valid buffer: not read when bias_off < 0 */
  /* An epilogue applies to whole sums only: no split with one. */
  int splits = bias_offset >= 0 || relu ? 1 : own_splits(s);
  /* The scratch was sized at the largest batch, where this shape may not have
   * split (more rows, more blocks): never split past what it holds. */
  while (splits > 1 && (size_t)splits * s->m * s->n * sizeof(float) > r->gemm_temp_bytes) splits--;
  int k_chunk = (kk + splits - 1) / splits, c_split = m * n;
  cl_mem out = c;
  if (splits > 1) { /* partial products go to the scratch, summed below */
    out = r->gemm_temp;
    co = 0;
  }
  clt_karg args[] = {CLT_ARG(m),      CLT_ARG(n),        CLT_ARG(kk),   CLT_ARG(a),
                     CLT_ARG(ao),     CLT_ARG(lda),      CLT_ARG(b),    CLT_ARG(bo),
                     CLT_ARG(ldb),    CLT_ARG(out),      CLT_ARG(co),   CLT_ARG(ldc),
                     CLT_ARG(bias),   CLT_ARG(bias_off), CLT_ARG(relu), CLT_ARG(k_chunk),
                     CLT_ARG(c_split)};
  char name[48];
  snprintf(name, sizeof name, "gemm16 %zux%zux%zu%s%s", s->m, s->n, s->k, s->trans_a ? " At" : "",
           s->trans_b ? " Bt" : "");
  /* One work-item per group: its float16 code is the vector code; PoCL gains
   * nothing from grouping, and large groups measured slower. */
  const size_t rows = (size_t)tm * OWN_RB;
  size_t global[3] = {s->n / (16 * (size_t)nb), (s->m + rows - 1) / rows, (size_t)splits};
  size_t local[3] = {1, 1, 1};
  if ((status = clt_launch(r, k, name, args, 17, 3, global, local, e))) return status;
  if (splits == 1) return CLT_OK;
  cl_kernel sum;
  if ((status = clt_replica_kernel(r, "gemm.cl", options, "sum_splits", &sum, e))) return status;
  int count = m * n, final_off = (int)c_off;
  clt_karg sargs[] = {CLT_ARG(r->gemm_temp), CLT_ARG(splits), CLT_ARG(c_split),
                      CLT_ARG(count),        CLT_ARG(c),      CLT_ARG(final_off)};
  return clt_launch1d(r, sum, "gemm split-K sum", sargs, 6, (size_t)count, e);
}

/* Grows the scratch buffer to at least `bytes`. */
static int grow_temp(clt_replica *r, size_t bytes, clt_err *e) {
  if (bytes <= r->gemm_temp_bytes) return CLT_OK;
  if (r->gemm_temp) {
    clReleaseMemObject(r->gemm_temp);
    r->allocated_bytes -= r->gemm_temp_bytes;
    r->gemm_temp = NULL;
    r->gemm_temp_bytes = 0;
  }
  int status = clt_replica_alloc(r, bytes, "GEMM scratch", &r->gemm_temp, e);
  if (status == CLT_OK) r->gemm_temp_bytes = bytes;
  return status;
}

int clt_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0) return CLT_OK;
  if (use_own(r, s)) {
    char options[96];
    cl_kernel k;
    own_options(s, options, sizeof options);
    int status = clt_replica_kernel(r, "gemm.cl", options, "gemm16", &k, e);
    if (!status && s->trans_b)
      status = clt_replica_kernel(r, "gemm.cl", options, "transpose", &k, e);
    if (!status && s->trans_b) status = grow_temp(r, s->k * s->n * sizeof(float), e);
    if (!status && own_splits(s) > 1) {
      status = clt_replica_kernel(r, "gemm.cl", options, "sum_splits", &k, e);
      if (!status) status = grow_temp(r, (size_t)own_splits(s) * s->m * s->n * sizeof(float), e);
    }
    return status;
  }
  size_t bytes = 0;
  CLBlastStatusCode rc = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, tr(s->trans_a),
                                                    tr(s->trans_b), s->m, s->n, s->k, 0, s->lda, 0,
                                                    s->ldb, 0, s->ldc, &r->queue, &bytes);
  if (rc != CLBlastSuccess) {
    return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu: %s", r->device.index,
                    r->device.name, s->m, s->n, s->k, clt_status_name(rc));
  }
  return grow_temp(r, bytes, e);
}

int clt_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off, cl_mem b,
             size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  if (s->k == 0) return clt_fail(e, CLT_ERR_INTERNAL, "GEMM with k = 0");
  if (alpha == 1.0f && beta == 0.0f && use_own(r, s)) {
    return own_gemm(r, s, a, a_off, b, b_off, c, c_off, NULL, -1, 0, e);
  }
  CLBlastStatusCode rc;
  if (r->gemm_temp) {
    rc = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m,
                                    s->n, s->k, alpha, a, a_off, s->lda, b, b_off, s->ldb, beta, c,
                                    c_off, s->ldc, &r->queue, clt_replica_profile_event(r),
                                    r->gemm_temp);
  } else {
    /* Shapes whose kernels need no scratch (CLBlast's direct path). */
    rc = CLBlastSgemm(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m, s->n, s->k,
                      alpha, a, a_off, s->lda, b, b_off, s->ldb, beta, c, c_off, s->ldc, &r->queue,
                      clt_replica_profile_event(r));
  }
  if (rc == CLBlastSuccess && r->profile) {
    char name[48];
    snprintf(name, sizeof name, "gemm %zux%zux%zu%s%s", s->m, s->n, s->k, s->trans_a ? " At" : "",
             s->trans_b ? " Bt" : "");
    clt_replica_profile_commit(r, name);
  }
  if (rc != CLBlastSuccess) {
    return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu%s%s: %s", r->device.index,
                    r->device.name, s->m, s->n, s->k, s->trans_a ? " A^T" : "",
                    s->trans_b ? " B^T" : "", clt_status_name(rc));
  }
  return CLT_OK;
}

int clt_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                      size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                      int relu, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  if (use_own(r, s))
    return own_gemm(r, s, a, a_off, b, b_off, c, c_off, bias, (long)bias_offset, relu, e);
  int status = clt_gemm(r, s, 1.0f, a, a_off, b, b_off, 0.0f, c, c_off, e);
  if (status) return status;
  cl_kernel k;
  if ((status = clt_replica_kernel(r, "conv.cl", "", "bias_act", &k, e))) return status;
  /* bias_act works on C from its start: the layers' outputs begin at offset 0. */
  if (c_off != 0 || s->ldc != s->n) return clt_fail(e, CLT_ERR_INTERNAL, "bias_act on a strided C");
  int off = (int)bias_offset, rows = (int)s->m, cols = (int)s->n;
  clt_karg args[] = {CLT_ARG(c),    CLT_ARG(bias), CLT_ARG(off),
                     CLT_ARG(rows), CLT_ARG(cols), CLT_ARG(relu)};
  /* CPU: a work-item per float; GPU: (n, m), the row from the range (no modulo). */
  if (r->flavor == CLT_KERNELS_GPU)
    return clt_launch_rows(r, k, "bias_act", args, 6, s->n, s->m, 1, e);
  return clt_launch1d(r, k, "bias_act", args, 6, s->m * s->n, e);
}
