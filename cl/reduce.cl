// dst[dst_offset + i] += src[src_offset + i] for i < n: the receiving side of a
// reduce-scatter step, and the sum of an activation's gradients from two readers. Eight floats per work-item (PoCL does not vectorise
// across work-items). Range: ceil(n / 8).
__kernel void add_into(__global float *dst, const int dst_offset, __global const float *src,
                       const int src_offset, const int n) {
  const int i = get_global_id(0) * 8;
  __global float *d = dst + dst_offset + i;
  __global const float *s = src + src_offset + i;
  if (i + 8 <= n) {
    vstore8(vload8(0, d) + vload8(0, s), 0, d);
  } else {
    for (int j = 0; j < n - i; j++) d[j] += s[j];
  }
}

// Counts non-finite values of x[0..n) per block of `block` floats into
// partial[blk]; then count_final adds the partials into out[slot] (fixed order).
__kernel void count_nonfinite_partial(__global const float *x, const int n, const int block,
                                      __global float *partial) {
  const int blk = get_global_id(0);
  const int begin = blk * block;
  if (begin >= n) return;
  const int end = min(n, begin + block);
  int bad = 0;
  for (int i = begin; i < end; i++) bad += !isfinite(x[i]);
  partial[blk] = (float)bad;
}

__kernel void count_final(__global const float *partial, const int nblocks, __global float *out,
                          const int slot) {
  if (get_global_id(0) != 0) return;
  float sum = 0.0f;
  for (int i = 0; i < nblocks; i++) sum += partial[i];
  out[slot] = sum;
}
