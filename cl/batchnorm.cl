// BatchNormalization. NHWC.
//
// Batch normalization sees its input as `rows` = B*H*W rows of C contiguous
// channels. Per-channel sums over rows run in two fixed-order passes, as
// bias_grad in bias.cl: partial sums over blocks of rows, then a sum over the
// blocks, so the result does not depend on scheduling and replicas fed the same
// data agree bit for bit. No atomics anywhere.
//
// The two variants of each kernel (CLT_GPU, see common.cl):
// CLT_GPU 0 (CPUs): PoCL does not vectorise across work-items, so each work-item
//   takes a chunk of 8 channels (dimension 0 of a 2-D range, ceil(C/8) wide) as
//   a float8; when C is not a multiple of 8 the last chunk is done with scalars.
//   The sums over rows and bn_apply, bn_dx take CG channels a work-item instead
//   (see BN_CPU_BLOCK).
// CLT_GPU 1 (GPUs): a work-item per channel along dimension 0, so consecutive
//   work-items read consecutive floats (coalesced). Elementwise passes take one
//   element per work-item (clt_launch_rows, clt_launch_elems); sums over rows
//   run in work-groups of (LC channels, LR row lanes) (clt_launch_blocks): the
//   lanes stride through the rows and meet in a fixed local-memory tree.
#if !CLT_GPU
// The CPU's partial sums over rows: a work-item takes a block of rows times CG
// channels. bn_partial_grad reads each row's CG floats in one run, keeping the
// sums in its slice of `partial` (in L1), eight channels at a time. Work-items
// of 8 channels each had read every row in 32-byte pieces a row apart, which
// the prefetchers did not follow: 16 GB/s where the elementwise passes reach
// 30. bn_partial_stats goes down the rows a strip of BN_STATS_STRIP channels
// (four cache lines a row) at a time, its three running values in registers
// rather than loaded and stored in L1 for every row. Each channel's sum still
// runs over the block's rows in order from 0, as on one item per channel.
#define BN_STATS_STRIP 64
#define BN_CPU_BLOCK                                                    \
  const int c0 = get_global_id(0) * CG, blk = get_global_id(1);         \
  const int r0 = blk * rows_per_block;                                  \
  if (c0 >= C || r0 >= rows) return;                                    \
  const int n = min(rows - r0, rows_per_block), w = min(CG, C - c0);    \
  __global const float *p = x + (size_t)r0 * C + c0
#endif

