// Average pooling (AveragePooling2D, 'valid' and 'same'). NHWC.
//
// CLT_GPU 0 (CPUs): a work-item per position loops over its contiguous channels
// 8 at a time as float8, the C % 8 left as scalars (PoCL does not vectorise
// across work-items); CLT_GPU 1 (GPUs): a work-item per (channel, position),
// consecutive work-items consecutive channels (coalesced), from clt_launch_rows.

// The part of the window starting at `start` (P cells) inside [0, N): [lo, hi).
#define CLIP_WINDOW(start, P, N, lo, hi) \
  const int lo = max(start, 0), hi = min((start) + (P), N)

// The mean of channel c over the cells [y0, y1) x [x0, x1) of the NHWC image img.
static inline float window_mean(__global const float *img, const int W, const int C, const int c,
                                const int y0, const int y1, const int x0, const int x1,
                                const float count) {
  float s = 0.0f;
  for (int iy = y0; iy < y1; iy++)
    for (int ix = x0; ix < x1; ix++) s += img[((size_t)iy * W + ix) * C + c];
  return s / count;
}

// The gradient of channel c of an input cell from windows oy_lo..oy_hi, ox_lo..ox_hi
// of the image's dy, g: each window's dy / its count of cells inside the image.
static inline float window_grad(__global const float *g, const int c, const int oy_lo,
                                const int oy_hi, const int ox_lo, const int ox_hi, const int H,
                                const int W, const int C, const int PH, const int PW,
                                const int SH, const int SW, const int PT, const int PL,
                                const int OW) {
  float s = 0.0f;
  for (int oy = oy_lo; oy <= oy_hi; oy++) {
    CLIP_WINDOW(oy * SH - PT, PH, H, y0, y1);
    for (int ox = ox_lo; ox <= ox_hi; ox++) {
      CLIP_WINDOW(ox * SW - PL, PW, W, x0, x1);
      s += g[((size_t)oy * OW + ox) * C + c] / (float)((y1 - y0) * (x1 - x0));
    }
  }
  return s;
}

// Window (oy, ox) covers input rows oy*SH - PT .. + PH - 1 and columns ox*SW - PL
// .. + PW - 1; y is the mean over the cells inside the image (TensorFlow leaves
// 'same' padding out of the count). Range: B*OH*OW; GPU: (C, B*OH*OW).
__kernel void avgpool_forward(__global const float *x, __global float *y, const int B,
                              const int H, const int W, const int C, const int PH, const int PW,
                              const int SH, const int SW, const int PT, const int PL,
                              const int OH, const int OW) {
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * OH * OW) return;
#else
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW) return;
#endif
  const int ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
  CLIP_WINDOW(oy * SH - PT, PH, H, y0, y1);
  CLIP_WINDOW(ox * SW - PL, PW, W, x0, x1);
  const float count = (float)((y1 - y0) * (x1 - x0));
  __global const float *img = x + (size_t)b * H * W * C;
#if CLT_GPU
  y[(size_t)pos * C + c] = window_mean(img, W, C, c, y0, y1, x0, x1, count);
#else
  __global float *out = y + (size_t)pos * C;
  int c = 0;
  for (; c + CH <= C; c += CH) {
    float8 s = (float8)(0.0f);
    for (int iy = y0; iy < y1; iy++)
      for (int ix = x0; ix < x1; ix++) s += vload8(0, img + ((size_t)iy * W + ix) * C + c);
    vstore8(s / count, 0, out + c);
  }
  for (; c < C; c++) out[c] = window_mean(img, W, C, c, y0, y1, x0, x1, count);
#endif
}

// One work-item per input position gathers dy / count from every window covering
// it, in a fixed order: every dx entry is written once, without atomics.
// Range: B*H*W; GPU: (C, B*H*W).
__kernel void avgpool_backward(__global const float *dy, __global float *dx, const int B,
                               const int H, const int W, const int C, const int PH, const int PW,
                               const int SH, const int SW, const int PT, const int PL,
                               const int OH, const int OW) {
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * H * W) return;
#else
  const int pos = get_global_id(0);
  if (pos >= B * H * W) return;
#endif
  const int ix = pos % W, iy = (pos / W) % H, b = pos / (W * H);
  // Windows oy with oy*SH <= py < oy*SH + PH, in padded coordinates.
  const int py = iy + PT, px = ix + PL;
  const int oy_lo = py >= PH ? (py - PH) / SH + 1 : 0, oy_hi = min(py / SH, OH - 1);
  const int ox_lo = px >= PW ? (px - PW) / SW + 1 : 0, ox_hi = min(px / SW, OW - 1);
  __global const float *g = dy + (size_t)b * OH * OW * C;
#if CLT_GPU
  dx[(size_t)pos * C + c] =
      window_grad(g, c, oy_lo, oy_hi, ox_lo, ox_hi, H, W, C, PH, PW, SH, SW, PT, PL, OW);
#else
  __global float *out = dx + (size_t)pos * C;
  int c = 0;
  for (; c + CH <= C; c += CH) {
    float8 s = (float8)(0.0f);
    for (int oy = oy_lo; oy <= oy_hi; oy++) {
      CLIP_WINDOW(oy * SH - PT, PH, H, y0, y1);
      for (int ox = ox_lo; ox <= ox_hi; ox++) {
        CLIP_WINDOW(ox * SW - PL, PW, W, x0, x1);
        s += vload8(0, g + ((size_t)oy * OW + ox) * C + c) / (float)((y1 - y0) * (x1 - x0));
      }
    }
    vstore8(s, 0, out + c);
  }
  for (; c < C; c++)
    out[c] = window_grad(g, c, oy_lo, oy_hi, ox_lo, ox_hi, H, W, C, PH, PW, SH, SW, PT, PL, OW);
#endif
}
