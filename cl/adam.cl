// Every replica applies the same update to the same all-reduced gradients, and
// their parameters must stay bit-identical even across device kinds: products
// are not contracted into FMAs (a compiler's choice otherwise), and the host
// builds this file with -cl-fp32-correctly-rounded-divide-sqrt where the device
// offers it (OpenCL's default sqrt and division may be off by ulps).
#pragma OPENCL FP_CONTRACT OFF

// Keras Adam over the whole flat parameter buffer. alpha is
// lr * sqrt(1 - beta2^t) / (1 - beta1^t), computed on the host in double.
__kernel void adam_update(__global float *p, __global const float *g, __global float *m,
                          __global float *v, const int n, const float beta1, const float beta2,
                          const float eps, const float alpha) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float gi = g[i];
  const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
  const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] -= alpha * mi / (sqrt(vi) + eps);
}

// BatchNormalization's moving statistics, p[first..total): their gradient slots
// hold the batch statistics averaged over the replicas by the all-reduce (see
// batchnorm.c). Keras' assign_moving_average: p -= (p - batch) * (1 - momentum).
__kernel void moving_average(__global float *p, __global const float *g, const int first,
                             const int total, const float momentum) {
  const int i = first + get_global_id(0);
  if (i >= total) return;
  p[i] -= (p[i] - g[i]) * (1.0f - momentum);
}
