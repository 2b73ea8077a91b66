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

// ---- Convolutions as GEMMs over the image itself (implicit im2col) ----------------
//
// im2col's column matrix (rows: the output positions (b, oy, ox) of a batch of
// NHWC images X; columns: the taps (ky, kx) times the C channels) is read in
// place rather than written out and read back: on CPUs that pass over a matrix
// KH*KW times the image's size cost as much as a third of the product. The
// blocking, k order and epilogue are gemm16's, so results match it bit for bit.
// Geometry: H x W x C images, KW taps a row, stride S, PT/PL padding before the
// first row/column, OH x OW outputs. PADDED=0 (build option): every window lies
// inside the image (a 'valid' convolution), so no tap is checked; otherwise taps
// outside read as 0.
#ifndef PADDED
#define PADDED 1
#endif

// Y = col(X) * Wt (+ bias, ReLU): M = B*OH*OW, K = KH*KW*C, Wt: [K][N]. Taps in
// chunks of KC / C (at least one) play gemm16's K chunks. Range as gemm16's with
// one split.
__kernel void conv16(const int M, const int N, const int K, __global const float *X,
                     const int x_off, const int H, const int W, const int C, const int KW,
                     const int S, const int PT, const int PL, const int OH, const int OW,
                     __global const float *B, const int b_off, const int ldb, __global float *Y,
                     const int y_off, const int ldc, __global const float *bias,
                     const int bias_off, const int relu) {
  const int col = get_global_id(0) * 16 * NB;
  const int row_base = get_global_id(1) * (TM * RB);
  if (col >= N || row_base >= M) return;
  Y += y_off + col;
  X += x_off;
  B += b_off + col;
  const int taps = K / C, tc = max(1, KC / C), plane = OH * OW;
  float16 add[NB];
  UNROLL for (int j = 0; j < NB; j++)
    add[j] = bias_off >= 0 ? LOAD16(j, bias + bias_off + col) : (float16)(0.0f);
  for (int t0 = 0; t0 < taps; t0 += tc) {
    const int t1 = min(taps, t0 + tc);
    for (int rb = 0; rb < RB; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      // Each row's window origin; rows past M repeat row M-1 and are not stored.
      int iy[TM], ix[TM];
      const __global float *img[TM];
      UNROLL for (int i = 0; i < TM; i++) {
        const int row = min(row0 + i, M - 1);
        const int b = row / plane, r = row - b * plane, oy = r / OW;
        iy[i] = oy * S - PT;
        ix[i] = (r - oy * OW) * S - PL;
        img[i] = X + (size_t)b * H * W * C;
      }
      float16 acc[TM][NB];
      __global float *y = Y + (size_t)row0 * ldc;
      UNROLL for (int i = 0; i < TM; i++)
        UNROLL for (int j = 0; j < NB; j++)
          acc[i][j] = t0 == 0 || row0 + i >= M ? (float16)(0.0f) : LOAD16(j, y + (size_t)i * ldc);
      for (int t = t0; t < t1; t++) {
        const int ky = t / KW, kx = t - ky * KW;
        const __global float *a[TM];
#if PADDED
        int in[TM];
#endif
        UNROLL for (int i = 0; i < TM; i++) {
          const int yy = iy[i] + ky, xx = ix[i] + kx;
#if PADDED
          in[i] = yy >= 0 && yy < H && xx >= 0 && xx < W;
          a[i] = img[i] + (in[i] ? ((size_t)yy * W + xx) * C : 0);
#else
          a[i] = img[i] + ((size_t)yy * W + xx) * C;
#endif
        }
        const __global float *b = B + (size_t)t * C * ldb;
        for (int c = 0; c < C; c++, b += ldb) {
          float16 bv[NB];
          UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
          UNROLL for (int i = 0; i < TM; i++) {
#if PADDED
            const float16 av = (float16)(in[i] ? a[i][c] : 0.0f);
#else
            const float16 av = (float16)(a[i][c]);
#endif
            UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
          }
        }
      }
      const int last = t1 == taps;
      UNROLL for (int i = 0; i < TM; i++) {
        if (row0 + i < M) {
          UNROLL for (int j = 0; j < NB; j++) {
            float16 v = acc[i][j];
            if (last && bias_off >= 0) v += add[j];
            if (last && relu) v = v < (float16)(0.0f) ? (float16)(0.0f) : v;
            STORE16(v, j, y + (size_t)i * ldc);
          }
        }
      }
    }
  }
}

