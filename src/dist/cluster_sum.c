/* The cross-process sum of gradients (cluster.h): a ring over the processes. */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_impl.h"
#include "half.h"

const char *clt_wire_name(clt_wire wire) { return wire == CLT_WIRE_FP16 ? "fp16" : "fp32"; }

int clt_wire_parse(const char *text, const char *what, clt_wire *out, clt_err *e) {
  if (text && strcmp(text, "fp32") == 0) {
    *out = CLT_WIRE_FP32;
  } else if (text && strcmp(text, "fp16") == 0) {
    *out = CLT_WIRE_FP16;
  } else {
    return clt_fail(e, CLT_ERR_ARG, "%s %s: expected fp32 or fp16", what, text ? text : "(none)");
  }
  return CLT_OK;
}

int clt_cluster_reserve_wire(clt_cluster *c, size_t floats, clt_wire wire, clt_err *e) {
  const int n = clt_cluster_size(c);
  if (n == 1) return CLT_OK;
  const size_t need = (floats + (size_t)n - 1) / (size_t)n;
  if (need > c->scratch_floats) {
    float *s = malloc((need ? need : 1) * sizeof *s);
    if (!s) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the cross-process sum");
    memset(s, 0, need * sizeof *s); /* first touch now, not in the step loop */
    free(c->scratch);
    c->scratch = s;
    c->scratch_floats = need;
  }
  if (wire == CLT_WIRE_FP16 && need > c->halves_chunk) {
    uint16_t *h = malloc(2 * (need ? need : 1) * sizeof *h);
    if (!h) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the cross-process sum");
    memset(h, 0, 2 * need * sizeof *h);
    free(c->halves);
    c->halves = h;
    c->halves_chunk = need;
  }
  return CLT_OK;
}

int clt_cluster_reserve(clt_cluster *c, size_t floats, clt_err *e) {
  return clt_cluster_reserve_wire(c, floats, CLT_WIRE_FP32, e);
}

/* Chunk k of n floats cut in `parts`: the same cut as the device ring's. */
static size_t chunk_begin(size_t n, int parts, int k) { return (size_t)k * n / (size_t)parts; }

/* Where the sum of floats [lo, hi) of n cuts its chunk k (of parts). Two
 * processes cut the range in halves of its own: each float is then the sum of
 * the same two floats as in the whole buffer's call, whichever process adds
 * them, and the sum of two floats is the same in either order; this way both
 * send half of the range at each step, as a ring over the whole buffer does.
 * More processes cut it where the whole buffer's chunks are, the summation
 * order then depending on the chunk (so a range inside one chunk goes one way
 * round at a time). */
static size_t cut(size_t n, int parts, int k, size_t lo, size_t hi) {
  if (parts == 2) return lo + chunk_begin(hi - lo, parts, k);
  const size_t b = chunk_begin(n, parts, k);
  return b < lo ? lo : b > hi ? hi : b;
}

/* One step of the ring: a blocking exchange, or (idle) one polled. */
static int exchange(clt_cluster *c, const void *send, size_t send_bytes, int to, void *recv,
                    size_t recv_bytes, int from, int tag, clt_cluster_idle_fn idle, void *ctx,
                    clt_err *e) {
  if (!idle) return clt_cluster_exchange(c, send, send_bytes, to, recv, recv_bytes, from, tag, e);
  return clt_cluster_exchange_polled(c, send, send_bytes, to, recv, recv_bytes, from, tag, idle,
                                     ctx, e);
}

int clt_cluster_sum(clt_cluster *c, float *buf, size_t n, clt_err *e) {
  return clt_cluster_sum_range(c, buf, n, 0, n, CLT_WIRE_FP32, NULL, NULL, e);
}

int clt_cluster_sum_range(clt_cluster *c, float *buf, size_t n, size_t lo, size_t hi, clt_wire wire,
                          clt_cluster_idle_fn idle, void *ctx, clt_err *e) {
  const int size = clt_cluster_size(c);
  if (size == 1) return CLT_OK;
  const size_t chunk = (n + (size_t)size - 1) / (size_t)size;
  const int half = wire == CLT_WIRE_FP16;
  if (chunk > c->scratch_floats || (half && chunk > c->halves_chunk)) {
    return clt_fail(e, CLT_ERR_INTERNAL, "cross-process sum of %zu floats: %zu reserved", n,
                    (half ? c->halves_chunk : c->scratch_floats) * (size_t)size);
  }
  if (lo > hi || hi > n)
    return clt_fail(e, CLT_ERR_INTERNAL, "cross-process sum of floats [%zu, %zu) of %zu", lo, hi,
                    n);
  if (lo == hi) return CLT_OK;
  uint16_t *hsend = c->halves, *hrecv = c->halves + c->halves_chunk;
  /* Half precision: every process's own floats rounded first (Horovod's
   * compression), so that the sum of two is the same in either order. */
  if (half) clt_floats_round_to_half(buf + lo, hi - lo);
  const int rank = c->rank, next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int g = 0; g < 2 * (size - 1); g++) {
    /* Reduce-scatter, then all-gather, in the device ring's order: after step g
     * of the first phase rank holds chunk rank-1-g summed over g+2 processes. */
    const int reduce = g < size - 1;
    const int t = reduce ? g : g - (size - 1);
    const int send = reduce ? ((rank - g) % size + size) % size
                            : ((rank + 1 - t) % size + size) % size;
    const int recv = reduce ? ((rank - 1 - g) % size + 2 * size) % size
                            : ((rank - t) % size + size) % size;
    const size_t s0 = cut(n, size, send, lo, hi), slen = cut(n, size, send + 1, lo, hi) - s0;
    const size_t r0 = cut(n, size, recv, lo, hi), rlen = cut(n, size, recv + 1, lo, hi) - r0;
    int status;
    if (!half) {
      float *into = reduce ? c->scratch : buf + r0;
      status = exchange(c, buf + s0, slen * sizeof *buf, next, into, rlen * sizeof *into, prev, g,
                        idle, ctx, e);
      if (status) return status;
      if (reduce) {
        float *dst = buf + r0;
        for (size_t i = 0; i < rlen; i++) dst[i] += c->scratch[i]; /* own + received, as add_into */
      }
      continue;
    }
    if (reduce || t == 0) {
      clt_halves_from_floats(hsend, buf + s0, slen);
      /* The complete chunk, as it goes round: its owner keeps the rounded sum too. */
      if (!reduce) clt_halves_to_floats(buf + s0, hsend, slen);
    } else {
      uint16_t *h = hsend; /* what came in last step goes on as it is */
      hsend = hrecv;
      hrecv = h;
    }
    status = exchange(c, hsend, slen * sizeof *hsend, next, hrecv, rlen * sizeof *hrecv, prev, g,
                      idle, ctx, e);
    if (status) return status;
    if (reduce) clt_halves_add_into(buf + r0, hrecv, rlen);
    else clt_halves_to_floats(buf + r0, hrecv, rlen);
  }
  return CLT_OK;
}
