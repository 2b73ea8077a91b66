// DepthwiseConv2D as direct kernels (no GEMM: each output channel reads one input
// channel, so im2col would copy KH*KW times the input for a product of depth 1).
// NHWC activations; the Keras kernel (KH, KW, C, M) seen as [KH*KW][CO], CO = C*M,
// output channel co = c*M + m reading input channel c = co / M.
//
// Two variants per kernel (CLT_GPU, common.cl): CPUs (0) get a
// work-item per position (or per block of a weight-gradient sum) that loops over
// the channels, 8 at a time as float8 when M == 1 (then co = c and both tensors
// are contiguous in the channel); GPUs (1) a work-item per element, consecutive
// work-items on consecutive channels (coalesced). Every sum has a fixed order: no
// atomics, runs repeat exactly.

// One output: channel co at (b, oy, ox), reading input channel c = co / M; the sum
// over the taps inside x, in order, after the bias (bias_off < 0: none); ReLU when relu.
static inline float dw_output(__global const float *x, __global const float *params,
                              __global const float *w, const int bias_off, const int relu,
                              const int b, const int oy, const int ox, const int co,
                              const int H, const int W, const int C, const int M, const int KH,
                              const int KW, const int S, const int PT, const int PL) {
  const int CO = C * M, c = co / M;
  float acc = bias_off < 0 ? 0.0f : params[bias_off + co];
  for (int ky = 0; ky < KH; ky++) {
    const int iy = oy * S + ky - PT;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int ix = ox * S + kx - PL;
      if (ix < 0 || ix >= W) continue;
      acc += x[(((size_t)b * H + iy) * W + ix) * C + c] * w[(ky * KW + kx) * CO + co];
    }
  }
  if (relu && acc < 0.0f) acc = 0.0f; // not fmax: a NaN must reach the loss guard
  return acc;
}

// One input gradient: channel c at (b, iy, ix), gathered tap by tap in a fixed order
// from the windows that read it and the M output channels of c.
static inline float dw_input_grad(__global const float *dy, __global const float *w,
                                  const int b, const int iy, const int ix, const int c,
                                  const int C, const int M, const int KH, const int KW,
                                  const int S, const int PT, const int PL, const int OH,
                                  const int OW) {
  const int CO = C * M;
  float sum = 0.0f;
  for (int ky = 0; ky < KH; ky++) {
    const int ty = iy + PT - ky;
    if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int tx = ix + PL - kx;
      if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
      __global const float *g = dy + (((size_t)b * OH + ty / S) * OW + tx / S) * CO + c * M;
      __global const float *k = w + (ky * KW + kx) * CO + c * M;
      for (int m = 0; m < M; m++) sum += g[m] * k[m];
    }
  }
  return sum;
}

// y[b, oy, ox, co] = bias[co] + sum over the taps inside x of
// x[b, oy*S + ky - PT, ox*S + kx - PL, co / M] * w[ky, kx, co], then ReLU when relu.
// w at params[w_off], bias at params[bias_off] (bias_off < 0: none).
// Range: B*OH*OW; GPU: (CO, B*OH*OW).
__kernel void depthwise_forward(__global const float *x, __global const float *params,
                                const int w_off, const int bias_off, __global float *y,
                                const int B, const int H, const int W, const int C, const int M,
                                const int KH, const int KW, const int S, const int PT,
                                const int PL, const int OH, const int OW, const int relu) {
  const int CO = C * M;
  __global const float *w = params + w_off;
#if CLT_GPU
  const int co = get_global_id(0), pos = get_global_id(1);
  if (co >= CO || pos >= B * OH * OW) return;
  const int ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
  y[(size_t)pos * CO + co] =
      dw_output(x, params, w, bias_off, relu, b, oy, ox, co, H, W, C, M, KH, KW, S, PT, PL);
#else
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW) return;
  const int ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
  __global float *out = y + (size_t)pos * CO;
  int co = 0;
  if (M == 1) {
    for (; co + CH <= CO; co += CH) {
      float8 acc = bias_off < 0 ? (float8)(0.0f) : vload8(0, params + bias_off + co);
      for (int ky = 0; ky < KH; ky++) {
        const int iy = oy * S + ky - PT;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; kx++) {
          const int ix = ox * S + kx - PL;
          if (ix < 0 || ix >= W) continue;
          acc += vload8(0, x + (((size_t)b * H + iy) * W + ix) * C + co) *
                 vload8(0, w + (ky * KW + kx) * CO + co);
        }
      }
      if (relu) acc = select(acc, (float8)(0.0f), isless(acc, (float8)(0.0f)));
      vstore8(acc, 0, out + co);
    }
  }
  for (; co < CO; co++)
    out[co] = dw_output(x, params, w, bias_off, relu, b, oy, ox, co, H, W, C, M, KH, KW, S, PT, PL);
