/* Conv2D's Winograd passes (src/backend/winograd.c, cl/winograd.cl) against the
 * double-precision reference (tests/ref's ref_conv2d_*, itself checked by finite
 * differences in test_ref): output, input gradient and kernel and bias
 * gradients, for F(2x2,3x3) and F(4x4,3x3), beside the direct kernels (im2col
 * or in place: the replica's winograd tile 0) on the same layer and data, so
 * that each line states the worst error relative to the largest reference
 * value of each pass and algorithm. Odd image sizes (tiles overhanging the
 * edge), channels not multiples of 8, batch 1 to 3, 'same', 'valid' and folded
 * zero padding, with and without bias and ReLU; then ResNet50's 3x3 layers at
 * 96 px and the reference CNN's second convolution (skipped in small mode).
 * A pass run twice gives the same bits (not checked on Oclgrind: simulated()). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Relative to the largest reference value: direct sums as test_layer_kinds, and
 * F(2x2) no worse; F(4x4)'s transforms (matrices of 1/24 to 8) round more. */
#define TOL 2e-5 /* direct and F(2x2) */
#define TOL_F4 1e-4

typedef struct wino_case {
  const char *entry;
  clt_pad pad; /* folded ZeroPadding2D */
  int B, H, W, C;
} wino_case;

static const wino_case cases[] = {
    {"w_same=Conv2D(5,3x3,s1,same,relu)", {0, 0, 0, 0}, 1, 7, 9, 3},
    {"w_valid=Conv2D(17,3x3,s1,valid)", {0, 0, 0, 0}, 2, 8, 7, 12},
    {"w_nobias=Conv2D(16,3x3,s1,same,nobias,relu)", {0, 0, 0, 0}, 3, 9, 9, 9},
    {"w_pad=Conv2D(8,3x3,s1,valid,relu)", {1, 1, 1, 1}, 2, 6, 5, 10},
    {"w_asym=Conv2D(6,3x3,s1,valid,nobias)", {0, 1, 0, 1}, 2, 5, 6, 4},
    {"w_pad2=Conv2D(7,3x3,s1,valid)", {1, 2, 2, 0}, 1, 5, 5, 6},
    {"w_pad3=Conv2D(3,3x3,s1,valid,relu)", {3, 0, 0, 1}, 1, 4, 5, 5},
    /* 18 inputs and 24 outputs: whole 16 x 16 blocks of the flipped kernel
     * and tails, float16 lanes and tails. */
    {"w_blocks=Conv2D(24,3x3,s1,same,relu)", {0, 0, 0, 0}, 1, 3, 3, 18},
};

/* ResNet50's 3x3 layers at 96 px (conv2 to conv5: 24, 12, 6 and 3 px) and the
 * reference CNN's second convolution, one example each (the double reference
 * takes most of the test's time). */
static const wino_case model_cases[] = {
    {"conv2_block1_2=Conv2D(64,3x3,s1,same,nobias)", {0, 0, 0, 0}, 1, 24, 24, 64},
    {"conv3_block2_2=Conv2D(128,3x3,s1,same,nobias)", {0, 0, 0, 0}, 1, 12, 12, 128},
    {"conv4_block2_2=Conv2D(256,3x3,s1,same,nobias)", {0, 0, 0, 0}, 1, 6, 6, 256},
    {"conv5_block2_2=Conv2D(512,3x3,s1,same,nobias)", {0, 0, 0, 0}, 1, 3, 3, 512},
    {"cnn_conv2d_1=Conv2D(80,3x3,s1,valid,relu)", {0, 0, 0, 0}, 1, 13, 13, 64},
};

static const char *algo_name(int tile) {
  return tile == 4 ? "F(4x4,3x3)" : tile == 2 ? "F(2x2,3x3)" : "direct";
}

/* Compares n floats of m bit for bit with `first`. */
static void same_bits(const char *what, cl_mem m, const float *first, size_t n) {
  float *again = hnew(n * sizeof *again);
  download_f(m, 0, again, n);
  expect(what, memcmp(again, first, n * sizeof *again) != 0, 1);
}

