// Convolution as im2col + GEMM (the GEMM runs in CLBlast). Activations are NHWC
// and kernels HWIO, so a row of the column matrix, ordered (ky, kx, c), lines up
// with the flattened Keras kernel [KH*KW*C][CO] and the GEMM output [B*OH*OW][CO]
// is already the NHWC output.
//
// Two variants per kernel (CLT_GPU, set per device by the replica): CPUs (0) get
// a work-item per row, tap or position looping over channels as vectors (PoCL
// does not vectorise across work-items); GPUs (1) get a work-item per element
// with consecutive work-items on consecutive channels, the contiguous NHWC
// dimension, so loads and stores coalesce. Same names and arguments; the host
// picks the geometry by r->flavor. No atomics: every sum has a fixed order.
#ifndef CLT_GPU
#define CLT_GPU 0
#endif
#ifndef CLT_WG
#define CLT_WG 64
#endif
// Columns a CPU work-item takes in the sums over rows: devices/replica.h's
// CLT_CPU_BLOCK_COLS, with which every program is built.
#define CG CLT_CPU_BLOCK_COLS

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
// work-item dominated at one position each: 1 ms per batch of 64 here).
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

// y[r, c] += bias[c], then ReLU when relu != 0. Shared by conv and dense layers;
// bias_offset < 0: no bias (a ReLU alone, for layers with use_bias=False).
// Range: rows*cols; GPU: (cols, rows) (clt_launch_rows), no 64-bit modulo.
__kernel void bias_act(__global float *y, __global const float *params, const int bias_offset,
                       const int rows, const int cols, const int relu) {
#if CLT_GPU
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= cols || r >= rows) return;
  const size_t gid = (size_t)r * cols + c;
#else
  const size_t gid = get_global_id(0);
  if (gid >= (size_t)rows * cols) return;
  const int c = (int)(gid % cols);
#endif
  float v = bias_offset < 0 ? y[gid] : y[gid] + params[bias_offset + c];
  if (relu && v < 0.0f) v = 0.0f; // not fmax: a NaN must propagate to the loss, where it is caught
  y[gid] = v;
}

#if CLT_GPU
// Column sums across the rows of a (LC, LR) work-group (clt_launch_blocks):
// each item passes its partial sum v, the LR of a column meet in a fixed tree.
// Every item must call it (barriers); the sum is returned to all. static: a
// plain C99 inline definition emits no body when not inlined (-cl-opt-disable).
static inline float column_sum(float v, __local float *tile) {
  const int lc = get_local_id(0), lr = get_local_id(1), LC = get_local_size(0);
  tile[lr * LC + lc] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(1) / 2; s > 0; s >>= 1) {
    if (lr < s) tile[lr * LC + lc] += tile[(lr + s) * LC + lc];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return tile[lc];
}
#endif

// Bias gradient in two fixed-order passes (deterministic, and enough work-items
// to fill a device even when cols is small): partial[blk, c] = sum of dy[r, c]
// over the rows r of block blk, then grad[c] = sum over blocks. With relu, the
// layer's ReLU backward is fused in: dy[r, c] = 0 where y[r, c] <= 0, written
// back, then summed (one pass over dy instead of two). A CPU work-item takes CG
// columns of a block, 8 at a time as float8 (PoCL does not vectorise across
// work-items), the last ones scalar when cols is not a multiple of 8.
// Range (clt_launch_row_blocks): CPU (ceil(cols / CG), nblocks); GPU (cols, nblocks *
// LR) in groups (LC, LR): a column's LR items take every LR-th row of the block
// and meet in column_sum.
__kernel void bias_grad_partial(__global float *dy, __global const float *y, const int relu,
                                const int rows, const int cols, const int rows_per_block,
                                __global float *partial, const int partial_offset) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int c = get_global_id(0), blk = get_group_id(1);
  const int begin = blk * rows_per_block, end = min(rows, begin + rows_per_block);
  float sum = 0.0f;
  if (c < cols) {
    for (int r = begin + (int)get_local_id(1); r < end; r += (int)get_local_size(1)) {
      const size_t at = (size_t)r * cols + c;
      float g = dy[at];
      if (relu && !(y[at] > 0.0f)) dy[at] = g = 0.0f;
      sum += g;
    }
  }
  sum = column_sum(sum, tile); // all items, also those past cols: barriers
  if (get_local_id(1) == 0 && c < cols) partial[partial_offset + (size_t)blk * cols + c] = sum;
#else
  // CG columns of a block's rows, a row's CG floats in one run, the sums kept
  // in the item's slice of partial, as cl/norm.cl's partial sums. Each
  // column's sum runs over the block's rows in order from 0.
  const int c0 = get_global_id(0) * CG, blk = get_global_id(1);
  const int begin = blk * rows_per_block;
  if (c0 >= cols || begin >= rows) return;
  const int n = min(rows - begin, rows_per_block), w = min(CG, cols - c0);
  __global float *out = partial + partial_offset + (size_t)blk * cols + c0;
  __global float *g = dy + (size_t)begin * cols + c0;
  __global const float *py = y + (size_t)begin * cols + c0;
  for (int c = 0; c < w; c++) out[c] = 0.0f;
  for (int r = 0; r < n; r++, g += cols, py += cols) {
    int c = 0;
    for (; c + 8 <= w; c += 8) {
      float8 v = vload8(0, g + c);
      if (relu) {
        v = select(v, (float8)(0.0f), isgreater(vload8(0, py + c), (float8)(0.0f)) == 0);
        vstore8(v, 0, g + c);
      }
      vstore8(vload8(0, out + c) + v, 0, out + c);
    }
    for (; c < w; c++) {
      if (relu && !(py[c] > 0.0f)) g[c] = 0.0f;
      out[c] += g[c];
    }
  }
#endif
}

// grads[offset + c] = sum of partial[blk, c] over the blocks. CPU: range cols, a
// work-item per column adds the blocks in order. GPU: the column sums of one
// block of nblocks rows (clt_launch_blocks with one block), as above.
__kernel void bias_grad_final(__global const float *partial, const int partial_offset,
                              const int nblocks, const int cols, __global float *grads,
                              const int offset) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int c = get_global_id(0);
  float sum = 0.0f;
  if (c < cols) {
    for (int blk = (int)get_local_id(1); blk < nblocks; blk += (int)get_local_size(1))
      sum += partial[partial_offset + (size_t)blk * cols + c];
  }
  sum = column_sum(sum, tile);
  if (get_local_id(1) == 0 && c < cols) grads[offset + c] = sum;
#else
  const int c = get_global_id(0);
  if (c >= cols) return;
  float sum = 0.0f;
  for (int blk = 0; blk < nblocks; blk++) sum += partial[partial_offset + blk * cols + c];
  grads[offset + c] = sum;
#endif
}

// ---- Conv2D + ReLU + 2x2 max pooling as one pass (src/layers/conv2d.c) ----
// For a first layer of few taps (K = KH*KW*C, stride 1, no padding, CO a
// multiple of 16) followed by MaxPooling2D(2,s2): the convolution's output, 4x
// the pooled one, is never stored; its gradient pass recomputes it. A pooled
// position's window reads a (KH+1) x (KW+1) patch of x; CO runs in blocks of
// 16 channels as float16, the weights [K][CO] (HWIO) a row per tap. The same
// body in both variants: the layer runs these on CPU replicas only (the GPU
// flavor keeps im2col + GEMM), the tests on both. float16 values move through
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
// launch, and the two bodies in one kernel took 0.28 s where this one alone
// takes 0.11 (a run's start, empty kernel cache).
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
