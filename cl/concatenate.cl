// Concatenate along the channels: rows = B*H*W rows; y[r] = (x[r, 0..C1), x2[r, 0..C2)). CPU: a work-item per row
// copies both parts as float8 runs; GPU: clt_launch_rows over (C1 + C2, rows), a
// work-item per output channel.

#if !CLT_GPU
static inline void copy_run(__global const float *src, __global float *dst, const int n) {
  int c = 0;
  for (; c + CH <= n; c += CH) vstore8(vload8(0, src + c), 0, dst + c);
  for (; c < n; c++) dst[c] = src[c];
}
#endif

__kernel void concat_forward(__global const float *x, __global const float *x2, __global float *y,
                             const int rows, const int C1, const int C2) {
  const int C = C1 + C2;
#if CLT_GPU
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  y[(size_t)r * C + c] = c < C1 ? x[(size_t)r * C1 + c] : x2[(size_t)r * C2 + c - C1];
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  copy_run(x + (size_t)r * C1, y + (size_t)r * C, C1);
  copy_run(x2 + (size_t)r * C2, y + (size_t)r * C + C1, C2);
#endif
}

// dx[r] = dy[r, 0..C1), dx2[r] = dy[r, C1..C1+C2); either may be NULL.
__kernel void concat_backward(__global const float *dy, __global float *dx, __global float *dx2,
                              const int rows, const int C1, const int C2) {
  const int C = C1 + C2;
#if CLT_GPU
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  if (c < C1) {
    if (dx) dx[(size_t)r * C1 + c] = dy[(size_t)r * C + c];
  } else if (dx2) {
    dx2[(size_t)r * C2 + c - C1] = dy[(size_t)r * C + c];
  }
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  if (dx) copy_run(dy + (size_t)r * C, dx + (size_t)r * C1, C1);
  if (dx2) copy_run(dy + (size_t)r * C + C1, dx2 + (size_t)r * C2, C2);
#endif
}
