// Row-major C[M][N] = op(A)[M][K] * B[K][N] for N a multiple of 16 (gemm_tail
// below takes a remainder), written for
// CPU OpenCL (PoCL): each work-item computes a TM x (16*NB) block of C in
// TM*NB explicit float16 accumulators, so each loaded element of A feeds NB
// vector FMAs and each row segment of B feeds TM. PoCL does not vectorise
// across work-items: scalar kernels ran at 8-12 GFLOP/s where explicit vectors
// reach the cores' FMA peak. Each work-item sums over k in order, so results
// repeat bit for bit.
//
// Build options: -DTRANS_A=0|1, -DTM=rows, -DNB=16-column blocks, -DRB=row
// sub-blocks per work-item, -DKC=k chunk. A work-item takes K in chunks of KC
// and runs each of its RB sub-blocks over the chunk in turn, so the chunk of B
// (KC x 16NB floats) is read from memory once and from L1 RB times; a later
// chunk reloads the sums the previous one stored (k still in order).
//   op(A)[m][k] = TRANS_A ? A[k*lda + m] : A[m*lda + k]
// Epilogue (a layer's bias and ReLU, saving a pass over C): when bias_off >= 0,
// C[m][n] += bias[bias_off + n]; then, when relu, negative values become 0
// (not fmax: a NaN passes on to the loss guard).
// Split K (few rows, long sums: a weight gradient over a whole batch): the third
// range dimension takes k in chunks of k_chunk, and chunk s writes its partial
// product to C + s * c_split (no epilogue); sum_splits then adds the chunks in
// order. Without a split the range's third dimension is 1.
// Range: (N / (16*NB), ceil(M / (TM*RB)), splits).  (B^T operands are transposed first.)
#ifndef TM
#define TM 4
#endif
#ifndef NB
#define NB 4
#endif
#ifndef RB
#define RB 1
#endif
#ifndef KC
#define KC (1 << 30)
#endif

// float16 values never cross a function call: on hosts without AVX-512 a
// float16 argument or return value of a builtin (vload16, fma, select) draws
// clang's "changes the ABI" warning on every build. Loads and stores go
// through float8 halves and the arithmetic is written as operators (contracted
// to FMA, FP_CONTRACT being on by default), which compile to the same vector
// instructions.
#define LOAD16(j, p) ((float16)(vload8(2 * (j), (p)), vload8(2 * (j) + 1, (p))))
#define STORE16(v, j, p)              \
  do {                                \
    const float16 v_ = (v);           \
    vstore8(v_.lo, 2 * (j), (p));     \
    vstore8(v_.hi, 2 * (j) + 1, (p)); \
  } while (0)

// PoCL leaves these loops rolled otherwise, and the accumulator arrays then
// live on the stack (one load and store per FMA: a third of the speed).
#define UNROLL _Pragma("unroll")

__kernel void gemm16(const int M, const int N, const int K, __global const float *A,
                     const int a_off, const int lda, __global const float *B, const int b_off,
                     const int ldb, __global float *C, const int c_off, const int ldc,
                     __global const float *bias, const int bias_off, const int relu,
                     const int k_chunk, const int c_split) {
  const int col = get_global_id(0) * 16 * NB;
  const int row_base = get_global_id(1) * (TM * RB);
  if (col >= N || row_base >= M) return;
  const int k_begin = get_global_id(2) * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  C += (size_t)get_global_id(2) * c_split + c_off + col;
  A += a_off;
  B += b_off + col;
  float16 add[NB];
  UNROLL for (int j = 0; j < NB; j++)
    add[j] = bias_off >= 0 ? LOAD16(j, bias + bias_off + col) : (float16)(0.0f);
  for (int kc = k_begin; kc < k_end; kc += KC) {
    const int kc_end = min(k_end, kc + KC);
    for (int rb = 0; rb < RB; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      // Rows past M read row M-1 (always valid) and are not stored.
      const __global float *a[TM];
      UNROLL for (int i = 0; i < TM; i++) {
        const int row = min(row0 + i, M - 1);
#if TRANS_A
        a[i] = A + row;
#else
        a[i] = A + (size_t)row * lda;
#endif
      }
      float16 acc[TM][NB];
      __global float *c = C + (size_t)row0 * ldc;
      // Later chunks continue the sums stored by earlier ones: k stays in order.
      UNROLL for (int i = 0; i < TM; i++)
        UNROLL for (int j = 0; j < NB; j++)
          acc[i][j] = kc == k_begin || row0 + i >= M ? (float16)(0.0f)
                                                     : LOAD16(j, c + (size_t)i * ldc);
      const __global float *b = B + (size_t)kc * ldb;
      for (int k = kc; k < kc_end; k++, b += ldb) {
        float16 bv[NB];
        UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
        UNROLL for (int i = 0; i < TM; i++) {
#if TRANS_A
          const float16 av = (float16)(a[i][(size_t)k * lda]);
#else
          const float16 av = (float16)(a[i][k]);
#endif
          UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
        }
      }
      const int last = kc_end == k_end;
      UNROLL for (int i = 0; i < TM; i++) {
        if (row0 + i < M) {
          UNROLL for (int j = 0; j < NB; j++) {
            float16 v = acc[i][j];
            if (last && bias_off >= 0) v += add[j];
            if (last && relu) v = v < (float16)(0.0f) ? (float16)(0.0f) : v;
            STORE16(v, j, c + (size_t)i * ldc);
          }
        }
      }
    }
  }
}

