// Conv2D's kernels: im2col and col2im, around the GEMM of the backend (its
// convolutions over the image in place need no column matrix), and a first
// convolution fused with its ReLU and 2x2 max pooling. Activations are NHWC
// and kernels HWIO, so a row of the column matrix, ordered (ky, kx, c), lines
// up with the flattened Keras kernel [KH*KW*C][CO] and the GEMM output
// [B*OH*OW][CO] is already the NHWC output.

// The input position that column row `pos` = ((b*OH + oy)*OW + ox)*KH*KW + ky*KW + kx
// reads: its offset in x (channel 0) when (iy, ix) is inside the image, else -1.
static inline long tap_source(const int pos, const int H, const int W, const int C, const int KH,
                              const int KW, const int S, const int PT, const int PL, const int OH,
                              const int OW) {
  const int kk = pos % (KH * KW);
  const int row = pos / (KH * KW);
  const int ky = kk / KW, kx = kk - ky * KW;
  const int ox = row % OW;
  const int oy = (row / OW) % OH;
  const int b = row / (OW * OH);
  const int iy = oy * S + ky - PT;
  const int ix = ox * S + kx - PL;
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) return -1;
  return (((long)b * H + iy) * W + ix) * C;
}

// col[(b*OH + oy)*OW + ox][(ky*KW + kx)*C + c] = x[b, oy*S + ky - PT, ox*S + kx - PL, c] or 0
// One work-item per (output position, ky, kx) copies C contiguous floats: in NHWC
// a kernel tap is a contiguous run of channels, so this is a row copy (vectorised
// when C is a multiple of 4) and the index arithmetic is paid once per run.
// Range: B*OH*OW*KH*KW. GPU: range (C, B*OH*OW*KH*KW), a work-item per entry.
__kernel void im2col(__global const float *x, __global float *col, const int B, const int H,
                     const int W, const int C, const int KH, const int KW, const int S,
                     const int PT, const int PL, const int OH, const int OW) {
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * OH * OW * KH * KW) return;
  const long at = tap_source(pos, H, W, C, KH, KW, S, PT, PL, OH, OW);
  col[(size_t)pos * C + c] = at < 0 ? 0.0f : x[at + c];
#else
  const int pos = get_global_id(0);
  if (pos >= B * OH * OW * KH * KW) return;
  const long at = tap_source(pos, H, W, C, KH, KW, S, PT, PL, OH, OW);
  __global float *dst = col + (size_t)pos * C;
  if (at < 0) {
    for (int c = 0; c < C; c++) dst[c] = 0.0f;
    return;
  }
  __global const float *src = x + at;
  if ((C & 3) == 0) {
    for (int c = 0; c < C; c += 4) vstore4(vload4(0, src + c), 0, dst + c);
  } else {
    for (int c = 0; c < C; c++) dst[c] = src[c];
  }
#endif
}

// The same for few channels (the first layer's C = 1): one work-item per output
// row (b, oy) writes the OW * KH*KW*C contiguous entries of its positions, so
// work-items are neither single floats nor single positions (PoCL's cost per
// work-item dominates at one position each).
// Range: B*OH. GPU: range (OW*KH*KW*C, B*OH), a work-item per entry of the
// output row (C is small, so a row rather than C makes the coalesced dimension).
__kernel void im2col_rows(__global const float *x, __global float *col, const int B, const int H,
                          const int W, const int C, const int KH, const int KW, const int S,
                          const int PT, const int PL, const int OH, const int OW) {
#if CLT_GPU
  const int j = get_global_id(0), r = get_global_id(1);
  const int K = KH * KW * C;
  if (j >= OW * K || r >= B * OH) return;
  const int oy = r % OH, b = r / OH;
  const int ox = j / K, t = j - ox * K;
  const int kk = t / C, c = t - kk * C;
  const int ky = kk / KW, kx = kk - ky * KW;
  const int iy = oy * S + ky - PT, ix = ox * S + kx - PL;
  float v = 0.0f;
  if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = x[(((size_t)b * H + iy) * W + ix) * C + c];
  col[(size_t)r * OW * K + j] = v;
#else
  const int r = get_global_id(0);
  if (r >= B * OH) return;
  const int oy = r % OH;
  const int b = r / OH;
  __global float *dst = col + (size_t)r * OW * KH * KW * C;
  for (int ox = 0; ox < OW; ox++) {
    for (int ky = 0; ky < KH; ky++) {
      const int iy = oy * S + ky - PT;
      for (int kx = 0; kx < KW; kx++) {
        const int ix = ox * S + kx - PL;
        // The source address only for taps inside the input: outside it would
        // point before or past the buffer (undefined even if never read).
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
          __global const float *src = x + (((size_t)b * H + iy) * W + ix) * C;
          for (int c = 0; c < C; c++) *dst++ = src[c];
        } else {
          for (int c = 0; c < C; c++) *dst++ = 0.0f;
        }
      }
    }
  }
