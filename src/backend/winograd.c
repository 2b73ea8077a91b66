/* Winograd F(m x m, 3x3) convolutions (gemm.h) on any backend: cl/winograd.cl's
 * transforms through the backend's launch shapes, and the (m+2)^2 products of
 * the Winograd domain through its GEMM as one strided batch (clt_gemm_batched:
 * one launch rather than (m+2)^2 small ones, each leaving the device idle
 * while the next is enqueued).
 *
 * With P tiles of m x m outputs (every image's ceil(OH/m) x ceil(OW/m)) and
 * T = (m+2)^2 positions, the scratch holds for a pass:
 *   forward: V[T][P][C] (input), M[T][P][CO] (products), U[T][C][CO] (kernel)
 *   dx:      the same over dy's tiles of dx, with C and CO swapped, then
 *            F[9][CO][C]: the kernel's taps flipped and transposed, which
 *            wino_filter reads as a forward kernel
 *   dW:      V[T][P][C], Z[T][P][CO] (output gradient), dU[T][C][CO].
 * Each position's matrix is followed by PLANE_PAD floats: a transform's
 * work-item touches all T positions at once, and matrices whose size is a
 * multiple of 64 KiB (channels and tiles in powers of two) would put those T
 * lines in one cache set, more than it has ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

int clt_winograd_env(void) {
  const char *v = getenv("CLTRAIN_WINOGRAD");
  if (!v || !*v || strcmp(v, "off") == 0) return 0;
  if (strcmp(v, "2") == 0) return 2;
  if (strcmp(v, "4") == 0) return 4;
  return -1;
}

int clt_winograd_fits(const clt_conv_geom *g) { return g->kh == 3 && g->kw == 3 && g->stride == 1; }

static int is_winograd(int algo) {
  return algo == CLT_CONV_WINOGRAD2 || algo == CLT_CONV_WINOGRAD4;
}

/* The product that runs as a convolution of `cin` channels of h x w into `cout` of oh x ow: the
 * forward's, or dx's (dy's tiles of dx). */
typedef struct wino_conv {
  int m, batch, h, w, cin, pt, pl, oh, ow, cout;
  int th, tw;
  size_t p; /* tiles */
} wino_conv;

/* c with its tiles counted. */
static wino_conv tiled(wino_conv c) {
  c.th = (c.oh + c.m - 1) / c.m;
  c.tw = (c.ow + c.m - 1) / c.m;
  c.p = (size_t)c.batch * c.th * c.tw;
  return c;
}

static wino_conv forward_conv(const clt_conv_geom *g, int filters, int m) {
  return tiled((wino_conv){m, g->batch, g->h, g->w, g->c, g->pad_top, g->pad_left, g->oh, g->ow,
                           filters, 0, 0, 0});
}

/* dx = dy convolved with the flipped kernel, dy padded by 2 - PT rows and 2 - PL columns. */
static wino_conv dx_conv(const clt_conv_geom *g, int filters, int m) {
  return tiled((wino_conv){m, g->batch, g->oh, g->ow, filters, 2 - g->pad_top, 2 - g->pad_left,
                           g->h, g->w, g->c, 0, 0, 0});
}

static size_t positions(int m) { return (size_t)(m + 2) * (size_t)(m + 2); }

/* A cache line of floats between positions' matrices. */
enum { PLANE_PAD = 16 };

/* One position's matrices apart, in floats: V, M (or Z), U (or dU). */
typedef struct wino_planes {
  size_t v, m, u;
} wino_planes;

static wino_planes planes(const wino_conv *c) {
  return (wino_planes){c->p * c->cin + PLANE_PAD, c->p * c->cout + PLANE_PAD,
                       (size_t)c->cin * c->cout + PLANE_PAD};
}

/* The flipped kernel F (dx's pass: flip set), floats. */
static size_t flip_floats(const wino_conv *c, int flip) {
  return flip ? (size_t)9 * c->cin * c->cout : 0;
}

/* V, M (or Z), U (or dU), in that order in the scratch, then F where flip. */
static size_t conv_floats(const wino_conv *c, int flip) {
  const wino_planes s = planes(c);
  return positions(c->m) * (s.v + s.m + s.u) + flip_floats(c, flip);
}