// Columns n0..N-1 of C where N is not a multiple of 16 (a classifier's 10
// outputs; gemm16 takes the columns before n0): a work-item computes one row's
// last N - n0 < 16 columns, k in order, with gemm16's epilogue. Keeping these
// here rather than in CLBlast spares CPUs its program builds (about 10 s on a
// first run) for a sliver of the work. Range: M.
// Lanes past nt are 0 and never read (no private array: Oclgrind's
// uninitialised-value check crashed on one indexed by a loop).
#define TAIL_LANE(p, i, nt) ((i) < (nt) ? (p)[i] : 0.0f)
#define TAIL_LOAD(p, nt)                                                             \
  ((float16)(TAIL_LANE(p, 0, nt), TAIL_LANE(p, 1, nt), TAIL_LANE(p, 2, nt),          \
             TAIL_LANE(p, 3, nt), TAIL_LANE(p, 4, nt), TAIL_LANE(p, 5, nt),          \
             TAIL_LANE(p, 6, nt), TAIL_LANE(p, 7, nt), TAIL_LANE(p, 8, nt),          \
             TAIL_LANE(p, 9, nt), TAIL_LANE(p, 10, nt), TAIL_LANE(p, 11, nt),        \
             TAIL_LANE(p, 12, nt), TAIL_LANE(p, 13, nt), TAIL_LANE(p, 14, nt), 0.0f))

__kernel void gemm_tail(const int M, const int N, const int K, const int n0,
                        __global const float *A, const int a_off, const int lda,
                        __global const float *B, const int b_off, const int ldb, __global float *C,
                        const int c_off, const int ldc, __global const float *bias,
                        const int bias_off, const int relu) {
  const int row = get_global_id(0);
  if (row >= M) return;
  const int nt = N - n0; /* 1..15 */
  A += a_off;
  B += b_off + n0;
  float16 acc = (float16)(0.0f);
  for (int k = 0; k < K; k++, B += ldb) {
#if TRANS_A
    const float a = A[(size_t)k * lda + row];
#else
    const float a = A[(size_t)row * lda + k];
#endif
    acc = (float16)(a) * TAIL_LOAD(B, nt) + acc;
  }
  if (bias_off >= 0) acc += TAIL_LOAD(bias + bias_off + n0, nt);
  if (relu) acc = acc < (float16)(0.0f) ? (float16)(0.0f) : acc;
  float out[16];
  STORE16(acc, 0, out);
  C += c_off + (size_t)row * ldc + n0;
  for (int j = 0; j < nt; j++) C[j] = out[j];
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
// the GEMM above reads it in rows. A work-item moves a 16 x 16 tile (edge
// tiles element by element): one element per work-item cost more in PoCL's
// per-item overhead than the copy itself. Range: (ceil(K / 16), ceil(N / 16)).
__kernel void transpose(__global const float *src, const int src_off, const int ld, const int K,
                        const int N, __global float *dst) {
  const int k0 = get_global_id(0) * 16, n0 = get_global_id(1) * 16;
  if (k0 >= K || n0 >= N) return;
  src += src_off + (size_t)n0 * ld + k0;
  dst += (size_t)k0 * N + n0;
  if (k0 + 16 <= K && n0 + 16 <= N) {
    float16 r[16];
    UNROLL for (int n = 0; n < 16; n++) r[n] = LOAD16(0, src + (size_t)n * ld);
    float t[16][16];
    UNROLL for (int n = 0; n < 16; n++) STORE16(r[n], 0, &t[n][0]);
    UNROLL for (int k = 0; k < 16; k++) {
      float16 v;
      v.s0 = t[0][k]; v.s1 = t[1][k]; v.s2 = t[2][k]; v.s3 = t[3][k];
      v.s4 = t[4][k]; v.s5 = t[5][k]; v.s6 = t[6][k]; v.s7 = t[7][k];
      v.s8 = t[8][k]; v.s9 = t[9][k]; v.sa = t[10][k]; v.sb = t[11][k];
      v.sc = t[12][k]; v.sd = t[13][k]; v.se = t[14][k]; v.sf = t[15][k];
      STORE16(v, 0, dst + (size_t)k * N);
    }
  } else {
    const int kt = min(16, K - k0), nt = min(16, N - n0);
    for (int k = 0; k < kt; k++)
      for (int n = 0; n < nt; n++) dst[(size_t)k * N + n] = src[(size_t)n * ld + k];
  }
}
