// ZeroPadding2D as a layer of its own (where it cannot fold into the next one):
// y is x with PT zero rows above, PL zero columns left, and zeros below and right
// up to OH x OW; the backward pass crops. NHWC.
//
// Launches: clt_launch_rows over (C, positions). CLT_GPU 0 (CPUs): a work-item
// takes 8 channels (a float8, scalars for a C % 8 tail) of rows_per_item
// positions; CLT_GPU 1 (GPUs): a work-item per element, consecutive work-items
// on consecutive channels (coalesced).

// y[b, oy, ox, c] = x[b, oy - PT, ox - PL, c], or 0 outside x.
__kernel void pad_forward(__global const float *x, __global float *y, const int B, const int H,
                          const int W, const int C, const int PT, const int PL, const int OH,
                          const int OW, const int rows_per_item) {
#if CLT_GPU
  (void)rows_per_item; // the CPU variant's
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * OH * OW) return;
  const int ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
  const int iy = oy - PT, ix = ox - PL;
  float v = 0.0f;
  if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = x[(((size_t)b * H + iy) * W + ix) * C + c];
  y[(size_t)pos * C + c] = v;
#else
  const int c0 = get_global_id(0) * CH;
  const int p0 = get_global_id(1) * rows_per_item;
  if (c0 >= C || p0 >= B * OH * OW) return;
  const int p1 = min(B * OH * OW, p0 + rows_per_item);
  for (int pos = p0; pos < p1; pos++) {
    const int ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
    const int iy = oy - PT, ix = ox - PL;
    __global float *out = y + (size_t)pos * C + c0;
    const int inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
    // The source address only inside x: outside it would point past the buffer.
    __global const float *src = inside ? x + (((size_t)b * H + iy) * W + ix) * C + c0 : x;
    if (c0 + CH <= C) {
      vstore8(inside ? vload8(0, src) : (float8)(0.0f), 0, out);
    } else {
      for (int c = 0; c < C - c0; c++) out[c] = inside ? src[c] : 0.0f;
    }
  }
#endif
}

// dx[b, iy, ix, c] = dy[b, iy + PT, ix + PL, c]: the gradient of the padding is dropped.
__kernel void pad_backward(__global const float *dy, __global float *dx, const int B,
                           const int H, const int W, const int C, const int PT, const int PL,
                           const int OH, const int OW, const int rows_per_item) {
#if CLT_GPU
  (void)rows_per_item; // the CPU variant's
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * H * W) return;
  const int ix = pos % W, iy = (pos / W) % H, b = pos / (W * H);
  dx[(size_t)pos * C + c] = dy[(((size_t)b * OH + iy + PT) * OW + ix + PL) * C + c];
#else
  const int c0 = get_global_id(0) * CH;
  const int p0 = get_global_id(1) * rows_per_item;
  if (c0 >= C || p0 >= B * H * W) return;
  const int p1 = min(B * H * W, p0 + rows_per_item);
  for (int pos = p0; pos < p1; pos++) {
    const int ix = pos % W, iy = (pos / W) % H, b = pos / (W * H);
    __global const float *src = dy + (((size_t)b * OH + iy + PT) * OW + ix + PL) * C + c0;
    __global float *out = dx + (size_t)pos * C + c0;
    if (c0 + CH <= C) {
      vstore8(vload8(0, src), 0, out);
    } else {
      for (int c = 0; c < C - c0; c++) out[c] = src[c];
    }
  }
#endif
}
