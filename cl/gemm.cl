// Row-major products on CPU OpenCL (PoCL), C[M][N] = A[M][K] * B[K][N] (gemm16)
// and C[M][N] = A[K][M]^T * B[K][N] (gemm16_at), N a multiple of 16 (gemm_tail
// takes a remainder). Each work-item computes a TM x (16*NB) block of C in
// TM*NB explicit float16 accumulators, so each loaded element of A feeds NB
// vector FMAs and each row segment of B feeds TM. PoCL does not vectorise
// across work-items, so only explicit vectors reach the cores' FMA peak. Each
// work-item sums over k in order, so results repeat bit for bit.
//
// A may be a convolution's im2col matrix read in place from the images X
// (rows: the output positions (b, oy, ox); columns: the taps (ky, kx) times the
// C channels): writing that matrix out and reading it back cost CPUs as much as
// a third of the product. Geometry: H x W x C images, KW taps a row, stride S,
// PT/PL padding before the first row/column, OH x OW outputs. A plain matrix A
// [M][K] is the geometry H = W = KW = S = OH = OW = 1, C = K.
//
// Build options: -DTM=rows, -DNB=16-column blocks (the register tile, chosen
// per device), -DPADDED=0 when every window lies inside the image (a 'valid'
// convolution or a plain matrix: no tap is checked), 1 otherwise (taps outside
// read as 0) for the weight-gradient kernels, -DPACK_B=1: gemm16 copies each
// chunk of B into a private array (contiguous rows stay in L1; see own_options
// in src/backend/cpu_gemm.c), -DTRANS_B=1: gemm16's B is stored [N][K] (ldb
// apart: a B^T operand) and each chunk is copied into the private array
// transposed, 16 x 16 blocks in registers, so no transposed copy of B is
// written out and read back; the FMA loop is PACK_B's. gemm16 takes padding as an argument instead
// (`padded`): the choice is made once per run of k, outside the FMA loop, so it
// costs nothing there, and one program per tile then serves padded and unpadded
// products (each program and kernel variant is a compile at a run's start).
// gemm16 reads a tap outside the image's C channels from `zeros` (at least C
// floats of 0): a pointer chosen once per tap and row keeps its inner loop the
// plain one, where a choice per element keeps the loaded values in registers
// and spills accumulators to the stack. Arguments rb and kchunk: a
// work-item takes K in chunks of kchunk and runs each of its rb sub-blocks of
// TM rows over the chunk in turn, so the chunk of B (kchunk x 16NB floats) is
// read from memory once and from cache rb times; a later chunk reloads the
// sums the previous one stored (k still in order).
// Epilogue (a layer's bias and ReLU, saving a pass over C): when bias_off >= 0,
// C[m][n] += bias[bias_off + n]; then, when relu, negative values become 0
// (not fmax: a NaN passes on to the loss guard). accumulate (gemm16, gemm_tail):
// the sums start from C's values rather than 0, C += product (an input gradient
// added into the one another consumer of the input wrote, saving a pass).
// Split K (the weight-gradient kernels: few rows, long sums over a whole
// batch): the range's third dimension takes k in chunks of k_split, and chunk s
// writes its partial product to C + s * c_split; sum_splits then adds the
// chunks in order.
// Range: (N / (16*NB), ceil(M / (TM*rb)), count); the weight-gradient kernels'
// see AT_ARGS. (B^T operands of the A^T kernels are transposed first.)
// Strided batches (clt_gemm_batched: a Winograd pass's products in one
// launch): product z of the range's third dimension reads X at x_off +
// z * x_step, B at b_off + z * b_step and writes C at its offset + z * its
// step (steps 0 and a range of 1: one product).
// The tiled kernels are compiled only in programs built with a tile (-DTM),
// the others (gemm_tail, sum_splits, transpose) only without one: each program
// compiles just what it serves (the one without joins the other sources' joint
// program: devices/replica.c).
#ifdef TM
#ifndef NB
#define NB 4
#endif
#ifndef PADDED
#define PADDED 1
#endif
#ifndef PACK_B
#define PACK_B 0
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif
#endif
// float16 values never cross a function call on hosts without AVX-512: there a
// float16 argument or return value of a builtin (vload16, fma, select) draws
// clang's "changes the ABI" warning on every build. Loads and stores go
// through float8 halves and the arithmetic is written as operators (contracted
// to FMA, FP_CONTRACT being on by default), which compile to the same vector
// instructions. On AVX-512 devices loads and stores are vload16 and vstore16:
// a call with a float16 value marks the kernel as using 512-bit vectors
// (clang's min-legal-vector-width), without which LLVM's skylake-avx512
// tuning (256-bit vectors preferred) may split each float16 into two ymm
// halves (transpose's register shuffles then cost twice the instructions).
#ifdef __AVX512F__
#define LOAD16(j, p) vload16((j), (p))
#define STORE16(v, j, p) vstore16((v), (j), (p))
#else
#define LOAD16(j, p) ((float16)(vload8(2 * (j), (p)), vload8(2 * (j) + 1, (p))))
#define STORE16(v, j, p)              \
  do {                                \
    const float16 v_ = (v);           \
    vstore8(v_.lo, 2 * (j), (p));     \
    vstore8(v_.hi, 2 * (j) + 1, (p)); \
  } while (0)
