/* Backends: what differs between kinds of device, chosen once per replica.
 *
 * A backend is a table of functions, as a layer kind is (src/layers/layer.h):
 * the kernels' variant (the defines every program of the replica is built with,
 * cl/'s CLT_GPU), the launch shapes those variants are written for, the GEMM
 * and convolution algorithms, and which fusions its kernels support. Layers,
 * the network and the all-reduce call the dispatchers below and never ask
 * which backend runs; a new kind of device, or a tuner's choices, is a new
 * table or new members here.
 *
 *   cpu  (src/backend/cpu.c, cpu_gemm.c): a work-item per row or chunk of 8
 *        channels with explicit float8 vectors (PoCL does not vectorise across
 *        work-items), cltrain's float16-tiled GEMM and convolutions over the
 *        image in place, tiles chosen from the device's vector width.
 *   gpu  (src/backend/gpu.c): a work-item per element along the contiguous
 *        channel dimension (coalesced), local-memory tree reductions, and
 *        CLBlast's GEMM with its tuned database, or per product shape
 *        cltrain's local-memory tiled GEMM (cl/gemm_tiled.cl) where the GEMM
 *        tuner finds one of its tilings faster.
 *
 * A replica gets the backend of its device's type; $CLTRAIN_KERNELS=cpu|gpu|auto
 * forces one on every device (gpu on PoCL runs the GPU variants in tests). */
#ifndef CLT_BACKEND_H
#define CLT_BACKEND_H

#include "gemm.h"
#include "replica.h"

/* Product shapes a replica's tiling table holds at most, and tilings per
 * shape (the default among them). */
#define CLT_GEMM_MAX_SHAPES 128
#define CLT_GEMM_MAX_TILINGS 6
#define CLT_GEMM_TILING_NAME 64

/* Product shapes reserved on a replica, one per match (clt_gemm_shapes_match),
 * each kept with the largest batch's dimension it has had and with how many
 * products were reserved: what the GEMM tuner tunes. */
typedef struct clt_gemm_shape_list {
  int n;
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  int uses[CLT_GEMM_MAX_SHAPES];
} clt_gemm_shape_list;

/* Whether a and b take the same tiling: the same transposes, N and fixed
 * dimension, and the batch's dimension (M, or K for A^T) in the same power-of-two
 * bucket (clt_tune_batch_bucket's). */
int clt_gemm_shapes_match(const clt_gemm_shape *a, const clt_gemm_shape *b);
/* The entry of tiled[0 .. n) that matches s, or -1: a backend's table of the
 * shapes it has chosen tilings for. */
int clt_gemm_table_find(const clt_gemm_shape *tiled, int n, const clt_gemm_shape *s);
/* Adds s, `count` products, to l (a full list drops a new shape). */
void clt_gemm_list_note(clt_gemm_shape_list *l, const clt_gemm_shape *s, size_t count);
/* l's shapes into out (at most max) and their uses (when not NULL); how many. */
int clt_gemm_list_get(const clt_gemm_shape_list *l, clt_gemm_shape *out, int *uses, int max);

/* A backend's GEMM tilings: per product shape, kernels or blockings other than
 * its default, chosen by the GEMM tuner (src/engine/gemm_tuner.h) and restored
 * from checkpoints (src/dist/tuning.c). A tiling travels as its name, one line
 * of text that the backend parses ("6x1 kc384 rb12 pack0 cb0" on cpu, "tiled
 * 64x64 k16 4x4" on gpu); the default has none. */
typedef struct clt_gemm_tilings {
  /* The shapes reserved on r since the last clear, one per match, into out (at
   * most max), and into uses (when not NULL) how many products of each were
   * reserved (after a clear and one prepare of a net: about what a step runs);
   * returns how many. */
  int (*shapes)(const clt_replica *r, clt_gemm_shape *out, int *uses, int max);
  void (*shapes_clear)(clt_replica *r);
  /* Whether the product of shape s runs the kernels its tilings choose (the
   * cpu backend runs a short A^T as a transposed copy's plain product). */
  int (*tunable)(const clt_gemm_shape *s);
  /* The tilings worth timing for s besides the default, at most
   * CLT_GEMM_MAX_TILINGS - 1 names, into out; returns how many. */
  int (*candidates)(const clt_replica *r, const clt_gemm_shape *s,
                    char (*out)[CLT_GEMM_TILING_NAME]);
  /* Whether `name` is a tiling r can run for s. */
  int (*valid)(const clt_replica *r, const clt_gemm_shape *s, const char *name);
  /* Takes tiling `name` for the products matching s (NULL: back to the
   * default). One that is not valid, or a full table, is an error. Its kernels
   * are built when the shape is next reserved or run. */
  int (*choose)(clt_replica *r, const clt_gemm_shape *s, const char *name, clt_err *e);
  /* The tilings chosen: their shapes and names (at most max); returns how many. */
  int (*chosen)(const clt_replica *r, clt_gemm_shape *shapes, char (*names)[CLT_GEMM_TILING_NAME],
                int max);
} clt_gemm_tilings;