// Per block of rows, the statistics Chan et al.'s pairwise update combines:
// partial[part + blk*C + c] = the block's mean of x[r, c], partial[part2 + ...]
// = its sum of squared deviations from that mean, both computed so that errors
// scale with the spread, not the mean. CPUs: one pass over the block by
// Welford's update, rows in order (a first pass for the mean had cost as much
// again, though the second read came from cache). GPUs: the corrected two-pass
// algorithm (a first-pass mean m, then the deviations d = x - m: m + sum d / n,
// sum d^2 - (sum d)^2 / n), the lanes' sums meeting in lane_sum, which only
// adds. clt_launch_row_blocks over (C, nblocks).
__kernel void bn_partial_stats(__global const float *x, const int rows, const int C,
                               const int rows_per_block, __global float *partial,
                               const int part, const int part2) {
#if CLT_GPU
  __local float tile[CLT_WG], tile2[CLT_WG], tile3[CLT_WG];
  const int c = get_global_id(0), blk = get_group_id(1);
  const int r0 = blk * rows_per_block, r1 = min(rows, r0 + rows_per_block);
  const float n = (float)max(1, r1 - r0);
  float s = 0.0f;
  if (c < C)
    for (int r = r0 + get_local_id(1); r < r1; r += get_local_size(1)) s += x[(size_t)r * C + c];
  const float m = lane_sum(s, tile) / n;
  float sd = 0.0f, q = 0.0f;
  if (c < C) {
    for (int r = r0 + get_local_id(1); r < r1; r += get_local_size(1)) {
      const float d = x[(size_t)r * C + c] - m;
      sd += d;
      q += d * d;
    }
  }
  sd = lane_sum(sd, tile2);
  q = lane_sum(q, tile3);
  if (c < C && r0 < rows && get_local_id(1) == 0) {
    const float m2 = q - sd * sd / n;
    partial[part + (size_t)blk * C + c] = m + sd / n;
    partial[part2 + (size_t)blk * C + c] = m2 < 0.0f ? 0.0f : m2; // not max(): NaN goes on
  }
#else
  BN_CPU_BLOCK;
  // Welford's update row by row on x shifted by the block's first row k: the
  // running mean m of d = x - k gains (d - m) / (r + 1) and M2 gains (d - m) *
  // (d - m') with m' the updated mean; the block's mean is then k + m. The
  // shift keeps m near the spread's size, so its rounding does not scale with
  // the mean. A strip of NV x 8 channels at a time keeps k, m and M2 in
  // registers over the block's rows: BN_STATS_STRIP floats while they last, then
  // 8, then one at a time.
  __global float *out = partial + part + (size_t)blk * C + c0;
  __global float *out2 = partial + part2 + (size_t)blk * C + c0;
  int c = 0;
#define BN_STATS_STRIP_OF(NV)                                                             \
  for (; c + (NV) * CH <= w; c += (NV) * CH) {                                            \
    float8 k[NV], mean[NV], m2[NV];                                                       \
    __global const float *q = p + c;                                                      \
    _Pragma("unroll") for (int j = 0; j < (NV); j++) {                                    \
      k[j] = vload8(j, q);                                                                \
      mean[j] = m2[j] = (float8)(0.0f);                                                   \
    }                                                                                     \
    for (int r = 0; r < n; r++, q += C) {                                                 \
      const float inv = 1.0f / (float)(r + 1);                                            \
      _Pragma("unroll") for (int j = 0; j < (NV); j++) {                                  \
        const float8 v = vload8(j, q) - k[j], d = v - mean[j], m1 = mean[j] + d * inv;    \
        mean[j] = m1;                                                                     \
        m2[j] += d * (v - m1);                                                            \
      }                                                                                   \
    }                                                                                     \
    /* m2 < 0 from rounding: 0 (not fmax: a NaN goes on to the loss guard) */             \
    _Pragma("unroll") for (int j = 0; j < (NV); j++) {                                    \
      vstore8(mean[j] + k[j], j, out + c);                                                \
      vstore8(select(m2[j], (float8)(0.0f), isless(m2[j], (float8)(0.0f))), j, out2 + c); \
    }                                                                                     \
  }
  BN_STATS_STRIP_OF(BN_STATS_STRIP / CH)
  BN_STATS_STRIP_OF(1)
#undef BN_STATS_STRIP_OF
  for (; c < w; c++) {
    __global const float *q = p + c;
    const float k = q[0];
    float mean = 0.0f, m2 = 0.0f;
    for (int r = 0; r < n; r++, q += C) {
      const float v = q[0] - k, d = v - mean;
      mean += d * (1.0f / (float)(r + 1));
      m2 += d * (v - mean);
    }
    out[c] = mean + k;
    out2[c] = m2 < 0.0f ? 0.0f : m2;
  }
#endif
}

// The final passes below (bn_stats_final, bn_grad_final) run per channel: on
// CPUs a work-item per channel (range C) adds the blocks in order; on GPUs,
// where C work-items alone would leave most of the device idle for thousands of
// blocks, clt_launch_blocks over (C, 1): the LR lanes of a channel take every
// LR-th block and meet in lane_sum, and only lane 0 goes on (after the barriers).
#if CLT_GPU
// This lane's share of the sum over the blocks of partial[part + blk*C + c]:
// blocks lr, lr + LR, ... in order (0 for c >= C, which still joins lane_sum).
static inline float block_sum(__global const float *partial, const int part,
                              const int nblocks, const int C, const int c) {
  float s = 0.0f;
  if (c < C)
    for (int blk = get_local_id(1); blk < nblocks; blk += get_local_size(1))
      s += partial[part + (size_t)blk * C + c];
  return s;
}
#else
// Sum over the blocks of partial[part + blk*C + c], in block order.
static inline float block_sum(__global const float *partial, const int part,
                              const int nblocks, const int C, const int c) {
  float s = 0.0f;
  for (int blk = 0; blk < nblocks; blk++) s += partial[part + (size_t)blk * C + c];
  return s;
}
#endif

