// GlobalAveragePooling2D: the mean of each channel over an image's positions. NHWC.

// y[b, c] = (sum over the HW positions of x[b, p, c]) / HW: clt_launch_blocks over
// (C, B), an image per block. CPUs sum the positions in order; on GPUs the LR lanes
// of a work-group take every LR-th position and meet in lane_sum.
__kernel void gap_forward(__global const float *x, __global float *y, const int B, const int HW,
                          const int C) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int c = get_global_id(0), b = get_group_id(1);
  float s = 0.0f;
  if (c < C && b < B)
    for (int i = get_local_id(1); i < HW; i += get_local_size(1))
      s += x[((size_t)b * HW + i) * C + c];
  s = lane_sum(s, tile);
  if (c < C && b < B && get_local_id(1) == 0) y[(size_t)b * C + c] = s / (float)HW;
#else
  const int c0 = get_global_id(0) * CH;
  const int b = get_global_id(1);
  if (c0 >= C || b >= B) return;
  __global const float *p = x + (size_t)b * HW * C + c0;
  if (c0 + CH <= C) {
    float8 s = (float8)(0.0f);
    for (int i = 0; i < HW; i++) s += vload8(0, p + (size_t)i * C);
    vstore8(s / (float)HW, 0, y + (size_t)b * C + c0);
  } else {
    for (int c = 0; c < C - c0; c++) {
      float s = 0.0f;
      for (int i = 0; i < HW; i++) s += p[(size_t)i * C + c];
      y[(size_t)b * C + c0 + c] = s / (float)HW;
    }
  }
#endif
}

// dx[b, p, c] = dy[b, c] / HW: clt_launch_rows over (C, B*HW), a row per position.
__kernel void gap_backward(__global const float *dy, __global float *dx, const int B,
                           const int HW, const int C) {
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * HW) return;
  dx[(size_t)pos * C + c] = dy[(size_t)(pos / HW) * C + c] / (float)HW;
#else
  const int c0 = get_global_id(0) * CH;
  const int pos = get_global_id(1);
  if (c0 >= C || pos >= B * HW) return;
  __global const float *g = dy + (size_t)(pos / HW) * C;
  __global float *out = dx + (size_t)pos * C;
  if (c0 + CH <= C) {
    vstore8(vload8(0, g + c0) / (float)HW, 0, out + c0);
  } else {
    for (int c = c0; c < C; c++) out[c] = g[c] / (float)HW;
  }
#endif
}