#endif

// TRANSPOSE16: the 16 x 16 block r[0..15] (rows of float16) transposed in
// registers in four rounds (each swaps the off-diagonal blocks of 8, 4, 2, 1
// lanes between rows 8, 4, 2, 1 apart: constant swizzles, a shuffle each).
#define TR_SWAP(r, i, s, lo, hi)           \
  do {                                     \
    const float16 a_ = r[i], b_ = r[i + s]; \
    r[i] = (float16)lo;                    \
    r[i + s] = (float16)hi;                \
  } while (0)
#define TRANSPOSE16(r)                                                                 \
  do {                                                                                 \
    UNROLL for (int t_ = 0; t_ < 8; t_++) TR_SWAP(r, t_, 8, (a_.lo, b_.lo), (a_.hi, b_.hi)); \
    UNROLL for (int t_ = 0; t_ < 16; t_++) {                                           \
      if (t_ & 4) continue;                                                            \
      TR_SWAP(r, t_, 4, (a_.s0123, b_.s0123, a_.s89ab, b_.s89ab),                      \
              (a_.s4567, b_.s4567, a_.scdef, b_.scdef));                               \
    }                                                                                  \
    UNROLL for (int t_ = 0; t_ < 16; t_++) {                                           \
      if (t_ & 2) continue;                                                            \
      TR_SWAP(r, t_, 2, (a_.s01, b_.s01, a_.s45, b_.s45, a_.s89, b_.s89, a_.scd, b_.scd), \
              (a_.s23, b_.s23, a_.s67, b_.s67, a_.sab, b_.sab, a_.sef, b_.sef));       \
    }                                                                                  \
    UNROLL for (int t_ = 0; t_ < 16; t_ += 2)                                          \
      TR_SWAP(r, t_, 1, (((float16)(a_.even, b_.even)).s08192a3b4c5d6e7f),            \
              (((float16)(a_.odd, b_.odd)).s08192a3b4c5d6e7f));                        \
  } while (0)

// PoCL leaves these loops rolled otherwise, and the accumulator arrays then
// live on the stack (one load and store per FMA: a third of the speed).
#define UNROLL _Pragma("unroll")

// The output position after (b, oy, ox), in place.
#define NEXT_POSITION(b, oy, ox) \
  do {                           \
    if (++(ox) == OW) {          \
      (ox) = 0;                  \
      if (++(oy) == OH) {        \
        (oy) = 0;                \
        (b)++;                   \
      }                          \
    }                            \
  } while (0)

