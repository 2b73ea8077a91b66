// A convolution kernel flipped in space with its channels swapped, the kernel
// of a stride-1 convolution's input gradient run as a forward convolution of
// dy (src/backend/cpu_gemm.c's clt_cpu_conv_dx, src/backend/winograd.c's
// input gradient): F[tap][co][c] = w[taps - 1 - tap][c][co], w (HWIO) read as
// [taps][C][CO] at w_off, F written at f_off.
//
// GPUs: a work-item per (c, tap * CO + co): F's rows written by consecutive
// work-items (coalesced), w read CO floats apart. Range: (C, taps * CO).
// CPUs: a work-item per 16 x 16 block, its 16 rows of w read whole into
// registers (two float8 each), then each of its 16 rows of F written whole
// from four 8 x 8 register transposes; blocks at the edges by plain loops.
// Consecutive work-items take consecutive blocks of c, so F's rows are
// written front to back: taking blocks of co instead (w's rows read front to
// back) left each F row's lines to be written 16 floats at a time, the rows
// 2 KiB apart at 512 channels, and ran 1.2-1.7x slower. Range: (ceil(C / 16),
// taps * ceil(CO / 16)).
#if !CLT_GPU
// Column j of the 8 x 8 block whose rows are r[0..7].
#define COL8(r, j)                                                                       \
  (float8)((r)[0].s##j, (r)[1].s##j, (r)[2].s##j, (r)[3].s##j, (r)[4].s##j, (r)[5].s##j, \
           (r)[6].s##j, (r)[7].s##j)
// Row co0 + j of F's block: column s of the rows in `half` (lo: columns 0-7,
// hi: 8-15), j = s or 8 + s.
#define FLIP_ROW(half, j, s)                   \
  do {                                         \
    __global float *d = dst + (size_t)(j) * C; \
    vstore8(COL8(half, s), 0, d);              \
    vstore8(COL8(half + 8, s), 0, d + 8);      \
  } while (0)
#endif
__kernel void flip_taps(__global const float *w, const int w_off, __global float *F,
                        const int f_off, const int C, const int CO, const int taps) {
#if CLT_GPU
  const int c = get_global_id(0), row = get_global_id(1);
  if (c >= C || row >= taps * CO) return;
  const int tap = row / CO, co = row % CO;
  F[f_off + (size_t)row * C + c] = w[w_off + ((size_t)(taps - 1 - tap) * C + c) * CO + co];
#else
  const int nb = (CO + 15) / 16, c0 = (int)get_global_id(0) * 16;
  const int tap = (int)get_global_id(1) / nb, co0 = ((int)get_global_id(1) % nb) * 16;
  if (c0 >= C || tap >= taps) return;
  const int nco = min(16, CO - co0), nc = min(16, C - c0);
  __global const float *src = w + w_off + ((size_t)(taps - 1 - tap) * C + c0) * CO + co0;
  __global float *dst = F + f_off + ((size_t)tap * CO + co0) * C + c0;
  if (nco < 16 || nc < 16) {
    for (int k = 0; k < nco; k++)
      for (int n = 0; n < nc; n++) dst[(size_t)k * C + n] = src[(size_t)n * CO + k];
    return;
  }
  float8 lo[16], hi[16];
#pragma unroll
  for (int i = 0; i < 16; i++) {
    lo[i] = vload8(0, src + (size_t)i * CO);
    hi[i] = vload8(1, src + (size_t)i * CO);
  }
  FLIP_ROW(lo, 0, 0);
  FLIP_ROW(lo, 1, 1);
  FLIP_ROW(lo, 2, 2);
  FLIP_ROW(lo, 3, 3);
  FLIP_ROW(lo, 4, 4);
  FLIP_ROW(lo, 5, 5);
  FLIP_ROW(lo, 6, 6);
  FLIP_ROW(lo, 7, 7);
  FLIP_ROW(hi, 8, 0);
  FLIP_ROW(hi, 9, 1);
  FLIP_ROW(hi, 10, 2);
  FLIP_ROW(hi, 11, 3);
  FLIP_ROW(hi, 12, 4);
  FLIP_ROW(hi, 13, 5);
  FLIP_ROW(hi, 14, 6);
  FLIP_ROW(hi, 15, 7);
#endif
}
