// Max pooling, window P x P, stride S, no padding (floor). NHWC.
// Kernels run on a 2-D range (channel, position) so that neighbouring work-items
// read neighbouring floats and index arithmetic is paid once per position.

// Range: (C, B*OH*OW).
__kernel void maxpool_forward(__global const float *x, __global float *y, const int B,
                              const int H, const int W, const int C, const int P, const int S,
                              const int OH, const int OW) {
  const int c = get_global_id(0);
  const size_t pos = get_global_id(1);
  if (c >= C || pos >= (size_t)B * OH * OW) return;
  const int ox = (int)(pos % OW);
  const int oy = (int)((pos / OW) % OH);
  const int b = (int)(pos / ((size_t)OW * OH));
  __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C + c;
  float best = base[0];
  for (int ky = 0; ky < P; ky++)
    for (int kx = 0; kx < P; kx++) {
      const float v = base[((size_t)ky * W + kx) * C];
      if (v > best || isnan(v)) best = v; // not fmax: NaN propagates to the loss guard
    }
  y[pos * C + c] = best;
}

// Windows that tile without overlap (S == P): each window writes its whole
// gradient, dy to its first maximum (raster order, TensorFlow's tie rule) and 0
// to the rest. Inputs past the last window are zeroed by the caller.
// Range: (C, B*OH*OW).
__kernel void maxpool_backward_tiled(__global const float *x, __global const float *dy,
                                     __global float *dx, const int B, const int H, const int W,
                                     const int C, const int P, const int OH, const int OW) {
  const int c = get_global_id(0);
  const size_t pos = get_global_id(1);
  if (c >= C || pos >= (size_t)B * OH * OW) return;
  const int ox = (int)(pos % OW);
  const int oy = (int)((pos / OW) % OH);
  const int b = (int)(pos / ((size_t)OW * OH));
  const size_t base = (((size_t)b * H + oy * P) * W + ox * P) * C + c;
  int arg = 0;
  float best = x[base];
  for (int ky = 0; ky < P; ky++)
    for (int kx = 0; kx < P; kx++) {
      const float v = x[base + ((size_t)ky * W + kx) * C];
      if (v > best) {
        best = v;
        arg = ky * P + kx;
      }
    }
  const float g = dy[pos * C + c];
  for (int ky = 0; ky < P; ky++)
    for (int kx = 0; kx < P; kx++) dx[base + ((size_t)ky * W + kx) * C] = ky * P + kx == arg ? g : 0.0f;
}

// Overlapping windows (S < P): each input element gathers the gradient of every
// window whose first maximum it is, so no two work-items write the same float.
// Range: (C, B*H*W).
__kernel void maxpool_backward(__global const float *x, __global const float *dy,
                               __global float *dx, const int B, const int H, const int W,
                               const int C, const int P, const int S, const int OH,
                               const int OW) {
  const int c = get_global_id(0);
  const size_t pos = get_global_id(1);
  if (c >= C || pos >= (size_t)B * H * W) return;
  const int ix = (int)(pos % W);
  const int iy = (int)((pos / W) % H);
  const int b = (int)(pos / ((size_t)W * H));
  float sum = 0.0f;
  // Windows oy with oy*S <= iy < oy*S + P.
  const int oy_lo = iy >= P ? (iy - P) / S + 1 : 0;
  const int ox_lo = ix >= P ? (ix - P) / S + 1 : 0;
  for (int oy = oy_lo; oy <= iy / S && oy < OH; oy++) {
    for (int ox = ox_lo; ox <= ix / S && ox < OW; ox++) {
      __global const float *win = x + (((size_t)b * H + oy * S) * W + ox * S) * C + c;
      int arg = 0;
      float best = win[0];
      for (int ky = 0; ky < P; ky++)
        for (int kx = 0; kx < P; kx++) {
          const float v = win[((size_t)ky * W + kx) * C];
          if (v > best) {
            best = v;
            arg = ky * P + kx;
          }
        }
      if (arg == (iy - oy * S) * P + (ix - ox * S)) sum += dy[(((size_t)b * OH + oy) * OW + ox) * C + c];
    }
  }
  dx[pos * C + c] = sum;
}
