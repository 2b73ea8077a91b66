// Dropout. Element i (within its example) of global example e is kept when the high 32 bits
// of hash(key, e, i) are >= thr (= rate * 2^32), and scaled by 1 / (1 - rate). The
// key mixes the run's seed, the layer and the step (dropout.c), so the mask depends
// on nothing else: any split of a global batch across replicas draws the same one,
// and the backward recomputes it. tests/ref/ref.c's ref_dropout_hash is the same.

// splitmix64's finaliser (also on ulong4).
#define MIX64(z)                                \
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL; \
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL; \
  z = z ^ (z >> 31)

#if !CLT_GPU
// The keep mask (-1 kept, 0 dropped) of 4 elements: examples b, positions r.
// Four 64-bit lanes, not eight: a builtin taking or returning 512 bits (ulong8)
// draws clang's "changes the ABI" warning on every build without AVX-512.
static int4 dropout_keep4(const ulong key, const long example0, const int4 b, const int4 r,
                          const uint thr) {
  ulong4 h = (ulong4)(key) ^ (convert_ulong4((long4)(example0) + convert_long4(b)) *
                              0x9e3779b97f4a7c15UL);
  MIX64(h);
  h += convert_ulong4(r) * 0xd1b54a32d192ed03UL;
  MIX64(h);
  return convert_uint4(h >> 32) >= (uint4)(thr);
}
#endif

// y = x * scale where kept, else 0, over n floats of examples of per_example floats,
// the first being global example example0: the forward (x, y) and the backward (dy, dx).
__kernel void dropout_apply(__global const float *x, __global float *y, const int n,
                            const int per_example, const ulong key, const long example0,
                            const uint thr, const float scale) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i >= n) return;
  const int b = i / per_example;
  ulong h = key ^ ((ulong)(example0 + b) * 0x9e3779b97f4a7c15UL);
  MIX64(h);
  h += (ulong)(i - b * per_example) * 0xd1b54a32d192ed03UL;
  MIX64(h);
  y[i] = (uint)(h >> 32) >= thr ? x[i] * scale : 0.0f;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const int8 j = (int8)((int)at) + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    const int8 b = j / per_example, r = j - b * per_example;
    int8 keep;
    keep.lo = dropout_keep4(key, example0, b.lo, r.lo, thr);
    keep.hi = dropout_keep4(key, example0, b.hi, r.hi, thr);
    vstore8(select((float8)(0.0f), vload8(i, x) * scale, keep), i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) {
      const int b = (int)j / per_example;
      ulong h = key ^ ((ulong)(example0 + b) * 0x9e3779b97f4a7c15UL);
      MIX64(h);
      h += (ulong)((int)j - b * per_example) * 0xd1b54a32d192ed03UL;
      MIX64(h);
      y[j] = (uint)(h >> 32) >= thr ? x[j] * scale : 0.0f;
    }
  }
#endif
}

// dropout_apply with draws shared along the axes of `share` (dropout.c's SHARE_*:
// 1 batch, 2 height, 4 width, 8 channels; Keras' noise_shape entries of 1): value
// (b, h, w, c) of W x C rows draws at its position in the noise shape, example 0
// for every example when the batch shares.
static inline float dropout_shared_one(const float v, const int j, const int per_example,
                                       const ulong key, const long example0, const uint thr,
                                       const float scale, const int W, const int C,
                                       const int share) {
  const int b = j / per_example, r = j - b * per_example;
  const int c = r % C, x = (r / C) % W, y = r / C / W;
  const int nw = share & 4 ? 1 : W, nc = share & 8 ? 1 : C;
  const int at = ((share & 2 ? 0 : y) * nw + (share & 4 ? 0 : x)) * nc + (share & 8 ? 0 : c);
  ulong h = key ^ ((ulong)(share & 1 ? 0 : example0 + b) * 0x9e3779b97f4a7c15UL);
  MIX64(h);
  h += (ulong)at * 0xd1b54a32d192ed03UL;
  MIX64(h);
  return (uint)(h >> 32) >= thr ? v * scale : 0.0f;
}

__kernel void dropout_shared(__global const float *x, __global float *y, const int n,
                             const int per_example, const ulong key, const long example0,
                             const uint thr, const float scale, const int W, const int C,
                             const int share) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n)
    y[i] = dropout_shared_one(x[i], i, per_example, key, example0, thr, scale, W, C, share);
#else
  const size_t at = (size_t)i * CH, end = min(at + CH, (size_t)n);
  for (size_t j = at; j < end; j++)
    y[j] = dropout_shared_one(x[j], (int)j, per_example, key, example0, thr, scale, W, C, share);
#endif
}