size_t clt_winograd_scratch(const clt_conv_geom *g, int filters, const clt_conv_algos *a) {
  size_t n = 0, f;
  if (is_winograd(a->forward)) {
    const wino_conv c = forward_conv(g, filters, a->forward);
    f = conv_floats(&c, 0);
    if (f > n) n = f;
  }
  if (is_winograd(a->weight_grad)) {
    const wino_conv c = forward_conv(g, filters, a->weight_grad);
    f = conv_floats(&c, 0);
    if (f > n) n = f;
  }
  if (is_winograd(a->input_grad)) {
    const wino_conv c = dx_conv(g, filters, a->input_grad);
    f = conv_floats(&c, 1);
    if (f > n) n = f;
  }
  return n;
}

/* Channels a work-item of the m x m tiles' transforms takes: the gpu variant's
 * one (r->chunk 1); on CPUs a float16 for F(2x2) where the device's vectors are
 * that wide (half the work-items, each transform's instructions twice as wide),
 * else a float8: F(4x4)'s 36 positions of float16 spill registers anyway, and
 * its float16 kernels took PoCL seconds longer to build for no faster step. */
static int lanes(const clt_replica *r, int m) {
  if (r->chunk == 1) return 1;
  return m == 2 && r->device.float_vector_width >= 16 ? 16 : 8;
}

/* The columns to give clt_launch_rows for `channels` channels taken `lanes` a
 * work-item: it launches a work-item per r->chunk of its columns. */
static size_t lane_cols(const clt_replica *r, int m, int channels) {
  const size_t l = (size_t)lanes(r, m), n = (size_t)channels;
  return (n + l - 1) / l * r->chunk;
}

static void wino_options(const clt_replica *r, int m, char *buf, size_t size) {
  if (lanes(r, m) > 1) snprintf(buf, size, "-DWINO_M=%d -DWINO_LANES=%d", m, lanes(r, m));
  else snprintf(buf, size, "-DWINO_M=%d", m);
}

static int wino_kernel(clt_replica *r, int m, const char *name, cl_kernel *k, clt_err *e) {
  char options[48];
  wino_options(r, m, options, sizeof options);
  return clt_replica_kernel(r, "winograd.cl", options, name, k, e);
}

/* The T products of position t: [P x cin] * [cin x cout] (forward, dx), or
 * [cin x P]^T-read V times Z: [P x cin]^T [P x cout] (dW). */
static clt_gemm_shape product_shape(const wino_conv *c) {
  const size_t k = (size_t)c->cin, n = (size_t)c->cout;
  return (clt_gemm_shape){0, 0, c->p, n, k, k, n, n};
}
static clt_gemm_shape grad_shape(const wino_conv *c) {
  const size_t m = (size_t)c->cin, n = (size_t)c->cout;
  return (clt_gemm_shape){1, 0, m, n, c->p, m, n, n};
}

static int reserve_pass(clt_replica *r, const wino_conv *c, int weight_grad, int flip, clt_err *e) {
  const char *const fwd[] = {"wino_filter", "wino_input", "wino_output"};
  const char *const dw[] = {"wino_input", "wino_grad_output", "wino_filter_grad"};
  cl_kernel k;
  int status = flip ? clt_replica_kernel(r, "flip.cl", "", "flip_taps", &k, e) : CLT_OK;
  for (int i = 0; i < 3 && !status; i++)
    status = wino_kernel(r, c->m, weight_grad ? dw[i] : fwd[i], &k, e);
  const clt_gemm_shape s = weight_grad ? grad_shape(c) : product_shape(c);
  return status ? status : clt_gemm_batched_reserve(r, &s, positions(c->m), e);
}

int clt_winograd_reserve(clt_replica *r, const clt_conv_geom *g, int filters,
                         const clt_conv_algos *a, clt_err *e) {
  int status = CLT_OK;
  if (is_winograd(a->forward)) {
    const wino_conv c = forward_conv(g, filters, a->forward);
    status = reserve_pass(r, &c, 0, 0, e);
  }
  if (!status && is_winograd(a->weight_grad)) {
    const wino_conv c = forward_conv(g, filters, a->weight_grad);
    status = reserve_pass(r, &c, 1, 0, e);
  }
  if (!status && is_winograd(a->input_grad)) {
    const wino_conv c = dx_conv(g, filters, a->input_grad);
    status = reserve_pass(r, &c, 0, 1, e);
  }
  return status;
}

static int check_tile(int m, clt_err *e) {
  if (m == 2 || m == 4) return CLT_OK;
  return clt_fail(e, CLT_ERR_INTERNAL, "Winograd tile %d: expected 2 or 4", m);
}

