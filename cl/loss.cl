// Softmax cross-entropy from integer labels, one work-item per example in both
// variants: a batch slice has at most a few hundred rows of `classes` logits, a
// cost far below any layer's, so a GPU variant would buy nothing:
//   loss[i] = logsumexp(z_i) - z_i[label_i]
//   dz[i, k] = (softmax(z_i)[k] - [k == label_i]) * scale   (scale = 1 / global batch)
//   correct[i] = argmax(z_i) == label_i  (first maximum, like tf.argmax)
__kernel void softmax_xent(__global const float *z, __global const int *labels, const int n,
                           const int classes, const float scale, __global float *dz,
                           __global float *loss, __global float *correct) {
  const int i = get_global_id(0);
  if (i >= n) return;
  __global const float *zi = z + (size_t)i * classes;
  float zmax = zi[0];
  int arg = 0;
  for (int k = 1; k < classes; k++) {
    if (zi[k] > zmax) {
      zmax = zi[k];
      arg = k;
    }
  }
  float sum = 0.0f;
  for (int k = 0; k < classes; k++) sum += exp(zi[k] - zmax);
  const int label = labels[i];
  const float log_sum = log(sum);
  loss[i] = log_sum + zmax - zi[label];
  correct[i] = arg == label ? 1.0f : 0.0f;
  if (dz) {
    const float inv_sum = 1.0f / sum;
    for (int k = 0; k < classes; k++) {
      const float p = exp(zi[k] - zmax) * inv_sum;
      dz[(size_t)i * classes + k] = (p - (k == label ? 1.0f : 0.0f)) * scale;
    }
  }
}

// metrics[2*slot] = sum of loss[0..n), metrics[2*slot+1] = sum of correct[0..n),
// in a fixed order: tiny, and keeps the step free of host reads. CPU: one
// work-item; GPU: one work-group (a power of two) striding through the batch
// into a local-memory tree (clt_launch_single_group).
__kernel void metrics_accumulate(__global const float *loss, __global const float *correct,
                                 const int n, __global float *metrics, const int slot) {
#if CLT_GPU
  __local float tl[CLT_WG], tc[CLT_WG];
  const int lid = get_local_id(0), size = get_local_size(0);
  float l = 0.0f, c = 0.0f;
  for (int i = lid; i < n; i += size) {
    l += loss[i];
    c += correct[i];
  }
  tl[lid] = l;
  tc[lid] = c;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = size / 2; s > 0; s >>= 1) {
    if (lid < s) {
      tl[lid] += tl[lid + s];
      tc[lid] += tc[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    metrics[2 * slot] = tl[0];
    metrics[2 * slot + 1] = tc[0];
  }
#else
  if (get_global_id(0) != 0) return;
  float l = 0.0f, c = 0.0f;
  for (int i = 0; i < n; i++) {
    l += loss[i];
    c += correct[i];
  }
  metrics[2 * slot] = l;
  metrics[2 * slot + 1] = c;
#endif
}