#ifdef TM  // the tiled kernels
// ACC_START: a TM x 16NB block's sums from 0, or with `load` from C's rows
// (ldc apart; rows past M read row M-1 and are never stored). One branch for
// the block: a choice per row and vector makes each kernel variant longer to
// compile at a run's start.
#define ACC_START(acc, c, load)                                              \
  do {                                                                       \
    if (load) {                                                              \
      UNROLL for (int i_ = 0; i_ < TM; i_++)                                 \
        UNROLL for (int j_ = 0; j_ < NB; j_++)                               \
          acc[i_][j_] = LOAD16(j_, (c) + (size_t)min(i_, M - 1 - row0) * ldc); \
    } else {                                                                 \
      UNROLL for (int i_ = 0; i_ < TM; i_++)                                 \
        UNROLL for (int j_ = 0; j_ < NB; j_++) acc[i_][j_] = (float16)(0.0f);  \
    }                                                                        \
  } while (0)
// The window origins of output positions row0 .. row0+TM-1 (rows past M repeat
// row M-1): image, top row and left column. Positions follow each other, so
// (b, oy, ox) is stepped rather than divided out per row: the divisions cost
// more than the FMAs of a short K (a first convolution's 9 taps).
#define ORIGINS(row0, iy, ix, img)                                          \
  do {                                                                      \
    int b_ = (row0) / plane, oy_ = ((row0) - b_ * plane) / OW;              \
    int ox_ = (row0) - b_ * plane - oy_ * OW;                               \
    UNROLL for (int i_ = 0; i_ < TM; i_++) {                                \
      iy[i_] = oy_ * S - PT;                                                \
      ix[i_] = ox_ * S - PL;                                                \
      img[i_] = X + (size_t)b_ * H * W * C;                                 \
      if ((row0) + i_ + 1 < M) NEXT_POSITION(b_, oy_, ox_);                 \
    }                                                                       \
  } while (0)