/* Where V, M (Z), U (dU) and F start in the scratch, in floats. */
typedef struct wino_parts {
  int v, m, u, f;
} wino_parts;

static wino_parts parts(const wino_conv *c) {
  const size_t t2 = positions(c->m);
  const wino_planes s = planes(c);
  return (wino_parts){0, (int)(t2 * s.v), (int)(t2 * (s.v + s.m)), (int)(t2 * (s.v + s.m + s.u))};
}

/* The scratch's floats must be addressable by the kernels' int offsets. */
static int check_size(const wino_conv *c, int flip, clt_err *e) {
  const size_t n = conv_floats(c, flip);
  if (n < (size_t)1 << 31) return CLT_OK;
  return clt_fail(e, CLT_ERR_INTERNAL, "Winograd scratch of %zu floats: over 2^31", n);
}

/* The kernel's transform into U. The flip's kernel is the original one read
 * as [3][3][cout][cin]: cl/flip.cl's flip_taps writes it so into F at f_off,
 * then wino_filter transforms it. */
static int run_filter(clt_replica *r, const wino_conv *c, int flip, cl_mem w, size_t w_off,
                      cl_mem s, int u_off, int f_off, clt_err *e) {
  cl_kernel k;
  int status = CLT_OK, off = (int)w_off;
  const int C = c->cin, CO = c->cout, us = (int)planes(c).u, taps = 9;
  if (flip) {
    /* w is [9][CO][C] (the forward's cin, cout); F is [9][C][CO]. */
    status = clt_replica_kernel(r, "flip.cl", "", "flip_taps", &k, e);
    if (status) return status;
    clt_karg fargs[] = {CLT_ARG(w),  CLT_ARG(off), CLT_ARG(s),   CLT_ARG(f_off),
                        CLT_ARG(CO), CLT_ARG(C),   CLT_ARG(taps)};
    if (r->chunk > 1) /* a work-item per 16 x 16 block (CPUs) */
      status = clt_launch_rows(r, k, "wino_flip_taps", fargs, 7, ((size_t)CO + 15) / 16 * r->chunk,
                               (size_t)taps * (((size_t)C + 15) / 16), 1, e);
    else
      status = clt_launch_rows(r, k, "wino_flip_taps", fargs, 7, (size_t)CO, (size_t)taps * C, 1,
                               e);
    if (status) return status;
    w = s;
    off = f_off;
  }
  status = wino_kernel(r, c->m, "wino_filter", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(w), CLT_ARG(off), CLT_ARG(s), CLT_ARG(u_off),
                     CLT_ARG(C), CLT_ARG(CO),  CLT_ARG(us)};
  return clt_launch_rows(r, k, "wino_filter", args, 7, lane_cols(r, c->m, CO), (size_t)C, 1, e);
}

static int run_input(clt_replica *r, const wino_conv *c, cl_mem x, cl_mem s, int v_off,
                     clt_err *e) {
  cl_kernel k;
  int status = wino_kernel(r, c->m, "wino_input", &k, e);
  if (status) return status;
  const int vs = (int)planes(c).v;
  clt_karg args[] = {CLT_ARG(x),     CLT_ARG(s),     CLT_ARG(v_off),  CLT_ARG(c->batch),
                     CLT_ARG(c->h),  CLT_ARG(c->w),  CLT_ARG(c->cin), CLT_ARG(c->pt),
                     CLT_ARG(c->pl), CLT_ARG(c->th), CLT_ARG(c->tw),  CLT_ARG(vs)};
  return clt_launch_rows(r, k, "wino_input", args, 12, lane_cols(r, c->m, c->cin), c->p, 1, e);
}

/* The forward's (and dx's) T products, one batch: M[t] = V[t] U[t]. */
static int run_products(clt_replica *r, const wino_conv *c, cl_mem s, wino_parts at, clt_err *e) {
  const clt_gemm_shape shape = product_shape(c);
  const wino_planes ps = planes(c);
  const clt_gemm_batch bt = {positions(c->m), ps.v, ps.u, ps.m};
  return clt_gemm_batched(r, &shape, &bt, 1.0f, s, (size_t)at.v, s, (size_t)at.u, 0.0f, s,
                          (size_t)at.m, e);
}

