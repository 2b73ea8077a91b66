/* The gpu backend: cl/'s GPU variants (-DCLT_GPU=1: a work-item per element
 * along the contiguous channel dimension, local-memory tree reductions sized
 * for -DCLT_WG) and CLBlast's GEMM with its tuned database, or, per product
 * shape where the GEMM tuner chose one, a tiling of cltrain's own GEMM
 * (cl/gemm_tiled.cl). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "backend.h"

/* A tiling of cl/gemm_tiled.cl: a work-group's tile of C (tsm x tsn, tsk of
 * K at a time through local memory) and each work-item's outputs (wptm x
 * wptn). */
typedef struct gpu_tiling {
  int tsm, tsn, tsk, wptm, wptn;
} gpu_tiling;

/* What the backend keeps per replica: CLBlast's scratch, reserved once for
 * the largest product (its plain entry point allocates temporaries on every
 * call); the products' shapes reserved since the tuner last cleared them, and
 * the tilings chosen for shapes (the others run CLBlast). */
typedef struct gpu_state {
  cl_mem temp;
  size_t temp_bytes;
  clt_gemm_shape_list noted;
  int ntilings;
  clt_gemm_shape tiled[CLT_GEMM_MAX_SHAPES];
  gpu_tiling tilings[CLT_GEMM_MAX_SHAPES];
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

/* ---- cltrain's tiled GEMM (cl/gemm_tiled.cl) ------------------------------------------ */

/* Local memory a tile may take: half of the 32 KiB every OpenCL device has. */
#define TILE_LOCAL_BYTES 16384
/* Accumulators a work-item may hold, and its work-group's size. */
#define TILE_MAX_OUTPUTS 64
#define TILE_MAX_GROUP 256

static const gpu_tiling *tiling_chosen(const clt_replica *r, const clt_gemm_shape *s) {
  const gpu_state *st = state(r);
  const int at = st ? clt_gemm_table_find(st->tiled, st->ntilings, s) : -1;
  return at < 0 ? NULL : &st->tilings[at];
}

static void tiling_name(const gpu_tiling *t, char *out, size_t size) {
  snprintf(out, size, "tiled %dx%d k%d %dx%d", t->tsm, t->tsn, t->tsk, t->wptm, t->wptn);
}

static int tiling_parse(const char *text, gpu_tiling *t) {
  char end = 0;
  return sscanf(text, "tiled %dx%d k%d %dx%d%c", &t->tsm, &t->tsn, &t->tsk, &t->wptm, &t->wptn,
                &end) == 5
             ? 0
             : -1;
}

static int tiling_valid(const clt_replica *r, const gpu_tiling *t) {
  if (t->tsm < 1 || t->tsn < 1 || t->tsk < 1 || t->wptm < 1 || t->wptn < 1 || t->tsm > 256 ||
      t->tsn > 256 || t->tsk > 64 || t->tsm % t->wptm || t->tsn % t->wptn ||
      t->wptm * t->wptn > TILE_MAX_OUTPUTS)
    return 0;
  const size_t group = (size_t)(t->tsm / t->wptm) * (size_t)(t->tsn / t->wptn);
  const size_t local = (size_t)t->tsk * (size_t)(t->tsm + t->tsn + 2) * sizeof(float);
  return group <= TILE_MAX_GROUP && group <= r->max_work_group && local <= TILE_LOCAL_BYTES;
}

/* The tiling's build options, for the shape's transposes. */
static void tiling_options(const gpu_tiling *t, const clt_gemm_shape *s, char *out, size_t size) {
  snprintf(out, size, "-DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d -DWPTN=%d -DTRANS_A=%d -DTRANS_B=%d",
           t->tsm, t->tsn, t->tsk, t->wptm, t->wptn, s->trans_a, s->trans_b);
}

static int tiled_kernel(clt_replica *r, const gpu_tiling *t, const clt_gemm_shape *s, cl_kernel *k,
                        clt_err *e) {
  char options[160];
  tiling_options(t, s, options, sizeof options);
  return clt_replica_kernel(r, "gemm_tiled.cl", options, "gemm_tiled", k, e);
}

/* Whether the kernel's int offsets reach past each operand's last row for
 * `count` products of s from these offsets (bt NULL: one); a product that does
 * not fit (operands past 8 GiB) runs CLBlast's GEMM whatever its tiling. */
static int fits_int(const clt_gemm_shape *s, const clt_gemm_batch *bt, size_t a_off, size_t b_off,
                    size_t c_off) {
  const size_t before = bt ? bt->count - 1 : 0;
  const size_t ends[3] = {a_off + before * (bt ? bt->a_stride : 0) +
                              (s->trans_a ? s->k : s->m) * s->lda,
                          b_off + before * (bt ? bt->b_stride : 0) +
                              (s->trans_b ? s->n : s->k) * s->ldb,
                          c_off + before * (bt ? bt->c_stride : 0) + s->m * s->ldc};
  return ends[0] <= (size_t)INT32_MAX && ends[1] <= (size_t)INT32_MAX &&
         ends[2] <= (size_t)INT32_MAX;
}

/* `count` products of shape s (strided by bt; NULL: one) with tiling t. */
static int tiled_gemm(clt_replica *r, const gpu_tiling *t, const clt_gemm_shape *s,
                      const clt_gemm_batch *bt, float alpha, cl_mem a, size_t a_off, cl_mem b,
                      size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  const size_t count = bt ? bt->count : 1;
  const size_t strides[3] = {bt ? bt->a_stride : 0, bt ? bt->b_stride : 0, bt ? bt->c_stride : 0};
  cl_kernel k;
  int status = tiled_kernel(r, t, s, &k, e);
  if (status) return status;
  int m = (int)s->m, n = (int)s->n, kk = (int)s->k, lda = (int)s->lda, ldb = (int)s->ldb,
      ldc = (int)s->ldc;
  int ao = (int)a_off, bo = (int)b_off, co = (int)c_off, as = (int)strides[0], bs = (int)strides[1],
      cs = (int)strides[2];
  clt_karg args[] = {CLT_ARG(m),   CLT_ARG(n),   CLT_ARG(kk),   CLT_ARG(alpha), CLT_ARG(a),
                     CLT_ARG(ao),  CLT_ARG(lda), CLT_ARG(as),   CLT_ARG(b),     CLT_ARG(bo),
                     CLT_ARG(ldb), CLT_ARG(bs),  CLT_ARG(beta), CLT_ARG(c),     CLT_ARG(co),
                     CLT_ARG(ldc), CLT_ARG(cs)};
  const size_t lx = (size_t)(t->tsn / t->wptn), ly = (size_t)(t->tsm / t->wptm);
  const size_t global[3] = {(s->n + (size_t)t->tsn - 1) / (size_t)t->tsn * lx,
                            (s->m + (size_t)t->tsm - 1) / (size_t)t->tsm * ly, count};
  const size_t local[3] = {lx, ly, 1};
  char kname[72];
  snprintf(kname, sizeof kname, "gemm_tiled %zux%zux%zu%s%s%s", s->m, s->n, s->k,
           s->trans_a ? " At" : "", s->trans_b ? " Bt" : "", bt ? " batched" : "");
  return clt_launch(r, k, kname, args, 17, 3, global, local, e);
}

/* ---- CLBlast's GEMM ---------------------------------------------------------------- */

static CLBlastTranspose tr(int t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }

static int clblast_fail(clt_replica *r, const clt_gemm_shape *s, CLBlastStatusCode rc, clt_err *e) {
  return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu%s%s: %s", r->device.index,
                  r->device.name, s->m, s->n, s->k, s->trans_a ? " A^T" : "",
                  s->trans_b ? " B^T" : "", clt_status_name(rc));
}

