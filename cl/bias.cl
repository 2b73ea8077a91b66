// The bias and fused ReLU of the GEMM layers (Conv2D, Dense, the convolutions
// of DepthwiseConv2D and SeparableConv2D): the forward's bias_act, and the bias
// gradient as column sums of dy in two fixed-order passes, a ReLU's backward
// fused into the first. NHWC: a layer's output is [rows][cols], cols the
// channels.

// y[r, c] += bias[c], then ReLU when relu != 0;
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

// Bias gradient in two fixed-order passes (deterministic, and enough work-items
// to fill a device even when cols is small): partial[blk, c] = sum of dy[r, c]
// over the rows r of block blk, then grad[c] = sum over blocks. With relu, the
// layer's ReLU backward is fused in: dy[r, c] = 0 where y[r, c] <= 0, written
// back, then summed (one pass over dy instead of two). A CPU work-item takes CG
// columns of a block, 8 at a time as float8 (PoCL does not vectorise across
// work-items), the last ones scalar when cols is not a multiple of 8.
// Range (clt_launch_row_blocks): CPU (ceil(cols / CG), nblocks); GPU (cols, nblocks *
// LR) in groups (LC, LR): a column's LR items take every LR-th row of the block
// and meet in lane_sum.
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
  sum = lane_sum(sum, tile); // all items, also those past cols: barriers
  if (get_local_id(1) == 0 && c < cols) partial[partial_offset + (size_t)blk * cols + c] = sum;
#else
  // CG columns of a block's rows, a row's CG floats in one run, the sums kept
  // in the item's slice of partial, as batchnorm.cl's partial sums. Each
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
  sum = lane_sum(sum, tile);
  if (get_local_id(1) == 0 && c < cols) grads[offset + c] = sum;
#else
  const int c = get_global_id(0);
  if (c >= cols) return;
  float sum = 0.0f;
  for (int blk = 0; blk < nblocks; blk++) sum += partial[partial_offset + blk * cols + c];
  grads[offset + c] = sum;
#endif
}
