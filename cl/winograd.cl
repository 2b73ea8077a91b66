// Winograd F(m x m, 3x3) for 3x3 stride-1 convolutions (src/backend/winograd.c):
// a tile of m x m outputs is A^T [(G g G^T) . (B^T d B)] A, with d the
// (m+2) x (m+2) input tile, g the 3x3 kernel of one (input, output) channel
// pair and . the elementwise product, whose (m+2)^2 positions are independent
// products over the channels (GEMMs). The transforms here move between NHWC
// tensors and the Winograd domain, laid out as [position t][tile or channel]
// [channel]: the GEMM of position t reads rows of contiguous channels. The
// positions' matrices are vs, ms, zs or us floats apart (padded: winograd.c).
//
// Built with -DWINO_M=2 (F(2x2,3x3), points 0, 1, -1) or -DWINO_M=4
// (F(4x4,3x3), points 0, 1, -1, 2, -2, the matrices of Lavin and Gray).
//
// Launches: clt_launch_rows over (channels, tiles or input channels), one row
// a work-item. CLT_GPU 0 (CPUs): a work-item takes WINO_LANES channels as a
// float16 or float8 (a tail of fewer as the first lanes); CLT_GPU 1 (GPUs): a
// work-item per channel, consecutive work-items on consecutive channels
// (coalesced).

#ifndef WINO_M
#define WINO_M 2
#endif
#define WA (WINO_M + 2)  // the tile's side in the Winograd domain
#define WA2 (WA * WA)

// The matrices, applied as the 1-D transforms below:
// F(2x2,3x3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1].
// F(4x4,3x3): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
//   0 2 -1 -2 1 0; 0 4 0 -5 0 1], G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
//   1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1], A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0;
//   0 1 1 4 4 0; 0 1 -1 8 -8 1].
#if WINO_M != 2 && WINO_M != 4
#error "WINO_M must be 2 or 4"
#endif

#if CLT_GPU
typedef float vt;
#define LANES 1
// The work-item's channel and the count it takes (0: none).
#define LANE0() ((int)get_global_id(0))
static inline vt ld(__global const float *p, const int n, const int stride) {
  (void)n;
  (void)stride;
  return p[0];
}
static inline void st(__global float *p, const int n, const vt v) {
  (void)n;
  p[0] = v;
}
#else
// WINO_LANES channels a work-item: 16 (a float16, where the device's vectors
// are that wide) or 8; winograd.c launches that many fewer work-items.
#ifndef WINO_LANES
#define WINO_LANES 8
#endif
#if WINO_LANES == 16
typedef float16 vt;
#define VLOAD vload16
#define VSTORE vstore16
#elif WINO_LANES == 8
typedef float8 vt;
#define VLOAD vload8
#define VSTORE vstore8
#else
#error "WINO_LANES must be 8 or 16"
#endif
#define LANES WINO_LANES
#define LANE0() ((int)get_global_id(0) * LANES)
// n channels (at most LANES) from p, `stride` floats apart; the other lanes 0.
static inline vt ld(__global const float *p, const int n, const int stride) {
  if (n >= LANES && stride == 1) return VLOAD(0, p);
  float t[LANES];
  for (int i = 0; i < LANES; i++) t[i] = i < n ? p[i * stride] : 0.0f;
  return VLOAD(0, t);
}
static inline void st(__global float *p, const int n, const vt v) {
  if (n >= LANES) {
    VSTORE(v, 0, p);
    return;
  }
  float t[LANES];
  VSTORE(v, 0, t);
  for (int i = 0; i < n; i++) p[i] = t[i];
}
#endif

