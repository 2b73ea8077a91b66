// Max pooling, window P x P, stride S, no padding (floor), and the general case
// (maxpool_pad_*, at the end): zero padding folded in or TensorFlow's 'same',
// non-square windows and strides. NHWC.
//
// CLT_GPU (common.cl): 0 on CPUs, where a work-item takes a
// position and loops over its channels as vectors (PoCL does not vectorise
// across work-items); 1 on GPUs, where a work-item takes one (channel,
// position), consecutive work-items consecutive channels (coalesced): range
// (C, positions) from clt_launch_rows. Same names, arguments and results (the
// GPU bodies are the CPU variants' scalar channel loops).

// The (channel, position) of a GPU work-item; past the range: return (no
// barriers in this file).
#define GPU_ITEM(npos)                                                                        \
  const int c = get_global_id(0), pos = get_global_id(1);                                    \
  if (c >= C || pos >= (npos)) return

// One work-item per output position loops over the channels, 4 at a time when
// C allows: the channels of a window tap are contiguous in NHWC. Maxima let a
// NaN through (not fmax), so a NaN reaches the loss guard. Range: B*OH*OW; GPU:
// (C, B*OH*OW).
__kernel void maxpool_forward(__global const float *x, __global float *y, const int B,
                              const int H, const int W, const int C, const int P, const int S,
                              const int OH, const int OW) {
#if CLT_GPU
  GPU_ITEM(B * OH * OW);
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
  __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C + c;
  float best = base[0];
  for (int ky = 0; ky < P; ky++)
    for (int kx = 0; kx < P; kx++) {
      const float v = base[((size_t)ky * W + kx) * C];
      if (v > best || isnan(v)) best = v;
    }
  y[(size_t)pos * C + c] = best;
#else
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
#endif
}

// Windows that tile without overlap (S == P): each window writes its whole
// gradient, dy to its first maximum (raster order, TensorFlow's tie rule) and 0
// to the rest; one work-item per window position, channels 4 at a time when C
// allows. Inputs past the last window are zeroed by the caller. RELU != 0: x is
// a ReLU's output whose backward is done here (dy *= x > 0 at the maximum, all
// the producer's mask would keep). Range: B*OH*OW; GPU: (C, B*OH*OW), a
// work-item per window and channel.
__kernel void maxpool_backward_tiled(__global const float *x, __global const float *dy,
                                     __global float *dx, const int B, const int H, const int W,
                                     const int C, const int P, const int OH, const int OW,
                                     const int RELU) {
#if CLT_GPU
  GPU_ITEM(B * OH * OW);
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
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
  const float g = RELU && !(best > 0.0f) ? 0.0f : dy[(size_t)pos * C + c];
  for (int ky = 0; ky < P; ky++)
    for (int kx = 0; kx < P; kx++)
      dx[base + ((size_t)ky * W + kx) * C] = ky * P + kx == arg ? g : 0.0f;
#else
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
    float4 g = vload4(0, dy + (size_t)pos * C + c);
    if (RELU) g = select((float4)(0.0f), g, isgreater(best, (float4)(0.0f)));
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
    const float g = RELU && !(best > 0.0f) ? 0.0f : dy[(size_t)pos * C + c];
    for (int ky = 0; ky < P; ky++)
      for (int kx = 0; kx < P; kx++)
        dx[base + ((size_t)ky * W + kx) * C + c] = ky * P + kx == arg ? g : 0.0f;
  }
#endif
}

// Overlapping windows (S < P): each input element gathers the gradient of every
// window whose first maximum it is, so no two work-items write the same float.
// Range: (C, B*H*W), already a work-item per element along the channels: one
// body for both variants (the host groups it with clt_launch_rows on GPUs).
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
      if (arg == (iy - oy * S) * P + (ix - ox * S))
        sum += dy[(((size_t)b * OH + oy) * OW + ox) * C + c];
    }
  }
  dx[pos * C + c] = sum;
}

// ---- The general case: padding, non-square windows and strides ----------------
//
// Window PH x PW, strides SH x SW, PT rows and PL columns of padding before the
// input (after it, whatever the output's size reaches). ZERO != 0: the padding is
// a folded ZeroPadding2D, cells holding 0 that take part in the max exactly as if
// the zeros were there; ZERO == 0: TensorFlow's 'same', cells that never win.
// Work-items take the C contiguous channels of a position 8 at a time as float8
// (PoCL does not vectorise across work-items), the C % 8 left as scalars.