typedef struct clt_backend {
  const char *name;    /* "cpu", "gpu": what CLTRAIN_KERNELS names */
  const char *summary; /* one line for the replica lines of `cltrain train` */
  /* cl/ files of the backend's own kernels that a model's joint program
   * includes (NULL-terminated). */
  const char *const *sources;
  /* Whether a first Conv2D and the 2x2 max pooling that alone reads it run as
   * one pass each way (cl/conv2d.cl's conv_pool_*): see src/engine/plan.h. */
  int fuses_conv_pool;
  /* Whether its launch shapes and GEMM run the Winograd passes (gemm.h's
   * clt_winograd_*), taken where the replica's winograd tile says. */
  int winograd;

  /* Takes replica r: sets r->defines, r->group_size, r->chunk, and its own
   * state (r->backend_state); release frees that state (r may be half set up). */
  int (*attach)(clt_replica *r, clt_err *e);
  void (*release)(clt_replica *r);

  /* Launch shapes: see the dispatchers below. */
  int (*launch_rows)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                     int nargs, size_t cols, size_t rows, size_t rows_per_item, clt_err *e);
  int (*launch_row_chunks)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                           int nargs, size_t cols, size_t rows, size_t rows_per_item, clt_err *e);
  int (*launch_blocks)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, size_t cols, size_t nblocks, clt_err *e);
  int (*launch_row_blocks)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                           int nargs, size_t cols, size_t nblocks, clt_err *e);
  int (*launch_columns)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                        int nargs, size_t cols, clt_err *e);
  int (*launch_positions)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                          int nargs, size_t channels, size_t positions, size_t per_item,
                          clt_err *e);
  int (*launch_matrix)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, size_t cols, size_t rows, clt_err *e);
  int (*launch_elements)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                         int nargs, size_t cols, size_t rows, clt_err *e);
  int (*launch_groups)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                       int nargs, size_t nblocks, clt_err *e);
  int (*launch_single_group)(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                             int nargs, clt_err *e);
  /* Rows a block of a column-sum pass takes (at least min_rows): see
   * clt_sum_block_rows. */
  size_t (*sum_block_rows)(const clt_replica *r, size_t cols, size_t rows, size_t min_rows);

  /* GEMM (gemm.h). */
  int (*gemm_reserve)(clt_replica *r, const clt_gemm_shape *s, clt_err *e);
  int (*gemm)(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
              cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e);
  int (*gemm_bias_act)(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                       size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                       int relu, clt_err *e);
  /* Strided batches of one shape (gemm.h's clt_gemm_batched). */
  int (*gemm_batched_reserve)(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e);
  int (*gemm_batched)(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt,
                      float alpha, cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta,
                      cl_mem c, size_t c_off, clt_err *e);
  /* Its GEMM tilings, what the GEMM tuner chooses between (NULL: none). */
  const clt_gemm_tilings *tilings;

  /* Convolutions over the image in place (gemm.h); NULL members where the
   * backend has none (conv_algos then says im2col for every pass). */
  clt_conv_algos (*conv_algos)(const clt_replica *r, const clt_conv_geom *g, int filters);
  int (*conv_reserve)(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);
  int (*conv_forward)(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                      size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e);
  int (*conv_dw)(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy,
                 cl_mem dw, size_t dw_off, clt_err *e);
  int (*conv_dx_reserve)(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);
  int (*conv_dx)(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                 size_t w_off, cl_mem dx, clt_err *e);
} clt_backend;

extern const clt_backend clt_backend_cpu, clt_backend_gpu;

/* The backend `device` gets: from $CLTRAIN_KERNELS, else from its type. An
 * unknown value of the variable is an error. */
int clt_backend_for(const clt_device *device, const clt_backend **out, clt_err *e);

/* A replica of `device` (clt_replica_create) taken by its backend; destroyed
 * with clt_backend_destroy_replica, which releases the backend's state first. */
int clt_backend_create_replica(const clt_device *device, clt_replica **out, clt_err *e);
void clt_backend_destroy_replica(clt_replica *r);

/* ---- launch shapes ------------------------------------------------------------------
 * Each kernel of cl/ is written for one of these; the backend maps it onto its
 * variant (kernels guard their tails). */

/* Over a [rows][cols] matrix (cols contiguous: channels). cpu: a work-item takes
 * 8 channels of rows_per_item rows; gpu: a work-item per element, in groups of
 * consecutive channels (coalesced) by rows. */
static inline int clt_launch_rows(clt_replica *r, cl_kernel k, const char *kname,
                                  const clt_karg *args, int nargs, size_t cols, size_t rows,
                                  size_t rows_per_item, clt_err *e) {
  return r->backend->launch_rows(r, k, kname, args, nargs, cols, rows, rows_per_item, e);
}

