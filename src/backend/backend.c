/* Choosing a replica's backend, and the GEMM and convolution entry points
 * that dispatch to it (gemm.h). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

int clt_backend_for(const clt_device *device, const clt_backend **out, clt_err *e) {
  const char *v = getenv("CLTRAIN_KERNELS");
  if (!v || !*v || strcmp(v, "auto") == 0) {
    *out = (device->type & CL_DEVICE_TYPE_CPU) ? &clt_backend_cpu : &clt_backend_gpu;
  } else if (strcmp(v, "cpu") == 0) {
    *out = &clt_backend_cpu;
  } else if (strcmp(v, "gpu") == 0) {
    *out = &clt_backend_gpu;
  } else {
    return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_KERNELS=%s: expected cpu, gpu or auto", v);
  }
  return CLT_OK;
}

int clt_backend_create_replica(const clt_device *device, clt_replica **out, clt_err *e) {
  const clt_backend *b = NULL;
  *out = NULL;
  int status = clt_backend_for(device, &b, e);
  clt_replica *r = NULL;
  if (!status) status = clt_replica_create(device, &r, e);
  if (status) return status;
  r->backend = b;
  r->variant = b->name;
  r->winograd = clt_winograd_env();
  if (r->winograd < 0) {
    clt_backend_destroy_replica(r);
    return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_WINOGRAD=%s: expected off, 2 or 4",
                    getenv("CLTRAIN_WINOGRAD"));
  }
  if ((status = b->attach(r, e))) {
    clt_backend_destroy_replica(r);
    return status;
  }
  *out = r;
  return CLT_OK;
}

void clt_backend_destroy_replica(clt_replica *r) {
  /* A hung replica's thread may still be in its driver (clt_replica.hung):
   * nothing it uses is released. */
  if (!r || r->hung) return;
  if (r->queue) clFinish(r->queue);
  if (r->backend) r->backend->release(r);
  clt_replica_destroy(r);
}

int clt_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  return r->backend->gemm_reserve(r, s, e);
}

int clt_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off, cl_mem b,
             size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  if (s->k == 0) return clt_fail(e, CLT_ERR_INTERNAL, "GEMM with k = 0");
  return r->backend->gemm(r, s, alpha, a, a_off, b, b_off, beta, c, c_off, e);
}

int clt_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                      size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                      int relu, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  return r->backend->gemm_bias_act(r, s, a, a_off, b, b_off, c, c_off, bias, bias_offset, relu, e);
}

clt_conv_algos clt_conv_algos_for(const clt_replica *r, const clt_conv_geom *g, int filters) {
  clt_conv_algos a = {CLT_CONV_IM2COL, CLT_CONV_IM2COL, CLT_CONV_IM2COL};
  if (r->backend->conv_algos) a = r->backend->conv_algos(r, g, filters);
  if (r->backend->winograd && r->winograd && clt_winograd_fits(g))
    a.forward = a.weight_grad = a.input_grad = r->winograd;
  return a;
}

/* The in-place passes exist only where conv_algos chose them. */
static int no_in_place(const clt_replica *r, clt_err *e) {
  return clt_fail(e, CLT_ERR_INTERNAL, "the %s backend has no in-place convolution", r->variant);
}

int clt_conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e) {
  if (!r->backend->conv_reserve) return no_in_place(r, e);
  return r->backend->conv_reserve(r, g, filters, e);
}

int clt_conv_forward(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                     size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e) {
  if (!r->backend->conv_forward) return no_in_place(r, e);
  return r->backend->conv_forward(r, g, filters, x, w, w_off, y, bias, bias_off, relu, e);
}

int clt_conv_dw(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy, cl_mem dw,
                size_t dw_off, clt_err *e) {
  if (!r->backend->conv_dw) return no_in_place(r, e);
  return r->backend->conv_dw(r, g, filters, x, dy, dw, dw_off, e);
}

int clt_conv_dx_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e) {
  if (!r->backend->conv_dx_reserve) return no_in_place(r, e);
  return r->backend->conv_dx_reserve(r, g, filters, e);
}

int clt_conv_dx(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                size_t w_off, cl_mem dx, clt_err *e) {
  if (!r->backend->conv_dx) return no_in_place(r, e);
  return r->backend->conv_dx(r, g, filters, dy, w, w_off, dx, e);
}