// One work-item per output position. The window's taps inside the input are
// maxed (a NaN wins, as above); with ZERO, a window reaching into the padding then
// also maxes with 0. Range: B*OH*OW; GPU: (C, B*OH*OW).
__kernel void maxpool_pad_forward(__global const float *x, __global float *y, const int B,
                                  const int H, const int W, const int C, const int PH,
                                  const int PW, const int SH, const int SW, const int PT,
                                  const int PL, const int ZERO, const int OH, const int OW) {
#if CLT_GPU
  GPU_ITEM(B * OH * OW);
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
  const int y0 = oy * SH - PT, x0 = ox * SW - PL;
  const int ky0 = max(0, -y0), ky1 = min(PH, H - y0);
  const int kx0 = max(0, -x0), kx1 = min(PW, W - x0);
  __global const float *img = x + (size_t)b * H * W * C + c;
  float best = -INFINITY;
  for (int ky = ky0; ky < ky1; ky++)
    for (int kx = kx0; kx < kx1; kx++) {
      const float v = img[((size_t)(y0 + ky) * W + x0 + kx) * C];
      if (v > best || isnan(v)) best = v;
    }
  if (ZERO && (ky0 > 0 || kx0 > 0 || ky1 < PH || kx1 < PW) && 0.0f > best) best = 0.0f;
  y[(size_t)pos * C + c] = best;
#else
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW) return;
  const int ox = pos % OW;
  const int oy = (pos / OW) % OH;
  const int b = pos / (OW * OH);
  const int y0 = oy * SH - PT, x0 = ox * SW - PL;
  const int ky0 = max(0, -y0), ky1 = min(PH, H - y0);
  const int kx0 = max(0, -x0), kx1 = min(PW, W - x0);
  const int padded = ZERO && (ky0 > 0 || kx0 > 0 || ky1 < PH || kx1 < PW);
  __global const float *base = x + ((size_t)b * H * W) * C;
  __global float *out = y + (size_t)pos * C;
  int c = 0;
  for (; c + 8 <= C; c += 8) {
    float8 best = (float8)(-INFINITY);
    for (int ky = ky0; ky < ky1; ky++)
      for (int kx = kx0; kx < kx1; kx++) {
        const float8 v = vload8(0, base + ((size_t)(y0 + ky) * W + x0 + kx) * C + c);
        best = select(best, v, isgreater(v, best) | isnan(v));
      }
    if (padded) best = select(best, (float8)(0.0f), isgreater((float8)(0.0f), best));
    vstore8(best, 0, out + c);
  }
  for (; c < C; c++) {
    float best = -INFINITY;
    for (int ky = ky0; ky < ky1; ky++)
      for (int kx = kx0; kx < kx1; kx++) {
        const float v = base[((size_t)(y0 + ky) * W + x0 + kx) * C + c];
        if (v > best || isnan(v)) best = v;
      }
    if (padded && 0.0f > best) best = 0.0f;
    out[c] = best;
  }
#endif
}

