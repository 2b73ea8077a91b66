// Max pooling, window P x P, stride S, no padding (floor). NHWC.

// One work-item per output position loops over the channels, 4 at a time when
// C allows: the channels of a window tap are contiguous in NHWC. Maxima let a
// NaN through (not fmax), so a NaN reaches the loss guard. Range: B*OH*OW.
__kernel void maxpool_forward(__global const float *x, __global float *y, const int B,
                              const int H, const int W, const int C, const int P, const int S,
                              const int OH, const int OW) {
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW) return;
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
  __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C;
  __global float *out = y + (size_t)pos * C;
  const int C4 = (C & 3) == 0 ? C : 0;
  for (int c = 0; c < C4; c += 4) {
    float4 best = vload4(0, base + c);
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) {
        const float4 v = vload4(0, base + ((size_t)ky * W + kx) * C + c);
        best = select(best, v, isgreater(v, best) | isnan(v));
      }
    vstore4(best, 0, out + c);
  }
  for (int c = C4; c < C; c++) {
    float best = base[c];
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) {
        const float v = base[((size_t)ky * W + kx) * C + c];
        if (v > best || isnan(v)) best = v;
      }
    out[c] = best;
  }
}

// Windows that tile without overlap (S == P): each window writes its whole
// gradient, dy to its first maximum (raster order, TensorFlow's tie rule) and 0
// to the rest; one work-item per window position, channels 4 at a time when C
// allows. Inputs past the last window are zeroed by the caller. Range: B*OH*OW.
__kernel void maxpool_backward_tiled(__global const float *x, __global const float *dy,
                                     __global float *dx, const int B, const int H, const int W,
                                     const int C, const int P, const int OH, const int OW) {
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW) return;
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
  const size_t base = (((size_t)b * H + oy * P) * W + ox * P) * C;
  const int C4 = (C & 3) == 0 ? C : 0;
  for (int c = 0; c < C4; c += 4) {
    float4 best = vload4(0, x + base + c);
    int4 arg = (int4)(0);
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) {
        const float4 v = vload4(0, x + base + ((size_t)ky * W + kx) * C + c);
        const int4 greater = isgreater(v, best);
        best = select(best, v, greater);
        arg = select(arg, (int4)(ky * P + kx), greater);
      }
    const float4 g = vload4(0, dy + (size_t)pos * C + c);
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) {
        const int4 here = arg == (int4)(ky * P + kx);
        vstore4(select((float4)(0.0f), g, here), 0, dx + base + ((size_t)ky * W + kx) * C + c);
      }
  }
  for (int c = C4; c < C; c++) {
    int arg = 0;
    float best = x[base + c];
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) {
        const float v = x[base + ((size_t)ky * W + kx) * C + c];
        if (v > best) {
          best = v;
          arg = ky * P + kx;
        }
      }
    const float g = dy[(size_t)pos * C + c];
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++) dx[base + ((size_t)ky * W + kx) * C + c] = ky * P + kx == arg ? g : 0.0f;
  }
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