#endif
}

// dx[b, iy, ix, c] = sum over the windows (oy, ox) and taps (ky, kx) that read it
// and the M output channels of c of dy[b, oy, ox, c*M + m] * w[ky, kx, c*M + m]:
// each input position gathers, tap by tap in a fixed order (as col2im). dy already
// masked by a fused ReLU. Range: B*H*W; GPU: (C, B*H*W).
__kernel void depthwise_backward_input(__global const float *dy, __global const float *params,
                                       const int w_off, __global float *dx, const int B,
                                       const int H, const int W, const int C, const int M,
                                       const int KH, const int KW, const int S, const int PT,
                                       const int PL, const int OH, const int OW) {
  const int CO = C * M;
  __global const float *w = params + w_off;
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * H * W) return;
  const int ix = pos % W, iy = (pos / W) % H, b = pos / (W * H);
  dx[(size_t)pos * C + c] = dw_input_grad(dy, w, b, iy, ix, c, C, M, KH, KW, S, PT, PL, OH, OW);
#else
  const int pos = get_global_id(0);
  if (pos >= B * H * W) return;
  const int ix = pos % W, iy = (pos / W) % H, b = pos / (W * H);
  __global float *out = dx + (size_t)pos * C;
  int c = 0;
  if (M == 1) {
    for (; c + CH <= C; c += CH) {
      float8 sum = (float8)(0.0f);
      for (int ky = 0; ky < KH; ky++) {
        const int ty = iy + PT - ky;
        if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
        for (int kx = 0; kx < KW; kx++) {
          const int tx = ix + PL - kx;
          if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
          sum += vload8(0, dy + (((size_t)b * OH + ty / S) * OW + tx / S) * CO + c) *
                 vload8(0, w + (ky * KW + kx) * CO + c);
        }
      }
      vstore8(sum, 0, out + c);
    }
  }
  for (; c < C; c++)
    out[c] = dw_input_grad(dy, w, b, iy, ix, c, C, M, KH, KW, S, PT, PL, OH, OW);
#endif
}

// The kernel's gradient, first pass: partial[part + (blk*KH*KW + tap)*CO + co] = sum
// over the output positions p of block blk (rows_per_block of them, in order) of
// dy[p, co] * x[the position tap reads for p, co / M]. bias.cl's bias_grad_final
// then adds the blocks. Row r = blk*KH*KW + tap of a [nblocks*KH*KW][CO] matrix:
// clt_launch_rows with a row per work-item (CPU: 8 channels of it; GPU: one).
__kernel void depthwise_backward_filter(__global const float *x, __global const float *dy,
                                        __global float *partial, const int part, const int B,
                                        const int H, const int W, const int C, const int M,
                                        const int KH, const int KW, const int S, const int PT,
                                        const int PL, const int OH, const int OW,
                                        const int rows_per_block) {
  const int CO = C * M, positions = B * OH * OW;
  const int nblocks = (positions + rows_per_block - 1) / rows_per_block;
#if CLT_GPU
  const int co = get_global_id(0), r = get_global_id(1);
  const int co0 = co, co1 = co + 1;
#else
  const int co0 = get_global_id(0) * CH, r = get_global_id(1);
  const int co1 = min(CO, co0 + CH);
#endif
  if (co0 >= CO || r >= nblocks * KH * KW) return;
  const int tap = r % (KH * KW), blk = r / (KH * KW);
  const int ky = tap / KW, kx = tap - ky * KW;
  const int p0 = blk * rows_per_block, p1 = min(positions, p0 + rows_per_block);
  __global float *out = partial + part + (size_t)r * CO;
#if !CLT_GPU
  if (M == 1 && co0 + CH <= CO) {
    float8 sum = (float8)(0.0f);
    for (int p = p0; p < p1; p++) {
      const int ox = p % OW, oy = (p / OW) % OH, b = p / (OW * OH);
      const int iy = oy * S + ky - PT, ix = ox * S + kx - PL;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
      sum += vload8(0, dy + (size_t)p * CO + co0) *
             vload8(0, x + (((size_t)b * H + iy) * W + ix) * C + co0);
    }
    vstore8(sum, 0, out + co0);
    return;
  }
#endif
  for (int o = co0; o < co1; o++) {
    const int c = o / M;
    float sum = 0.0f;
    for (int p = p0; p < p1; p++) {
      const int ox = p % OW, oy = (p / OW) % OH, b = p / (OW * OH);
      const int iy = oy * S + ky - PT, ix = ox * S + kx - PL;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
      sum += dy[(size_t)p * CO + o] * x[(((size_t)b * H + iy) * W + ix) * C + c];
    }
    out[o] = sum;
  }
}
