// Row-major SGEMM for GPUs, cltrain's own beside CLBlast's (the gpu backend's
// GEMM tilings, src/backend/gpu.c): C = alpha * op(A) op(B) + beta * C, for
// each product of a strided batch (the grid's third dimension).
//
// A work-group computes a TSM x TSN tile of C. It stages TSK columns of op(A)'s
// rows and TSK rows of op(B)'s columns in local memory at a time, each
// work-item loading along the operand's contiguous dimension (coalesced), then
// each work-item takes WPTM x WPTN outputs strided by the group's shape, so
// neighbouring work-items write neighbouring columns of C. Each output sums
// its K products in order (k = 0, 1, ...), so results repeat bit for bit.
// Outside M, N or K the tiles hold zeros; beta 0 never reads C.
//
// Build options: -DTSM, -DTSN, -DTSK (the tile), -DWPTM, -DWPTN (outputs a
// work-item: TSM and TSN their multiples), -DTRANS_A, -DTRANS_B (0 or 1: A
// stored [K][M], B stored [N][K]). Work-groups of (TSN / WPTN, TSM / WPTM).

#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define THREADS (RTSM * RTSN)

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1))) void
gemm_tiled(const int M, const int N, const int K, const float alpha, __global const float *A,
           const int a_off, const int lda, const int a_stride, __global const float *B,
           const int b_off, const int ldb, const int b_stride, const float beta,
           __global float *C, const int c_off, const int ldc, const int c_stride) {
  // A row of each tile is padded by one float: loads along K (A, or B^T) store
  // down a column, which without the pad would fall in one bank.
  __local float As[TSK][TSM + 1];
  __local float Bs[TSK][TSN + 1];
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int tid = tm * RTSN + tn;
  const int m0 = get_group_id(1) * TSM, n0 = get_group_id(0) * TSN;
  const int p = get_global_id(2);
  __global const float *a = A + a_off + (size_t)p * a_stride;
  __global const float *b = B + b_off + (size_t)p * b_stride;
  __global float *c = C + c_off + (size_t)p * c_stride;

  float acc[WPTM][WPTN];
  for (int i = 0; i < WPTM; i++)
    for (int j = 0; j < WPTN; j++) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TSK) {
    for (int q = tid; q < TSK * TSM; q += THREADS) {
#if TRANS_A
      const int kk = q / TSM, mm = q % TSM; // A[k][m]: consecutive m
#else
      const int mm = q / TSK, kk = q % TSK; // A[m][k]: consecutive k
#endif
      const int gm = m0 + mm, gk = k0 + kk;
#if TRANS_A
      As[kk][mm] = gm < M && gk < K ? a[(size_t)gk * lda + gm] : 0.0f;
#else
      As[kk][mm] = gm < M && gk < K ? a[(size_t)gm * lda + gk] : 0.0f;
#endif
    }
    for (int q = tid; q < TSK * TSN; q += THREADS) {
#if TRANS_B
      const int nn = q / TSK, kk = q % TSK; // B[n][k]: consecutive k
#else
      const int kk = q / TSN, nn = q % TSN; // B[k][n]: consecutive n
#endif
      const int gn = n0 + nn, gk = k0 + kk;
#if TRANS_B
      Bs[kk][nn] = gn < N && gk < K ? b[(size_t)gn * ldb + gk] : 0.0f;
#else
      Bs[kk][nn] = gn < N && gk < K ? b[(size_t)gk * ldb + gn] : 0.0f;
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TSK; kk++) {
      float bv[WPTN];
      for (int j = 0; j < WPTN; j++) bv[j] = Bs[kk][tn + j * RTSN];
      for (int i = 0; i < WPTM; i++) {
        const float av = As[kk][tm + i * RTSM];
        for (int j = 0; j < WPTN; j++) acc[i][j] = fma(av, bv[j], acc[i][j]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < WPTM; i++) {
    const int gm = m0 + tm + i * RTSM;
    if (gm >= M) continue;
    for (int j = 0; j < WPTN; j++) {
      const int gn = n0 + tn + j * RTSN;
      if (gn >= N) continue;
      __global float *out = c + (size_t)gm * ldc + gn;
      *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out;
    }
  }
}
