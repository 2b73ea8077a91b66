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