/* CLBlast's scratch for `count` products of s (kept whatever the tiling: the
 * tuner switches back and forth), and the kernel of the tiling chosen for s. */
static int reserve(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0) return CLT_OK;
  clt_gemm_list_note(&state(r)->noted, s, count);
  const gpu_tiling *t = tiling_chosen(r, s);
  cl_kernel k;
  int status = t ? tiled_kernel(r, t, s, &k, e) : CLT_OK;
  if (status) return status;
  /* A tile's group the compiled kernel cannot take (registers): refused here
   * rather than at its first launch. */
  size_t most = 0;
  const size_t group = t ? (size_t)(t->tsm / t->wptm) * (size_t)(t->tsn / t->wptn) : 0;
  if (t && (clGetKernelWorkGroupInfo(k, r->device.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most,
                                     NULL) != CL_SUCCESS ||
            most < group)) {
    char name[CLT_GEMM_TILING_NAME];
    tiling_name(t, name, sizeof name);
    return clt_fail(e, CLT_ERR_ARG,
                    "device %d (%s): GEMM tiling %s needs work-groups of %zu, its kernel takes %zu",
                    r->device.index, r->device.name, name, group, most);
  }
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
  status = clt_replica_alloc(r, bytes, "GEMM scratch", &st->temp, e);
  if (status == CLT_OK) st->temp_bytes = bytes;
  return status;
}

static int gpu_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  return reserve(r, s, 1, e);
}

