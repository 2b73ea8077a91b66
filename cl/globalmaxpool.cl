// GlobalMaxPooling2D, the maximum of each channel over an image's positions. NHWC.
//
// clt_launch_rows over (C, B): CPU: a work-item per 8 channels of an image; GPU:
// a work-item per (channel, image), scanning the HW positions.

// The maximum of p[i*C] over the HW positions i (a NaN wins, as in maxpool.cl).
static inline float column_max(__global const float *p, const int HW, const int C) {
  float best = p[0];
  for (int i = 1; i < HW; i++) {
    const float v = p[(size_t)i * C];
    if (v > best || isnan(v)) best = v;
  }
  return best;
}

// dx[i*C] = g at the first maximum of x[i*C] over the HW positions i (strict '>'),
// 0 elsewhere.
static inline void route_max(__global const float *x, const float g, __global float *dx,
                             const int HW, const int C) {
  float best = x[0];
  int arg = 0;
  for (int i = 1; i < HW; i++) {
    const float v = x[(size_t)i * C];
    if (v > best) {
      best = v;
      arg = i;
    }
  }
  for (int i = 0; i < HW; i++) dx[(size_t)i * C] = i == arg ? g : 0.0f;
}

// y[b, c] = max over the positions of x[b, p, c] (a NaN wins, as in maxpool.cl).
__kernel void gmp_forward(__global const float *x, __global float *y, const int B, const int HW,
                          const int C) {
#if CLT_GPU
  const int c = get_global_id(0), b = get_global_id(1);
  if (c >= C || b >= B) return;
  y[(size_t)b * C + c] = column_max(x + (size_t)b * HW * C + c, HW, C);
#else
  const int c0 = get_global_id(0) * CH, b = get_global_id(1);
  if (c0 >= C || b >= B) return;
  __global const float *p = x + (size_t)b * HW * C + c0;
  if (c0 + CH <= C) {
    float8 best = vload8(0, p);
    for (int i = 1; i < HW; i++) {
      const float8 v = vload8(0, p + (size_t)i * C);
      best = select(best, v, isgreater(v, best) | isnan(v));
    }
    vstore8(best, 0, y + (size_t)b * C + c0);
  } else {
    for (int c = 0; c < C - c0; c++) y[(size_t)b * C + c0 + c] = column_max(p + c, HW, C);
  }
#endif
}

// dx[b, p, c] = dy[b, c] at the first maximum over p (strict '>', TensorFlow's
// rule), 0 elsewhere: every entry written.
__kernel void gmp_backward(__global const float *x, __global const float *dy, __global float *dx,
                           const int B, const int HW, const int C) {
#if CLT_GPU
  const int c = get_global_id(0), b = get_global_id(1);
  if (c >= C || b >= B) return;
  const size_t base = (size_t)b * HW * C + c;
  route_max(x + base, dy[(size_t)b * C + c], dx + base, HW, C);
#else
  const int c0 = get_global_id(0) * CH, b = get_global_id(1);
  if (c0 >= C || b >= B) return;
  const size_t base = (size_t)b * HW * C + c0;
  if (c0 + CH <= C) {
    float8 best = vload8(0, x + base);
    int8 arg = (int8)(0);
    for (int i = 1; i < HW; i++) {
      const float8 v = vload8(0, x + base + (size_t)i * C);
      const int8 greater = isgreater(v, best);
      best = select(best, v, greater);
      arg = select(arg, (int8)(i), greater);
    }
    const float8 g = vload8(0, dy + (size_t)b * C + c0);
    for (int i = 0; i < HW; i++)
      vstore8(select((float8)(0.0f), g, arg == (int8)(i)), 0, dx + base + (size_t)i * C);
  } else {
    for (int c = 0; c < C - c0; c++)
      route_max(x + base + c, dy[(size_t)b * C + c0 + c], dx + base + c, HW, C);
  }
#endif
}