// The blocks' rows: n_b = per_block, the last one's the remainder.
#define BLOCK_ROWS(blk) ((float)min(per_block, rows - (blk) * per_block))

#if CLT_GPU
// This lane's share of sum n_b (m_b - ref) over the blocks (lanes take every
// LR-th block), and of sum M2_b + n_b (m_b - mean)^2.
static inline float block_shift(__global const float *partial, const int part,
                                const int nblocks, const int rows, const int per_block,
                                const int C, const int c, const float ref) {
  float s = 0.0f;
  if (c < C)
    for (int blk = get_local_id(1); blk < nblocks; blk += get_local_size(1))
      s += BLOCK_ROWS(blk) * (partial[part + (size_t)blk * C + c] - ref);
  return s;
}
static inline float block_dev(__global const float *partial, const int part, const int part2,
                              const int nblocks, const int rows, const int per_block,
                              const int C, const int c, const float mean) {
  float q = 0.0f;
  if (c < C) {
    for (int blk = get_local_id(1); blk < nblocks; blk += get_local_size(1)) {
      const float d = partial[part + (size_t)blk * C + c] - mean;
      q += partial[part2 + (size_t)blk * C + c] + BLOCK_ROWS(blk) * d * d;
    }
  }
  return q;
}
#else
// sum n_b (m_b - ref) over the blocks, in block order.
static inline float block_shift(__global const float *partial, const int part,
                                const int nblocks, const int rows, const int per_block,
                                const int C, const int c, const float ref) {
  float s = 0.0f;
  for (int blk = 0; blk < nblocks; blk++)
    s += BLOCK_ROWS(blk) * (partial[part + (size_t)blk * C + c] - ref);
  return s;
}
// sum M2_b + n_b (m_b - mean)^2 over the blocks, in block order.
static inline float block_dev(__global const float *partial, const int part, const int part2,
                              const int nblocks, const int rows, const int per_block,
                              const int C, const int c, const float mean) {
  float q = 0.0f;
  for (int blk = 0; blk < nblocks; blk++) {
    const float d = partial[part + (size_t)blk * C + c] - mean;
    q += partial[part2 + (size_t)blk * C + c] + BLOCK_ROWS(blk) * d * d;
  }
  return q;
}
#endif

// From bn_partial_stats' blocks (Chan et al.'s combination): mean = m_0 + sum
// n_b (m_b - m_0) / rows, the first block's mean m_0 taken out so that the sum
// runs over spread-sized terms; the sum of squared deviations sq = sum M2_b +
// n_b (m_b - mean)^2; biased var = sq / rows. state gets mean and 1/sqrt(var +
// eps). The replica's shares of the batch statistics, stat_weight * mean and
// stat_weight * the unbiased variance (TensorFlow's fused batch norm feeds that
// to the moving variance), go to the moving statistics' gradient slots for the
// all-reduce to average.
__kernel void bn_stats_final(__global const float *partial, const int part, const int part2,
                             const int nblocks, const int rows, const int per_block, const int C,
                             const float eps, __global float *state, __global float *grads,
                             const int mean_slot, const int var_slot, const float stat_weight) {
  const int c = get_global_id(0);
#if CLT_GPU
  __local float tile[CLT_WG], tile2[CLT_WG];
  const float ref = c < C ? partial[part + c] : 0.0f;
  const float mean =
      ref + lane_sum(block_shift(partial, part, nblocks, rows, per_block, C, c, ref), tile) /
                (float)rows;
  const float sq =
      lane_sum(block_dev(partial, part, part2, nblocks, rows, per_block, C, c, mean), tile2);
  if (c >= C || get_local_id(1) != 0) return;
#else
  if (c >= C) return;
  const float ref = partial[part + c];
  const float mean =
      ref + block_shift(partial, part, nblocks, rows, per_block, C, c, ref) / (float)rows;
  const float sq = block_dev(partial, part, part2, nblocks, rows, per_block, C, c, mean);
#endif
  state[c] = mean;
  state[C + c] = 1.0f / sqrt(sq / (float)rows + eps);
  grads[mean_slot + c] = stat_weight * mean;
  grads[var_slot + c] = stat_weight * (sq / (float)(rows > 1 ? rows - 1 : 1));
}