static int run_output(clt_replica *r, const wino_conv *c, cl_mem s, int m_off, cl_mem y,
                      cl_mem bias, long bias_off, int relu, clt_err *e) {
  cl_kernel k;
  int status = wino_kernel(r, c->m, "wino_output", &k, e);
  if (status) return status;
  const int boff = bias_off < 0 ? -1 : (int)bias_off, ms = (int)planes(c).m;
  clt_karg args[] = {CLT_ARG(s),       CLT_ARG(m_off),    CLT_ARG(y),     CLT_ARG(bias),
                     CLT_ARG(boff),    CLT_ARG(c->batch), CLT_ARG(c->oh), CLT_ARG(c->ow),
                     CLT_ARG(c->cout), CLT_ARG(c->th),    CLT_ARG(c->tw), CLT_ARG(relu),
                     CLT_ARG(ms)};
  return clt_launch_rows(r, k, "wino_output", args, 13, lane_cols(r, c->m, c->cout), c->p, 1, e);
}

/* A forward over c: kernel, input, products, output. */
static int run_conv(clt_replica *r, const wino_conv *c, int flip, cl_mem x, cl_mem w, size_t w_off,
                    cl_mem y, cl_mem bias, long bias_off, int relu, cl_mem s, clt_err *e) {
  int status = check_tile(c->m, e);
  if (!status) status = check_size(c, flip, e);
  if (status) return status;
  const wino_parts at = parts(c);
  status = run_filter(r, c, flip, w, w_off, s, at.u, at.f, e);
  if (!status) status = run_input(r, c, x, s, at.v, e);
  if (!status) status = run_products(r, c, s, at, e);
  if (!status) status = run_output(r, c, s, at.m, y, bias, bias_off, relu, e);
  return status;
}

int clt_winograd_forward(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem x,
                         cl_mem w, size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu,
                         cl_mem scratch, clt_err *e) {
  const wino_conv c = forward_conv(g, filters, m);
  return run_conv(r, &c, 0, x, w, w_off, y, bias, bias_off, relu, scratch, e);
}

int clt_winograd_dx(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem dy, cl_mem w,
                    size_t w_off, cl_mem dx, cl_mem scratch, clt_err *e) {
  const wino_conv c = dx_conv(g, filters, m);
  return run_conv(r, &c, 1, dy, w, w_off, dx, w, -1, 0, scratch, e);
}

int clt_winograd_dw(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem x, cl_mem dy,
                    cl_mem dw, size_t dw_off, cl_mem scratch, clt_err *e) {
  const wino_conv c = forward_conv(g, filters, m);
  int status = check_tile(m, e);
  if (!status) status = check_size(&c, 0, e);
  if (status) return status;
  const wino_parts at = parts(&c);
  status = run_input(r, &c, x, scratch, at.v, e);
  cl_kernel k;
  if (!status) status = wino_kernel(r, m, "wino_grad_output", &k, e);
  const wino_planes ps = planes(&c);
  const int zs = (int)ps.m, us = (int)ps.u;
  if (!status) {
    clt_karg args[] = {CLT_ARG(dy),   CLT_ARG(scratch), CLT_ARG(at.m),   CLT_ARG(c.batch),
                       CLT_ARG(c.oh), CLT_ARG(c.ow),    CLT_ARG(c.cout), CLT_ARG(c.th),
                       CLT_ARG(c.tw), CLT_ARG(zs)};
    status = clt_launch_rows(r, k, "wino_grad_output", args, 10, lane_cols(r, c.m, c.cout), c.p, 1,
                             e);
  }
  /* dU[t] = V[t]^T Z[t], one batch, each a sum over the tiles in the GEMM's
   * fixed order. */
  const clt_gemm_shape shape = grad_shape(&c);
  const clt_gemm_batch bt = {positions(m), ps.v, ps.m, ps.u};
  if (!status)
    status = clt_gemm_batched(r, &shape, &bt, 1.0f, scratch, (size_t)at.v, scratch, (size_t)at.m,
                              0.0f, scratch, (size_t)at.u, e);
  if (!status) status = wino_kernel(r, m, "wino_filter_grad", &k, e);
  if (status) return status;
  const int off = (int)dw_off;
  clt_karg args[] = {CLT_ARG(scratch), CLT_ARG(at.u),   CLT_ARG(dw), CLT_ARG(off),
                     CLT_ARG(c.cin),   CLT_ARG(c.cout), CLT_ARG(us)};
  return clt_launch_rows(r, k, "wino_filter_grad", args, 7, lane_cols(r, c.m, c.cout),
                         (size_t)c.cin, 1, e);
}
