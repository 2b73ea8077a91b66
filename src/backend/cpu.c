/* The cpu backend: cl/'s CPU variants (-DCLT_GPU=0: a work-item per row or
 * chunk of 8 channels with explicit float8 vectors, since PoCL does not
 * vectorise across work-items) and cltrain's own GEMM (cpu_gemm.c). */
#include <stdio.h>
#include <stdlib.h>

#include "cpu.h"

/* Channels a work-item of the long row passes takes (-DCLT_CPU_BLOCK_COLS):
 * a block's rows are read that many floats at a time, runs the prefetchers
 * follow. */
#define CPU_BLOCK_COLS 256

/* Work-items per 1-D group (PoCL's vector code is per work-item; larger
 * groups gain nothing). */
#define CPU_GROUP 64

/* Work-items across the channels in the groups of row passes (each takes 8
 * channels): the rest of CPU_GROUP goes down the rows. */
#define ROW_GROUP_COLS 8

static int cpu_attach(clt_replica *r, clt_err *e) {
  if (!(r->backend_state = calloc(1, sizeof(clt_cpu_state))))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a replica");
  snprintf(r->defines, sizeof r->defines, "-DCLT_GPU=0 -DCLT_WG=%zu -DCLT_CPU_BLOCK_COLS=%d",
           r->tile_wg, CPU_BLOCK_COLS);
  r->group_size = CPU_GROUP;
  r->chunk = 8;
  return CLT_OK;
}

static void cpu_release(clt_replica *r) {
  clt_cpu_state *s = cpu_state(r);
  if (s && s->temp) clReleaseMemObject(s->temp);
  if (s && s->zeros) clReleaseMemObject(s->zeros);
  free(s);
  r->backend_state = NULL;
}

/* ---- launch shapes ------------------------------------------------------------------ */

static int cpu_rows(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                    size_t cols, size_t rows, size_t rows_per_item, clt_err *e) {
  if (cols == 0 || rows == 0) return CLT_OK;
  const size_t n0 = (cols + 7) / 8, n1 = (rows + rows_per_item - 1) / rows_per_item;
  /* One group shape for every width that allows it: PoCL compiles a kernel
   * again for each group shape it is launched with, and a shape per width
   * built a model's Winograd kernels once per stage. */
  if (n0 % ROW_GROUP_COLS != 0 || clt_replica_local_1d(r, k) < CPU_GROUP)
    return clt_launch2d(r, k, kname, args, nargs, n0, n1, e);
  const size_t l1 = CPU_GROUP / ROW_GROUP_COLS;
  size_t global[2] = {n0, (n1 + l1 - 1) / l1 * l1}, local[2] = {ROW_GROUP_COLS, l1};
  return clt_launch(r, k, kname, args, nargs, 2, global, local, e);
}

static int cpu_blocks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t cols, size_t nblocks, clt_err *e) {
  if (cols == 0 || nblocks == 0) return CLT_OK;
  return clt_launch2d(r, k, kname, args, nargs, (cols + 7) / 8, nblocks, e);
}

static int cpu_row_blocks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                          int nargs, size_t cols, size_t nblocks, clt_err *e) {
  if (cols == 0 || nblocks == 0) return CLT_OK;
  /* Groups of one: a block is long work, and wider groups of few-column
   * layers left one core most of the blocks. */
  size_t global[2] = {(cols + CPU_BLOCK_COLS - 1) / CPU_BLOCK_COLS, nblocks};
  size_t local[2] = {1, 1};
  return clt_launch(r, k, kname, args, nargs, 2, global, local, e);
}

static int cpu_row_chunks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                          int nargs, size_t cols, size_t rows, size_t rows_per_item, clt_err *e) {
  return cpu_row_blocks(r, k, kname, args, nargs, cols, (rows + rows_per_item - 1) / rows_per_item,
                        e);
}

static int cpu_columns(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, size_t cols, clt_err *e) {
  return clt_launch1d(r, k, kname, args, nargs, cols, e);
}

static int cpu_positions(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                         int nargs, size_t channels, size_t positions, size_t per_item,
                         clt_err *e) {
  (void)channels; /* a work-item loops over them */
  return clt_launch1d(r, k, kname, args, nargs, (positions + per_item - 1) / per_item, e);
}

static int cpu_matrix(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t cols, size_t rows, clt_err *e) {
  return clt_launch1d(r, k, kname, args, nargs, rows * cols, e);
}

static int cpu_elements(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                        int nargs, size_t cols, size_t rows, clt_err *e) {
  return clt_launch2d(r, k, kname, args, nargs, cols, rows, e);
}

static int cpu_groups(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t nblocks, clt_err *e) {
  return clt_launch1d(r, k, kname, args, nargs, nblocks, e);
}

static int cpu_single_group(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                            int nargs, clt_err *e) {
  size_t n = 1;
  return clt_launch(r, k, kname, args, nargs, 1, &n, &n, e);
}

static size_t cpu_sum_block_rows(const clt_replica *r, size_t cols, size_t rows, size_t min_rows) {
  (void)r;
  (void)cols;
  (void)rows;
  return min_rows;
}

/* Sources of the backend's own kernels: gemm.cl's plain ones (its tiled ones
 * are built apart, with their tile options). */
static const char *const cpu_sources[] = {"gemm.cl", NULL};

const clt_backend clt_backend_cpu = {
    .name = "cpu",
    .summary = "cpu kernels (float8 per work-item; GEMM: cltrain float16 tiles)",
    .sources = cpu_sources,
    .fuses_conv_pool = 1,
    .winograd = 1,
    .attach = cpu_attach,
    .release = cpu_release,
    .launch_rows = cpu_rows,
    .launch_row_chunks = cpu_row_chunks,
    .launch_blocks = cpu_blocks,
    .launch_row_blocks = cpu_row_blocks,
    .launch_columns = cpu_columns,
    .launch_positions = cpu_positions,
    .launch_matrix = cpu_matrix,
    .launch_elements = cpu_elements,
    .launch_groups = cpu_groups,
    .launch_single_group = cpu_single_group,
    .sum_block_rows = cpu_sum_block_rows,
    .gemm_reserve = clt_cpu_gemm_reserve,
    .gemm = clt_cpu_gemm,
    .gemm_bias_act = clt_cpu_gemm_bias_act,
    .gemm_batched_reserve = clt_cpu_gemm_batched_reserve,
    .gemm_batched = clt_cpu_gemm_batched,
    .tilings = &clt_cpu_tilings,
    .conv_algos = clt_cpu_conv_algos,
    .conv_reserve = clt_cpu_conv_reserve,
    .conv_forward = clt_cpu_conv_forward,
    .conv_dw = clt_cpu_conv_dw,
    .conv_dx_reserve = clt_cpu_conv_dx_reserve,
    .conv_dx = clt_cpu_conv_dx,
};