/* width: the vector width the replica's device is taken to have (the CPU
 * variant's F(2x2) transforms take 16 channels a work-item at 16, else 8), 0 for its
 * own. */
static void run_case(const wino_case *t, int tile, cl_uint width) {
  set_case("%s %s pad %d,%d,%d,%d B%d %dx%dx%d%s:", t->entry, algo_name(tile), t->pad.top,
           t->pad.bottom, t->pad.left, t->pad.right, t->B, t->H, t->W, t->C,
           width == 16 ? " width 16"
           : width     ? " width 8"
                       : "");
  if (width) R->device.float_vector_width = width;
  clt_layer l;
  if (api_failed(clt_layer_init(&l, t->entry, &E), "init")) goto done;
  l.pad = t->pad;
  const clt_shape in[1] = {{t->H, t->W, t->C}};
  if (api_failed(l.ops->setup(&l, in, &E), "setup")) goto done;
  const int B = t->B;
  const double work = (double)B * l.out.h * l.out.w * 9 * t->C * l.out.c;
  /* Small mode keeps w_pad (10 channels and 8 filters: the CPU variant's lanes
   * and their tail) and w_blocks. */
  if (skip_large(work)) goto done;
  R->winograd = tile;
  const size_t nx = clt_shape_size(l.in) * B, ny = clt_shape_size(l.out) * B;
  const size_t flat = place_params(&l);
  double *params = dnew(flat), *grads_ref = dnew(flat), *grads = dnew(flat);
  for (int p = 0; p < l.nparams; p++)
    rand_fill(params + l.params[p].offset, l.params[p].size, -1, 1);
  double *x = dnew(nx), *y = dnew(ny), *y_ref = dnew(ny), *dy = dnew(ny), *dy_ref = dnew(ny);
  double *dx = dnew(nx), *dx_ref = dnew(nx);
  rand_fill(x, nx, -1, 1);
  rand_fill(dy, ny, -1, 1);
  const double tol = tile == 4 ? TOL_F4 : TOL;
  clt_ref_io ref = {
      .batch = B, .train = 1, .params = params, .grads = grads_ref, .x = x, .y = y_ref};
  l.ops->ref_forward(&l, &ref);

  if (api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare")) goto done;
  const size_t ns = clt_layer_scratch_floats(&l, B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(P, 0, params, flat);
  upload(DY, 0, dy, ny);
  clt_layer_io io = layer_io(B, X, Y, DY, DX, P, G, S, NULL);
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  download(Y, 0, y, ny);
  check("y", y, y_ref, ny, tol);
  check_untouched("y tail", Y, ny, TAIL);
  check_untouched("scratch tail", S, ns, TAIL);
  if (!simulated()) {
    float *y_bits = hnew(ny * sizeof *y_bits);
    download_f(Y, 0, y_bits, ny);
    if (api_failed(l.ops->forward(&l, &io, &E), "forward again")) goto done;
    same_bits("y again, bit for bit", Y, y_bits, ny);
  }

  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  memcpy(dy_ref, dy, ny * sizeof *dy);
  ref.y = y, ref.dy = dy_ref, ref.dx = dx_ref;
  l.ops->ref_backward(&l, &ref);
  download(DX, 0, dx, nx);
  check("dx", dx, dx_ref, nx, tol);
  check_untouched("dx tail", DX, nx, TAIL);
  download(G, 0, grads, flat);
  for (int p = 0; p < l.nparams; p++) {
    char what[64];
    snprintf(what, sizeof what, "d%s", l.params[p].name);
    check(what, grads + l.params[p].offset, grads_ref + l.params[p].offset, l.params[p].size, tol);
  }
  check_flat("no write outside the parameters' slots", G, &l, flat, 0, l.nparams - 1);
  if (!simulated()) {
    float *g_bits = hnew(flat * sizeof *g_bits);
    download_f(G, 0, g_bits, flat);
    upload(DY, 0, dy, ny);
    if (api_failed(l.ops->backward(&l, &io, &E), "backward again")) goto done;
    same_bits("gradients again, bit for bit", G, g_bits, flat);
  }
done:
  R->winograd = 0;
  case_end();
}

/* CLTRAIN_WINOGRAD's values, and the choice per pass the backend makes. */
static void test_choice(void) {
  set_case("CLTRAIN_WINOGRAD:");
  const char *values[] = {"off", "2", "4", "", "3", "on"};
  const int want[] = {0, 2, 4, 0, -1, -1};
  for (int i = 0; i < 6; i++) {
    setenv("CLTRAIN_WINOGRAD", values[i], 1);
    char what[64];
    snprintf(what, sizeof what, "\"%s\" reads as %d", values[i], want[i]);
    expect(what, clt_winograd_env() != want[i], 1);
  }
  setenv("CLTRAIN_WINOGRAD", "2", 1);
  const clt_conv_geom g3 = {2, 9, 9, 8, 3, 3, 1, 1, 1, 9, 9},
                      s2 = {2, 9, 9, 8, 3, 3, 2, 1, 1, 5, 5};
  const clt_conv_geom k5 = {2, 9, 9, 8, 5, 5, 1, 2, 2, 9, 9};
  R->winograd = 4;
  clt_conv_algos a = clt_conv_algos_for(R, &g3, 16);
  expect("3x3 stride 1 takes F(4x4) for every pass",
         a.forward != 4 || a.weight_grad != 4 || a.input_grad != 4, 1);
  a = clt_conv_algos_for(R, &s2, 16);
  expect("stride 2 does not", a.forward >= 2 || a.weight_grad >= 2 || a.input_grad >= 2, 1);
  a = clt_conv_algos_for(R, &k5, 16);
  expect("5x5 does not", a.forward >= 2 || a.weight_grad >= 2 || a.input_grad >= 2, 1);
  R->winograd = 0;
  a = clt_conv_algos_for(R, &g3, 16);
  expect("off: none", a.forward >= 2 || a.weight_grad >= 2 || a.input_grad >= 2, 1);
  case_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* The layers' scratch holds Winograd's room only where it is asked for. */
  setenv("CLTRAIN_WINOGRAD", "2", 1);
  replica_open();
  test_choice();
  /* Small mode (Oclgrind): Winograd alone, the direct kernels being covered elsewhere. */
  const int tiles[3] = {2, 4, 0}, ntiles = small_mode() ? 2 : 3;
  const size_t ncases = sizeof cases / sizeof cases[0];
  /* Small mode (Oclgrind, whose device reports no CPU's width) runs each case
   * of the CPU variant (chunk 8) with both lane counts, a fresh replica each
   * (case_end). */
  const cl_uint widths[2] = {16, 8};
  const int nwidths = small_mode() && R->chunk > 1 ? 2 : 1;
  /* $CLT_TEST_TILE=2 or 4: that tile's cases alone (tests/oclgrind.sh runs
   * the two side by side). */
  const char *only = getenv("CLT_TEST_TILE");
  const int tile = only ? atoi(only) : 0;
  /* The same data for each algorithm of a case. */
  for (size_t i = 0; i < ncases; i++)
    for (int k = 0; k < ntiles; k++)
      for (int v = 0; v < nwidths && (!tile || tiles[k] == tile); v++) {
        rng_seed(0x3a7e1 + i);
        run_case(&cases[i], tiles[k], small_mode() ? widths[v] : 0);
      }
  for (size_t i = 0; i < sizeof model_cases / sizeof model_cases[0]; i++)
    for (int k = 0; k < ntiles; k++) {
      if (tile && tiles[k] != tile) continue;
      rng_seed(0x5c0d3 + i);
      run_case(&model_cases[i], tiles[k], 0);
    }
  replica_close();
  return summary();
}
