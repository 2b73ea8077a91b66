/* The cpu backend's parts (cpu.c: its table, launch shapes and state;
 * cpu_gemm.c: its GEMM and convolutions). */
#ifndef CLT_BACKEND_CPU_H
#define CLT_BACKEND_CPU_H

#include "backend.h"

/* A register tile and blocking of cl/gemm.cl's tiled kernels for one product
 * shape, chosen by the GEMM tuner (src/engine/gemm_tuner.h) in place of
 * own_tiling's defaults: tm rows by nb 16-wide column blocks (build options),
 * K chunks of kc, up to rb row sub-blocks a work-item (halved while the
 * device has too few work-items), pack (PACK_B, gemm16: the B chunk copied
 * into a private array; 2, B^T products only: B read as stored, each chunk
 * transposed into that array, where 0 and 1 transpose B into the scratch
 * first), and for A^T products up to cb column blocks a
 * work-item (0: own_tiling's rule; 1: the in-place kernel). */
typedef struct clt_gemm_tiling {
  int tm, nb, kc, rb, pack, cb;
} clt_gemm_tiling;

/* What the backend keeps per replica: the GEMM scratch (a transposed operand,
 * split-K partial sums, a flipped kernel), grown at set-up to the largest
 * product, and the zeros a padded convolution reads for taps outside the
 * image, grown to the widest padded input. */
typedef struct clt_cpu_state {
  cl_mem temp;
  size_t temp_bytes;
  cl_mem zeros;
  size_t zeros_floats;
  /* The tiled products' shapes reserved since the tuner last cleared them
   * (clt_cpu_tilings.shapes), and the tilings chosen for shapes. */
  clt_gemm_shape_list noted;
  int ntilings;
  clt_gemm_shape tiled[CLT_GEMM_MAX_SHAPES];
  clt_gemm_tiling tilings[CLT_GEMM_MAX_SHAPES];
} clt_cpu_state;

static inline clt_cpu_state *cpu_state(const clt_replica *r) {
  return (clt_cpu_state *)r->backend_state;
}

int clt_cpu_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e);
int clt_cpu_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
                 cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e);
int clt_cpu_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                          size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                          int relu, clt_err *e);

int clt_cpu_gemm_batched_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e);
int clt_cpu_gemm_batched(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt,
                         float alpha, cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta,
                         cl_mem c, size_t c_off, clt_err *e);

clt_conv_algos clt_cpu_conv_algos(const clt_replica *r, const clt_conv_geom *g, int filters);
int clt_cpu_conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);
int clt_cpu_conv_forward(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                         size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e);
int clt_cpu_conv_dw(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy,
                    cl_mem dw, size_t dw_off, clt_err *e);
int clt_cpu_conv_dx_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);
int clt_cpu_conv_dx(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                    size_t w_off, cl_mem dx, clt_err *e);

/* ---- the GEMM tuner's hooks (cpu_gemm.c) ----
 * A tiled product's shape here is what the tiled kernel computes: N in whole
 * 16-wide blocks, a B^T operand already transposed, a short A^T as a plain
 * product (the transposed copy). */

/* The tilings worth timing for s besides the default, at most
 * CLT_GEMM_MAX_TILINGS - 1, into out; returns how many. Each passes
 * clt_cpu_gemm_tiling_valid. */
int clt_cpu_gemm_candidates(const clt_replica *r, const clt_gemm_shape *s, clt_gemm_tiling *out);

/* Whether t fits s and r's registers and the kernels' private arrays. */
int clt_cpu_gemm_tiling_valid(const clt_replica *r, const clt_gemm_shape *s,
                              const clt_gemm_tiling *t);

/* Takes t for the products matching s (NULL: back to the default). An
 * invalid tiling or a full table is an error. The tiling's kernels are built
 * when the shape is next reserved or run. */
int clt_cpu_gemm_choose(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_tiling *t,
                        clt_err *e);

/* "6x4 kc384 rb12 pack0 cb0", and back (-1: not a tiling). */
void clt_cpu_gemm_tiling_name(const clt_gemm_tiling *t, char *out, size_t size);
int clt_cpu_gemm_tiling_parse(const char *text, clt_gemm_tiling *out);

/* The above as the backend's table of tilings, names for tilings. */
extern const clt_gemm_tilings clt_cpu_tilings;

#endif
