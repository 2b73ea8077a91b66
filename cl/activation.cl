// Standalone activations (Keras' ReLU and Activation layers; a ReLU after Conv2D,
// Dense, BatchNormalization or Add is fused into that layer instead), and the
// scale and shift of Rescaling (and of Dropout in inference). Elementwise
// (clt_launch_elems): on CPUs (CLT_GPU 0) work-item i takes floats [8i, 8i + 8)
// as a float8, the one past them the n % 8 left; on GPUs work-item i takes
// float i. Softmax works by rows (see there).

// y = x where x > 0, else 0 (NaN gives 0, as the fused ReLUs).
__kernel void relu_forward(__global const float *x, __global float *y, const int n) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const float8 v = vload8(i, x);
    vstore8(select((float8)(0.0f), v, isgreater(v, (float8)(0.0f))), i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) y[j] = x[j] > 0.0f ? x[j] : 0.0f;
  }
#endif
}

// dx = dy where the output y is positive, else 0.
__kernel void relu_backward(__global const float *dy, __global const float *y, __global float *dx,
                            const int n) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    vstore8(select((float8)(0.0f), vload8(i, dy), isgreater(vload8(i, y), (float8)(0.0f))), i, dx);
  } else {
    for (size_t j = at; j < (size_t)n; j++) dx[j] = y[j] > 0.0f ? dy[j] : 0.0f;
  }
#endif
}

// ---- Activation, ReLU(max_value) -------------------------------------------------

// op: the host's ACT_OP_* (activation.c): a ReLU clipped at hi, the sigmoid, tanh.
#define OP_CLIP 0
#define OP_SIGMOID 1
#define OP_TANH 2

// The clip lets a NaN through as 0, as relu_forward.
#define ACT(v, zero, op, hi)                                                             \
  ((op) == OP_SIGMOID ? 1.0f / (1.0f + exp(-(v)))                                        \
   : (op) == OP_TANH  ? tanh(v)                                                          \
                      : select(zero, fmin(v, hi), isgreater(v, zero)))

// Backward from the output y: sigmoid dy*y*(1-y), tanh dy*(1-y^2), the clip dy
// where 0 < y < hi.
#define DACT(g, y, zero, op, hi)                                                         \
  ((op) == OP_SIGMOID ? (g) * (y) * (1.0f - (y))                                         \
   : (op) == OP_TANH  ? (g) * (1.0f - (y) * (y))                                         \
                      : select(zero, g, isgreater(y, zero) & isless(y, hi)))

__kernel void act_forward(__global const float *x, __global float *y, const int n, const int op,
                          const float hi) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) y[i] = ACT(x[i], 0.0f, op, hi);
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const float8 v = vload8(i, x);
    vstore8(ACT(v, (float8)(0.0f), op, (float8)(hi)), i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) y[j] = ACT(x[j], 0.0f, op, hi);
  }
#endif
}

__kernel void act_backward(__global const float *dy, __global const float *y, __global float *dx,
                           const int n, const int op, const float hi) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) dx[i] = DACT(dy[i], y[i], 0.0f, op, hi);
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    const float8 g = vload8(i, dy), v = vload8(i, y);
    vstore8(DACT(g, v, (float8)(0.0f), op, (float8)(hi)), i, dx);
  } else {
    for (size_t j = at; j < (size_t)n; j++) dx[j] = DACT(dy[j], y[j], 0.0f, op, hi);
  }
#endif
}

// ---- Activation: the functions computed from x -----------------------------------
//
// xop: activation.c's act_fn less ACT_SWISH; a: elu's alpha, leaky_relu's slope.
// Formulas and derivatives: activation.c's header.
#define XOP_SWISH 0
#define XOP_HARD_SIGMOID 1
#define XOP_HARD_SIGMOID_K2 2
#define XOP_HARD_SILU 3
#define XOP_GELU 4
#define XOP_GELU_TANH 5
#define XOP_ELU 6
#define XOP_SELU 7
#define XOP_LEAKY_RELU 8

#define SELU_ALPHA 1.67326324235437728f
#define SELU_SCALE 1.05070098735548049f
#define SQRT_2_PI 0.797884560802865356f // sqrt(2/pi)
#define RSQRT_2PI 0.398942280401432678f // 1/sqrt(2 pi)

static inline float hard_sigmoid(const float x) { return fmin(fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f; }

static inline float actx(const float x, const int op, const float a) {
  switch (op) {
  case XOP_SWISH:
    return x * (1.0f / (1.0f + exp(-x)));
  case XOP_HARD_SIGMOID:
    return hard_sigmoid(x);
  case XOP_HARD_SIGMOID_K2:
    return fmin(fmax(0.2f * x + 0.5f, 0.0f), 1.0f);
  case XOP_HARD_SILU:
    return x * hard_sigmoid(x);
  case XOP_GELU:
    return 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F));
  case XOP_GELU_TANH:
    return 0.5f * x * (1.0f + tanh(SQRT_2_PI * (x + 0.044715f * x * x * x)));
  case XOP_ELU:
    return x > 0.0f ? x : a * expm1(x);
  case XOP_SELU:
    return SELU_SCALE * (x > 0.0f ? x : SELU_ALPHA * expm1(x));
  default: // XOP_LEAKY_RELU
    return x >= 0.0f ? x : a * x;
  }
}

