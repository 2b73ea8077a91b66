// Add: the sum of two tensors of one shape, with its fused ReLU.

// y = x + x2, then ReLU when relu != 0 (clt_launch_elems over n). CPUs: work-item i
// adds floats [8i, 8i + 8) as a float8, the one past them the n % 8 left; GPUs:
// work-item i adds float i.
__kernel void add_forward(__global const float *x, __global const float *x2, __global float *y,
                          const int n, const int relu) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i >= n) return;
  float v = x[i] + x2[i];
  if (relu && v < 0.0f) v = 0.0f;
  y[i] = v;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    float8 v = vload8(i, x) + vload8(i, x2);
    if (relu) v = select(v, (float8)(0.0f), isless(v, (float8)(0.0f)));
    vstore8(v, i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) {
      float v = x[j] + x2[j];
      if (relu && v < 0.0f) v = 0.0f;
      y[j] = v;
    }
  }
#endif
}

// dx = dx2 = dy, zeroed where the output y is not positive when relu != 0; dx or
// dx2 may be NULL. Same layout of work as add_forward.
__kernel void add_backward(__global const float *dy, __global const float *y,
                           __global float *dx, __global float *dx2, const int n,
                           const int relu) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i >= n) return;
  const float g = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
  if (dx) dx[i] = g;
  if (dx2) dx2[i] = g;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    float8 g = vload8(i, dy);
    if (relu) g = select((float8)(0.0f), g, isgreater(vload8(i, y), (float8)(0.0f)));
    if (dx) vstore8(g, i, dx);
    if (dx2) vstore8(g, i, dx2);
  } else {
    for (size_t j = at; j < (size_t)n; j++) {
      const float g = relu && !(y[j] > 0.0f) ? 0.0f : dy[j];
      if (dx) dx[j] = g;
      if (dx2) dx2[j] = g;
    }
  }
#endif
}

// The same where the gradient plan gave the inputs' gradients the output
// gradient's buffer (src/engine/net.c): dy masked in place, and copied to dx
// when dx is not NULL (an input whose gradient lives elsewhere). Same layout
// of work as add_forward.
__kernel void add_backward_in_place(__global float *dy, __global const float *y,
                                    __global float *dx, const int n) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i >= n) return;
  const float g = y[i] > 0.0f ? dy[i] : 0.0f;
  dy[i] = g;
  if (dx) dx[i] = g;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const float8 g = select((float8)(0.0f), vload8(i, dy), isgreater(vload8(i, y), (float8)(0.0f)));
    vstore8(g, i, dy);
    if (dx) vstore8(g, i, dx);
  } else {
    for (size_t j = at; j < (size_t)n; j++) {
      const float g = y[j] > 0.0f ? dy[j] : 0.0f;
      dy[j] = g;
      if (dx) dx[j] = g;
    }
  }
#endif
}
