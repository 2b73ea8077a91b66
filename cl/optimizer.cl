// Every optimizer's update (src/engine/optimizer.c launches them) and the moving
// averages of BatchNormalization's statistics.
//
// Every replica applies the same update to the same all-reduced gradients, and
// their parameters must stay bit-identical even across device kinds: products
// are not contracted into FMAs (a compiler's choice otherwise), and the host
// builds this file with -cl-fp32-correctly-rounded-divide-sqrt where the device
// offers it (OpenCL's default sqrt and division may be off by ulps).
#pragma OPENCL FP_CONTRACT OFF

// The updates run per block of `block` gradient floats (clt_launch_groups): on
// CPUs a work-item per block, eight floats at a time as float8 (the same float
// operations per value as one at a time); on GPUs a work-group per block, its
// items striding through it. Reading every gradient anyway, each block also
// counts its non-finite values into partial[blk] (the trainer's gradient check,
// summed by reduce.cl's count_final), over [0, count_n): count_n >= n also takes
// in the gradient floats after the trainable ones that no optimizer updates (the
// batch statistics, which moving_average reads). UPDATE(i, w) updates w values
// from index i (w 1 or 8) below n.
#if CLT_GPU
#define OPT_BLOCKS(UPDATE)                                                      \
  __local float tile[CLT_WG];                                                   \
  const int blk = get_group_id(0), begin = blk * block;                         \
  const int end = min(count_n, begin + block);                                  \
  int bad = 0;                                                                  \
  for (int i = begin + (int)get_local_id(0); i < end; i += get_local_size(0)) { \
    bad += !isfinite(g[i]);                                                     \
    if (i < n) UPDATE(i, 1);                                                    \
  }                                                                             \
  const float sum = group_sum((float)bad, tile);                                \
  if (get_local_id(0) == 0 && begin < count_n) partial[blk] = sum;
#else
#define OPT_BLOCKS(UPDATE)                                                                      \
  const int blk = get_global_id(0), begin = blk * block;                                        \
  if (begin >= count_n) return;                                                                 \
  const int end = min(n, begin + block), cend = min(count_n, begin + block);                    \
  int8 lanes = (int8)(0);                                                                       \
  int bad = 0, i = begin;                                                                       \
  for (; i + 8 <= end; i += 8) {                                                                \
    lanes += (int8)(1) + isfinite(vload8(0, g + i));                                            \
    UPDATE(i, 8);                                                                               \
  }                                                                                             \
  for (; i < end; i++) {                                                                        \
    bad += !isfinite(g[i]);                                                                     \
    UPDATE(i, 1);                                                                               \
  }                                                                                             \
  for (; i + 8 <= cend; i += 8) lanes += (int8)(1) + isfinite(vload8(0, g + i));                \
  for (; i < cend; i++) bad += !isfinite(g[i]);                                                 \
  bad += lanes.s0 + lanes.s1 + lanes.s2 + lanes.s3 + lanes.s4 + lanes.s5 + lanes.s6 + lanes.s7; \
  partial[blk] = (float)bad;
#endif

// Loads and stores of w floats at index i (w 1 or 8).
#define OPT_LD1(a, i) (a)[i]
#define OPT_LD8(a, i) vload8(0, (a) + (i))
#define OPT_ST1(x, a, i) ((a)[i] = (x))
#define OPT_ST8(x, a, i) vstore8((x), 0, (a) + (i))
#define OPT_FLOATS1 float
#define OPT_FLOATS8 float8

// Keras Adam over the whole flat parameter buffer. alpha is
// lr * sqrt(1 - beta2^t) / (1 - beta1^t), computed on the host in double.
#define OPT_ADAM(i, w)                                                           \
  do {                                                                           \
    const OPT_FLOATS##w gi = OPT_LD##w(g, i);                                    \
    const OPT_FLOATS##w mi = beta1 * OPT_LD##w(m, i) + (1.0f - beta1) * gi;      \
    const OPT_FLOATS##w vi = beta2 * OPT_LD##w(v, i) + (1.0f - beta2) * gi * gi; \
    OPT_ST##w(mi, m, i);                                                         \
    OPT_ST##w(vi, v, i);                                                         \
    OPT_ST##w(OPT_LD##w(p, i) - alpha * mi / (sqrt(vi) + eps), p, i);            \
  } while (0)
__kernel void adam_update(__global float *p, __global const float *g, __global float *m,
                          __global float *v, const int n, const float beta1, const float beta2,
                          const float eps, const float alpha, const int count_n, const int block,
                          __global float *partial) {
  OPT_BLOCKS(OPT_ADAM)
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
#define OPT_SGD(i, w)                                               \
  do {                                                              \
    OPT_FLOATS##w pi = OPT_LD##w(p, i);                             \
    if (wd > 0.0f) pi -= pi * wd * lr;                              \
    const OPT_FLOATS##w step = OPT_LD##w(g, i) * lr;                \
    if (momentum == 0.0f) {                                         \
      OPT_ST##w(pi - step, p, i);                                   \
    } else {                                                        \
      const OPT_FLOATS##w mi = OPT_LD##w(m, i) * momentum - step;   \
      OPT_ST##w(mi, m, i);                                          \
      OPT_ST##w(pi + (nesterov ? mi * momentum - step : mi), p, i); \
    }                                                               \
  } while (0)
__kernel void sgd_update(__global float *p, __global const float *g, __global float *m,
                         const int n, const float lr, const float momentum, const int nesterov,
                         const float wd, const int count_n, const int block,
                         __global float *partial) {
  OPT_BLOCKS(OPT_SGD)
}

// RMSprop (not centered). one_minus_rho is 1 - rho rounded once, from the host's
// double, as Keras' Python float. v = rho * v + (1 - rho) * g^2; inc = lr * g /
// sqrt(v + eps) (eps inside the root, as Keras 3); momentum 0: p -= inc; else
// mom = momentum * mom + inc, p -= mom.
#define OPT_RMSPROP(i, w)                                                       \
  do {                                                                          \
    OPT_FLOATS##w pi = OPT_LD##w(p, i);                                         \
    if (wd > 0.0f) pi -= pi * wd * lr;                                          \
    const OPT_FLOATS##w gi = OPT_LD##w(g, i);                                   \
    const OPT_FLOATS##w vi = rho * OPT_LD##w(v, i) + one_minus_rho * (gi * gi); \
    OPT_ST##w(vi, v, i);                                                        \
    const OPT_FLOATS##w inc = lr * gi / sqrt(vi + eps);                         \
    if (momentum > 0.0f) {                                                      \
      const OPT_FLOATS##w mi = momentum * OPT_LD##w(mom, i) + inc;              \
      OPT_ST##w(mi, mom, i);                                                    \
      OPT_ST##w(pi - mi, p, i);                                                 \
    } else {                                                                    \
      OPT_ST##w(pi - inc, p, i);                                                \
    }                                                                           \
  } while (0)
__kernel void rmsprop_update(__global float *p, __global const float *g, __global float *v,
                             __global float *mom, const int n, const float lr, const float rho,
                             const float one_minus_rho, const float eps, const float momentum,
                             const float wd, const int count_n, const int block,
                             __global float *partial) {
  OPT_BLOCKS(OPT_RMSPROP)
}
#undef OPT_BLOCKS
#undef OPT_ADAM
#undef OPT_SGD
#undef OPT_RMSPROP

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
