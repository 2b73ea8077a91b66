// LayerNormalization over the channels of each position (a row of C floats, NHWC):
// y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var (the biased one)
// over the row's C channels, as tf.nn.moments takes them.
//
// Launches: clt_launch_groups over the rows. CLT_GPU 0 (CPUs): a work-item per row,
// its sums in channel order; CLT_GPU 1 (GPUs): a work-group per row, its work-items
// striding the channels, their sums added by a fixed tree (group_sum).

// gamma at p[g] and beta at p[bt] (-1: none, the scale 1 or the offset 0).
__kernel void layernorm_forward(__global const float *x, __global const float *p, const int g,
                                const int bt, __global float *y, const int rows, const int C,
                                const float eps) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
  __global const float *xr = x + (size_t)r * C;
  __global float *yr = y + (size_t)r * C;
  float s = 0.0f;
  for (int c = lid; c < C; c += size) s += xr[c];
  const float mean = group_sum(s, tile) / C;
  s = 0.0f;
  for (int c = lid; c < C; c += size) s += (xr[c] - mean) * (xr[c] - mean);
  const float inv = rsqrt(group_sum(s, tile) / C + eps);
  for (int c = lid; c < C; c += size) {
    const float v = (xr[c] - mean) * inv;
    yr[c] = v * (g >= 0 ? p[g + c] : 1.0f) + (bt >= 0 ? p[bt + c] : 0.0f);
  }
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  __global const float *xr = x + (size_t)r * C;
  __global float *yr = y + (size_t)r * C;
  float s = 0.0f;
  for (int c = 0; c < C; c++) s += xr[c];
  const float mean = s / C;
  s = 0.0f;
  for (int c = 0; c < C; c++) s += (xr[c] - mean) * (xr[c] - mean);
  const float inv = rsqrt(s / C + eps);
  for (int c = 0; c < C; c++) {
    const float v = (xr[c] - mean) * inv;
    yr[c] = v * (g >= 0 ? p[g + c] : 1.0f) + (bt >= 0 ? p[bt + c] : 0.0f);
  }
#endif
}

// Per row, from x (mean and 1/std recomputed) and dy: with xh = (x - mean) * inv and
// d = dy * gamma, dx = inv * (d - mean(d) - xh * mean(d * xh)) (if want_dx), and
// gx = dy * xh (if want_gx: its column sums are gamma's gradient).
__kernel void layernorm_backward(__global const float *x, __global const float *dy,
                                 __global const float *p, const int g, __global float *dx,
                                 const int want_dx, __global float *gx, const int want_gx,
                                 const int rows, const int C, const float eps) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
  const size_t at = (size_t)r * C;
  float s = 0.0f;
  for (int c = lid; c < C; c += size) s += x[at + c];
  const float mean = group_sum(s, tile) / C;
  s = 0.0f;
  for (int c = lid; c < C; c += size) s += (x[at + c] - mean) * (x[at + c] - mean);
  const float inv = rsqrt(group_sum(s, tile) / C + eps);
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lid; c < C; c += size) {
    const float xh = (x[at + c] - mean) * inv, d = dy[at + c] * (g >= 0 ? p[g + c] : 1.0f);
    s1 += d;
    s2 += d * xh;
    if (want_gx) gx[at + c] = dy[at + c] * xh;
  }
  const float m1 = group_sum(s1, tile) / C, m2 = group_sum(s2, tile) / C;
  if (!want_dx) return;
  for (int c = lid; c < C; c += size) {
    const float xh = (x[at + c] - mean) * inv, d = dy[at + c] * (g >= 0 ? p[g + c] : 1.0f);
    dx[at + c] = inv * (d - m1 - xh * m2);
  }
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  const size_t at = (size_t)r * C;
  float s = 0.0f;
  for (int c = 0; c < C; c++) s += x[at + c];
  const float mean = s / C;
  s = 0.0f;
  for (int c = 0; c < C; c++) s += (x[at + c] - mean) * (x[at + c] - mean);
  const float inv = rsqrt(s / C + eps);
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = 0; c < C; c++) {
    const float xh = (x[at + c] - mean) * inv, d = dy[at + c] * (g >= 0 ? p[g + c] : 1.0f);
    s1 += d;
    s2 += d * xh;
    if (want_gx) gx[at + c] = dy[at + c] * xh;
  }
  const float m1 = s1 / C, m2 = s2 / C;
  if (!want_dx) return;
  for (int c = 0; c < C; c++) {
    const float xh = (x[at + c] - mean) * inv, d = dy[at + c] * (g >= 0 ? p[g + c] : 1.0f);
    dx[at + c] = inv * (d - m1 - xh * m2);
  }
#endif
}