// gemm16's longest K chunk (own_tiling's FWD_KC in src/backend/cpu_gemm.c).
#define FWD_PACK_K 384
__kernel void gemm16(const int M, const int N, const int K, __global const float *X,
                     const int x_off, const int H, const int W, const int C, const int KW,
                     const int S, const int PT, const int PL, const int OH, const int OW,
                     __global const float *B, const int b_off, const int ldb, __global float *Y,
                     const int y_off, const int ldc, __global const float *bias,
                     const int bias_off, const int relu, const int rb_count,
                     const int kchunk, __global const float *zeros, const int accumulate,
                     const int padded, const int x_step, const int b_step, const int y_step) {
  const int col = get_global_id(0) * 16 * NB;
  const int row_base = get_global_id(1) * (TM * rb_count);
  if (col >= N || row_base >= M) return;
  const size_t z = get_global_id(2);
  Y += y_off + z * y_step + col;
  X += x_off + z * x_step;
#if TRANS_B
  B += b_off + z * b_step + (size_t)col * ldb; /* row col of the stored [N][K] */
#else
  B += b_off + z * b_step + col;
#endif
  const int plane = OH * OW;
  float16 add[NB];
  UNROLL for (int j = 0; j < NB; j++)
    add[j] = bias_off >= 0 ? LOAD16(j, bias + bias_off + col) : (float16)(0.0f);
#if PACK_B || TRANS_B
  float bp[FWD_PACK_K * 16 * NB];
#endif
  for (int kc = 0; kc < K; kc += kchunk) {
    const int kc_end = min(K, kc + kchunk);
#if TRANS_B
    // bp[p - kc][n] = B[n][p]: 16 x 16 blocks while 16 values of k remain,
    // then the chunk's last values of k one at a time.
    int p = kc;
    for (; p + 16 <= kc_end; p += 16) {
      UNROLL for (int j = 0; j < NB; j++) {
        float16 r[16];
        UNROLL for (int i = 0; i < 16; i++) r[i] = LOAD16(0, B + (size_t)(16 * j + i) * ldb + p);
        TRANSPOSE16(r);
        UNROLL for (int i = 0; i < 16; i++) STORE16(r[i], j, bp + (p - kc + i) * 16 * NB);
      }
    }
    for (; p < kc_end; p++)
      for (int n = 0; n < 16 * NB; n++) bp[(p - kc) * 16 * NB + n] = B[(size_t)n * ldb + p];
#elif PACK_B
    for (int p = kc; p < kc_end; p++) {
      const __global float *b = B + (size_t)p * ldb;
      UNROLL for (int j = 0; j < NB; j++) STORE16(LOAD16(j, b), j, bp + (p - kc) * 16 * NB);
    }
#endif
    for (int rb = 0; rb < rb_count; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      // Rows past M repeat row M-1 and are not stored.
      int iy[TM], ix[TM];
      const __global float *img[TM];
      ORIGINS(row0, iy, ix, img);
      float16 acc[TM][NB];
      __global float *y = Y + (size_t)row0 * ldc;
      ACC_START(acc, y, kc > 0 || accumulate);
      for (int k = kc; k < kc_end;) {
        int c0, c1;
        const __global float *a[TM];
        if (padded) {
          // The chunk's k run over taps: channels c0..c1-1 of tap t at a time.
          const int t = k / C, ky = t / KW, kx = t - ky * KW;
          c0 = k - t * C;
          c1 = min(C, c0 + (kc_end - k));
          UNROLL for (int i = 0; i < TM; i++) {
            const int yy = iy[i] + ky, xx = ix[i] + kx;
            const int in = yy >= 0 && yy < H && xx >= 0 && xx < W;
            a[i] = in ? img[i] + ((size_t)yy * W + xx) * C : zeros;
          }
        } else {
          // The chunk's k run over kernel rows: with every window inside the
          // image, a kernel row's KW taps of C channels lie next to each other
          // (KW*C floats), so k runs over c0..c1-1 of kernel row ky at a time.
          const int run = KW * C, ky = k / run;
          c0 = k - ky * run;
          c1 = min(run, c0 + (kc_end - k));
          UNROLL for (int i = 0; i < TM; i++)
            a[i] = img[i] + ((size_t)(iy[i] + ky) * W + ix[i]) * C;
        }
#if PACK_B || TRANS_B
        const float *b = bp + (k - kc) * 16 * NB;
        for (int c = c0; c < c1; c++, b += 16 * NB) {
#else
        const __global float *b = B + (size_t)k * ldb;
        for (int c = c0; c < c1; c++, b += ldb) {
#endif
          float16 bv[NB];
          UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
          UNROLL for (int i = 0; i < TM; i++) {
            const float16 av = (float16)(a[i][c]);
            UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
          }
        }
        k += c1 - c0;
      }
      // The epilogue after the last chunk; before it, + 0 and a floor of
      // -inf leave the sums as they are (a NaN too).
      const int last = kc_end == K;
      float16 addl[NB];
      UNROLL for (int j = 0; j < NB; j++) addl[j] = last ? add[j] : (float16)(0.0f);
      const float16 floor = last && relu ? (float16)(0.0f) : (float16)(-INFINITY);
      UNROLL for (int i = 0; i < TM; i++) {
        if (row0 + i < M) {
          UNROLL for (int j = 0; j < NB; j++) {
            float16 v = acc[i][j] + addl[j];
            v = v < floor ? floor : v;
            STORE16(v, j, y + (size_t)i * ldc);
          }
        }
      }
    }
  }
}

// The weight-gradient kernels' arguments (range: N / (16*NB*cb_count),
// ceil(M / (TM*rb_count)), count * splits), and AT_START: a work-item's first
// column and row, its product z (a strided batch's) and share of K (split K:
// chunk s of k_split writes its partial product to C + s * c_split), and the
// operands moved to them.
#define AT_ARGS                                                                         \
  const int M, const int N, const int K, __global const float *X, const int x_off,     \
      const int H, const int W, const int C, const int KW, const int S, const int PT,  \
      const int PL, const int OH, const int OW, __global const float *B, const int b_off, \
      const int ldb, __global float *Cm, const int c_off, const int ldc,               \
      const int rb_count, const int cb_count, const int kchunk, const int k_split,     \
      const int c_split, __global const float *zeros, const int splits, const int x_step, \
      const int b_step, const int c_step
#define AT_START                                                          \
  const int col = get_global_id(0) * 16 * NB * cb_count;                 \
  const int row_base = get_global_id(1) * (TM * rb_count);                \
  if (col >= N || row_base >= M) return;                                  \
  const int z_ = get_global_id(2) / splits;                               \
  const int split_ = get_global_id(2) - z_ * splits;                      \
  const int k_begin = split_ * k_split;                                   \
  const int k_end = min(K, k_begin + k_split);                            \
  Cm += (size_t)split_ * c_split + c_off + (size_t)z_ * c_step + col;     \
  X += x_off + (size_t)z_ * x_step;                                       \
  B += b_off + (size_t)z_ * b_step + col;                                 \
  const int plane = OH * OW
// The weight-gradient kernels' shared steps (they use the kernel's geometry
// and X, zeros, org, oy0, ox0, tky, tkx by name):
// CHUNK_ORIGINS: the window origins of positions kc .. kc+kn-1 into org (image
// offset) and oy0, ox0 (top row, left column), (b, oy, ox) stepped rather than
// divided out per position (the divisions cost as much as a short row's FMAs).
#define CHUNK_ORIGINS(kc, kn)                                                 \
  do {                                                                        \
    int pb_ = (kc) / plane, oy_ = ((kc) - pb_ * plane) / OW;                  \
    int ox_ = (kc) - pb_ * plane - oy_ * OW;                                  \
    for (int p_ = 0; p_ < (kn); p_++) {                                       \
      const int y0_ = oy_ * S - PT, x0_ = ox_ * S - PL;                       \
      org[p_] = ((pb_ * H + y0_) * W + x0_) * C;                              \
      oy0[p_] = y0_;                                                          \
      ox0[p_] = x0_;                                                          \
      NEXT_POSITION(pb_, oy_, ox_);                                           \
    }                                                                         \
  } while (0)
// AT_ACC_LOAD: a sub-block's sums start at 0 in a work-item's first chunk and
// from C (what the previous chunk stored) after it; AT_ACC_STORE: its rows
// before M back to C.
#define AT_ACC_LOAD(acc, c) ACC_START(acc, c, kc > k_begin)
#define AT_ACC_STORE(acc, c)                                                  \
  UNROLL for (int i_ = 0; i_ < TM; i_++)                                      \
    if (row0 + i_ < M) UNROLL for (int j_ = 0; j_ < NB; j_++)                 \
      STORE16(acc[i_][j_], j_, (c) + (size_t)i_ * ldc)
// ROW_TAPS: rows row0 .. row0+TM-1 (past M: row M-1), row m being channel
// m % C of tap m / C: its offset d from a window's origin, and the tap's row
// and column.
#define ROW_TAPS(row0, d, tky, tkx)                                           \
  UNROLL for (int i_ = 0; i_ < TM; i_++) {                                    \
    const int m_ = min((row0) + i_, M - 1), t_ = m_ / C, c_ = m_ - t_ * C;    \
    const int ky_ = t_ / KW, kx_ = t_ - ky_ * KW;                             \
    d[i_] = (ky_ * W + kx_) * C + c_;                                         \
    tky[i_] = ky_;                                                            \
    tkx[i_] = kx_;                                                            \
  }
// TAP_OR_ZEROS: pointer x for position p's tap of row i, or (PADDED) zeros
// when that tap lies outside the image.
#if PADDED
#define TAP_OR_ZEROS(p, i, x)                                                         \
  ((uint)(oy0[p] + tky[i]) < (uint)H && (uint)(ox0[p] + tkx[i]) < (uint)W ? (x) : zeros)
#else
#define TAP_OR_ZEROS(p, i, x) (x)
#endif

// C = A^T B with A[K][M] the im2col matrix of X (a weight gradient: M =
// KH*KW*C, a tap's channel per row; K = B*OH*OW, the sum over output positions
// in order) or a plain matrix (the geometry above). No epilogue. A work-item
// takes rb_count sub-blocks of TM rows by cb_count blocks of 16*NB columns, K
// in chunks of kchunk. Each chunk's window origins are worked out once; its
// rows of B (16*NB*cb_count floats each, ldb apart) are copied into a private
// array, and so are each sub-block's TM values per position (a padded
// window's tap read as 0), so the FMA loop reads two short contiguous arrays
// for all column blocks. Read in place, B's rows and X's positions lie a power
// of two apart in most layers and fall into a few cache sets; the copy of X is
// what lets one sub-block serve 128 columns (AVX2: 8 blocks) rather than 16,
// so X is read from memory N/128 times, not N/16. With one FMA loop the
// compiler keeps its 12 AVX2 accumulators in registers, where two loops
// (inside one tap, or across two) spill one to the stack, a store and reload on
// every iteration's dependency chain.
#define PACK_K 64
#define PACK_COLS 128
__kernel void gemm16_at(AT_ARGS) {
  const int width = 16 * NB * cb_count;
  AT_START;
  float bp[PACK_K * PACK_COLS], xp[PACK_K * TM];
  int org[PACK_K], oy0[PACK_K], ox0[PACK_K];
  for (int kc = k_begin; kc < k_end; kc += kchunk) {
    const int kn = min(k_end - kc, kchunk);
    CHUNK_ORIGINS(kc, kn);
    for (int p = 0; p < kn; p++) {
      const __global float *b = B + (size_t)(kc + p) * ldb;
      for (int j = 0; j < width; j += 16) STORE16(LOAD16(0, b + j), 0, bp + p * width + j);
    }
    for (int rb = 0; rb < rb_count; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      int d[TM], tky[TM], tkx[TM];
      ROW_TAPS(row0, d, tky, tkx);
      const int one_tap = row0 + TM <= M && row0 / C == (row0 + TM - 1) / C;
      if (one_tap) {
        const __global float *x0 = X + d[0];
        for (int p = 0; p < kn; p++) {
          const __global float *a = TAP_OR_ZEROS(p, 0, x0 + org[p]);
          UNROLL for (int i = 0; i < TM; i++) xp[p * TM + i] = a[i];
        }
      } else {
        for (int p = 0; p < kn; p++) {
          UNROLL for (int i = 0; i < TM; i++) {
            xp[p * TM + i] = *TAP_OR_ZEROS(p, i, X + org[p] + d[i]);
          }
        }
      }
      for (int cb = 0; cb < cb_count; cb++) {
        float16 acc[TM][NB];
        __global float *c = Cm + (size_t)row0 * ldc + cb * 16 * NB;
        AT_ACC_LOAD(acc, c);
        const float *bq = bp + cb * 16 * NB, *a = xp;
        for (int p = 0; p < kn; p++, bq += width, a += TM) {
          float16 bv[NB];
          UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, bq);
          UNROLL for (int i = 0; i < TM; i++) {
            const float16 av = (float16)(a[i]);
            UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
          }
        }
        AT_ACC_STORE(acc, c);
      }
    }
  }
}