#endif
}

// Inverse of im2col for gradients: each input position gathers, tap by tap in a
// fixed order, the column entries it was copied to (no atomics, so runs repeat
// exactly). As in im2col, a tap is a run of C contiguous channels, added as
// vectors when C is a multiple of 4. Range: B*H*W. GPU: range (C, B*H*W), a
// work-item per dx element, its taps in the same order (the same sums).
__kernel void col2im(__global const float *col, __global float *dx, const int B, const int H,
                     const int W, const int C, const int KH, const int KW, const int S,
                     const int PT, const int PL, const int OH, const int OW) {
#if CLT_GPU
  const int c = get_global_id(0), pos = get_global_id(1);
  if (c >= C || pos >= B * H * W) return;
  const int K = KH * KW * C;
  const int ix = pos % W;
  const int iy = (pos / W) % H;
  const int b = pos / (W * H);
  float sum = 0.0f;
  for (int ky = 0; ky < KH; ky++) {
    const int ty = iy + PT - ky;
    if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int tx = ix + PL - kx;
      if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
      sum += col[(((size_t)b * OH + ty / S) * OW + tx / S) * K + (ky * KW + kx) * C + c];
    }
  }
  dx[(size_t)pos * C + c] = sum;
#else
  const int pos = get_global_id(0);
  if (pos >= B * H * W) return;
  const int K = KH * KW * C;
  const int ix = pos % W;
  const int iy = (pos / W) % H;
  const int b = pos / (W * H);
  __global float *dst = dx + (size_t)pos * C;
  int first = 1;
  for (int ky = 0; ky < KH; ky++) {
    const int ty = iy + PT - ky;
    if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
    for (int kx = 0; kx < KW; kx++) {
      const int tx = ix + PL - kx;
      if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
      __global const float *src =
          col + (((size_t)b * OH + ty / S) * OW + tx / S) * K + (ky * KW + kx) * C;
      if ((C & 3) == 0) {
        for (int c = 0; c < C; c += 4) {
          const float4 v = vload4(0, src + c);
          vstore4(first ? v : v + vload4(0, dst + c), 0, dst + c);
        }
      } else {
        for (int c = 0; c < C; c++) dst[c] = first ? src[c] : dst[c] + src[c];
      }
      first = 0;
    }
  }
  if (first) {
    for (int c = 0; c < C; c++) dst[c] = 0.0f;
  }
#endif
}

// ---- Conv2D + ReLU + 2x2 max pooling as one pass (src/layers/conv2d.c) ----
// For a first layer of few taps (K = KH*KW*C, stride 1, no padding, CO a
// multiple of 16) followed by MaxPooling2D(2,s2): the convolution's output, 4x
// the pooled one, is never stored; its gradient pass recomputes it. A pooled
// position's window reads a (KH+1) x (KW+1) patch of x; CO runs in blocks of
// 16 channels as float16, the weights [K][CO] (HWIO) a row per tap. The same
// body in both variants: the plan fuses the pair where the backend says so
// (the cpu backend; the gpu backend keeps im2col + GEMM), the tests run both. float16 values move through
// float16 pointers, so w_off and b_off must be multiples of 16 (the model
// aligns parameters to 32 floats): vload16 would draw clang's ABI warning on
// hosts without AVX-512 (see cl/gemm.cl), and a float16 built from two float8
// halves crashes Oclgrind 21.10's --uninitialized.
#define CP_LOAD16(p) (*(__global const float16 *)(p))
#define CP_STORE16(v, p) (*(__global float16 *)(p) = (v))
#define CP_MAX_K 32 // taps a work-item keeps sums of (the layer's condition for fusing)
// The bodies take the taps' shape as arguments and are inlined into calls with
// constants (fmnist-cnn's 3x3x1) and without: with constants the tap loops
// unroll (PoCL leaves them rolled unasked) and the per-tap vectors stay in
// registers; the copy without cannot unroll, which is no news (-Wpass-failed).
#define CP_INLINE static inline __attribute__((always_inline))
#define CP_UNROLL _Pragma("unroll")
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"