// dW = col(X)^T * dY: M = KH*KW*C (a tap's channel per row), N = the filters,
// K = B*OH*OW (the sum runs over output positions, in order), dY: [K][N]. A
// chunk's KC window origins are worked out once for the RB sub-blocks. Split K
// as gemm16's (partial products at Cm + split * c_split). Range as gemm16's.
__kernel void conv16_dw(const int M, const int N, const int K, __global const float *X,
                        const int x_off, const int H, const int W, const int C, const int KW,
                        const int S, const int PT, const int PL, const int OH, const int OW,
                        __global const float *B, const int b_off, const int ldb,
                        __global float *Cm, const int c_off, const int ldc, const int k_chunk,
                        const int c_split) {
  const int col = get_global_id(0) * 16 * NB;
  const int row_base = get_global_id(1) * (TM * RB);
  if (col >= N || row_base >= M) return;
  const int k_begin = get_global_id(2) * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  Cm += (size_t)get_global_id(2) * c_split + c_off + col;
  X += x_off;
  B += b_off + col;
  const int plane = OH * OW;
  for (int kc = k_begin; kc < k_end; kc += KC) {
    const int kc_end = min(k_end, kc + KC);
    // The chunk's window origins: image offset, and (PADDED) top-left corner.
    int org[KC];
#if PADDED
    int oy0[KC], ox0[KC];
#endif
    for (int p = kc; p < kc_end; p++) {
      const int b = p / plane, r = p - b * plane, oy = r / OW;
      const int y0 = oy * S - PT, x0 = (r - oy * OW) * S - PL;
      org[p - kc] = (b * H + y0) * W * C + x0 * C;
#if PADDED
      oy0[p - kc] = y0;
      ox0[p - kc] = x0;
#endif
    }
    for (int rb = 0; rb < RB; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      // Row m is channel m % C of tap m / C: its offset from a window's origin.
      int d[TM];
#if PADDED
      int tky[TM], tkx[TM];
#endif
      UNROLL for (int i = 0; i < TM; i++) {
        const int m = min(row0 + i, M - 1);
        const int t = m / C, c = m - t * C, ky = t / KW, kx = t - ky * KW;
        d[i] = (ky * W + kx) * C + c;
#if PADDED
        tky[i] = ky;
        tkx[i] = kx;
#endif
      }
      float16 acc[TM][NB];
      __global float *c = Cm + (size_t)row0 * ldc;
      UNROLL for (int i = 0; i < TM; i++)
        UNROLL for (int j = 0; j < NB; j++)
          acc[i][j] = kc == k_begin || row0 + i >= M ? (float16)(0.0f)
                                                     : LOAD16(j, c + (size_t)i * ldc);
      const __global float *b = B + (size_t)kc * ldb;
      for (int p = kc; p < kc_end; p++, b += ldb) {
        float16 bv[NB];
        UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
        const int o = org[p - kc];
        UNROLL for (int i = 0; i < TM; i++) {
#if PADDED
          const int yy = oy0[p - kc] + tky[i], xx = ox0[p - kc] + tkx[i];
          const int in = yy >= 0 && yy < H && xx >= 0 && xx < W;
          const float16 av = (float16)(in ? X[o + d[i]] : 0.0f);
#else
          const float16 av = (float16)(X[o + d[i]]);
#endif
          UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
        }
      }
      UNROLL for (int i = 0; i < TM; i++)
        if (row0 + i < M) UNROLL for (int j = 0; j < NB; j++) STORE16(acc[i][j], j, c + (size_t)i * ldc);
    }
  }
}