// gemm16_at reading X and B in place, for a work-item of one column block
// (cb_count 1): nothing to share a copy with, and the copies would slow
// AVX-512's widest blocks (the CNN's 576 x 80 and 9 x 64 weight gradients). Same
// arguments and sums; K chunks of at most PACK_K.
__kernel void gemm16_at_direct(AT_ARGS) {
  AT_START;
  for (int kc = k_begin; kc < k_end; kc += kchunk) {
    const int kc_end = min(k_end, kc + kchunk);
    int org[PACK_K], oy0[PACK_K], ox0[PACK_K];
    CHUNK_ORIGINS(kc, kc_end - kc);
    for (int rb = 0; rb < rb_count; rb++) {
      const int row0 = row_base + rb * TM;
      if (row0 >= M) break;
      int d[TM], tky[TM], tkx[TM];
      ROW_TAPS(row0, d, tky, tkx);
      for (int cb = 0; cb < cb_count; cb++) {
        float16 acc[TM][NB];
        __global float *c = Cm + (size_t)row0 * ldc + cb * 16 * NB;
        AT_ACC_LOAD(acc, c);
        // A sub-block inside one tap (most of them: a tap's C rows hold many)
        // reads its TM values next to each other from one pointer, a padded
        // window's tap checked once for all rows and read from `zeros` (TM
        // floats of 0) when outside: the per-row offsets and checks had taken
        // more registers than there are, spilling accumulators to the stack.
        const int one_tap = row0 + TM <= M && row0 / C == (row0 + TM - 1) / C;
        const __global float *b = B + (size_t)kc * ldb + cb * 16 * NB;
        if (one_tap) {
          const __global float *x0 = X + d[0];
          for (int p = kc; p < kc_end; p++, b += ldb) {
            float16 bv[NB];
            UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
            const __global float *a = TAP_OR_ZEROS(p - kc, 0, x0 + org[p - kc]);
            UNROLL for (int i = 0; i < TM; i++) {
              const float16 av = (float16)(a[i]);
              UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
            }
          }
        } else {
          for (int p = kc; p < kc_end; p++, b += ldb) {
            float16 bv[NB];
            UNROLL for (int j = 0; j < NB; j++) bv[j] = LOAD16(j, b);
            const int o = org[p - kc];
            UNROLL for (int i = 0; i < TM; i++) {
              const float16 av = (float16)(*TAP_OR_ZEROS(p - kc, i, X + o + d[i]));
              UNROLL for (int j = 0; j < NB; j++) acc[i][j] = av * bv[j] + acc[i][j];
            }
          }
        }
        AT_ACC_STORE(acc, c);
      }
    }
  }
}