// The derivative dy/dx at x.
static inline float dactx(const float x, const int op, const float a) {
  const float inside = x > -3.0f && x < 3.0f ? 1.0f : 0.0f;
  switch (op) {
  case XOP_SWISH: {
    const float s = 1.0f / (1.0f + exp(-x));
    return s * (1.0f + x * (1.0f - s));
  }
  case XOP_HARD_SIGMOID:
    return inside / 6.0f;
  case XOP_HARD_SIGMOID_K2: {
    const float v = 0.2f * x + 0.5f;
    return v >= 0.0f && v <= 1.0f ? 0.2f : 0.0f;
  }
  case XOP_HARD_SILU:
    return hard_sigmoid(x) + x * inside / 6.0f;
  case XOP_GELU:
    return 0.5f * (1.0f + erf(x * M_SQRT1_2_F)) + x * exp(-0.5f * x * x) * RSQRT_2PI;
  case XOP_GELU_TANH: {
    const float t = tanh(SQRT_2_PI * (x + 0.044715f * x * x * x));
    const float du = SQRT_2_PI * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
  }
  case XOP_ELU:
    return x > 0.0f ? 1.0f : a * exp(x);
  case XOP_SELU:
    return SELU_SCALE * (x > 0.0f ? 1.0f : SELU_ALPHA * exp(x));
  default: // XOP_LEAKY_RELU
    return x > 0.0f ? 1.0f : a;
  }
}

__kernel void actx_forward(__global const float *x, __global float *y, const int n, const int op,
                           const float a) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) y[i] = actx(x[i], op, a);
#else
  const size_t at = (size_t)i * CH, end = min(at + CH, (size_t)n);
  for (size_t j = at; j < end; j++) y[j] = actx(x[j], op, a);
#endif
}

// dx = dy * f'(x).
__kernel void actx_backward(__global const float *dy, __global const float *x, __global float *dx,
                            const int n, const int op, const float a) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) dx[i] = dy[i] * dactx(x[i], op, a);
#else
  const size_t at = (size_t)i * CH, end = min(at + CH, (size_t)n);
  for (size_t j = at; j < end; j++) dx[j] = dy[j] * dactx(x[j], op, a);
#endif
}

// y = x * a + b: Rescaling's forward (its backward with b = 0), and the identity
// (a = 1, b = 0) of Activation(linear) and of Dropout in inference.
__kernel void scale_shift(__global const float *x, __global float *y, const int n, const float a,
                          const float b) {
  const int i = get_global_id(0);
#if CLT_GPU
  if (i < n) y[i] = x[i] * a + b;
#else
  const size_t at = (size_t)i * CH;
  if (at + CH <= (size_t)n) {
    vstore8(vload8(i, x) * a + b, i, y);
  } else {
    for (size_t j = at; j < (size_t)n; j++) y[j] = x[j] * a + b;
  }
#endif
}

// ---- Softmax over the channels ------------------------------------------------------
//
// Rows of C channels. CPU: a work-item per row; GPU: a work-group per row
// (clt_launch_groups), its work-items striding through the channels and meeting
// in local-memory trees (fixed order).

#if CLT_GPU
// The group's maximum (is_max) or sum of v, valid in every work-item; every
// work-item must call it.
static inline float group_reduce(float v, const int is_max, __local float *tile) {
  const int lid = get_local_id(0);
  tile[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) tile[lid] = is_max ? fmax(tile[lid], tile[lid + s]) : tile[lid] + tile[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = tile[0];
  barrier(CLK_LOCAL_MEM_FENCE); // all have read tile[0] before the next call writes it
  return r;
}
#endif

// y = exp(x - max) / sum(exp(x - max)) per row (max subtracted: no overflow).
__kernel void softmax_forward(__global const float *x, __global float *y, const int rows,
                              const int C) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
  __global const float *xr = x + (size_t)r * C;
  float m = -INFINITY, s = 0.0f;
  for (int c = lid; c < C; c += size) m = fmax(m, xr[c]);
  m = group_reduce(m, 1, tile);
  for (int c = lid; c < C; c += size) s += exp(xr[c] - m);
  s = group_reduce(s, 0, tile);
  for (int c = lid; c < C; c += size) y[(size_t)r * C + c] = exp(xr[c] - m) / s;
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  __global const float *xr = x + (size_t)r * C;
  __global float *yr = y + (size_t)r * C;
  float m = -INFINITY, s = 0.0f;
  for (int c = 0; c < C; c++) m = fmax(m, xr[c]);
  for (int c = 0; c < C; c++) s += exp(xr[c] - m);
  for (int c = 0; c < C; c++) yr[c] = exp(xr[c] - m) / s;
#endif
}

// dx = y * (dy - sum(dy * y)) per row.
__kernel void softmax_backward(__global const float *dy, __global const float *y,
                               __global float *dx, const int rows, const int C) {
#if CLT_GPU
  __local float tile[CLT_WG];
  const int r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
  const size_t at = (size_t)r * C;
  float dot = 0.0f;
  for (int c = lid; c < C; c += size) dot += dy[at + c] * y[at + c];
  dot = group_reduce(dot, 0, tile);
  for (int c = lid; c < C; c += size) dx[at + c] = y[at + c] * (dy[at + c] - dot);
#else
  const int r = get_global_id(0);
  if (r >= rows) return;
  const size_t at = (size_t)r * C;
  float dot = 0.0f;
  for (int c = 0; c < C; c++) dot += dy[at + c] * y[at + c];
  for (int c = 0; c < C; c++) dx[at + c] = y[at + c] * (dy[at + c] - dot);
#endif
}