// The window's 4 convolution sums plus bias for channels c0 .. c0+15, window
// top-left at p (x at (b, 2py, 2px), channel 0): a0 (0,0), a1 (0,1), a2 (1,0),
// a3 (1,1). A macro, so forward and gradient sum in the same order (the same
// maxima and ties).
#define CP_WINDOW_SUMS(p, w, c0, bias, a0, a1, a2, a3)                                      \
  do {                                                                                      \
    (a0) = (a1) = (a2) = (a3) = (float16)(0.0f);                                            \
    CP_UNROLL for (int ky_ = 0; ky_ < KH; ky_++)                                            \
      CP_UNROLL for (int kx_ = 0; kx_ < KW; kx_++)                                          \
        CP_UNROLL for (int c_ = 0; c_ < C; c_++) {                                          \
          const int k_ = (ky_ * KW + kx_) * C + c_;                                         \
          const float16 wk_ = CP_LOAD16((w) + (size_t)k_ * CO + (c0));                      \
          __global const float *t_ = (p) + ((size_t)ky_ * W + kx_) * C + c_;                \
          (a0) = t_[0] * wk_ + (a0);                                                        \
          (a1) = t_[C] * wk_ + (a1);                                                        \
          (a2) = t_[(size_t)W * C] * wk_ + (a2);                                            \
          (a3) = t_[(size_t)W * C + C] * wk_ + (a3);                                        \
        }                                                                                   \
    (a0) += (bias);                                                                         \
    (a1) += (bias);                                                                         \
    (a2) += (bias);                                                                         \
    (a3) += (bias);                                                                         \
  } while (0)

CP_INLINE void cp_forward_row(__global const float *x, __global const float *params,
                              const int w_off, const int b_off, __global float *y, const int r,
                              const int H, const int W, const int C, const int KH, const int KW,
                              const int CO, const int PH, const int PW) {
  const int py = r % PH, b = r / PH;
  __global const float *w = params + w_off;
  const float16 zero = (float16)(0.0f);
  for (int c0 = 0; c0 < CO; c0 += 16) {
    const float16 bias = b_off < 0 ? zero : CP_LOAD16(params + b_off + c0);
    for (int px = 0; px < PW; px++) {
      __global const float *p = x + (((size_t)b * H + 2 * py) * W + 2 * px) * C;
      float16 a0, a1, a2, a3;
      CP_WINDOW_SUMS(p, w, c0, bias, a0, a1, a2, a3);
      a0 = a0 < zero ? zero : a0;
      a1 = a1 < zero ? zero : a1;
      a2 = a2 < zero ? zero : a2;
      a3 = a3 < zero ? zero : a3;
      float16 best = a0;
      best = a1 > best || a1 != a1 ? a1 : best;
      best = a2 > best || a2 != a2 ? a2 : best;
      best = a3 > best || a3 != a3 ? a3 : best;
      CP_STORE16(best, y + ((size_t)r * PW + px) * CO + c0);
    }
  }
}

// y[b, py, px, c] = max over the window of relu(conv + bias): bias_act's ReLU
// and maxpool_forward's maximum (a NaN passes both). Pooled positions (PH, PW) =
// the convolution's (H-KH+1, W-KW+1) halved, floor: an odd last row or column
// is in no window. b_off < 0: no bias. A work-item per pooled row (b, py).
// Range: B*PH.
__kernel void conv_pool_forward(__global const float *x, __global const float *params,
                                const int w_off, const int b_off, __global float *y, const int B,
                                const int H, const int W, const int C, const int KH, const int KW,
                                const int CO, const int PH, const int PW) {
  const int r = get_global_id(0);
  if (r >= B * PH) return;
  cp_forward_row(x, params, w_off, b_off, y, r, H, W, C, KH, KW, CO, PH, PW);
}

// conv_pool_forward for 3x3 taps over one channel (KH, KW, C ignored): the
// Fashion-MNIST CNN's first layer, its tap loops unrolled. A kernel of its own
// rather than a branch of the one above: PoCL compiles a kernel at its first
// launch, and the two bodies in one kernel compile more than twice as long
// as this one alone (a run's start, empty kernel cache).
__kernel void conv_pool_forward_3x3c1(__global const float *x, __global const float *params,
                                      const int w_off, const int b_off, __global float *y,
                                      const int B, const int H, const int W, const int C,
                                      const int KH, const int KW, const int CO, const int PH,
                                      const int PW) {
  const int r = get_global_id(0);
  if (r >= B * PH) return;
  cp_forward_row(x, params, w_off, b_off, y, r, H, W, 1, 3, 3, CO, PH, PW);
}