// The 1-D transforms of a tile's column or row, in even/odd form: rows of
// the matrices for the points +p and -p share the sums of the even and the
// odd terms, computed once (the constants' zero terms left out).
#if WINO_M == 2
// o = G (a, b, c)
static inline void g_1d(vt *o, const vt a, const vt b, const vt c) {
  const vt e = (a + c) * 0.5f, od = b * 0.5f;
  o[0] = a;
  o[1] = e + od;
  o[2] = e - od;
  o[3] = c;
}
// o = G^T u
static inline void gt_1d(vt *o, const vt u0, const vt u1, const vt u2, const vt u3) {
  const vt e = (u1 + u2) * 0.5f;
  o[0] = u0 + e;
  o[1] = (u1 - u2) * 0.5f;
  o[2] = e + u3;
}
// o = B^T d
static inline void bt_1d(vt *o, const vt d0, const vt d1, const vt d2, const vt d3) {
  o[0] = d0 - d2;
  o[1] = d1 + d2;
  o[2] = d2 - d1;
  o[3] = d1 - d3;
}
// o = A^T m
static inline void at_1d(vt *o, const vt m0, const vt m1, const vt m2, const vt m3) {
  o[0] = m0 + m1 + m2;
  o[1] = m1 - m2 - m3;
}
// o = A e
static inline void a_1d(vt *o, const vt e0, const vt e1) {
  o[0] = e0;
  o[1] = e0 + e1;
  o[2] = e0 - e1;
  o[3] = -e1;
}
// The arguments: column j or row i of an array of WA or WINO_M.
#define COLW(x, j) x[0][j], x[1][j], x[2][j], x[3][j]
#define ROWW(x, i) x[i][0], x[i][1], x[i][2], x[i][3]
#define COLM(x, j) x[0][j], x[1][j]
#define ROWM(x, i) x[i][0], x[i][1]
#else
static inline void g_1d(vt *o, const vt a, const vt b, const vt c) {
  const vt e = a + c, e2 = a * (1.0f / 24) + c * (1.0f / 6), od = b * (1.0f / 12);
  o[0] = a * 0.25f;
  o[1] = (e + b) * (-1.0f / 6);
  o[2] = (e - b) * (-1.0f / 6);
  o[3] = e2 + od;
  o[4] = e2 - od;
  o[5] = c;
}
static inline void gt_1d(vt *o, const vt u0, const vt u1, const vt u2, const vt u3, const vt u4,
                         const vt u5) {
  const vt s12 = u1 + u2, d12 = u1 - u2, s34 = u3 + u4, d34 = u3 - u4;
  o[0] = u0 * 0.25f + s12 * (-1.0f / 6) + s34 * (1.0f / 24);
  o[1] = d12 * (-1.0f / 6) + d34 * (1.0f / 12);
  o[2] = s12 * (-1.0f / 6) + s34 * (1.0f / 6) + u5;
}
static inline void bt_1d(vt *o, const vt d0, const vt d1, const vt d2, const vt d3, const vt d4,
                         const vt d5) {
  const vt a = d4 - d2 * 4.0f, b = d3 - d1 * 4.0f, c = d4 - d2, f = (d3 - d1) * 2.0f;
  o[0] = d0 * 4.0f - d2 * 5.0f + d4;
  o[1] = a + b;
  o[2] = a - b;
  o[3] = c + f;
  o[4] = c - f;
  o[5] = d1 * 4.0f - d3 * 5.0f + d5;
}
static inline void at_1d(vt *o, const vt m0, const vt m1, const vt m2, const vt m3, const vt m4,
                         const vt m5) {
  const vt s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  o[0] = m0 + s12 + s34;
  o[1] = d12 + d34 * 2.0f;
  o[2] = s12 + s34 * 4.0f;
  o[3] = d12 + d34 * 8.0f + m5;
}
static inline void a_1d(vt *o, const vt e0, const vt e1, const vt e2, const vt e3) {
  const vt ev = e0 + e2, od = e1 + e3, ev2 = e0 + e2 * 4.0f, od2 = e1 * 2.0f + e3 * 8.0f;
  o[0] = e0;
  o[1] = ev + od;
  o[2] = ev - od;
  o[3] = ev2 + od2;
  o[4] = ev2 - od2;
  o[5] = e3;
}
#define COLW(x, j) x[0][j], x[1][j], x[2][j], x[3][j], x[4][j], x[5][j]
#define ROWW(x, i) x[i][0], x[i][1], x[i][2], x[i][3], x[i][4], x[i][5]
#define COLM(x, j) x[0][j], x[1][j], x[2][j], x[3][j]
#define ROWM(x, i) x[i][0], x[i][1], x[i][2], x[i][3]
#endif
#define COL3(x, j) x[0][j], x[1][j], x[2][j]
#define ROW3(x, i) x[i][0], x[i][1], x[i][2]

