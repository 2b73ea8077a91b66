// Elementwise sums, differences and products of two NHWC tensors, one of which may be
// a per-channel vector broadcast over groups of rows (squeeze-and-excitation's
// (1, 1, C) per example; LayerScale's (C) over the whole batch). Every kernel is
// launched as clt_launch_elements over (C, rows): one body, a work-item per element.
//
// A row r of the full tensor reads the broadcast one's row r / G (G: the rows of a
// group, H*W per example). mul != 0: a product, else the sum a * x + b * x2.

// The input's value for element (r, c): the full tensor's or the broadcast row's.
inline float bcast_at(__global const float *v, const int off, const int bcast, const int r,
                      const int c, const int C, const int G) {
  return v[off + (bcast ? (r / G) * C : r * C) + c];
}

// y = x * x2 (mul) or a * x + b * x2, over rows x C; bx, bx2: that input is broadcast;
// x2 starts off2 floats in (a parameter in the flat buffer).
__kernel void bcast_forward(__global const float *x, __global const float *x2, const int off2,
                            __global float *y, const int C, const int rows, const int G,
                            const int bx, const int bx2, const int mul, const float a,
                            const float b) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  const float u = bcast_at(x, 0, bx, r, c, C, G), v = bcast_at(x2, off2, bx2, r, c, C, G);
  y[(size_t)r * C + c] = mul ? u * v : a * u + b * v;
}

// The gradient of a full-shape input: dx = dy * other (mul; other broadcast when
// bother, starting off floats in) or dx = a * dy.
__kernel void bcast_grad(__global const float *dy, __global const float *other, const int off,
                         __global float *dx, const int C, const int rows, const int G,
                         const int bother, const int mul, const float a) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= C || r >= rows) return;
  const size_t i = (size_t)r * C + c;
  dx[i] = mul ? dy[i] * bcast_at(other, off, bother, r, c, C, G) : a * dy[i];
}

// The gradient of a broadcast input, launched over (C, groups): ds[off + g * C + c] =
// the sum over the group's G rows, in order, of dy * other (mul; other full-shape)
// or of dy, times a.
__kernel void bcast_grad_sum(__global const float *dy, __global const float *other,
                             __global float *ds, const int off, const int C, const int groups,
                             const int G, const int mul, const float a) {
  const int c = get_global_id(0), g = get_global_id(1);
  if (c >= C || g >= groups) return;
  float s = 0.0f;
  for (int k = 0; k < G; k++) {
    const size_t i = ((size_t)g * G + k) * C + c;
    s += mul ? dy[i] * other[i] : dy[i];
  }
  ds[off + (size_t)g * C + c] = mul ? s : a * s;
}