/* Elementwise passes over rows written for long CPU work-items (BatchNormalization's):
 * cpu: as clt_launch_row_blocks over blocks of rows_per_item rows; gpu: as
 * clt_launch_rows. */
static inline int clt_launch_row_chunks(clt_replica *r, cl_kernel k, const char *kname,
                                        const clt_karg *args, int nargs, size_t cols, size_t rows,
                                        size_t rows_per_item, clt_err *e) {
  return r->backend->launch_row_chunks(r, k, kname, args, nargs, cols, rows, rows_per_item, e);
}

/* Column sums over blocks of rows (partial[blk][c]): cpu: a work-item sums its
 * block's rows for 8 channels; gpu: a work-group per block and group of
 * channels, its rows meeting in a local-memory tree. */
static inline int clt_launch_blocks(clt_replica *r, cl_kernel k, const char *kname,
                                    const clt_karg *args, int nargs, size_t cols, size_t nblocks,
                                    clt_err *e) {
  return r->backend->launch_blocks(r, k, kname, args, nargs, cols, nblocks, e);
}

/* The same for long CPU work-items (a block's rows read CLT_CPU_BLOCK_COLS floats
 * at a time, runs the prefetchers follow); gpu: as clt_launch_blocks. */
static inline int clt_launch_row_blocks(clt_replica *r, cl_kernel k, const char *kname,
                                        const clt_karg *args, int nargs, size_t cols,
                                        size_t nblocks, clt_err *e) {
  return r->backend->launch_row_blocks(r, k, kname, args, nargs, cols, nblocks, e);
}

/* The final pass of column sums, over `cols` columns of partial sums: cpu: a
 * work-item per column; gpu: clt_launch_blocks over one block. */
static inline int clt_launch_columns(clt_replica *r, cl_kernel k, const char *kname,
                                     const clt_karg *args, int nargs, size_t cols, clt_err *e) {
  return r->backend->launch_columns(r, k, kname, args, nargs, cols, e);
}

/* Over the positions of an NHWC tensor: cpu: a work-item per per_item positions,
 * looping over the channels; gpu: a work-item per (channel, position), as
 * clt_launch_rows over (channels, positions). */
static inline int clt_launch_positions(clt_replica *r, cl_kernel k, const char *kname,
                                       const clt_karg *args, int nargs, size_t channels,
                                       size_t positions, size_t per_item, clt_err *e) {
  return r->backend->launch_positions(r, k, kname, args, nargs, channels, positions, per_item, e);
}

/* Elementwise over a [rows][cols] matrix whose kernel needs each element's
 * column: cpu: a work-item per element (the column from its index); gpu: as
 * clt_launch_rows. */
static inline int clt_launch_matrix(clt_replica *r, cl_kernel k, const char *kname,
                                    const clt_karg *args, int nargs, size_t cols, size_t rows,
                                    clt_err *e) {
  return r->backend->launch_matrix(r, k, kname, args, nargs, cols, rows, e);
}

/* A work-item per element of a [rows][cols] matrix in both variants (one
 * kernel body): cpu: clt_launch2d over (cols, rows); gpu: as clt_launch_rows. */
static inline int clt_launch_elements(clt_replica *r, cl_kernel k, const char *kname,
                                      const clt_karg *args, int nargs, size_t cols, size_t rows,
                                      clt_err *e) {
  return r->backend->launch_elements(r, k, kname, args, nargs, cols, rows, e);
}

/* One work-group per block (gpu: a power of two <= CLT_WG work-items striding
 * through the block into a local-memory tree), one work-item per block (cpu):
 * kernels written with get_group_id(0) on GPUs, get_global_id(0) on CPUs. */
static inline int clt_launch_groups(clt_replica *r, cl_kernel k, const char *kname,
                                    const clt_karg *args, int nargs, size_t nblocks, clt_err *e) {
  return r->backend->launch_groups(r, k, kname, args, nargs, nblocks, e);
}

/* A reduction by one work-group (gpu: a local-memory tree; cpu: one work-item
 * loops). */
static inline int clt_launch_single_group(clt_replica *r, cl_kernel k, const char *kname,
                                          const clt_karg *args, int nargs, clt_err *e) {
  return r->backend->launch_single_group(r, k, kname, args, nargs, e);
}

/* Rows per block of a column-sum pass over rows x cols, at least min_rows (what
 * its scratch is sized for): cpu: min_rows, enough blocks for every core;
 * gpu: longer blocks, so blocks x channel groups fill the device while the
 * final pass over the blocks stays short. */
static inline size_t clt_sum_block_rows(const clt_replica *r, size_t cols, size_t rows,
                                        size_t min_rows) {
  return r->backend->sum_block_rows(r, cols, rows, min_rows);
}

#endif
