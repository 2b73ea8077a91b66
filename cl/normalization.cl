// Keras' Normalization (the preprocessing layer) with its statistics as weights:
// y = (x - mean[c]) / max(sqrt(var[c]), eps), and its backward dx = dy / the same.
//
// Launches: clt_launch_rows over (C, positions). CLT_GPU 0 (CPUs): a work-item takes
// 8 channels (scalars for a C % 8 tail) of rows_per_item positions; CLT_GPU 1
// (GPUs): a work-item per element, consecutive work-items on consecutive channels.

// The divisor of channel c, as Keras computes it.
static inline float normalization_div(__global const float *p, const int var, const int c,
                                      const float eps) {
  return fmax(sqrt(p[var + c]), eps);
}

// mean at p[m], variance at p[v]; backward: mean < 0 (x is dy, y is dx). stats >= 0
// (a training forward): work-items of position 0 also write w times mean, variance
// and count (at p[stats]) into their gradient slots, the statistics the moving
// average keeps, w the slice's share of the batch.
__kernel void normalization_apply(__global const float *x, __global float *y,
                                  __global const float *p, const int m, const int v,
                                  const int rows, const int C, const float eps,
                                  __global float *grads, const int stats, const float w,
                                  const int rows_per_item) {
#if CLT_GPU
  (void)rows_per_item; // the CPU variant's
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= rows) return;
  const size_t at = (size_t)pos * C + c;
  y[at] = (x[at] - (m >= 0 ? p[m + c] : 0.0f)) / normalization_div(p, v, c, eps);
  if (stats >= 0 && pos == 0) {
    grads[m + c] = w * p[m + c];
    grads[v + c] = w * p[v + c];
    if (c == 0) grads[stats] = w * p[stats];
  }
#else
  const int c0 = get_global_id(0) * CH;
  const int p0 = get_global_id(1) * rows_per_item;
  if (c0 >= C || p0 >= rows) return;
  const int p1 = min(rows, p0 + rows_per_item), c1 = min(C, c0 + CH);
  for (int pos = p0; pos < p1; pos++) {
    const size_t at = (size_t)pos * C;
    for (int c = c0; c < c1; c++)
      y[at + c] = (x[at + c] - (m >= 0 ? p[m + c] : 0.0f)) / normalization_div(p, v, c, eps);
  }
  if (stats >= 0 && p0 == 0) {
    for (int c = c0; c < c1; c++) {
      grads[m + c] = w * p[m + c];
      grads[v + c] = w * p[v + c];
    }
    if (c0 == 0) grads[stats] = w * p[stats];
  }
#endif
}
