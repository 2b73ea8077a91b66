// Builds a float batch on the device from the uint8 dataset held there, so a
// training step uploads nothing but the epoch's order (once per epoch).
// x[i, p] = preprocess(images[order[first + i], p]);  y[i] = labels[order[first + i]]

// The models' input preprocessing (clt_preprocess): mode 0 scales to [0, 1];
// mode 1 is Keras' ResNet50 'caffe' preprocess_input for 3-channel RGB input:
// channels reversed to BGR, ImageNet's BGR means subtracted, no scaling; mode 2
// passes the values 0..255 on (a Keras model file's own Rescaling scales them).
// `p` is the flat index within one image (NHWC), whose channel is p % 3.
static inline float preprocess(__global const uchar *image, const int p, const int mode) {
  if (mode == 0) return (float)image[p] * (1.0f / 255.0f);
  if (mode == 2) return (float)image[p];
  const int c = p % 3;
  const float mean = c == 0 ? 103.939f : c == 1 ? 116.779f : 123.68f;
  return (float)image[p - c + (2 - c)] - mean;
}

__kernel void gather_batch(__global const uchar *images, __global const uchar *labels,
                           __global const int *order, const int first, const int count,
                           const int pixels, const int mode, __global float *x, __global int *y) {
  const int gid = get_global_id(0);
  if (gid >= count * pixels) return;
  const int i = gid / pixels;
  const int p = gid - i * pixels;
  const int src = order[first + i];
  x[gid] = preprocess(images + (size_t)src * pixels, p, mode);
  if (p == 0) y[i] = labels[src];
}

// The same for a batch uploaded from the host (photo folders): n bytes of
// consecutive images, `channels` channels each (mode 1 needs 3).
__kernel void convert_batch(__global const uchar *staging, const int n, const int channels,
                            const int mode, __global float *x) {
  const int gid = get_global_id(0);
  if (gid >= n) return;
  const int pixel = gid / channels;
  x[gid] = preprocess(staging + (size_t)pixel * channels, gid - pixel * channels, mode);
}
