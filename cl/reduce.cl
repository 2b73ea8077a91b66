// Fills, sums and counts over flat float arrays: zeroing buffers, the
// all-reduce's adds, the check of a gradient for non-finite values. On CPUs
// (CLT_GPU 0) a work-item takes eight floats as a float8; on GPUs consecutive
// work-items take consecutive floats and reductions meet in local memory.

// dst[dst_offset + i] += src[src_offset + i] for i < n: the receiving side of a
// reduce-scatter step, and the sum of an activation's gradients from two readers.
// Range: ceil(n / 8) on CPUs, n on GPUs (clt_launch_elems).
__kernel void add_into(__global float *dst, const int dst_offset, __global const float *src,
                       const int src_offset, const int n) {
#if CLT_GPU
  const int i = get_global_id(0);
  if (i < n) dst[dst_offset + i] += src[src_offset + i];
#else
  const int i = get_global_id(0) * 8;
  if (i >= n) return;
  __global float *d = dst + dst_offset + i;
  __global const float *s = src + src_offset + i;
  if (i + 8 <= n) {
    vstore8(vload8(0, d) + vload8(0, s), 0, d);
  } else {
    for (int j = 0; j < n - i; j++) d[j] += s[j];
  }
#endif
}

#if CLT_GPU
// Sum of v over the work-group, in a fixed tree order (the same on every run);
// every work-item must call it. The result is valid in work-item 0.
static inline float group_sum(float v, __local float *tile) {
  const int lid = get_local_id(0);
  tile[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) tile[lid] += tile[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return tile[0];
}
#endif

// Counts non-finite values of x[0..n) per block of `block` floats into
// partial[blk]; then count_final adds the partials into out[slot] (fixed order).
// CPU: a work-item per block, range nblocks. GPU: a work-group per block, its
// items striding through it (coalesced), range nblocks * group size.
__kernel void count_nonfinite_partial(__global const float *x, const int n, const int block,
                                      __global float *partial) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int blk = get_group_id(0);
  const int begin = blk * block, end = min(n, begin + block);
  int bad = 0;
  for (int i = begin + (int)get_local_id(0); i < end; i += get_local_size(0)) bad += !isfinite(x[i]);
  const float sum = group_sum((float)bad, tile);
  if (get_local_id(0) == 0 && begin < n) partial[blk] = sum;
#else
  const int blk = get_global_id(0);
  const int begin = blk * block;
  if (begin >= n) return;
  const int end = min(n, begin + block);
  // Eight lanes at a time (a scalar loop is slow over ResNet50's 23.5M
  // gradients). isfinite of a vector is -1 per finite lane, 0 otherwise.
  int8 lanes = (int8)(0);
  int i = begin;
  for (; i + 8 <= end; i += 8) lanes += (int8)(1) + isfinite(vload8(0, x + i));
  int bad = lanes.s0 + lanes.s1 + lanes.s2 + lanes.s3 + lanes.s4 + lanes.s5 + lanes.s6 + lanes.s7;
  for (; i < end; i++) bad += !isfinite(x[i]);
  partial[blk] = (float)bad;
#endif
}

// out[slot] = sum of partial[0..nblocks). One work-item (CPU) or one work-group
// (GPU, a power of two) for the whole sum: nblocks is small.
__kernel void count_final(__global const float *partial, const int nblocks, __global float *out,
                          const int slot) {
#if CLT_GPU
  __local float tile[CLT_WG];
  float sum = 0.0f;
  for (int i = get_local_id(0); i < nblocks; i += get_local_size(0)) sum += partial[i];
  sum = group_sum(sum, tile);
  if (get_local_id(0) == 0) out[slot] = sum;
#else
  if (get_global_id(0) != 0) return;
  float sum = 0.0f;
  for (int i = 0; i < nblocks; i++) sum += partial[i];
  out[slot] = sum;
#endif
}

// dst[offset + i] = value for i < n: zeroing fresh buffers and slots. A kernel
// rather than clEnqueueFillBuffer so that every write is a kernel's (Oclgrind
// 21.10 does not count a fill as initialising memory, and reported every read
// of a filled buffer). Elementwise (clt_launch_elems).
__kernel void fill(__global float *dst, const ulong offset, const ulong n, const float value) {
#if CLT_GPU
  const size_t i = get_global_id(0);
  if (i < n) dst[offset + i] = value;
#else
  const size_t i = get_global_id(0) * 8;
  if (i >= n) return;
  __global float *d = dst + offset + i;
  if (i + 8 <= n) {
    vstore8((float8)(value), 0, d);
  } else {
    for (size_t j = 0; j < n - i; j++) d[j] = value;
  }
#endif
}
