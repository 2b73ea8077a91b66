/* Choosing a replica's backend, and the GEMM and convolution entry points
 * that dispatch to it (gemm.h). */
#include "backend.h"

#include <stdio.h>
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

int clt_gemm_batched_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e) {
  return r->backend->gemm_batched_reserve(r, s, count, e);
}

int clt_gemm_batched(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt, float alpha,
                     cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta, cl_mem c,
                     size_t c_off, clt_err *e) {
  if (s->m == 0 || s->n == 0 || bt->count == 0) return CLT_OK;
  if (s->k == 0) return clt_fail(e, CLT_ERR_INTERNAL, "batched GEMM with k = 0");
  return r->backend->gemm_batched(r, s, bt, alpha, a, a_off, b, b_off, beta, c, c_off, e);
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

const char *clt_conv_pass_name(int pass) {
  static const char *const names[CLT_CONV_PASSES] = {"fwd", "dw", "dx"};
  return pass >= 0 && pass < CLT_CONV_PASSES ? names[pass] : "?";
}

const char *clt_conv_algo_name(int algo) {
  switch (algo) {
    case CLT_CONV_IM2COL:
      return "im2col";
    case CLT_CONV_IN_PLACE:
      return "in_place";
    case CLT_CONV_WINOGRAD2:
      return "winograd2";
    case CLT_CONV_WINOGRAD4:
      return "winograd4";
    default:
      return NULL;
  }
}

int clt_conv_algo_parse(const char *name) {
  const int algos[] = {CLT_CONV_IM2COL, CLT_CONV_IN_PLACE, CLT_CONV_WINOGRAD2, CLT_CONV_WINOGRAD4};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, clt_conv_algo_name(algos[i])) == 0) return algos[i];
  return -1;
}

static int pass_algo(const clt_conv_algos *a, int pass) {
  return pass == CLT_CONV_PASS_FORWARD       ? a->forward
         : pass == CLT_CONV_PASS_WEIGHT_GRAD ? a->weight_grad
                                             : a->input_grad;
}

int clt_conv_candidates(const clt_replica *r, const clt_conv_geom *g, int filters, int pass,
                        int *out) {
  int n = 0;
  out[n++] = CLT_CONV_IM2COL;
  /* The in-place kernels have preconditions the backend's default checks. */
  clt_conv_algos d = {CLT_CONV_IM2COL, CLT_CONV_IM2COL, CLT_CONV_IM2COL};
  if (r->backend->conv_algos) d = r->backend->conv_algos(r, g, filters);
  if (pass_algo(&d, pass) == CLT_CONV_IN_PLACE) out[n++] = CLT_CONV_IN_PLACE;
  if (r->backend->winograd && clt_winograd_fits(g)) {
    out[n++] = CLT_CONV_WINOGRAD2;
    out[n++] = CLT_CONV_WINOGRAD4;
  }
  return n;
}

static int algo_allowed(const clt_replica *r, const clt_conv_geom *g, int filters, int pass,
                        int algo) {
  int c[CLT_CONV_MAX_CANDIDATES];
  const int n = clt_conv_candidates(r, g, filters, pass, c);
  for (int i = 0; i < n; i++)
    if (c[i] == algo) return 1;
  return 0;
}

/* The index of layer's entry in r's choices, or -1. */
static int find_choice(const clt_replica *r, const char *layer) {
  for (int i = 0; i < r->nconv_choices; i++)
    if (strcmp(r->conv_choices[i].layer, layer) == 0) return i;
  return -1;
}

int clt_conv_choose(clt_replica *r, const char *layer, const clt_conv_geom *g, int filters,
                    int pass, int algo, clt_err *e) {
  if (pass < 0 || pass >= CLT_CONV_PASSES)
    return clt_fail(e, CLT_ERR_INTERNAL, "%s: no convolution pass %d", layer, pass);
  if (algo >= 0 && !algo_allowed(r, g, filters, pass, algo)) {
    const char *name = clt_conv_algo_name(algo);
    return clt_fail(e, CLT_ERR_ARG, "%s: the %s backend cannot run its %s pass as %s", layer,
                    r->variant, clt_conv_pass_name(pass), name ? name : "that algorithm");
  }
  if (strlen(layer) >= sizeof r->conv_choices[0].layer)
    return clt_fail(e, CLT_ERR_ARG, "%s: layer name too long for a convolution choice", layer);
  int at = find_choice(r, layer);
  if (at < 0) {
    if (r->nconv_choices == CLT_MAX_CONV_CHOICES)
      return clt_fail(e, CLT_ERR_ARG, "%s: more than %d convolution layers chosen for", layer,
                      CLT_MAX_CONV_CHOICES);
    at = r->nconv_choices++;
    clt_conv_choice *c = &r->conv_choices[at];
    snprintf(c->layer, sizeof c->layer, "%s", layer);
    c->algo[0] = c->algo[1] = c->algo[2] = -1;
  }
  r->conv_choices[at].algo[pass] = algo;
  return CLT_OK;
}

clt_conv_algos clt_conv_algos_layer(const clt_replica *r, const char *layer, const clt_conv_geom *g,
                                    int filters) {
  clt_conv_algos a = clt_conv_algos_for(r, g, filters);
  if (r->backend->winograd && r->winograd && clt_winograd_fits(g)) return a;
  const int at = find_choice(r, layer);
  if (at < 0) return a;
  const clt_conv_choice *c = &r->conv_choices[at];
  int *pass[CLT_CONV_PASSES] = {&a.forward, &a.weight_grad, &a.input_grad};
  for (int p = 0; p < CLT_CONV_PASSES; p++)
    if (c->algo[p] >= 0 && algo_allowed(r, g, filters, p, c->algo[p])) *pass[p] = c->algo[p];
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

/* ---- the GEMM tilings' shape lists ---------------------------------------------------- */

static size_t batch_dim(const clt_gemm_shape *s) { return s->trans_a ? s->k : s->m; }
static size_t fixed_dim(const clt_gemm_shape *s) { return s->trans_a ? s->m : s->k; }

static size_t bucket(size_t v) {
  size_t b = 1;
  while (b < v && b < ((size_t)1 << 40)) b *= 2;
  return b;
}

int clt_gemm_shapes_match(const clt_gemm_shape *a, const clt_gemm_shape *b) {
  return a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->n == b->n &&
         fixed_dim(a) == fixed_dim(b) && bucket(batch_dim(a)) == bucket(batch_dim(b));
}

int clt_gemm_table_find(const clt_gemm_shape *tiled, int n, const clt_gemm_shape *s) {
  for (int i = 0; i < n; i++)
    if (clt_gemm_shapes_match(&tiled[i], s)) return i;
  return -1;
}

void clt_gemm_list_note(clt_gemm_shape_list *l, const clt_gemm_shape *s, size_t count) {
  for (int i = 0; i < l->n; i++) {
    if (!clt_gemm_shapes_match(&l->shapes[i], s)) continue;
    if (batch_dim(s) > batch_dim(&l->shapes[i])) l->shapes[i] = *s;
    l->uses[i] += (int)count;
    return;
  }
  if (l->n < CLT_GEMM_MAX_SHAPES) {
    l->uses[l->n] = (int)count;
    l->shapes[l->n++] = *s;
  }
}

int clt_gemm_list_get(const clt_gemm_shape_list *l, clt_gemm_shape *out, int *uses, int max) {
  int n = 0;
  for (; n < l->n && n < max; n++) {
    out[n] = l->shapes[n];
    if (uses) uses[n] = l->uses[n];
  }
  return n;
}
