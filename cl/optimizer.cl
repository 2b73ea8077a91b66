// Every optimizer's update (src/engine/optimizer.c launches them) and the moving
// averages of BatchNormalization's statistics.
//
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

// The other optimizers of src/engine/optimizer.h, as Keras 3 writes them (the same float
// operations in the same order). wd > 0: Keras' decoupled weight decay first,
// p -= p * wd * lr; Adam gets it from weight_decay, launched before adam_update.
__kernel void weight_decay(__global float *p, const int n, const float wd, const float lr) {
  const int i = get_global_id(0);
  if (i >= n) return;
  p[i] -= p[i] * wd * lr;
}

// SGD. momentum 0: p -= g * lr (m unused). Else m = m * momentum - g * lr, then
// p += m, or with Nesterov p += m * momentum - g * lr.
__kernel void sgd_update(__global float *p, __global const float *g, __global float *m,
                         const int n, const float lr, const float momentum, const int nesterov,
                         const float wd) {
  const int i = get_global_id(0);
  if (i >= n) return;
  float pi = p[i];
  if (wd > 0.0f) pi -= pi * wd * lr;
  const float step = g[i] * lr;
  if (momentum == 0.0f) {
    p[i] = pi - step;
    return;
  }
  const float mi = m[i] * momentum - step;
  m[i] = mi;
  p[i] = pi + (nesterov ? mi * momentum - step : mi);
}

// RMSprop (not centered). one_minus_rho is 1 - rho rounded once, from the host's
// double, as Keras' Python float. v = rho * v + (1 - rho) * g^2; inc = lr * g /
// sqrt(v + eps) (eps inside the root, as Keras 3); momentum 0: p -= inc; else
// mom = momentum * mom + inc, p -= mom.
__kernel void rmsprop_update(__global float *p, __global const float *g, __global float *v,
                             __global float *mom, const int n, const float lr, const float rho,
                             const float one_minus_rho, const float eps, const float momentum,
                             const float wd) {
  const int i = get_global_id(0);
  if (i >= n) return;
  float pi = p[i];
  if (wd > 0.0f) pi -= pi * wd * lr;
  const float gi = g[i];
  const float vi = rho * v[i] + one_minus_rho * (gi * gi);
  v[i] = vi;
  const float inc = lr * gi / sqrt(vi + eps);
  if (momentum > 0.0f) {
    const float mi = momentum * mom[i] + inc;
    mom[i] = mi;
    p[i] = pi - mi;
  } else {
    p[i] = pi - inc;
  }
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

// Back to OpenCL's default for the sources built after this one in a joint
// program (devices/replica.c): the pragma holds to the end of the program text,
// and would leave their kernels without FMAs.
#pragma OPENCL FP_CONTRACT ON
