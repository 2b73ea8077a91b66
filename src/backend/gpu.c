/* The gpu backend: cl/'s GPU variants (-DCLT_GPU=1: a work-item per element
 * along the contiguous channel dimension, local-memory tree reductions sized
 * for -DCLT_WG) and CLBlast's GEMM with its tuned database. */
#include <stdio.h>
#include <stdlib.h>

#include <clblast_c.h>

#include "backend.h"

/* What the backend keeps per replica: CLBlast's scratch, reserved once for
 * the largest product (its plain entry point allocates temporaries on every
 * call). */
typedef struct gpu_state {
  cl_mem temp;
  size_t temp_bytes;
} gpu_state;

static gpu_state *state(const clt_replica *r) { return (gpu_state *)r->backend_state; }

static int gpu_attach(clt_replica *r, clt_err *e) {
  if (!(r->backend_state = calloc(1, sizeof(gpu_state))))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a replica");
  snprintf(r->defines, sizeof r->defines, "-DCLT_GPU=1 -DCLT_WG=%zu", r->tile_wg);
  r->group_size = r->tile_wg;
  r->chunk = 1;
  return CLT_OK;
}

static void gpu_release(clt_replica *r) {
  gpu_state *s = state(r);
  if (s && s->temp) clReleaseMemObject(s->temp);
  free(s);
  r->backend_state = NULL;
  /* CLBlast keeps its programs in a process-wide cache that is otherwise
   * released at exit, after the OpenCL runtime may be gone (Oclgrind's is:
   * its heap is corrupted there). Emptying it costs other live replicas only a
   * rebuild, and replicas are destroyed together at the end of a run. */
  CLBlastClearCache();
}

/* ---- launch shapes ------------------------------------------------------------------ */

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* 2-D groups (lc, lr) of `total` work-items: up to 32 consecutive channels (a
 * 128-byte line), fewer when there are fewer, by rows. */
static void split_2d(size_t total, size_t cols, size_t *lc, size_t *lr) {
  size_t c = 1;
  while (c < cols && c < 32 && c < total) c *= 2;
  *lc = c;
  *lr = total / c;
}

static int gpu_rows(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                    size_t cols, size_t rows, size_t rows_per_item, clt_err *e) {
  (void)rows_per_item; /* a work-item per element */
  if (cols == 0 || rows == 0) return CLT_OK;
  size_t lc, lr;
  split_2d(clt_replica_local_pow2(r, k), cols, &lc, &lr);
  size_t global[2] = {round_up(cols, lc), round_up(rows, lr)}, local[2] = {lc, lr};
  return clt_launch(r, k, kname, args, nargs, 2, global, local, e);
}

static int gpu_blocks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t cols, size_t nblocks, clt_err *e) {
  if (cols == 0 || nblocks == 0) return CLT_OK;
  size_t lc, lr;
  split_2d(clt_replica_local_pow2(r, k), cols, &lc, &lr);
  size_t global[2] = {round_up(cols, lc), nblocks * lr}, local[2] = {lc, lr};
  return clt_launch(r, k, kname, args, nargs, 2, global, local, e);
}

static int gpu_columns(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, size_t cols, clt_err *e) {
  return gpu_blocks(r, k, kname, args, nargs, cols, 1, e);
}

static int gpu_positions(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                         int nargs, size_t channels, size_t positions, size_t per_item,
                         clt_err *e) {
  (void)per_item; /* a work-item per (channel, position) */
  return gpu_rows(r, k, kname, args, nargs, channels, positions, 1, e);
}

static int gpu_matrix(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t cols, size_t rows, clt_err *e) {
  return gpu_rows(r, k, kname, args, nargs, cols, rows, 1, e);
}

static int gpu_groups(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t nblocks, clt_err *e) {
  if (nblocks == 0) return CLT_OK;
  size_t local = clt_replica_local_pow2(r, k), global = nblocks * local;
  return clt_launch(r, k, kname, args, nargs, 1, &global, &local, e);
}

static int gpu_single_group(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                            int nargs, clt_err *e) {
  size_t n = clt_replica_local_pow2(r, k);
  return clt_launch(r, k, kname, args, nargs, 1, &n, &n, e);
}

/* A block is a work-group of up to 32 channels (a 128-byte line) by row lanes:
 * blocks x channel groups should fill a large GPU (about 8 groups for each of
 * 132 multiprocessors), while at most MAX_SUM_BLOCKS blocks keep the final
 * pass (a work-group per 32 channels) short. */