#else  // no tile: the plain kernels
// Columns n0..N-1 of C where N is not a multiple of 16 (a classifier's 10
// outputs; gemm16 takes the columns before n0) of the plain product op(A) B,
// op(A)[m][k] = trans_a ? A[k*lda + m] : A[m*lda + k] and op(B)[k][n] = trans_b ?
// B[n*ldb + k] : B[k*ldb + n]: a work-item computes one
// row's last N - n0 < 16 columns, k in order, with gemm16's epilogue. Keeping these
// here rather than in CLBlast spares CPUs its program builds (most of a first
// run's start) for a sliver of the work. Range: (M, count), product z's
// operands z steps on (a strided batch's; steps 0 and count 1: one product).
// Lanes past nt are 0 and never read (no private array: Oclgrind's
// uninitialised-value check crashed on one indexed by a loop).
#define TAIL_LANE(p, i, nt, st) ((i) < (nt) ? (p)[(i) * (st)] : 0.0f)
#define TAIL_LOAD_STRIDED(p, nt, st)                                                           \
  ((float16)(TAIL_LANE(p, 0, nt, st), TAIL_LANE(p, 1, nt, st), TAIL_LANE(p, 2, nt, st),        \
             TAIL_LANE(p, 3, nt, st), TAIL_LANE(p, 4, nt, st), TAIL_LANE(p, 5, nt, st),        \
             TAIL_LANE(p, 6, nt, st), TAIL_LANE(p, 7, nt, st), TAIL_LANE(p, 8, nt, st),        \
             TAIL_LANE(p, 9, nt, st), TAIL_LANE(p, 10, nt, st), TAIL_LANE(p, 11, nt, st),      \
             TAIL_LANE(p, 12, nt, st), TAIL_LANE(p, 13, nt, st), TAIL_LANE(p, 14, nt, st), 0.0f))
