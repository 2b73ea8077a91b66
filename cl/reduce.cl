// Fills, sums and counts over flat float arrays: zeroing buffers, the
// all-reduce's adds, the total of a gradient's non-finite count. On CPUs
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

// The gradient check's total: the optimizers' update kernels (optimizer.cl) count
// the gradient's non-finite values per block of floats into partial[blk]; this
// adds them into out[slot] (fixed order): out[slot] = sum of partial[0..nblocks).
// One work-item (CPU) or one work-group
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