#define SUM_GROUPS 1024
#define MAX_SUM_BLOCKS 256

static size_t gpu_sum_block_rows(const clt_replica *r, size_t cols, size_t rows, size_t min_rows) {
  (void)r;
  size_t blocks = SUM_GROUPS / ((cols + 31) / 32);
  if (blocks > MAX_SUM_BLOCKS) blocks = MAX_SUM_BLOCKS;
  if (blocks < 1) blocks = 1;
  const size_t per = (rows + blocks - 1) / blocks;
  return per > min_rows ? per : min_rows;
}

/* ---- CLBlast's GEMM ---------------------------------------------------------------- */

static CLBlastTranspose tr(int t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }

static int clblast_fail(clt_replica *r, const clt_gemm_shape *s, CLBlastStatusCode rc, clt_err *e) {
  return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu%s%s: %s", r->device.index,
                  r->device.name, s->m, s->n, s->k, s->trans_a ? " A^T" : "",
                  s->trans_b ? " B^T" : "", clt_status_name(rc));
}

static int gpu_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0) return CLT_OK;
  size_t bytes = 0;
  CLBlastStatusCode rc = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, tr(s->trans_a),
                                                    tr(s->trans_b), s->m, s->n, s->k, 0, s->lda, 0,
                                                    s->ldb, 0, s->ldc, &r->queue, &bytes);
  if (rc != CLBlastSuccess) return clblast_fail(r, s, rc, e);
  gpu_state *st = state(r);
  if (bytes <= st->temp_bytes) return CLT_OK;
  if (st->temp) {
    clReleaseMemObject(st->temp);
    r->allocated_bytes -= st->temp_bytes;
    st->temp = NULL;
    st->temp_bytes = 0;
  }
  int status = clt_replica_alloc(r, bytes, "GEMM scratch", &st->temp, e);
  if (status == CLT_OK) st->temp_bytes = bytes;
  return status;
}

static int gpu_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
                    cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  const gpu_state *st = state(r);
  CLBlastStatusCode rc;
  if (st->temp) {
    rc = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m,
                                    s->n, s->k, alpha, a, a_off, s->lda, b, b_off, s->ldb, beta, c,
                                    c_off, s->ldc, &r->queue, clt_replica_profile_event(r),
                                    st->temp);
  } else {
    /* Shapes whose kernels need no scratch (CLBlast's direct path). */
    rc = CLBlastSgemm(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m, s->n, s->k,
                      alpha, a, a_off, s->lda, b, b_off, s->ldb, beta, c, c_off, s->ldc, &r->queue,
                      clt_replica_profile_event(r));
  }
  if (rc != CLBlastSuccess) return clblast_fail(r, s, rc, e);
  if (r->profile) {
    char name[48];
    snprintf(name, sizeof name, "gemm %zux%zux%zu%s%s", s->m, s->n, s->k, s->trans_a ? " At" : "",
             s->trans_b ? " Bt" : "");
    clt_replica_profile_commit(r, name);
  }
  return CLT_OK;
}

/* ---- strided batches (CLBlast's batched GEMM where it allocates nothing) ---- */

/* Whether CLBlast runs `count` products of shape s with its direct kernel (one
 * launch over the batch, no temporaries): its batched routine has no scratch
 * argument and its indirect path allocates padded copies of the whole batch on
 * every call (and reads operands that need no copy at batch * rows * columns,
 * not at the strides). The direct kernel is what the temporary size reports 0
 * for even with an offset operand, which the indirect path copies. */
static int batched_direct(clt_replica *r, const clt_gemm_shape *s, size_t count, int *out,
                          clt_err *e) {
  *out = 0;
  if (count < 2) return CLT_OK;
  size_t bytes = 0;
  CLBlastStatusCode rc = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, tr(s->trans_a),
                                                    tr(s->trans_b), s->m, s->n, s->k, 1, s->lda, 0,
                                                    s->ldb, 0, s->ldc, &r->queue, &bytes);
  if (rc != CLBlastSuccess) return clblast_fail(r, s, rc, e);
  *out = bytes == 0;
  return CLT_OK;
}

/* The scratch of one product (the products that go one at a time), and with
 * the direct kernel CLBlast's batched program, built now by a batch of two 1 x 1
 * products on a buffer of its own rather than in the first step. */
