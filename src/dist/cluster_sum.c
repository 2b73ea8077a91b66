/* The cross-process sum of gradients (cluster.h): a ring over the processes. */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_impl.h"

int clt_cluster_reserve(clt_cluster *c, size_t floats, clt_err *e) {
  const int n = clt_cluster_size(c);
  if (n == 1) return CLT_OK;
  const size_t need = (floats + (size_t)n - 1) / (size_t)n;
  if (need <= c->scratch_floats) return CLT_OK;
  float *s = malloc((need ? need : 1) * sizeof *s);
  if (!s) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the cross-process sum");
  memset(s, 0, need * sizeof *s); /* first touch now, not in the step loop */
  free(c->scratch);
  c->scratch = s;
  c->scratch_floats = need;
  return CLT_OK;
}

/* Chunk k of n floats cut in `parts`: the same cut as the device ring's. */
static size_t chunk_begin(size_t n, int parts, int k) { return (size_t)k * n / (size_t)parts; }

int clt_cluster_sum(clt_cluster *c, float *buf, size_t n, clt_err *e) {
  const int size = clt_cluster_size(c);
  if (size == 1) return CLT_OK;
  if ((n + (size_t)size - 1) / (size_t)size > c->scratch_floats) {
    return clt_fail(e, CLT_ERR_INTERNAL, "cross-process sum of %zu floats: %zu reserved", n,
                    c->scratch_floats * (size_t)size);
  }
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
    const size_t s0 = chunk_begin(n, size, send), slen = chunk_begin(n, size, send + 1) - s0;
    const size_t r0 = chunk_begin(n, size, recv), rlen = chunk_begin(n, size, recv + 1) - r0;
    float *into = reduce ? c->scratch : buf + r0;
    int status = clt_cluster_exchange(c, buf + s0, slen * sizeof *buf, next, into,
                                      rlen * sizeof *into, prev, g, e);
    if (status) return status;
    if (reduce) {
      float *dst = buf + r0;
      for (size_t i = 0; i < rlen; i++) dst[i] += c->scratch[i]; /* own + received, as add_into */
    }
  }
  return CLT_OK;
}