static int gpu_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
                    cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  const gpu_tiling *t = tiling_chosen(r, s);
  if (t && fits_int(s, NULL, a_off, b_off, c_off))
    return tiled_gemm(r, t, s, NULL, alpha, a, a_off, b, b_off, beta, c, c_off, e);
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
  int direct = 0, status = reserve(r, s, count, e);
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
  if (bt->count == 0 || s->m == 0 || s->n == 0) return CLT_OK;
  const gpu_tiling *t = tiling_chosen(r, s);
  if (t && fits_int(s, bt, a_off, b_off, c_off))
    return tiled_gemm(r, t, s, bt, alpha, a, a_off, b, b_off, beta, c, c_off, e);
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

/* ---- the tilings' table for the GEMM tuner (backend.h's clt_gemm_tilings) ---- */

static int gpu_shapes(const clt_replica *r, clt_gemm_shape *out, int *uses, int max) {
  return clt_gemm_list_get(&state(r)->noted, out, uses, max);
}

static void gpu_shapes_clear(clt_replica *r) { state(r)->noted.n = 0; }

static int gpu_tunable(const clt_gemm_shape *s) { return s->m > 0 && s->n > 0 && s->k > 0; }

/* Tiles from small to large: (tsm, tsn, tsk, wptm, wptn). Those much larger
 * than the product are left out. */
static const gpu_tiling CANDIDATES[] = {
    {32, 32, 16, 2, 2},  {64, 64, 16, 4, 4},  {32, 64, 16, 2, 4},
    {64, 128, 16, 4, 8}, {128, 64, 16, 8, 4}, {128, 128, 8, 8, 8},
};

static int gpu_candidates(const clt_replica *r, const clt_gemm_shape *s,
                          char (*out)[CLT_GEMM_TILING_NAME]) {
  int n = 0;
  for (size_t i = 0; i < sizeof CANDIDATES / sizeof CANDIDATES[0]; i++) {
    const gpu_tiling *t = &CANDIDATES[i];
    if (n == CLT_GEMM_MAX_TILINGS - 1) break;
    if (i > 0 && ((size_t)t->tsm > 2 * s->m || (size_t)t->tsn > 2 * s->n)) continue;
    if (tiling_valid(r, t)) tiling_name(t, out[n++], CLT_GEMM_TILING_NAME);
  }
  return n;
}

static int gpu_valid(const clt_replica *r, const clt_gemm_shape *s, const char *name) {
  (void)s; /* the kernel guards every edge */
  gpu_tiling t;
  return tiling_parse(name, &t) == 0 && tiling_valid(r, &t);
}

static int gpu_choose(clt_replica *r, const clt_gemm_shape *s, const char *name, clt_err *e) {
  gpu_state *st = state(r);
  int at = clt_gemm_table_find(st->tiled, st->ntilings, s);
  if (!name) {
    if (at >= 0) {
      st->ntilings--;
      st->tiled[at] = st->tiled[st->ntilings];
      st->tilings[at] = st->tilings[st->ntilings];
    }
    return CLT_OK;
  }
  gpu_tiling t;
  if (tiling_parse(name, &t) != 0 || !tiling_valid(r, &t))
    return clt_fail(e, CLT_ERR_ARG, "device %d (%s): \"%s\" is not a GEMM tiling it can run",
                    r->device.index, r->device.name, name);
  if (at < 0 && st->ntilings == CLT_GEMM_MAX_SHAPES)
    return clt_fail(e, CLT_ERR_INTERNAL, "more than %d GEMM tilings chosen", CLT_GEMM_MAX_SHAPES);
  if (at < 0) at = st->ntilings++;
  st->tiled[at] = *s;
  st->tilings[at] = t;
  return CLT_OK;
}

static int gpu_chosen(const clt_replica *r, clt_gemm_shape *shapes,
                      char (*names)[CLT_GEMM_TILING_NAME], int max) {
  const gpu_state *st = state(r);
  int n = 0;
  for (; n < st->ntilings && n < max; n++) {
    shapes[n] = st->tiled[n];
    tiling_name(&st->tilings[n], names[n], CLT_GEMM_TILING_NAME);
  }
  return n;
}

static const clt_gemm_tilings gpu_tilings = {
    .shapes = gpu_shapes,
    .shapes_clear = gpu_shapes_clear,
    .tunable = gpu_tunable,
    .candidates = gpu_candidates,
    .valid = gpu_valid,
    .choose = gpu_choose,
    .chosen = gpu_chosen,
};

static const char *const gpu_sources[] = {NULL};

const clt_backend clt_backend_gpu = {
    .name = "gpu",
    .summary = "gpu kernels (coalesced, local-memory reductions; GEMM: CLBlast or tuned tiles)",
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
    .tilings = &gpu_tilings,
};
