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

#if WINO_M == 2
__constant float BT[WA][WA] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
__constant float G[WA][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
__constant float AT[WINO_M][WA] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
#elif WINO_M == 4
__constant float BT[WA][WA] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
__constant float G[WA][3] = {{0.25f, 0, 0},
                             {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                             {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                             {1.0f / 24, 1.0f / 12, 1.0f / 6},
                             {1.0f / 24, -1.0f / 12, 1.0f / 6},
                             {0, 0, 1}};
__constant float AT[WINO_M][WA] = {{1, 1, 1, 1, 1, 0},
                                   {0, 1, -1, 2, -2, 0},
                                   {0, 1, 1, 4, 4, 0},
                                   {0, 1, -1, 8, -8, 1}};
#else
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

// G g G^T of the 3x3 kernel g into U at `at`, position t `tstride` floats apart.
static inline void filter_tile(vt g[3][3], __global float *U, const size_t at, const size_t tstride,
                               const int n) {
  vt tg[WA][3];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < 3; j++)
      tg[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      const vt u = tg[i][0] * G[j][0] + tg[i][1] * G[j][1] + tg[i][2] * G[j][2];
      st(U + at + (size_t)(i * WA + j) * tstride, n, u);
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
  vt d[WA][WA], t[WA][WA];
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
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += BT[i][k] * d[k][j];
      t[i][j] = s;
    }
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += t[i][k] * BT[j][k];
      st(V + v_off + (size_t)(i * WA + j) * vs + (size_t)p * C + c, n, s);
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
  vt m[WA][WA], t[WINO_M][WA];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++)
      m[i][j] = ld(M + m_off + (size_t)(i * WA + j) * ms + (size_t)p * CO + co, n, 1);
#pragma unroll
  for (int i = 0; i < WINO_M; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += AT[i][k] * m[k][j];
      t[i][j] = s;
    }
  const vt add = bias_off >= 0 ? ld(bias + bias_off + co, n, 1) : (vt)(0.0f);
#pragma unroll
  for (int i = 0; i < WINO_M; i++)
#pragma unroll
    for (int j = 0; j < WINO_M; j++) {
      const int oy = ty * WINO_M + i, ox = tx * WINO_M + j;
      if (oy >= OH || ox >= OW) continue;
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += t[i][k] * AT[j][k];
      s += add;
      if (relu) s = fmax(s, (vt)(0.0f));
      st(y + (((size_t)b * OH + oy) * OW + ox) * CO + co, n, s);
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
  vt d[WINO_M][WINO_M], t[WA][WINO_M];
#pragma unroll
  for (int i = 0; i < WINO_M; i++)
#pragma unroll
    for (int j = 0; j < WINO_M; j++) {
      const int oy = ty * WINO_M + i, ox = tx * WINO_M + j;
      d[i][j] = oy < OH && ox < OW ? ld(dy + (((size_t)b * OH + oy) * OW + ox) * CO + co, n, 1)
                                   : (vt)(0.0f);
    }
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WINO_M; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WINO_M; k++) s += AT[k][i] * d[k][j];
      t[i][j] = s;
    }
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WINO_M; k++) s += t[i][k] * AT[k][j];
      st(Z + z_off + (size_t)(i * WA + j) * zs + (size_t)p * CO + co, n, s);
    }
}

// dw[i][j][c][co] (HWIO at dw_off) = (G^T dU G)[i][j] with dU[t][c][co] the
// Winograd domain's gradient (sum over tiles of V times Z). Rows: inputs c.
__kernel void wino_filter_grad(__global const float *dU, const int du_off, __global float *dw,
                               const int dw_off, const int C, const int CO, const int us) {
  const int co = LANE0(), c = get_global_id(1);
  if (co >= CO || c >= C) return;
  const int n = min(LANES, CO - co);
  vt u[WA][WA], t[3][WA];
#pragma unroll
  for (int i = 0; i < WA; i++)
#pragma unroll
    for (int j = 0; j < WA; j++)
      u[i][j] = ld(dU + du_off + (size_t)(i * WA + j) * us + (size_t)c * CO + co, n, 1);
#pragma unroll
  for (int i = 0; i < 3; i++)
#pragma unroll
    for (int j = 0; j < WA; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += G[k][i] * u[k][j];
      t[i][j] = s;
    }
#pragma unroll
  for (int i = 0; i < 3; i++)
#pragma unroll
    for (int j = 0; j < 3; j++) {
      vt s = (vt)(0.0f);
#pragma unroll
      for (int k = 0; k < WA; k++) s += t[i][k] * G[k][j];
      st(dw + dw_off + ((size_t)(i * 3 + j) * C + c) * CO + co, n, s);
    }
}