// G g G^T of the 3x3 kernel g into U at `at`, position t `tstride` floats apart.
static inline void filter_tile(vt g[3][3], __global float *U, const size_t at, const size_t tstride,
                               const int n) {
  vt tg[WA][3], o[WA];
#pragma unroll
  for (int j = 0; j < 3; j++) {
    g_1d(o, COL3(g, j));
#pragma unroll
    for (int i = 0; i < WA; i++) tg[i][j] = o[i];
  }
#pragma unroll
  for (int i = 0; i < WA; i++) {
    g_1d(o, ROW3(tg, i));
#pragma unroll
    for (int j = 0; j < WA; j++) st(U + at + (size_t)(i * WA + j) * tstride, n, o[j]);
  }
}

// U[t][c][co] = (G g G^T)[t] for the kernel w (HWIO at w_off: [3][3][C][CO]).
// Rows: input channels c; channels: outputs co.
__kernel void wino_filter(__global const float *w, const int w_off, __global float *U,
                          const int u_off, const int C, const int CO, const int us) {
  const int co = LANE0(), c = get_global_id(1);
  if (co >= CO || c >= C) return;
  const int n = min(LANES, CO - co);
  vt g[3][3];
#pragma unroll
  for (int i = 0; i < 3; i++)
#pragma unroll
    for (int j = 0; j < 3; j++)
      g[i][j] = ld(w + w_off + ((size_t)(i * 3 + j) * C + c) * CO + co, n, 1);
  filter_tile(g, U, u_off + (size_t)c * CO + co, us, n);
}

// V[t][p][c] = (B^T d B)[t] for tile p = (b, ty, tx) of TH x TW per image: d
// the WA x WA window of x (B images of H x W x C) at row ty * WINO_M - PT,
// column tx * WINO_M - PL, zeros outside. Rows: tiles.
__kernel void wino_input(__global const float *x, __global float *V, const int v_off, const int B,
                         const int H, const int W, const int C, const int PT, const int PL,
                         const int TH, const int TW, const int vs) {
  const int c = LANE0(), p = get_global_id(1), P = B * TH * TW;
  if (c >= C || p >= P) return;
  const int n = min(LANES, C - c);
  const int tx = p % TW, ty = (p / TW) % TH, b = p / (TW * TH);
  const int y0 = ty * WINO_M - PT, x0 = tx * WINO_M - PL;
  vt d[WA][WA], t[WA][WA], o[WA];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      const int iy = y0 + i, ix = x0 + j;
      d[i][j] = iy >= 0 && iy < H && ix >= 0 && ix < W
                    ? ld(x + (((size_t)b * H + iy) * W + ix) * C + c, n, 1)
                    : (vt)(0.0f);
    }
#pragma unroll
  for (int j = 0; j < WA; j++) {
    bt_1d(o, COLW(d, j));
#pragma unroll
    for (int i = 0; i < WA; i++) t[i][j] = o[i];
  }
#pragma unroll
  for (int i = 0; i < WA; i++) {
    bt_1d(o, ROWW(t, i));
#pragma unroll
    for (int j = 0; j < WA; j++)
      st(V + v_off + (size_t)(i * WA + j) * vs + (size_t)p * C + c, n, o[j]);
  }
}

// y = (A^T M A) of tile p, + bias[bias_off + co] (bias_off < 0: none), then
// ReLU when relu; y is B images of OH x OW x CO, the tile's outputs past its
// edge dropped. M[t][p][co]. Rows: tiles.
__kernel void wino_output(__global const float *M, const int m_off, __global float *y,
                          __global const float *bias, const int bias_off, const int B, const int OH,
                          const int OW, const int CO, const int TH, const int TW, const int relu,
                          const int ms) {
  const int co = LANE0(), p = get_global_id(1), P = B * TH * TW;
  if (co >= CO || p >= P) return;
  const int n = min(LANES, CO - co);
  const int tx = p % TW, ty = (p / TW) % TH, b = p / (TW * TH);
  vt m[WA][WA], t[WINO_M][WA], o[WINO_M];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++)
      m[i][j] = ld(M + m_off + (size_t)(i * WA + j) * ms + (size_t)p * CO + co, n, 1);