// Inference statistics from the moving averages, laid out as the training state:
// stats[c] = moving_mean[c], stats[C + c] = 1/sqrt(moving_variance[c] + eps).
// Range: C, a work-item per channel in both variants (coalesced on GPUs already).
__kernel void bn_infer_stats(__global const float *params, const int mean_off, const int var_off,
                             const int C, const float eps, __global float *stats,
                             const int stats_off) {
  const int c = get_global_id(0);
  if (c >= C) return;
  stats[stats_off + c] = params[mean_off + c];
  stats[stats_off + C + c] = 1.0f / sqrt(params[var_off + c] + eps);
}

// The normalised value before the residual and the ReLU: d * scale + shift, d = x -
// mean, scale = gamma * inv_std, shift = beta. bn_apply writes it; the backward of a
// BatchNormalization with its ReLU recomputes it from x for the mask (y > 0 exactly
// where this is > 0) instead of reading y: the one expression in both, so the same
// bits (a contraction to FMA, if any, is the same in both).
static inline float bn_norm(const float d, const float scale, const float shift) {
  return d * scale + shift;
}
#if !CLT_GPU
static inline float8 bn_norm8(const float8 d, const float8 scale, const float8 shift) {
  return d * scale + shift;
}
#endif

// y = (x - mean) * gamma * inv_std + beta (+ res when res is not NULL: the Add
// that follows, fused), then ReLU when relu != 0 (not fmax, so a
// NaN reaches the loss guard); mean and inv_std at stats[off], stats[off + C];
// gamma_off < 0: gamma 1 (scale=False), beta_off < 0: beta 0 (center=False).
// CPUs: a work-item takes rows_per_item rows of CG channels (clt_launch_row_blocks
// over (C, ceil(rows / rows_per_item))): items of 8 channels read rows in 32-byte
// pieces a row apart, as the partial sums did. GPUs: clt_launch_rows over (C,
// rows), a work-item per element (rows_per_item unused).
__kernel void bn_apply(__global const float *x, __global float *y, const int rows, const int C,
                       const int rows_per_item, __global const float *stats, const int off,
                       __global const float *params, const int gamma_off, const int beta_off,
                       const int relu, __global const float *res) {
#if CLT_GPU
  (void)rows_per_item; // the CPU variant's
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  const size_t at = (size_t)r * C + c;
  const float gamma = gamma_off < 0 ? 1.0f : params[gamma_off + c];
  const float beta = beta_off < 0 ? 0.0f : params[beta_off + c];
  float v = bn_norm(x[at] - stats[off + c], gamma * stats[off + C + c], beta);
  if (res) v += res[at];
  if (relu && v < 0.0f) v = 0.0f;
  y[at] = v;
#else
  // A block of rows_per_item rows times CG channels, each row's CG floats in
  // one run (as the partial sums above).
  const int c0 = get_global_id(0) * CG;
  const int r0 = get_global_id(1) * rows_per_item;
  if (c0 >= C || r0 >= rows) return;
  const int r1 = min(rows, r0 + rows_per_item), w = min(CG, C - c0);
  __global const float *mean = stats + off + c0, *inv_std = stats + off + C + c0;
  for (int r = r0; r < r1; r++) {
    __global const float *xr = x + (size_t)r * C + c0;
    __global float *yr = y + (size_t)r * C + c0;
    __global const float *rr = res ? res + (size_t)r * C + c0 : res;
    int c = 0;
    for (; c + CH <= w; c += CH) {
      const float8 gamma =
          gamma_off < 0 ? (float8)(1.0f) : vload8(0, params + gamma_off + c0 + c);
      const float8 shift = beta_off < 0 ? (float8)(0.0f) : vload8(0, params + beta_off + c0 + c);
      const float8 scale = gamma * vload8(0, inv_std + c);
      float8 v = bn_norm8(vload8(0, xr + c) - vload8(0, mean + c), scale, shift);
      if (rr) v += vload8(0, rr + c);
      if (relu) v = select(v, (float8)(0.0f), isless(v, (float8)(0.0f)));
      vstore8(v, 0, yr + c);
    }
    for (; c < w; c++) {
      const float gamma = gamma_off < 0 ? 1.0f : params[gamma_off + c0 + c];
      const float beta = beta_off < 0 ? 0.0f : params[beta_off + c0 + c];
      float v = bn_norm(xr[c] - mean[c], gamma * inv_std[c], beta);
      if (rr) v += rr[c];
      if (relu && v < 0.0f) v = 0.0f;
      yr[c] = v;
    }
  }
#endif
}

