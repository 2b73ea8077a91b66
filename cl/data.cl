// Builds a float batch on the device from the uint8 dataset held there, so a
// training step uploads nothing but the epoch's order (once per epoch).
// x[i, p] = images[order[first + i], p] / 255;  y[i] = labels[order[first + i]]
__kernel void gather_batch(__global const uchar *images, __global const uchar *labels,
                           __global const int *order, const int first, const int count,
                           const int pixels, __global float *x, __global int *y) {
  const int gid = get_global_id(0);
  if (gid >= count * pixels) return;
  const int i = gid / pixels;
  const int p = gid - i * pixels;
  const int src = order[first + i];
  x[gid] = (float)images[(size_t)src * pixels + p] * (1.0f / 255.0f);
  if (p == 0) y[i] = labels[src];
}
