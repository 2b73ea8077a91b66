// Row-major C[M][N] = op(A)[M][K] * B[K][N] for N a multiple of 16, written for
// CPU OpenCL (PoCL): each work-item computes a TM x (16*NB) block of C in
// TM*NB explicit float16 accumulators, so each loaded element of A feeds NB
// vector FMAs and each row segment of B feeds TM. PoCL does not vectorise
// across work-items: scalar kernels ran at 8-12 GFLOP/s where explicit vectors
// reach the cores' FMA peak. Each work-item sums over k in order, so results
// repeat bit for bit.
//
// Build options: -DTRANS_A=0|1, -DTM=rows, -DNB=16-column blocks per work-item.
//   op(A)[m][k] = TRANS_A ? A[k*lda + m] : A[m*lda + k]
// Epilogue (a layer's bias and ReLU, saving a pass over C): when bias_off >= 0,
// C[m][n] += bias[bias_off + n]; then, when relu, negative values become 0
// (not fmax: a NaN passes on to the loss guard).
// Split K (few rows, long sums: a weight gradient over a whole batch): the third
// range dimension takes k in chunks of k_chunk, and chunk s writes its partial
// product to C + s * c_split (no epilogue); sum_splits then adds the chunks in
// order. Without a split the range's third dimension is 1.
// Range: (N / (16*NB), ceil(M / TM), splits).  (B^T operands are transposed first.)
#ifndef TM
#define TM 4
#endif
#ifndef NB
#define NB 4
#endif

#if TRANS_A
#define A_AT(m, k) A[(size_t)(k) * lda + (m)]
#else
#define A_AT(m, k) A[(size_t)(m) * lda + (k)]
#endif

__kernel void gemm16(const int M, const int N, const int K, __global const float *A,
                     const int a_off, const int lda, __global const float *B, const int b_off,
                     const int ldb, __global float *C, const int c_off, const int ldc,
                     __global const float *bias, const int bias_off, const int relu,
                     const int k_chunk, const int c_split) {
  const int col = get_global_id(0) * 16 * NB;
  const int row0 = get_global_id(1) * TM;
  if (col >= N || row0 >= M) return;
  const int k_begin = get_global_id(2) * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  C += (size_t)get_global_id(2) * c_split;
  A += a_off;
  B += b_off + col;
  // Rows past M read row M-1 (always valid) and are not stored.
  int rows[TM];
  for (int i = 0; i < TM; i++) rows[i] = min(row0 + i, M - 1);
  float16 acc[TM][NB];
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < NB; j++) acc[i][j] = (float16)(0.0f);
#if TRANS_A && TM == 8
  if (row0 + TM <= M) {
    // Op(A)'s TM rows at one k are contiguous in A^T: one vector load.
    for (int k = k_begin; k < k_end; k++) {
      float16 b[NB];
      for (int j = 0; j < NB; j++) b[j] = vload16(j, B + (size_t)k * ldb);
      const float8 a8 = vload8(0, A + (size_t)k * lda + row0);
      const float a[8] = {a8.s0, a8.s1, a8.s2, a8.s3, a8.s4, a8.s5, a8.s6, a8.s7};
      for (int i = 0; i < TM; i++)
        for (int j = 0; j < NB; j++) acc[i][j] = fma((float16)(a[i]), b[j], acc[i][j]);
    }
  } else
#endif
  for (int k = k_begin; k < k_end; k++) {
    float16 b[NB];
    for (int j = 0; j < NB; j++) b[j] = vload16(j, B + (size_t)k * ldb);
    for (int i = 0; i < TM; i++) {
      const float16 a = (float16)(A_AT(rows[i], k));
      for (int j = 0; j < NB; j++) acc[i][j] = fma(a, b[j], acc[i][j]);
    }
  }
  float16 add[NB];
  for (int j = 0; j < NB; j++) add[j] = bias_off >= 0 ? vload16(j, bias + bias_off + col) : (float16)(0.0f);
  for (int i = 0; i < TM; i++) {
    if (row0 + i >= M) break;
    for (int j = 0; j < NB; j++) {
      float16 v = acc[i][j];
      if (bias_off >= 0) v += add[j];
      if (relu) v = select(v, (float16)(0.0f), isless(v, (float16)(0.0f)));
      vstore16(v, j, C + c_off + (size_t)(row0 + i) * ldc + col);
    }
  }
}

// C[c_off + i] = sum over s of P[s * stride + i], in order of s. Range: count.
__kernel void sum_splits(__global const float *P, const int splits, const int stride,
                         const int count, __global float *C, const int c_off) {
  const int i = get_global_id(0);
  if (i >= count) return;
  float sum = 0.0f;
  for (int s = 0; s < splits; s++) sum += P[(size_t)s * stride + i];
  C[c_off + i] = sum;
}

// dst[k][n] = src[src_off + n*ld + k]: a [N][K] operand laid out as [K][N] so
// the GEMM above reads it in rows. Range: (K, N).
__kernel void transpose(__global const float *src, const int src_off, const int ld, const int K,
                        const int N, __global float *dst) {
  const int k = get_global_id(0), n = get_global_id(1);
  if (k >= K || n >= N) return;
  dst[(size_t)k * N + n] = src[src_off + (size_t)n * ld + k];
}