#define TAIL_LOAD(p, nt) TAIL_LOAD_STRIDED(p, nt, 1)

__kernel void gemm_tail(const int M, const int N, const int K, const int n0,
                        const int trans_a, __global const float *A, const int a_off, const int lda,
                        const int trans_b, __global const float *B, const int b_off, const int ldb, __global float *C,
                        const int c_off, const int ldc, __global const float *bias,
                        const int bias_off, const int relu, const int accumulate,
                        const int a_step, const int b_step, const int c_step) {
  const int row = get_global_id(0);
  if (row >= M) return;
  const int nt = N - n0; /* 1..15 */
  const size_t z = get_global_id(1);
  A += a_off + z * a_step;
  B += b_off + z * b_step + (trans_b ? (size_t)n0 * ldb : (size_t)n0);
  const int b_lane = trans_b ? ldb : 1, b_row = trans_b ? 1 : ldb;
  C += c_off + z * c_step + (size_t)row * ldc + n0;
  float16 acc = accumulate ? TAIL_LOAD(C, nt) : (float16)(0.0f);
  for (int k = 0; k < K; k++, B += b_row) {
    const float a = trans_a ? A[(size_t)k * lda + row] : A[(size_t)row * lda + k];
    acc = (float16)(a) * TAIL_LOAD_STRIDED(B, nt, b_lane) + acc;
  }
  if (bias_off >= 0) acc += TAIL_LOAD(bias + bias_off + n0, nt);
  if (relu) acc = acc < (float16)(0.0f) ? (float16)(0.0f) : acc;
  float out[16];
  STORE16(acc, 0, out);
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

// dst[k*ldd + n] = src[src_off + n*ld + k]: a [N][K] operand laid out as [K][N]
// rows (ldd apart) so the GEMM above reads it in rows. The range's third
// dimension z moves both by whole matrices, src by src_step (negative to
// reverse their order) and dst by dst_step: a convolution kernel's taps, each
// C x filters block transposed, in reverse (clt_conv_dx's flipped kernel). A
// work-item moves TR_TILES 16 x 16 tiles along K: fewer items keep PoCL's
// per-item overhead small against the copy. A whole tile is 16 rows loaded as
// float16 vectors, transposed in registers in four rounds (each swaps the
// off-diagonal blocks of 8, 4, 2, 1 lanes between rows 8, 4, 2, 1 apart:
// constant swizzles, a shuffle each) and stored as 16 rows, where element by
// element every float is a strided scalar load and a store. Tiles at the edges
// (K or N not a multiple of 16) go element by element. Range:
// (ceil(K / (16 * TR_TILES)), ceil(N / 16), count).
#define TR_TILES 4
__kernel void transpose(__global const float *src, const int src_off, const int ld, const int K,
                        const int N, __global float *dst, const int ldd, const int src_step,
                        const int dst_step) {
  const int kb = get_global_id(0) * 16 * TR_TILES, n0 = get_global_id(1) * 16,
            z = get_global_id(2);
  if (kb >= K || n0 >= N) return;
  src += src_off + (long)z * src_step + (size_t)n0 * ld;
  dst += (size_t)z * dst_step + n0;
  const int nt = min(16, N - n0);
  for (int k0 = kb; k0 < min(K, kb + 16 * TR_TILES); k0 += 16) {
    const int kt = min(16, K - k0);
    if (kt < 16 || nt < 16) {
      for (int k = 0; k < kt; k++)
        for (int n = 0; n < nt; n++) dst[(size_t)(k0 + k) * ldd + n] = src[(size_t)n * ld + k0 + k];
      continue;
    }
    float16 r[16];
    UNROLL for (int i = 0; i < 16; i++) r[i] = LOAD16(0, src + (size_t)i * ld + k0);
    TRANSPOSE16(r);
    UNROLL for (int i = 0; i < 16; i++) STORE16(r[i], 0, dst + (size_t)(k0 + i) * ldd);
  }
}
#endif  // TM