// The gradient g a backward pass works with: dy, and with relu != 0 (the fused
// ReLU's backward, done in the two passes that read dy rather than as a pass of its
// own) 0 where the output is not positive. The output before the ReLU is recomputed
// from d = x - mean (bn_norm, as bn_apply computed it: the same bits, so the mask
// is exact), which saves reading y. scale, shift as bn_apply's.
static inline float bn_grad(const float dy, const int relu, const float d, const float scale,
                            const float shift) {
  return relu && !(bn_norm(d, scale, shift) > 0.0f) ? 0.0f : dy;
}
// gamma * inv_std and beta of channel c (gamma_off < 0: 1; beta_off < 0: 0).
static inline float bn_scale(__global const float *params, const int gamma_off,
                             __global const float *state, const int C, const int c) {
  return (gamma_off < 0 ? 1.0f : params[gamma_off + c]) * state[C + c];
}
static inline float bn_shift(__global const float *params, const int beta_off, const int c) {
  return beta_off < 0 ? 0.0f : params[beta_off + c];
}
#if !CLT_GPU
static inline float8 bn_grad8(const float8 dy, const int relu, const float8 d, const float8 scale,
                              const float8 shift) {
  return relu ? select((float8)(0.0f), dy, isgreater(bn_norm8(d, scale, shift), (float8)(0.0f)))
              : dy;
}
static inline float8 bn_scale8(__global const float *params, const int gamma_off,
                               __global const float *state, const int C, const int c) {
  return (gamma_off < 0 ? (float8)(1.0f) : vload8(0, params + gamma_off + c)) *
         vload8(0, state + C + c);
}
static inline float8 bn_shift8(__global const float *params, const int beta_off, const int c) {
  return beta_off < 0 ? (float8)(0.0f) : vload8(0, params + beta_off + c);
}
#endif

// Backward partial sums over blocks of rows: sum of g (bn_grad) into partial[part
// ...] and sum of g * (x - mean) into partial[part2 ...] (times inv_std that is
// dgamma). params, gamma_off, beta_off as bn_apply's (for the ReLU's mask only).
// clt_launch_row_blocks over (C, nblocks).
__kernel void bn_partial_grad(__global const float *dy, __global const float *x,
                              __global const float *params, const int gamma_off,
                              const int beta_off, const int relu, const int rows, const int C,
                              const int rows_per_block, __global const float *state,
                              __global float *partial, const int part, const int part2) {
#if CLT_GPU
  __local float tile[CLT_WG], tile2[CLT_WG];
  const int c = get_global_id(0), blk = get_group_id(1);
  const int r0 = blk * rows_per_block, r1 = min(rows, r0 + rows_per_block);
  float s = 0.0f, s2 = 0.0f;
  if (c < C) {
    const float m = state[c], scale = bn_scale(params, gamma_off, state, C, c);
    const float shift = bn_shift(params, beta_off, c);
    for (int r = r0 + get_local_id(1); r < r1; r += get_local_size(1)) {
      const size_t at = (size_t)r * C + c;
      const float d = x[at] - m, g = bn_grad(dy[at], relu, d, scale, shift);
      s += g;
      s2 += g * d;
    }
  }
  s = lane_sum(s, tile);
  s2 = lane_sum(s2, tile2);
  if (c < C && r0 < rows && get_local_id(1) == 0) {
    partial[part + (size_t)blk * C + c] = s;
    partial[part2 + (size_t)blk * C + c] = s2;
  }
#else
  BN_CPU_BLOCK;
  __global float *out = partial + part + (size_t)blk * C + c0;
  __global float *out2 = partial + part2 + (size_t)blk * C + c0;
  __global const float *m = state + c0;
  __global const float *gy = dy + (size_t)r0 * C + c0;
  for (int c = 0; c < w; c++) out[c] = out2[c] = 0.0f;
  for (int r = 0; r < n; r++, p += C, gy += C) {
    int c = 0;
    for (; c + CH <= w; c += CH) {
      const float8 d = vload8(0, p + c) - vload8(0, m + c);
      const float8 g = bn_grad8(vload8(0, gy + c), relu, d,
                                bn_scale8(params, gamma_off, state, C, c0 + c),
                                bn_shift8(params, beta_off, c0 + c));
      const float8 s2 = vload8(0, out2 + c);
      vstore8(vload8(0, out + c) + g, 0, out + c);
      vstore8(s2 + g * d, 0, out2 + c);
    }
    for (; c < w; c++) {
      const float d = p[c] - m[c];
      const float g = bn_grad(gy[c], relu, d, bn_scale(params, gamma_off, state, C, c0 + c),
                              bn_shift(params, beta_off, c0 + c));
      out[c] += g;
      out2[c] += g * d;
    }
  }
#endif
}