static int gpu_gemm_batched_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count,
                                    clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0 || count == 0) return CLT_OK;
  int direct = 0, status = gpu_gemm_reserve(r, s, e);
  if (!status) status = batched_direct(r, s, count, &direct, e);
  if (status || !direct) return status;
  cl_mem t;
  const size_t bytes = 6 * sizeof(float);
  if ((status = clt_replica_alloc(r, bytes, "batched GEMM build", &t, e))) return status;
  CLBlastStatusCode rc = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                                    CLBlastTransposeNo, 1, 1, 1, 1.0f, t, 0, 1, 1,
                                                    t, 2, 1, 1, 0.0f, t, 4, 1, 1, 2, &r->queue,
                                                    NULL);
  clReleaseMemObject(t);
  r->allocated_bytes -= bytes;
  if (rc != CLBlastSuccess) {
    const clt_gemm_shape one = {0, 0, 1, 1, 1, 1, 1, 1};
    return clblast_fail(r, &one, rc, e);
  }
  return CLT_OK;
}

static int gpu_gemm_batched(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt,
                            float alpha, cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta,
                            cl_mem c, size_t c_off, clt_err *e) {
  int direct = 0, status = batched_direct(r, s, bt->count, &direct, e);
  if (status) return status;
  if (!direct) {
    /* One product at a time through the reserved scratch. */
    for (size_t i = 0; i < bt->count && !status; i++)
      status = gpu_gemm(r, s, alpha, a, a_off + i * bt->a_stride, b, b_off + i * bt->b_stride, beta,
                        c, c_off + i * bt->c_stride, e);
    return status;
  }
  CLBlastStatusCode rc = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, tr(s->trans_a),
                                                    tr(s->trans_b), s->m, s->n, s->k, alpha, a,
                                                    a_off, s->lda, bt->a_stride, b, b_off, s->ldb,
                                                    bt->b_stride, beta, c, c_off, s->ldc,
                                                    bt->c_stride, bt->count, &r->queue,
                                                    clt_replica_profile_event(r));
  if (rc != CLBlastSuccess) return clblast_fail(r, s, rc, e);
  if (r->profile) {
    char name[56];
    snprintf(name, sizeof name, "gemm %zux%zux%zu%s%s batched", s->m, s->n, s->k,
             s->trans_a ? " At" : "", s->trans_b ? " Bt" : "");
    clt_replica_profile_commit(r, name);
  }
  return CLT_OK;
}

/* The product, then cl/bias.cl's bias_act over C for the bias and ReLU. */
static int gpu_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off,
                             cl_mem b, size_t b_off, cl_mem c, size_t c_off, cl_mem bias,
                             size_t bias_offset, int relu, clt_err *e) {
  int status = gpu_gemm(r, s, 1.0f, a, a_off, b, b_off, 0.0f, c, c_off, e);
  if (status) return status;
  cl_kernel k;
  if ((status = clt_replica_kernel(r, "bias.cl", "", "bias_act", &k, e))) return status;
  /* bias_act works on C from its start: the layers' outputs begin at offset 0. */
  if (c_off != 0 || s->ldc != s->n) return clt_fail(e, CLT_ERR_INTERNAL, "bias_act on a strided C");
  int off = (int)bias_offset, rows = (int)s->m, cols = (int)s->n;
  clt_karg args[] = {CLT_ARG(c),    CLT_ARG(bias), CLT_ARG(off),
                     CLT_ARG(rows), CLT_ARG(cols), CLT_ARG(relu)};
  return gpu_matrix(r, k, "bias_act", args, 6, s->n, s->m, e);
}

static const char *const gpu_sources[] = {NULL};

const clt_backend clt_backend_gpu = {
    .name = "gpu",
    .summary = "gpu kernels (coalesced, local-memory reductions; GEMM: CLBlast)",
    .sources = gpu_sources,
    .fuses_conv_pool = 0,
    .winograd = 1,
    .attach = gpu_attach,
    .release = gpu_release,
    .launch_rows = gpu_rows,
    .launch_row_chunks = gpu_rows,
    .launch_blocks = gpu_blocks,
    .launch_row_blocks = gpu_blocks,
    .launch_columns = gpu_columns,
    .launch_positions = gpu_positions,
    .launch_matrix = gpu_matrix,
    .launch_elements = gpu_matrix,
    .launch_groups = gpu_groups,
    .launch_single_group = gpu_single_group,
    .sum_block_rows = gpu_sum_block_rows,
    .gemm_reserve = gpu_gemm_reserve,
    .gemm = gpu_gemm,
    .gemm_bias_act = gpu_gemm_bias_act,
    .gemm_batched_reserve = gpu_gemm_batched_reserve,
    .gemm_batched = gpu_gemm_batched,
};
