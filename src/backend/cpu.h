/* The cpu backend's parts (cpu.c: its table, launch shapes and state;
 * cpu_gemm.c: its GEMM and convolutions). */
#ifndef CLT_BACKEND_CPU_H
#define CLT_BACKEND_CPU_H

#include "backend.h"

/* What the backend keeps per replica: the GEMM scratch (a transposed operand,
 * split-K partial sums, a flipped kernel), grown at set-up to the largest
 * product, and the zeros a padded convolution reads for taps outside the
 * image, grown to the widest padded input. */
typedef struct clt_cpu_state {
  cl_mem temp;
  size_t temp_bytes;
  cl_mem zeros;
  size_t zeros_floats;
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

#endif