// dbeta = sum g, dgamma = inv_std * sum g * (x - mean) (g as in bn_partial_grad) into
// the gradient buffer, and the coefficients of dx = a * (g - b - (x - mean) * k) into coef:
// a = gamma * inv_std, b = dbeta / rows, k = dgamma * inv_std / rows, each C long.
// A layer without gamma (beta) passes slot -1: no gradient written; gamma_off -1: 1.
__kernel void bn_grad_final(__global const float *partial, const int part, const int part2,
                            const int nblocks, const int rows, const int C,
                            __global const float *state, __global const float *params,
                            const int gamma_off, __global float *grads, const int gamma_slot,
                            const int beta_slot, __global float *coef, const int coef_off) {
  const int c = get_global_id(0);
#if CLT_GPU
  __local float tile[CLT_WG], tile2[CLT_WG];
  const float dbeta = lane_sum(block_sum(partial, part, nblocks, C, c), tile);
  const float sum2 = lane_sum(block_sum(partial, part2, nblocks, C, c), tile2);
  if (c >= C || get_local_id(1) != 0) return;
#else
  if (c >= C) return;
  const float dbeta = block_sum(partial, part, nblocks, C, c);
  const float sum2 = block_sum(partial, part2, nblocks, C, c);
#endif
  const float inv_std = state[C + c];
  const float dgamma = sum2 * inv_std;
  if (beta_slot >= 0) grads[beta_slot + c] = dbeta;
  if (gamma_slot >= 0) grads[gamma_slot + c] = dgamma;
  coef[coef_off + c] = (gamma_off < 0 ? 1.0f : params[gamma_off + c]) * inv_std;
  coef[coef_off + C + c] = dbeta / (float)rows;
  coef[coef_off + 2 * C + c] = dgamma * inv_std / (float)rows;
}

// dx = a * (g - b - (x - mean) * k) with the coefficients of bn_grad_final and g
// as in bn_partial_grad (params, gamma_off, beta_off for its mask); work as in
// bn_apply.
#if !CLT_GPU
// The CPU's dx over rows r0 .. r1 - 1 of channels c0 .. c0 + w - 1; with sum not
// NULL also sum[c] = that block's sum of dx of channel c0 + c, each added in row
// order from 0 as bias_grad_partial adds them (the same bits).
static inline void bn_dx_rows(__global const float *dy, __global const float *x,
                              __global const float *params, const int gamma_off,
                              const int beta_off, const int relu, __global float *dx,
                              const int C, __global const float *state,
                              __global const float *coef, const int coef_off, const int c0,
                              const int w, const int r0, const int r1, __global float *sum) {
  __global const float *a = coef + coef_off + c0, *b = a + C, *k = b + C, *m = state + c0;
  for (int c = 0; sum && c < w; c++) sum[c] = 0.0f;
  for (int r = r0; r < r1; r++) {
    const size_t at = (size_t)r * C + c0;
    int c = 0;
    for (; c + CH <= w; c += CH) {
      const float8 d = vload8(0, x + at + c) - vload8(0, m + c);
      const float8 g = bn_grad8(vload8(0, dy + at + c), relu, d,
                                bn_scale8(params, gamma_off, state, C, c0 + c),
                                bn_shift8(params, beta_off, c0 + c));
      const float8 v = vload8(0, a + c) * (g - vload8(0, b + c) - d * vload8(0, k + c));
      vstore8(v, 0, dx + at + c);
      if (sum) vstore8(vload8(0, sum + c) + v, 0, sum + c);
    }
    for (; c < w; c++) {
      const float d = x[at + c] - m[c];
      const float g = bn_grad(dy[at + c], relu, d, bn_scale(params, gamma_off, state, C, c0 + c),
                              bn_shift(params, beta_off, c0 + c));
      const float v = a[c] * (g - b[c] - d * k[c]);
      dx[at + c] = v;
      if (sum) sum[c] += v;
    }
  }
}
#else
// One element's dx (GPUs).
static inline float bn_dx_at(__global const float *dy, __global const float *x,
                             __global const float *params, const int gamma_off,
                             const int beta_off, const int relu, const int C,
                             __global const float *state, __global const float *coef,
                             const int coef_off, const int c, const size_t at) {
  __global const float *a = coef + coef_off, *b = a + C, *k = b + C;
  const float d = x[at] - state[c];
  const float g = bn_grad(dy[at], relu, d, bn_scale(params, gamma_off, state, C, c),
                          bn_shift(params, beta_off, c));
  return a[c] * (g - b[c] - d * k[c]);
}
#endif