CP_INLINE void cp_backward_block(__global const float *x, __global const float *params,
                                 const int w_off, const int b_off, __global const float *dy,
                                 __global float *partial, const int blk, const int c0, const int B,
                                 const int H, const int W, const int C, const int KH, const int KW,
                                 const int CO, const int PH, const int PW,
                                 const int rows_per_block) {
  const int rows = B * PH, begin = blk * rows_per_block, K = KH * KW * C;
  const int end = min(rows, begin + rows_per_block);
  const int nblocks = (rows + rows_per_block - 1) / rows_per_block;
  __global const float *w = params + w_off;
  const float16 zero = (float16)(0.0f);
  const float16 bias = b_off < 0 ? zero : CP_LOAD16(params + b_off + c0);
  float16 dw[CP_MAX_K], db = zero;
  CP_UNROLL for (int k = 0; k < K; k++) dw[k] = zero;
  for (int r = begin; r < end; r++) {
    const int py = r % PH, b = r / PH;
    for (int px = 0; px < PW; px++) {
      __global const float *p = x + (((size_t)b * H + 2 * py) * W + 2 * px) * C;
      float16 a0, a1, a2, a3;
      CP_WINDOW_SUMS(p, w, c0, bias, a0, a1, a2, a3);
      // The first maximum in raster order (past the ReLU, ties among values
      // > 0 are ties here too, and a maximum <= 0 passes no gradient): the
      // last position that raised the running maximum. Masks, not an index
      // vector: Oclgrind 21.10 with optimisation narrows an int16 of small
      // values and then misreads it.
      float16 best = a0;
      const int16 m1 = a1 > best;
      best = m1 ? a1 : best;
      const int16 m2 = a2 > best;
      best = m2 ? a2 : best;
      const int16 m3 = a3 > best;
      best = m3 ? a3 : best;
      float16 g = CP_LOAD16(dy + ((size_t)r * PW + px) * CO + c0);
      g = best > zero ? g : zero;
      db += g;
      const float16 g3 = m3 ? g : zero;
      g = m3 ? zero : g;
      const float16 g2 = m2 ? g : zero;
      g = m2 ? zero : g;
      const float16 g1 = m1 ? g : zero, g0 = m1 ? zero : g;
      CP_UNROLL for (int ky = 0; ky < KH; ky++)
        CP_UNROLL for (int kx = 0; kx < KW; kx++)
          CP_UNROLL for (int c = 0; c < C; c++) {
            __global const float *t = p + ((size_t)ky * W + kx) * C + c;
            const int k = (ky * KW + kx) * C + c;
            dw[k] = t[0] * g0 + dw[k];
            dw[k] = t[C] * g1 + dw[k];
            dw[k] = t[(size_t)W * C] * g2 + dw[k];
            dw[k] = t[(size_t)W * C + C] * g3 + dw[k];
          }
    }
  }
  __global float *out = partial + (size_t)blk * K * CO + c0;
  CP_UNROLL for (int k = 0; k < K; k++) CP_STORE16(dw[k], out + (size_t)k * CO);
  CP_STORE16(db, partial + ((size_t)nblocks * K + blk) * CO + c0);
}

// The gradient of conv_pool_forward into partial sums: a work-item per (block
// of rows_per_block pooled rows, 16 channels) recomputes each window's sums,
// passes dy to the window's first maximum (maxpool_backward_tiled's tie rule)
// when that maximum is > 0 (the ReLU's mask, as a pooling that masks its
// producer's ReLU), and adds g times that position's taps into its dW sums
// [K][16] (of the 4 positions' g all but one are 0) and g into its dbias sums.
// Out: partial[blk][K*CO] for dW, then partial[nblocks*K*CO + blk*CO] for
// dbias; bias_grad_final adds the blocks in order. Range: (nblocks, CO/16).
__kernel void conv_pool_backward(__global const float *x, __global const float *params,
                                 const int w_off, const int b_off, __global const float *dy,
                                 __global float *partial, const int B, const int H, const int W,
                                 const int C, const int KH, const int KW, const int CO,
                                 const int PH, const int PW, const int rows_per_block) {
  const int blk = get_global_id(0), c0 = get_global_id(1) * 16;
  if (blk * rows_per_block >= B * PH || c0 >= CO || KH * KW * C > CP_MAX_K) return;
  cp_backward_block(x, params, w_off, b_off, dy, partial, blk, c0, B, H, W, C, KH, KW, CO, PH, PW,
                    rows_per_block);
}

// conv_pool_backward for 3x3 taps over one channel (see conv_pool_forward_3x3c1).
__kernel void conv_pool_backward_3x3c1(__global const float *x, __global const float *params,
                                       const int w_off, const int b_off, __global const float *dy,
                                       __global float *partial, const int B, const int H,
                                       const int W, const int C, const int KH, const int KW,
                                       const int CO, const int PH, const int PW,
                                       const int rows_per_block) {
  const int blk = get_global_id(0), c0 = get_global_id(1) * 16;
  if (blk * rows_per_block >= B * PH || c0 >= CO) return;
  cp_backward_block(x, params, w_off, b_off, dy, partial, blk, c0, B, H, W, 1, 3, 3, CO, PH, PW,
                    rows_per_block);
}
#pragma clang diagnostic pop
