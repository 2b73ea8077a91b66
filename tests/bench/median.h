/* The median of repeated timings, shared by the C benchmarks (the clock is
 * clt_now_seconds, src/base/timing.h). */
#ifndef CLT_BENCH_MEDIAN_H
#define CLT_BENCH_MEDIAN_H

#include <stdlib.h>

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n), which it sorts. */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
