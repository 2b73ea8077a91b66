// Conv2D with groups (G > 1, other than the depthwise case): input channels and
// filters in G groups of CPG = C / G and FPG = F / G, filter f reading the channels
// of its group g = f / FPG; the kernel (KH, KW, CPG, F), as Keras keeps it. Direct
// passes, each output a sum in fixed order (taps, then channels of the group).
//
// Launches: clt_launch_elements over (columns, rows), one body for both variants.

// y[pos, f] = bias[f] + sum over taps and the group's channels of x * w, then ReLU if
// relu; b < 0: no bias. Over (F, B*OH*OW).
__kernel void grouped_forward(__global const float *x, __global const float *p, const int w,
                              const int b, __global float *y, const int B, const int H,
                              const int W, const int C, const int KH, const int KW, const int S,
                              const int PT, const int PL, const int OH, const int OW, const int F,
                              const int G, const int relu) {
  const int f = get_global_id(0), pos = get_global_id(1);
  if (f >= F || pos >= B * OH * OW) return;
  const int CPG = C / G, FPG = F / G, c0 = (f / FPG) * CPG;
  const int ox = pos % OW, oy = (pos / OW) % OH, n = pos / (OW * OH);
  float s = b >= 0 ? p[b + f] : 0.0f;
  for (int ky = 0; ky < KH; ky++) {
    const int iy = oy * S - PT + ky;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int ix = ox * S - PL + kx;
      if (ix < 0 || ix >= W) continue;
      __global const float *xs = x + (((size_t)n * H + iy) * W + ix) * C + c0;
      __global const float *ws = p + w + (size_t)(ky * KW + kx) * CPG * F + f;
      for (int c = 0; c < CPG; c++) s += xs[c] * ws[(size_t)c * F];
    }
  }
  y[(size_t)pos * F + f] = relu ? fmax(s, 0.0f) : s;
}

// dx[pos, c] = sum over the taps that reach it and the filters of c's group of
// dy * w. Over (C, B*H*W).
__kernel void grouped_backward_input(__global const float *dy, __global const float *p,
                                     const int w, __global float *dx, const int B, const int H,
                                     const int W, const int C, const int KH, const int KW,
                                     const int S, const int PT, const int PL, const int OH,
                                     const int OW, const int F, const int G) {
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * H * W) return;
  const int CPG = C / G, FPG = F / G, f0 = (c / CPG) * FPG, ci = c % CPG;
  const int ix = pos % W, iy = (pos / W) % H, n = pos / (W * H);
  float s = 0.0f;
  for (int ky = 0; ky < KH; ky++) {
    const int ty = iy + PT - ky;
    if (ty < 0 || ty % S || ty / S >= OH) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int tx = ix + PL - kx;
      if (tx < 0 || tx % S || tx / S >= OW) continue;
      __global const float *ds = dy + (((size_t)n * OH + ty / S) * OW + tx / S) * F + f0;
      __global const float *ws = p + w + ((size_t)(ky * KW + kx) * CPG + ci) * F + f0;
      for (int k = 0; k < FPG; k++) s += ds[k] * ws[k];
    }
  }
  dx[(size_t)pos * C + c] = s;
}

// The kernel's gradient, per block of per_block output positions: part[at + (blk * R +
// r) * F + f] = the block's sum of x * dy, r = (ky * KW + kx) * CPG + ci of R =
// KH*KW*CPG; conv.cl's bias_grad_final adds the blocks. Over (F, nblocks * R): the
// rows of a block next to each other, so its positions stay in cache.
__kernel void grouped_backward_filter(__global const float *x, __global const float *dy,
                                      __global float *part, const int at, const int B,
                                      const int H, const int W, const int C, const int KH,
                                      const int KW, const int S, const int PT, const int PL,
                                      const int OH, const int OW, const int F, const int G,
                                      const int per_block) {
  const int CPG = C / G, FPG = F / G, R = KH * KW * CPG;
  const int f = get_global_id(0), row = get_global_id(1);
  const int npos = B * OH * OW, nblocks = (npos + per_block - 1) / per_block;
  if (f >= F || row >= nblocks * R) return;
  const int r = row % R, blk = row / R;
  const int ci = r % CPG, kx = (r / CPG) % KW, ky = r / (CPG * KW), c = (f / FPG) * CPG + ci;
  const int p1 = min(npos, (blk + 1) * per_block);
  float s = 0.0f;
  for (int pos = blk * per_block; pos < p1; pos++) {
    const int ox = pos % OW, oy = (pos / OW) % OH, n = pos / (OW * OH);
    const int iy = oy * S - PT + ky, ix = ox * S - PL + kx;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
    s += x[(((size_t)n * H + iy) * W + ix) * C + c] * dy[(size_t)pos * F + f];
  }
  part[at + ((size_t)blk * R + r) * F + f] = s;
}