__kernel void bn_dx(__global const float *dy, __global const float *x,
                    __global const float *params, const int gamma_off, const int beta_off,
                    const int relu, __global float *dx, const int rows, const int C,
                    const int rows_per_item, __global const float *state,
                    __global const float *coef, const int coef_off) {
#if CLT_GPU
  (void)rows_per_item; // the CPU variant's
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  const size_t at = (size_t)r * C + c;
  dx[at] = bn_dx_at(dy, x, params, gamma_off, beta_off, relu, C, state, coef, coef_off, c, at);
#else
  // Blocks as bn_apply's.
  const int c0 = get_global_id(0) * CG;
  const int r0 = get_global_id(1) * rows_per_item;
  if (c0 >= C || r0 >= rows) return;
  bn_dx_rows(dy, x, params, gamma_off, beta_off, relu, dx, C, state, coef, coef_off, c0,
             min(CG, C - c0), r0, min(rows, r0 + rows_per_item), NULL);
#endif
}

// bn_dx, and the sums of dx over each block of rows_per_block rows into
// partial[part + blk * C + c]: the input's producer's bias gradient (a Conv2D
// whose output only this layer reads) in the layout and order of bias.cl's
// bias_grad_partial over dx, which bias_grad_final then adds up; so that pass
// over dx is saved and the gradient keeps its bits. clt_launch_row_blocks over
// (C, nblocks), the lanes of a GPU's group taking every LR-th row and meeting in
// lane_sum, as bias_grad_partial's.
__kernel void bn_dx_sums(__global const float *dy, __global const float *x,
                         __global const float *params, const int gamma_off, const int beta_off,
                         const int relu, __global float *dx, const int rows, const int C,
                         const int rows_per_block, __global const float *state,
                         __global const float *coef, const int coef_off, __global float *partial,
                         const int part) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int c = get_global_id(0), blk = get_group_id(1);
  const int begin = blk * rows_per_block, end = min(rows, begin + rows_per_block);
  float sum = 0.0f;
  if (c < C) {
    for (int r = begin + (int)get_local_id(1); r < end; r += (int)get_local_size(1)) {
      const size_t at = (size_t)r * C + c;
      const float v =
          bn_dx_at(dy, x, params, gamma_off, beta_off, relu, C, state, coef, coef_off, c, at);
      dx[at] = v;
      sum += v;
    }
  }
  sum = lane_sum(sum, tile); // all items, also those past C: barriers
  if (get_local_id(1) == 0 && c < C) partial[part + (size_t)blk * C + c] = sum;
#else
  const int c0 = get_global_id(0) * CG, blk = get_global_id(1);
  const int r0 = blk * rows_per_block;
  if (c0 >= C || r0 >= rows) return;
  bn_dx_rows(dy, x, params, gamma_off, beta_off, relu, dx, C, state, coef, coef_off, c0,
             min(CG, C - c0), r0, min(rows, r0 + rows_per_block),
             partial + part + (size_t)blk * C + c0);
#endif
}
