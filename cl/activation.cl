// Standalone activations (Keras' ReLU layer; a ReLU after Conv2D, Dense,
// BatchNormalization or Add is fused into that layer instead). Elementwise
// (clt_launch_elems): on CPUs (CLT_GPU 0) work-item i takes floats [8i, 8i + 8)
// as a float8, the one past them the n % 8 left, since PoCL does not vectorise
// across work-items; on GPUs work-item i takes float i (coalesced).
#ifndef CLT_GPU
#define CLT_GPU 0
#endif

#define CH 8

// y = x where x > 0, else 0 (NaN gives 0, as the fused ReLUs).
__kernel void relu_forward(__global const float *x, __global float *y, const int n) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const float8 v = vload8(i, x);
    vstore8(select((float8)(0.0f), v, isgreater(v, (float8)(0.0f))), i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) y[j] = x[j] > 0.0f ? x[j] : 0.0f;
  }
#endif
}

// dx = dy where the output y is positive, else 0.
__kernel void relu_backward(__global const float *dy, __global const float *y, __global float *dx,
                            const int n) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    vstore8(select((float8)(0.0f), vload8(i, dy), isgreater(vload8(i, y), (float8)(0.0f))), i, dx);
  } else {
    for (size_t j = at; j < (size_t)n; j++) dx[j] = y[j] > 0.0f ? dy[j] : 0.0f;
  }
#endif
}