// Each dx entry gets, window by window in a fixed order, the gradient of every
// window whose first maximum (raster order over the padded window, strict '>'
// as TensorFlow) it is. With ZERO padding cells are candidates holding 0, and a
// window whose first maximum is one sends its gradient nowhere; without, they
// are skipped. Every dx entry is written, so no zeroing is needed and
// overlapping windows need no atomics. GPU: a work-item per (channel, input
// position) gathers, range (C, B*H*W); CPU: a work-item per input row, range B*H.
__kernel void maxpool_pad_backward(__global const float *x, __global const float *dy,
                                   __global float *dx, const int B, const int H, const int W,
                                   const int C, const int PH, const int PW, const int SH,
                                   const int SW, const int PT, const int PL, const int ZERO,
                                   const int OH, const int OW) {
#if CLT_GPU
  GPU_ITEM(B * H * W);
  const int ix = pos % W;
  const int iy = (pos / W) % H;
  const int b = pos / (W * H);
  const int py = iy + PT, px = ix + PL;
  const int oy_lo = py >= PH ? (py - PH) / SH + 1 : 0, oy_hi = min(py / SH, OH - 1);
  const int ox_lo = px >= PW ? (px - PW) / SW + 1 : 0, ox_hi = min(px / SW, OW - 1);
  __global const float *img = x + (size_t)b * H * W * C + c;
  float sum = 0.0f;
  for (int oy = oy_lo; oy <= oy_hi; oy++)
    for (int ox = ox_lo; ox <= ox_hi; ox++) {
      const int y0 = oy * SH - PT, x0 = ox * SW - PL;
      float best = 0.0f;
      int arg = -1;
      for (int ky = 0; ky < PH; ky++)
        for (int kx = 0; kx < PW; kx++) {
          const int yy = y0 + ky, xx = x0 + kx;
          const int inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
          if (!inside && !ZERO) continue;
          const float v = inside ? img[((size_t)yy * W + xx) * C] : 0.0f;
          if (arg < 0 || v > best) {
            best = v;
            arg = ky * PW + kx;
          }
        }
      if (arg == (py - oy * SH) * PW + (px - ox * SW))
        sum += dy[(((size_t)b * OH + oy) * OW + ox) * C + c];
    }
  dx[(size_t)pos * C + c] = sum;
#else
  // A work-item per input row (b, iy) goes through the windows over that row,
  // finding each window's first maximum once per row it covers and adding the
  // window's gradient to the row's cell that holds it. A work-item per input
  // position had found each window's maximum once per position it covers (4
  // times as often for 3x3 windows, stride 2). Each dx entry still gets its
  // windows' gradients in (oy, ox) order from 0: the same sums.
  const int row = get_global_id(0);
  if (row >= B * H) return;
  const int iy = row % H, b = row / H;
  // In padded coordinates; windows oy with oy*SH <= py < oy*SH + PH.
  const int py = iy + PT;
  const int oy_lo = py >= PH ? (py - PH) / SH + 1 : 0, oy_hi = min(py / SH, OH - 1);
  __global const float *img = x + (size_t)b * H * W * C;
  __global float *out = dx + (size_t)row * W * C;
  int i = 0;
  for (; i + 8 <= W * C; i += 8) vstore8((float8)(0.0f), 0, out + i);
  for (; i < W * C; i++) out[i] = 0.0f;
  for (int oy = oy_lo; oy <= oy_hi; oy++) {
    const int y0 = oy * SH - PT, ky_here = py - oy * SH;
    for (int ox = 0; ox < OW; ox++) {
      const int x0 = ox * SW - PL;
      __global const float *g = dy + (((size_t)b * OH + oy) * OW + ox) * C;
      int c = 0;
      for (; c + 8 <= C; c += 8) {
        float8 best = (float8)(0.0f);
        int8 arg = (int8)(-1);
        for (int ky = 0; ky < PH; ky++)
          for (int kx = 0; kx < PW; kx++) {
            const int yy = y0 + ky, xx = x0 + kx;
            const int inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
            if (!inside && !ZERO) continue;
            const float8 v = inside ? vload8(0, img + ((size_t)yy * W + xx) * C + c)
                                    : (float8)(0.0f);
            // The first candidate seeds the maximum; later ones must be strictly greater.
            const int8 take = (arg == (int8)(-1)) | isgreater(v, best);
            best = select(best, v, take);
            arg = select(arg, (int8)(ky * PW + kx), take);
          }
        const float8 gv = vload8(0, g + c);
        for (int kx = 0; kx < PW; kx++) {
          const int xx = x0 + kx;
          if (xx < 0 || xx >= W) continue;
          const int8 mine = arg == (int8)(ky_here * PW + kx);
          __global float *o = out + (size_t)xx * C + c;
          vstore8(vload8(0, o) + select((float8)(0.0f), gv, mine), 0, o);
        }
      }
      for (; c < C; c++) {
        float best = 0.0f;
        int arg = -1;
        for (int ky = 0; ky < PH; ky++)
          for (int kx = 0; kx < PW; kx++) {
            const int yy = y0 + ky, xx = x0 + kx;
            const int inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
            if (!inside && !ZERO) continue;
            const float v = inside ? img[((size_t)yy * W + xx) * C + c] : 0.0f;
            if (arg < 0 || v > best) {
              best = v;
              arg = ky * PW + kx;
            }
          }
        const int kx = arg - ky_here * PW, xx = x0 + kx;
        if (kx >= 0 && kx < PW && xx >= 0 && xx < W) out[(size_t)xx * C + c] += g[c];
      }
    }
  }
#endif
}