#pragma unroll
  for (int j = 0; j < WA; j++) {
    at_1d(o, COLW(m, j));
#pragma unroll
    for (int i = 0; i < WINO_M; i++) t[i][j] = o[i];
  }
  const vt add = bias_off >= 0 ? ld(bias + bias_off + co, n, 1) : (vt)(0.0f);
#pragma unroll
  for (int i = 0; i < WINO_M; i++) {
    at_1d(o, ROWW(t, i));
#pragma unroll
    for (int j = 0; j < WINO_M; j++) {
      const int oy = ty * WINO_M + i, ox = tx * WINO_M + j;
      if (oy >= OH || ox >= OW) continue;
      vt s = o[j] + add;
      if (relu) s = fmax(s, (vt)(0.0f));
      st(y + (((size_t)b * OH + oy) * OW + ox) * CO + co, n, s);
    }
  }
}

// The weight gradient's side of the output gradient: Z[t][p][co] = (A e A^T)[t]
// with e the WINO_M x WINO_M tile p of dy (B images of OH x OW x CO), zeros past
// the edge (outputs the forward dropped). Rows: tiles.
__kernel void wino_grad_output(__global const float *dy, __global float *Z, const int z_off,
                               const int B, const int OH, const int OW, const int CO, const int TH,
                               const int TW, const int zs) {
  const int co = LANE0(), p = get_global_id(1), P = B * TH * TW;
  if (co >= CO || p >= P) return;
  const int n = min(LANES, CO - co);
  const int tx = p % TW, ty = (p / TW) % TH, b = p / (TW * TH);
  vt d[WINO_M][WINO_M], t[WA][WINO_M], o[WA];
#pragma unroll
  for (int i = 0; i < WINO_M; i++)
#pragma unroll
    for (int j = 0; j < WINO_M; j++) {
      const int oy = ty * WINO_M + i, ox = tx * WINO_M + j;
      d[i][j] = oy < OH && ox < OW ? ld(dy + (((size_t)b * OH + oy) * OW + ox) * CO + co, n, 1)
                                   : (vt)(0.0f);
    }
#pragma unroll
  for (int j = 0; j < WINO_M; j++) {
    a_1d(o, COLM(d, j));
#pragma unroll
    for (int i = 0; i < WA; i++) t[i][j] = o[i];
  }
#pragma unroll
  for (int i = 0; i < WA; i++) {
    a_1d(o, ROWM(t, i));
#pragma unroll
    for (int j = 0; j < WA; j++)
      st(Z + z_off + (size_t)(i * WA + j) * zs + (size_t)p * CO + co, n, o[j]);
  }
}

// dw[i][j][c][co] (HWIO at dw_off) = (G^T dU G)[i][j] with dU[t][c][co] the
// Winograd domain's gradient (sum over tiles of V times Z). Rows: inputs c.
__kernel void wino_filter_grad(__global const float *dU, const int du_off, __global float *dw,
                               const int dw_off, const int C, const int CO, const int us) {
  const int co = LANE0(), c = get_global_id(1);
  if (co >= CO || c >= C) return;
  const int n = min(LANES, CO - co);
  vt u[WA][WA], t[3][WA], o[3];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++)
      u[i][j] = ld(dU + du_off + (size_t)(i * WA + j) * us + (size_t)c * CO + co, n, 1);
#pragma unroll
  for (int j = 0; j < WA; j++) {
    gt_1d(o, COLW(u, j));
#pragma unroll
    for (int i = 0; i < 3; i++) t[i][j] = o[i];
  }
#pragma unroll
  for (int i = 0; i < 3; i++) {
    gt_1d(o, ROWW(t, i));
#pragma unroll
    for (int j = 0; j < 3; j++) st(dw + dw_off + ((size_t)(i * 3 + j) * C + c) * CO + co, n, o[j]);
  }
}
