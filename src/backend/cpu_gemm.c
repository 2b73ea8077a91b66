/* The cpu backend's GEMM and convolutions: cl/gemm.cl's explicitly vectorised
 * kernels, tiled for the device's vector registers, for every shape, and
 * convolutions as GEMMs over the image in place (no im2col matrix). */
#include <stdio.h>

#include "cpu.h"

/* Kernels whose code does not depend on the tile options come from one build of
 * gemm.cl, so PoCL compiles each of them once rather than once per variant. */
static const char *const PLAIN = "";

/* A strided batch (clt_gemm_batched): `count` products, product z's A, B and C
 * at their offsets + z times a, b and c floats. One product: ONE. */
typedef struct own_batch {
  int count, a, b, c;
} own_batch;
static const own_batch ONE = {1, 0, 0, 0};

/* A work-item's block (see cl/gemm.cl): rb sub-blocks of TM rows by NB
 * 16-wide column blocks (NB divides N/16), K taken in chunks of kc so the B
 * chunk (kc x 16NB floats) is reused from cache by every sub-block; `splits`
 * work-items share a long sum (split K). Only TM and NB are build options, so
 * a device compiles one program per register tile (and padding). */
typedef struct own_tiles {
  int tm, nb, rb, cb, kc, splits, pack;
} own_tiles;

/* pack 2: a B^T operand read as stored, each K chunk transposed into gemm16's
 * private array (TRANS_B in cl/gemm.cl). By default for products of at most
 * BT_ROWS rows (one work-item's, in 128-long chunks). */
enum { PACK_TRANS_B = 2, BT_ROWS = 144, BT_KC = 128 };

/* The private copies' sizes in cl/gemm.cl: gemm16's K chunk (FWD_PACK_K),
 * gemm16_at's K chunk and columns a work-item (PACK_K, PACK_COLS). */
enum { FWD_KC = 384, AT_PACK_K = 64, AT_PACK_COLS = 128 };

/* The 16 x 16 tiles along K a work-item of cl/gemm.cl's transpose moves (TR_TILES). */
enum { TR_TILES = 4 };

static const clt_gemm_tiling *tiling_chosen(const clt_replica *r, const clt_gemm_shape *s);

static int largest_divisor(size_t blocks, int limit) {
  for (int d = limit; d > 1; d--) {
    if (blocks % (size_t)d == 0) return d;
  }
  return 1;
}

/* Register tiles follow the device's vector registers (one float16 is one
 * AVX-512 register, two AVX2 ones); docs/performance.md has the measurements
 * behind each choice:
 * - 32 registers (native float width 16): TM=6, NB=4, 24 accumulators with the
 *   B vectors and the broadcast 29 of 32, the best of the tiles tried on the
 *   CNN's and ResNet50's shapes (tests/bench/bench_gemm). N/16 with no divisor
 *   up to 4 (N=80, 2000: 5 blocks) takes NB=5 with TM=4.
 * - 16 registers (width 8: AVX2): TM=6, NB=1, 12 accumulators, 2 for B and the
 *   broadcast (the 6x16 block of BLIS's Haswell kernel); AVX-512's 6x4 would
 *   need 48 registers and spill every accumulator.
 * Forward and input-gradient products (rows of A along K) take RB=12
 * sub-blocks (72 rows) over KC=384: B's chunk (96 KiB at NB=4) is read from
 * memory once and from L2 by the other eleven, where fewer sub-blocks re-read
 * it from memory for long sums; more left too few row blocks for 2 cores.
 * Weight gradients (A^T: M and N small, K the batch's positions) re-read B once
 * per row block, so a work-item takes up to 144 rows in 64-long K chunks (B's
 * chunk stays in L1 for all of them) and K is split for parallelism; and up to
 * 128 columns, cb blocks of 16*NB, each sub-block's X values copied once and
 * used by all of them (AVX2's narrow tiles; AVX-512's 4-block tiles take one
 * block). One block (cb 1) keeps the in-place kernel (own_kernel). */
static own_tiles own_tiling_from(const clt_replica *r, const clt_gemm_shape *s,
                                 const clt_gemm_tiling *chosen) {
  own_tiles t = {.tm = 6, .nb = 1, .rb = 12, .cb = 1, .kc = FWD_KC, .splits = 1};
  const size_t blocks = s->n / 16;
  if (chosen) { /* the tuner's, in place of the rules */
    t.tm = chosen->tm;
    t.nb = chosen->nb;
  } else if (r->device.float_vector_width >= 16) {
    t.nb = largest_divisor(blocks, 4);
    if (t.nb == 1 && blocks % 5 == 0) {
      t.nb = 5;
      t.tm = 4;
    }
  }
  /* B's rows 4 KiB or more apart (weights of 1024 outputs and up): the rows
   * of a 384-long chunk fall into few cache sets and do not stay in L2 for the
   * row sub-blocks; 128-long chunks do. */
  if (!s->trans_a && s->ldb >= 1024 && s->ldb % 1024 == 0) t.kc = 128;
  if (s->trans_a) {
    const size_t rows = s->m < 144 ? s->m : 144;
    t.rb = (int)((rows + (size_t)t.tm - 1) / (size_t)t.tm);
    t.kc = AT_PACK_K;
  }
  /* B^T (not with A^T) over at most BT_ROWS rows: read as stored, a
   * work-item taking all the rows, so each chunk of B is transposed once, as
   * the transposed copy would be, without the copy's pass and launch. Over
   * more rows each row block transposes the chunks again, and the copy (one
   * pass for all) is the faster (docs/performance.md, GEMM tilings). */
  const int bt_in_place = s->trans_b && !s->trans_a && s->m <= BT_ROWS;
  if (bt_in_place) {
    t.kc = BT_KC;
    t.rb = (BT_ROWS + t.tm - 1) / t.tm;
  }
  if (chosen) {
    t.kc = chosen->kc;
    t.rb = chosen->rb;
  }
  t.pack = chosen ? chosen->pack : bt_in_place ? PACK_TRANS_B : t.nb == 1;
  /* Split K (gemm16_at only) when the output has too few work-items to keep a
   * device's cores busy and the sums are long (the first layer's weight
   * gradient: 9 x 64 outputs, K = batch x 676); chunks of at least 512 keep
   * the extra pass small. Otherwise row blocks shrink while there are fewer
   * than 4 work-items per compute unit. */
  const size_t want = 4 * (size_t)(r->device.compute_units ? r->device.compute_units : 1);
  for (;;) {
    const size_t rows = (size_t)t.tm * (size_t)t.rb;
    const size_t items = blocks / (size_t)t.nb * ((s->m + rows - 1) / rows);
    if (s->trans_a && items < 64 && s->k >= 1024 && !s->trans_b && s->ldc == s->n) {
      const size_t splits = s->k / 512;
      t.splits = (int)(splits > 16 ? 16 : splits);
      break;
    }
    if (t.rb == 1 || items >= want) break;
    t.rb = (t.rb + 1) / 2;
  }
  /* Weight gradients: up to AT_PACK_COLS columns a work-item (AVX2: 8
   * blocks of 16), as long as every compute unit keeps 4 work-items. Tiles
   * of 4 blocks and more (AVX-512's) keep one block, read in place: the
   * copies shared by two blocks lost to it on most of ResNet50's weight
   * gradients (the GEMM tuner's choices). */
  if (s->trans_a) {
    const size_t cols = blocks / (size_t)t.nb, rows = (size_t)t.tm * (size_t)t.rb;
    const size_t items = cols * ((s->m + rows - 1) / rows) * (size_t)t.splits;
    const int widest = chosen && chosen->cb ? chosen->cb
                       : t.nb >= 4          ? 1
                                            : AT_PACK_COLS / (16 * t.nb);
    for (int d = widest; d > 1; d--) {
      if (cols % (size_t)d == 0 && items / (size_t)d >= want) {
        t.cb = d;
        break;
      }
    }
  }
  return t;
}

/* The tiling of s: the tuner's choice for it, else the rules above. */
static own_tiles own_tiling(const clt_replica *r, const clt_gemm_shape *s) {
  return own_tiling_from(r, s, tiling_chosen(r, s));
}

/* Whether some window reaches outside the image (the kernels then check taps). */
static int conv_padded(const clt_conv_geom *g) {
  return g->pad_top > 0 || g->pad_left > 0 || (g->oh - 1) * g->stride - g->pad_top + g->kh > g->h ||
         (g->ow - 1) * g->stride - g->pad_left + g->kw > g->w;
}

/* The program of shape s's tiled kernel over geometry g (NULL: a plain
 * matrix). gemm16 takes padding as an argument, so its products share the
 * unpadded program: a program and a kernel variant fewer to compile at the
 * start of a run with a padded convolution (cl/gemm.cl). PACK_B: a chunk of B
 * one block wide (AVX2's tiles: 384 x 16 floats, 24 KiB) is copied into a
 * private array that then stays in L1 for all the sub-blocks (read in place,
 * rows 2-8 KiB apart fall into two of L1's 64 sets); four blocks wide
 * (AVX-512, 96 KiB) the chunk lives in L2 either way and the copy costs. */
static void own_options(const own_tiles *t, const clt_gemm_shape *s, const clt_conv_geom *g,
                        char *buf, size_t size) {
  const int padded = s->trans_a && g && conv_padded(g);
  snprintf(buf, size, "-DTM=%d -DNB=%d -DPADDED=%d -DPACK_B=%d%s", t->tm, t->nb, padded,
           t->pack == 1, t->pack == PACK_TRANS_B ? " -DTRANS_B=1" : "");
}

/* C[c_off + i] = the sum of the `splits` partial products of `count` floats in
 * the scratch (split K), in split order. */
static int sum_splits(clt_replica *r, int splits, int count, cl_mem c, size_t c_off, clt_err *e) {
  cl_kernel sum;
  int status = clt_replica_kernel(r, "gemm.cl", PLAIN, "sum_splits", &sum, e);
  if (status) return status;
  int off = (int)c_off;
  clt_karg args[] = {CLT_ARG(cpu_state(r)->temp),
                     CLT_ARG(splits),
                     CLT_ARG(count),
                     CLT_ARG(count),
                     CLT_ARG(c),
                     CLT_ARG(off)};
  return clt_launch1d(r, sum, "gemm split-K sum", args, 6, (size_t)count, e);
}

/* A plain matrix as the kernels' image geometry (cl/gemm.cl): one 1 x 1 image
 * of `cols` channels per row of A (gemm16) or per row of A's transpose's
 * operand (gemm16_at: a row of the stored [K][M] matrix). */
static clt_conv_geom plain_geom(size_t rows, size_t cols) {
  return (clt_conv_geom){(int)rows, 1, 1, (int)cols, 1, 1, 1, 0, 0, 1, 1};
}

/* The geometry's arguments, in the kernels' order (X and x_off first). */
#define GEOM_ARGS(x, x_off, g)                                                                     \
  CLT_ARG(x), CLT_ARG(x_off), CLT_ARG((g)->h), CLT_ARG((g)->w), CLT_ARG((g)->c), CLT_ARG((g)->kw), \
      CLT_ARG((g)->stride), CLT_ARG((g)->pad_top), CLT_ARG((g)->pad_left), CLT_ARG((g)->oh),       \
      CLT_ARG((g)->ow)

/* One work-item per group: its float16 code is the vector code; PoCL gains
 * nothing from grouping, larger groups are slower, and one group size means
 * one compile of each kernel. */
static int launch_blocks(clt_replica *r, cl_kernel k, const char *name, const clt_karg *args,
                         int nargs, const clt_gemm_shape *s, const own_tiles *t, int splits,
                         const own_batch *z, clt_err *e) {
  const size_t rows = (size_t)t->tm * (size_t)t->rb;
  size_t global[3] = {s->n / (16 * (size_t)(t->nb * t->cb)), (s->m + rows - 1) / rows,
                      (size_t)splits * (size_t)z->count};
  size_t local[3] = {1, 1, 1};
  return clt_launch(r, k, name, args, nargs, 3, global, local, e);
}

/* The kernel of a tiled product: gemm16, or for A^T B gemm16_at (copies shared
 * by several column blocks) or gemm16_at_direct (one block: no copies). */
static const char *own_kernel(const clt_gemm_shape *s, const own_tiles *t) {
  if (!s->trans_a) return "gemm16";
  return t->cb > 1 ? "gemm16_at" : "gemm16_at_direct";
}

/* Shape s's tiling and kernel for geometry g. */
static int tiled_kernel(clt_replica *r, const clt_gemm_shape *s, const clt_conv_geom *g,
                        own_tiles *t, cl_kernel *k, clt_err *e) {
  *t = own_tiling(r, s);
  char options[64];
  own_options(t, s, g, options, sizeof options);
  return clt_replica_kernel(r, "gemm.cl", options, own_kernel(s, t), k, e);
}

/* " conv" in the profile's name of a product over an image. */
static const char *conv_label(const clt_conv_geom *g) {
  return g->kh * g->kw > 1 || g->stride > 1 ? " conv" : "";
}

/* " batched" in the profile's name of a strided batch's launch. */
static const char *batch_label(const own_batch *z) { return z->count > 1 ? " batched" : ""; }

/* The zeros a padded convolution over g reads for taps outside the image (at
 * least g->c floats, grown by clt_conv_reserve); for an unpadded one, any
 * buffer (`any`): the kernels do not read it. */
static int pad_zeros(const clt_replica *r, const clt_conv_geom *g, cl_mem any, cl_mem *out,
                     clt_err *e) {
  *out = conv_padded(g) ? cpu_state(r)->zeros : any;
  if (conv_padded(g) && (!*out || cpu_state(r)->zeros_floats < (size_t)g->c))
    return clt_fail(e, CLT_ERR_INTERNAL, "padded convolution over %d channels not reserved", g->c);
  return CLT_OK;
}

/* C (ldc, N a multiple of 16) = im2col(x)[M][K] * B (ldb) + bias (bias_off >= 0),
 * then ReLU; with accumulate, C += the product instead. s gives M, N, K. */
static int run_gemm16(clt_replica *r, const clt_gemm_shape *s, const clt_conv_geom *g, cl_mem x,
                      int x_off, cl_mem b, int b_off, int ldb, cl_mem c, int c_off, cl_mem bias,
                      int bias_off, int relu, int accumulate, const own_batch *z, clt_err *e) {
  own_tiles t;
  cl_kernel k;
  int status = tiled_kernel(r, s, g, &t, &k, e);
  if (status) return status;
  int m = (int)s->m, n = (int)s->n, kk = (int)s->k, ldc = (int)s->ldc, padded = conv_padded(g);
  if (!bias) bias = c; /* any valid buffer: not read when bias_off < 0 */
  cl_mem zeros;
  if ((status = pad_zeros(r, g, c, &zeros, e))) return status;
  clt_karg args[] = {CLT_ARG(m),          CLT_ARG(n),      CLT_ARG(kk),   GEOM_ARGS(x, x_off, g),
                     CLT_ARG(b),          CLT_ARG(b_off),  CLT_ARG(ldb),  CLT_ARG(c),
                     CLT_ARG(c_off),      CLT_ARG(ldc),    CLT_ARG(bias), CLT_ARG(bias_off),
                     CLT_ARG(relu),       CLT_ARG(t.rb),   CLT_ARG(t.kc), CLT_ARG(zeros),
                     CLT_ARG(accumulate), CLT_ARG(padded), CLT_ARG(z->a), CLT_ARG(z->b),
                     CLT_ARG(z->c)};
  char name[64];
  snprintf(name, sizeof name, "gemm16 %zux%zux%zu%s%s%s", s->m, s->n, s->k, conv_label(g),
           s->trans_b ? " Bt" : "", batch_label(z));
  return launch_blocks(r, k, name, args, 31, s, &t, 1, z, e);
}

/* C (ldc, N a multiple of 16) = im2col(x)^T * B (ldb): s gives M, N, K of the
 * product (K: im2col's rows); split K when the tiling says so. */
static int run_gemm16_at(clt_replica *r, const clt_gemm_shape *s, const clt_conv_geom *g, cl_mem x,
                         int x_off, cl_mem b, int b_off, int ldb, cl_mem c, int c_off,
                         const own_batch *z, clt_err *e) {
  own_tiles t;
  cl_kernel k;
  int status = tiled_kernel(r, s, g, &t, &k, e);
  if (status) return status;
  /* A batch's products fill the device without splitting K. */
  int splits = z->count > 1 ? 1 : t.splits;
  /* The scratch was sized at the largest batch, where this shape may not have
   * split (more rows, more blocks): never split past what it holds. */
  while (splits > 1 && (size_t)splits * s->m * s->n * sizeof(float) > cpu_state(r)->temp_bytes)
    splits--;
  int m = (int)s->m, n = (int)s->n, kk = (int)s->k, ldc = (int)s->ldc;
  int k_split = (kk + splits - 1) / splits, c_split = m * n, out_off = splits > 1 ? 0 : c_off;
  cl_mem out = splits > 1 ? cpu_state(r)->temp : c; /* partial products, summed below */
  cl_mem zeros;
  if ((status = pad_zeros(r, g, c, &zeros, e))) return status;
  clt_karg args[] = {CLT_ARG(m),       CLT_ARG(n),       CLT_ARG(kk),      GEOM_ARGS(x, x_off, g),
                     CLT_ARG(b),       CLT_ARG(b_off),   CLT_ARG(ldb),     CLT_ARG(out),
                     CLT_ARG(out_off), CLT_ARG(ldc),     CLT_ARG(t.rb),    CLT_ARG(t.cb),
                     CLT_ARG(t.kc),    CLT_ARG(k_split), CLT_ARG(c_split), CLT_ARG(zeros),
                     CLT_ARG(splits),  CLT_ARG(z->a),    CLT_ARG(z->b),    CLT_ARG(z->c)};
  char name[64];
  snprintf(name, sizeof name, "gemm16 %zux%zux%zu At%s%s", s->m, s->n, s->k, conv_label(g),
           batch_label(z));
  if ((status = launch_blocks(r, k, name, args, 30, s, &t, splits, z, e))) return status;
  return splits > 1 ? sum_splits(r, splits, c_split, c, (size_t)c_off, e) : CLT_OK;
}

/* The columns past the last multiple of 16 (bias_off < 0: no bias). */
static int own_tail(clt_replica *r, const clt_gemm_shape *s, cl_mem a, int ao, int tb, cl_mem b,
                    int bo, int ldb, cl_mem c, int co, cl_mem bias, int bias_off, int relu,
                    int accumulate, const own_batch *z, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(r, "gemm.cl", PLAIN, "gemm_tail", &k, e);
  if (status) return status;
  int m = (int)s->m, n = (int)s->n, kk = (int)s->k, n0 = (int)(s->n - s->n % 16), ta = s->trans_a,
      lda = (int)s->lda, ldc = (int)s->ldc;
  if (!bias) bias = c; /* any valid buffer: not read when bias_off < 0 */
  clt_karg args[] = {CLT_ARG(m),        CLT_ARG(n),    CLT_ARG(kk),         CLT_ARG(n0),
                     CLT_ARG(ta),       CLT_ARG(a),    CLT_ARG(ao),         CLT_ARG(lda),
                     CLT_ARG(tb),       CLT_ARG(b),    CLT_ARG(bo),         CLT_ARG(ldb),
                     CLT_ARG(c),        CLT_ARG(co),   CLT_ARG(ldc),        CLT_ARG(bias),
                     CLT_ARG(bias_off), CLT_ARG(relu), CLT_ARG(accumulate), CLT_ARG(z->a),
                     CLT_ARG(z->b),     CLT_ARG(z->c)};
  char name[64];
  snprintf(name, sizeof name, "gemm tail %zux%zux%zu%s%s%s", s->m, s->n % 16, s->k,
           s->trans_a ? " At" : "", s->trans_b ? " Bt" : "", batch_label(z));
  if (z->count == 1) return clt_launch1d(r, k, name, args, 22, s->m, e);
  /* Product z along the second dimension, groups as the 1-D launch's. */
  const size_t local = clt_replica_local_1d(r, k);
  size_t global[2] = {(s->m + local - 1) / local * local, (size_t)z->count}, group[2] = {local, 1};
  return clt_launch(r, k, name, args, 22, 2, global, group, e);
}

/* The row length of a transposed B operand in the scratch: N plus a cache line
 * when N floats are a multiple of 512 bytes. Rows 1-8 KiB apart fall into a
 * few cache sets (4 KiB aliasing), and the K chunk of B that gemm16 reuses from
 * cache for each of its row sub-blocks would not fit (ResNet50's products with
 * N = 1024 or 2048). */
static size_t transposed_ld(size_t n) { return n % 128 == 0 ? n + 16 : n; }

/* The transpose kernel (cl/gemm.cl) into the GEMM scratch: `count` blocks, block
 * z's K rows of N floats (ld apart) at src_off + z*src_step written as N rows of
 * K floats (ldd apart) at z*dst_step. Groups of one work-item: PoCL compiles a kernel
 * for each group size, and the shapes would otherwise each pick their own. */
static int transpose(clt_replica *r, const char *label, cl_mem src, int src_off, int ld, int K,
                     int N, int ldd, int count, int src_step, int dst_step, clt_err *e) {
  /* The last block's last row ends the written range (dst_step >= 0). */
  const size_t end = (size_t)(count - 1) * (size_t)dst_step + (size_t)(K - 1) * ldd + (size_t)N;
  if (end * sizeof(float) > cpu_state(r)->temp_bytes || !cpu_state(r)->temp)
    return clt_fail(e, CLT_ERR_INTERNAL, "%s: %zu floats, scratch of %zu not reserved", label, end,
                    cpu_state(r)->temp_bytes / sizeof(float));
  cl_kernel t;
  int status = clt_replica_kernel(r, "gemm.cl", PLAIN, "transpose", &t, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(src), CLT_ARG(src_off),  CLT_ARG(ld),
                     CLT_ARG(K),   CLT_ARG(N),        CLT_ARG(cpu_state(r)->temp),
                     CLT_ARG(ldd), CLT_ARG(src_step), CLT_ARG(dst_step)};
  const size_t strip = (size_t)16 * TR_TILES; /* K a work-item moves */
  size_t global[3] = {((size_t)K + strip - 1) / strip, ((size_t)N + 15) / 16, (size_t)count};
  size_t local[3] = {1, 1, 1};
  return clt_launch(r, t, label, args, 9, 3, global, local, e);
}

/* A^T B with a short K (a dense layer's weight gradient: K is the batch) runs
 * as A^T laid out as rows (the transpose kernel, into the scratch) times B: the
 * transpose moves M*K floats against the product's 2*M*N*K flops, and the
 * product is the forward kernel, which the layer compiles anyway, where the
 * A^T kernels would be one variant more to compile at a run's start. The weight gradients of
 * convolutions (K: every output position of the batch; A never written out) keep the A^T kernels.
 */
static int at_via_transpose(const clt_gemm_shape *s) {
  return s->trans_a && !s->trans_b && s->k <= 512 && s->n >= 16;
}

/* at_via_transpose for a run of s on r (`count` products: A^T of each): when
 * the shape was reserved with a longer K (a larger batch than this slice's: a
 * smaller last batch), the scratch may not hold A^T and the A^T kernels,
 * reserved then, take it. */
static int run_via_transpose(const clt_replica *r, const clt_gemm_shape *s, int count) {
  return at_via_transpose(s) &&
         (size_t)count * s->m * s->k * sizeof(float) <= cpu_state(r)->temp_bytes;
}

/* bias_offset < 0: no bias. accumulate: C += op(A) op(B) (beta 1; not with
 * trans_a). z: the strided batch (ONE: a single product); a transposed operand
 * of each product goes to the scratch, one after the other. */
static int own_gemm(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                    size_t b_off, cl_mem c, size_t c_off, cl_mem bias, long bias_offset, int relu,
                    int accumulate, const own_batch *z, clt_err *e) {
  /* The kernels read A as rows of K (or, transposed, of M) floats. */
  if (s->lda != (s->trans_a ? s->m : s->k) ||
      (s->trans_a && (bias_offset >= 0 || relu || accumulate)))
    return clt_fail(e, CLT_ERR_INTERNAL, "GEMM %zux%zux%zu: unsupported layout", s->m, s->n, s->k);
  int status;
  int n = (int)s->n, kk = (int)s->k, ldb = (int)s->ldb, ao = (int)a_off, bo = (int)b_off,
      co = (int)c_off;
  own_batch zb = *z;          /* steps of the operands as the kernels read them */
  clt_gemm_shape blocks = *s; /* the columns gemm16 takes */
  blocks.n -= s->n % 16;
  /* B^T read as stored (gemm16's TRANS_B; the tail reads it strided), or laid
   * out as rows first. */
  const int in_place = s->trans_b && (blocks.n == 0 || own_tiling(r, &blocks).pack == PACK_TRANS_B);
  if (s->trans_b && !in_place) {
    /* B is [N][K]: lay it out as [K][N] in the scratch first (weights: small). */
    const int ldt = (int)transposed_ld(s->n);
    if ((status = transpose(r, "gemm transpose", b, bo, ldb, kk, n, ldt, z->count, z->b, kk * ldt,
                            e)))
      return status;
    b = cpu_state(r)->temp;
    bo = 0;
    ldb = ldt;
    zb.b = kk * ldt;
  }
  int bias_off = (int)bias_offset;
  if (s->n % 16) {
    status = own_tail(r, s, a, ao, in_place, b, bo, ldb, c, co, bias, bias_off, relu, accumulate,
                      &zb, e);
    if (status || s->n < 16) return status;
  }
  if (run_via_transpose(r, s, z->count)) {
    /* [K][M] as [M][K] rows in the scratch, then the plain product. */
    const int mk = (int)(s->m * s->k);
    if ((status = transpose(r, "gemm transpose A", a, ao, (int)s->lda, (int)s->m, kk, kk, z->count,
                            z->a, mk, e)))
      return status;
    blocks.trans_a = 0;
    blocks.lda = s->k;
    zb.a = mk;
    const clt_conv_geom g = plain_geom(s->m, s->k);
    return run_gemm16(r, &blocks, &g, cpu_state(r)->temp, 0, b, bo, ldb, c, co, NULL, -1, 0, 0, &zb,
                      e);
  }
  if (s->trans_a) {
    const clt_conv_geom g = plain_geom(s->k, s->m);
    return run_gemm16_at(r, &blocks, &g, a, ao, b, bo, ldb, c, co, &zb, e);
  }
  const clt_conv_geom g = plain_geom(s->m, s->k);
  return run_gemm16(r, &blocks, &g, a, ao, b, bo, ldb, c, co, bias, bias_off, relu, accumulate, &zb,
                    e);
}

static void note_shape(clt_replica *r, const clt_gemm_shape *s, size_t count);

/* Grows the scratch buffer to at least `bytes`. */
static int grow_temp(clt_replica *r, size_t bytes, clt_err *e) {
  if (bytes <= cpu_state(r)->temp_bytes) return CLT_OK;
  if (cpu_state(r)->temp) {
    clReleaseMemObject(cpu_state(r)->temp);
    r->allocated_bytes -= cpu_state(r)->temp_bytes;
    cpu_state(r)->temp = NULL;
    cpu_state(r)->temp_bytes = 0;
  }
  int status = clt_replica_alloc(r, bytes, "GEMM scratch", &cpu_state(r)->temp, e);
  if (status == CLT_OK) cpu_state(r)->temp_bytes = bytes;
  return status;
}

/* The kernels and scratch of `count` products of shape s (clt_gemm_batched;
 * count 1: clt_gemm): transposed operands for all of them; split K only for
 * one. */
static int gemm_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0 || count == 0) return CLT_OK;
  clt_gemm_shape blocks = *s;
  blocks.n -= s->n % 16;
  const int via = at_via_transpose(s);
  if (via) {
    blocks.trans_a = 0;
    blocks.lda = s->k;
  }
  if (blocks.n) note_shape(r, &blocks, count);
  const own_tiles tiles = own_tiling(r, &blocks);
  char options[64];
  cl_kernel k;
  own_options(&tiles, &blocks, NULL, options, sizeof options);
  int status = CLT_OK;
  if (blocks.n)
    status = clt_replica_kernel(r, "gemm.cl", options, own_kernel(&blocks, &tiles), &k, e);
  if (!status && s->n % 16) status = clt_replica_kernel(r, "gemm.cl", PLAIN, "gemm_tail", &k, e);
  /* B^T laid out as rows too: a tiling the GEMM tuner may choose (pack 0, 1). */
  if (!status && s->trans_b) status = clt_replica_kernel(r, "gemm.cl", PLAIN, "transpose", &k, e);
  if (!status && s->trans_b)
    status = grow_temp(r, count * s->k * transposed_ld(s->n) * sizeof(float), e);
  if (!status && via) status = clt_replica_kernel(r, "gemm.cl", PLAIN, "transpose", &k, e);
  if (!status && via) status = grow_temp(r, count * s->m * s->k * sizeof(float), e);
  if (!status && blocks.n && tiles.splits > 1 && count == 1) {
    status = clt_replica_kernel(r, "gemm.cl", PLAIN, "sum_splits", &k, e);
    if (!status) status = grow_temp(r, (size_t)tiles.splits * s->m * s->n * sizeof(float), e);
  }
  return status;
}

int clt_cpu_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  return gemm_reserve(r, s, 1, e);
}

int clt_cpu_gemm_batched_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count,
                                 clt_err *e) {
  return gemm_reserve(r, s, count, e);
}

/* The kernels' offsets and steps are ints: the batch's last product must end
 * below 2^31 floats. */
static int batch_fits(const clt_gemm_shape *s, const clt_gemm_batch *bt, size_t a_off, size_t b_off,
                      size_t c_off, own_batch *z, clt_err *e) {
  const size_t last = bt->count - 1, limit = (size_t)1 << 31;
  const size_t a_end = a_off + last * bt->a_stride + (s->trans_a ? s->k * s->lda : s->m * s->lda);
  const size_t b_end = b_off + last * bt->b_stride + (s->trans_b ? s->n * s->ldb : s->k * s->ldb);
  const size_t c_end = c_off + last * bt->c_stride + s->m * s->ldc;
  if (bt->count >= limit || a_end >= limit || b_end >= limit || c_end >= limit)
    return clt_fail(e, CLT_ERR_INTERNAL, "batched GEMM %zux%zux%zu x %zu: past 2^31 floats", s->m,
                    s->n, s->k, bt->count);
  *z = (own_batch){(int)bt->count, (int)bt->a_stride, (int)bt->b_stride, (int)bt->c_stride};
  return CLT_OK;
}

int clt_cpu_gemm_batched(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt,
                         float alpha, cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta,
                         cl_mem c, size_t c_off, clt_err *e) {
  if (alpha != 1.0f || !(beta == 0.0f || (beta == 1.0f && !s->trans_a))) {
    return clt_fail(e, CLT_ERR_INTERNAL, "batched GEMM %zux%zux%zu with alpha %g, beta %g%s", s->m,
                    s->n, s->k, (double)alpha, (double)beta, s->trans_a ? " and A^T" : "");
  }
  own_batch z;
  int status = batch_fits(s, bt, a_off, b_off, c_off, &z, e);
  if (status) return status;
  return own_gemm(r, s, a, a_off, b, b_off, c, c_off, NULL, -1, 0, beta == 1.0f, &z, e);
}

int clt_cpu_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
                 cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  /* The kernels take C = op(A) op(B), or C += op(A) op(B) without A^T (an
   * input gradient added into one that exists: see clt_layer_io.dx_accumulate). */
  if (alpha != 1.0f || !(beta == 0.0f || (beta == 1.0f && !s->trans_a))) {
    return clt_fail(e, CLT_ERR_INTERNAL, "GEMM %zux%zux%zu with alpha %g, beta %g%s", s->m, s->n,
                    s->k, (double)alpha, (double)beta, s->trans_a ? " and A^T" : "");
  }
  return own_gemm(r, s, a, a_off, b, b_off, c, c_off, NULL, -1, 0, beta == 1.0f, &ONE, e);
}

int clt_cpu_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                          size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                          int relu, clt_err *e) {
  return own_gemm(r, s, a, a_off, b, b_off, c, c_off, bias, (long)bias_offset, relu, 0, &ONE, e);
}

/* ---- Convolutions over the image in place (cl/gemm.cl's im2col geometry) ---- */

/* The products' shapes (as im2col's matrices would have them). */
static clt_gemm_shape conv_fwd_shape(const clt_conv_geom *g, int filters) {
  const size_t m = (size_t)g->batch * g->oh * g->ow, k = (size_t)g->kh * g->kw * g->c;
  return (clt_gemm_shape){0, 0, m, (size_t)filters, k, k, (size_t)filters, (size_t)filters};
}
static clt_gemm_shape conv_dw_shape(const clt_conv_geom *g, int filters) {
  const size_t m = (size_t)g->batch * g->oh * g->ow, k = (size_t)g->kh * g->kw * g->c;
  return (clt_gemm_shape){1, 0, k, (size_t)filters, m, k, (size_t)filters, (size_t)filters};
}

/* The kernels and scratch of a convolution's forward product over g, and with
 * weight_grad of its weight gradient too (an input gradient's convolution has
 * none: reserving it would build a program no step uses). */
static int conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, int weight_grad,
                        clt_err *e) {
  if (filters % 16) { /* the tail columns go through gemm_tail over an im2col matrix */
    return clt_fail(e, CLT_ERR_INTERNAL, "implicit convolution with %d filters", filters);
  }
  const clt_gemm_shape fwd = conv_fwd_shape(g, filters), dw = conv_dw_shape(g, filters);
  note_shape(r, &fwd, 1);
  if (weight_grad) note_shape(r, &dw, 1);
  const own_tiles tf = own_tiling(r, &fwd), tw = own_tiling(r, &dw);
  char options[64];
  cl_kernel k;
  own_options(&tf, &fwd, g, options, sizeof options);
  int status = clt_replica_kernel(r, "gemm.cl", options, "gemm16", &k, e);
  if (!status && conv_padded(g) && cpu_state(r)->zeros_floats < (size_t)g->c) {
    /* Grown to the widest padded input; clt_replica_alloc zeroes it. */
    if (cpu_state(r)->zeros) {
      clReleaseMemObject(cpu_state(r)->zeros);
      r->allocated_bytes -= cpu_state(r)->zeros_floats * sizeof(float);
      cpu_state(r)->zeros = NULL;
      cpu_state(r)->zeros_floats = 0;
    }
    status = clt_replica_alloc(r, (size_t)g->c * sizeof(float), "convolution padding zeros",
                               &cpu_state(r)->zeros, e);
    if (!status) cpu_state(r)->zeros_floats = (size_t)g->c;
  }
  if (!weight_grad) return status;
  own_options(&tw, &dw, g, options, sizeof options);
  if (!status) status = clt_replica_kernel(r, "gemm.cl", options, own_kernel(&dw, &tw), &k, e);
  if (!status && tw.splits > 1) {
    status = clt_replica_kernel(r, "gemm.cl", PLAIN, "sum_splits", &k, e);
    if (!status) status = grow_temp(r, (size_t)tw.splits * dw.m * dw.n * sizeof(float), e);
  }
  return status;
}

int clt_cpu_conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e) {
  return conv_reserve(r, g, filters, 1, e);
}

int clt_cpu_conv_forward(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                         size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e) {
  const clt_gemm_shape s = conv_fwd_shape(g, filters);
  if (s.m == 0) return CLT_OK;
  return run_gemm16(r, &s, g, x, 0, w, (int)w_off, filters, y, 0, bias, (int)bias_off, relu, 0,
                    &ONE, e);
}

/* The input gradient of a stride-1 convolution is a convolution of dy with the
 * kernel flipped in space and transposed in channels, Wf[ky'][kx'][f][c] =
 * W[KH-1-ky'][KW-1-kx'][c][f], over dy as the image (OH x OW x filters) with
 * KH-1-PT rows and KW-1-PL columns of zeros before it, giving H x W x C. Run
 * that way it needs no column matrix (B*OH*OW x KH*KW*C floats written, then
 * gathered by col2im): ResNet50's 3x3 input gradients at 224 px wrote 9 times
 * their output. */
clt_conv_algos clt_cpu_conv_algos(const clt_replica *r, const clt_conv_geom *g, int filters) {
  (void)r;
  clt_conv_algos a = {CLT_CONV_IM2COL, CLT_CONV_IM2COL, CLT_CONV_IM2COL};
  /* Filters in float16 blocks: the tail columns would need an im2col matrix. */
  if (filters % 16 == 0) a.forward = a.weight_grad = CLT_CONV_IN_PLACE;
  if (a.forward && g->stride == 1 && g->c % 16 == 0 && (g->kh > 1 || g->kw > 1) &&
      g->pad_top <= g->kh - 1 && g->pad_left <= g->kw - 1)
    a.input_grad = CLT_CONV_IN_PLACE;
  return a;
}

static clt_conv_geom dx_geom(const clt_conv_geom *g, int filters) {
  return (clt_conv_geom){g->batch,
                         g->oh,
                         g->ow,
                         filters,
                         g->kh,
                         g->kw,
                         1,
                         g->kh - 1 - g->pad_top,
                         g->kw - 1 - g->pad_left,
                         g->h,
                         g->w};
}

int clt_cpu_conv_dx_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e) {
  const clt_conv_geom d = dx_geom(g, filters);
  cl_kernel k;
  int status = conv_reserve(r, &d, g->c, 0, e);
  if (!status) status = clt_replica_kernel(r, "flip.cl", PLAIN, "flip_taps", &k, e);
  if (!status)
    status = grow_temp(r, (size_t)g->kh * g->kw * g->c * (size_t)filters * sizeof(float), e);
  return status;
}

int clt_cpu_conv_dx(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                    size_t w_off, cl_mem dx, clt_err *e) {
  const clt_conv_geom d = dx_geom(g, filters);
  const clt_gemm_shape s = conv_fwd_shape(&d, g->c);
  if (s.m == 0) return CLT_OK;
  if (s.k * s.n * sizeof(float) > cpu_state(r)->temp_bytes)
    return clt_fail(e, CLT_ERR_INTERNAL, "flipped kernel of %zu floats not reserved", s.k * s.n);
  /* Tap T-1-z's C x filters block, transposed, to tap z (cl/flip.cl: a
   * work-item per 16 x 16 block). */
  cl_kernel k;
  int status = clt_replica_kernel(r, "flip.cl", PLAIN, "flip_taps", &k, e);
  if (status) return status;
  const int taps = g->kh * g->kw, off = (int)w_off, zero = 0;
  clt_karg args[] = {CLT_ARG(w),    CLT_ARG(off),  CLT_ARG(cpu_state(r)->temp),
                     CLT_ARG(zero), CLT_ARG(g->c), CLT_ARG(filters),
                     CLT_ARG(taps)};
  status = clt_launch_rows(r, k, "conv kernel flip", args, 7, ((size_t)g->c + 15) / 16 * r->chunk,
                           (size_t)taps * (((size_t)filters + 15) / 16), 1, e);
  if (status) return status;
  return run_gemm16(r, &s, &d, dy, 0, cpu_state(r)->temp, 0, g->c, dx, 0, NULL, -1, 0, 0, &ONE, e);
}

int clt_cpu_conv_dw(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy,
                    cl_mem dw, size_t dw_off, clt_err *e) {
  const clt_gemm_shape s = conv_dw_shape(g, filters);
  if (s.k == 0)
    return clt_replica_fill(r, dw, dw_off, s.m * s.n, 0.0f, "an empty kernel gradient", e);
  return run_gemm16_at(r, &s, g, x, 0, dy, 0, filters, dw, (int)dw_off, &ONE, e);
}

/* ---- Tilings chosen per shape (the GEMM tuner: src/engine/gemm_tuner.c) ---- */

static const clt_gemm_tiling *tiling_chosen(const clt_replica *r, const clt_gemm_shape *s) {
  const clt_cpu_state *c = cpu_state(r);
  const int at = c ? clt_gemm_table_find(c->tiled, c->ntilings, s) : -1;
  return at < 0 ? NULL : &c->tilings[at];
}

static void note_shape(clt_replica *r, const clt_gemm_shape *s, size_t count) {
  clt_gemm_list_note(&cpu_state(r)->noted, s, count);
}

/* Float16 accumulators a register tile may hold: AVX-512's 32 registers less
 * the B vectors and the broadcast; a float16 is two of AVX2's 16. */
static int tile_fits(const clt_replica *r, int tm, int nb) {
  const int regs = r->device.float_vector_width >= 16 ? 32 : 8;
  return tm * nb + nb + 1 <= regs;
}

int clt_cpu_gemm_tiling_valid(const clt_replica *r, const clt_gemm_shape *s,
                              const clt_gemm_tiling *t) {
  const size_t blocks = s->n / 16;
  if (t->tm < 1 || t->tm > 8 || t->nb < 1 || t->nb > 8 || blocks == 0 ||
      blocks % (size_t)t->nb != 0 || !tile_fits(r, t->tm, t->nb) || t->rb < 1 || t->rb > 64 ||
      t->kc < 1 || t->pack < 0 || t->pack > PACK_TRANS_B || t->cb < 0)
    return 0;
  if (t->pack == PACK_TRANS_B && (!s->trans_b || s->trans_a)) return 0;
  if (s->trans_a) /* gemm16_at's private copies: PACK_K rows, PACK_COLS columns */
    return t->kc <= AT_PACK_K && t->pack == 0 && t->cb * 16 * t->nb <= AT_PACK_COLS &&
           (t->cb == 0 || blocks / (size_t)t->nb % (size_t)t->cb == 0);
  return t->cb == 0 && t->kc <= 1024 && (!t->pack || t->kc <= FWD_KC);
}

int clt_cpu_gemm_candidates(const clt_replica *r, const clt_gemm_shape *s, clt_gemm_tiling *out) {
  const own_tiles d = own_tiling_from(r, s, NULL); /* the default */
  const int wide = r->device.float_vector_width >= 16;
  /* Register tiles around the defaults, two (A^T: three) that fit: AVX-512's
   * 6x4 against 4x4, 8x2, 8x3, and N of 5 blocks' 4x5 against 5x5, 3x5; AVX2's
   * 6x1 against 4x1, 8x1, 3x2. */
  static const int tiles16[][2] = {{6, 4}, {4, 4}, {8, 2}, {8, 3}, {4, 5}, {5, 5}, {6, 2}, {3, 5}};
  static const int tiles8[][2] = {{6, 1}, {4, 1}, {8, 1}, {3, 2}, {2, 2}};
  const int(*tiles)[2] = wide ? tiles16 : tiles8;
  const int ntiles = wide ? 8 : 5;
  const int rb = s->trans_a ? d.rb : 12;
  clt_gemm_tiling cand[16];
  int n = 0;
  /* B^T read as stored (gemm16's TRANS_B, pack 2), each K chunk transposed
   * once for a work-item's rows: 144 or 288 rows over 128- or 384-long
   * chunks, against the transposed copy (the default past BT_ROWS rows; the
   * candidate with PACK_B flipped below otherwise). */
  const int bt = s->trans_b && !s->trans_a;
  if (bt && d.pack == PACK_TRANS_B) { /* the transposed copy first: never left out */
    const int kc = s->ldb >= 1024 && s->ldb % 1024 == 0 ? 128 : FWD_KC;
    cand[n] = (clt_gemm_tiling){d.tm, d.nb, kc, 12, d.nb == 1, 0};
    if (clt_cpu_gemm_tiling_valid(r, s, &cand[n])) n++;
  }
  if (bt) {
    static const int kr[][2] = {{BT_KC, 24}, {BT_KC, 48}, {FWD_KC, 24}};
    for (int i = 0; i < 3; i++) {
      cand[n] = (clt_gemm_tiling){d.tm, d.nb, kr[i][0], kr[i][1] * 6 / d.tm, PACK_TRANS_B, 0};
      const int same = d.pack == PACK_TRANS_B && d.kc == cand[n].kc && d.rb == cand[n].rb;
      if (!same && clt_cpu_gemm_tiling_valid(r, s, &cand[n])) n++;
    }
  }
  for (int i = 0; i < ntiles && n < (s->trans_a ? 3 : bt ? 4 : 2); i++) {
    if (tiles[i][0] == d.tm && tiles[i][1] == d.nb) continue;
    /* The same rows a work-item: rb sub-blocks of tm. */
    const int rbi = (rb * d.tm + tiles[i][0] - 1) / tiles[i][0];
    cand[n] = (clt_gemm_tiling){tiles[i][0], tiles[i][1], d.kc, rbi, s->trans_a ? 0 : d.pack, 0};
    if (clt_cpu_gemm_tiling_valid(r, s, &cand[n])) n++;
  }
  if (!s->trans_a) {
    /* The default tile with longer or shorter K chunks, and with PACK_B the other way. */
    const int kcs[] = {d.kc == 256 ? 512 : 256, 512};
    for (int i = 0; i < 2; i++) {
      cand[n] = (clt_gemm_tiling){d.tm, d.nb, kcs[i], rb, kcs[i] > FWD_KC ? 0 : d.pack, 0};
      /* A chunk at least K long either way changes nothing. */
      const int same = s->k <= (size_t)(kcs[i] < d.kc ? kcs[i] : d.kc);
      if (kcs[i] != d.kc && (i == 0 || kcs[0] != 512) && !same &&
          clt_cpu_gemm_tiling_valid(r, s, &cand[n]))
        n++;
    }
    cand[n] = (clt_gemm_tiling){d.tm, d.nb, d.kc > FWD_KC ? FWD_KC : d.kc, rb, !d.pack, 0};
    if (clt_cpu_gemm_tiling_valid(r, s, &cand[n])) n++;
  } else {
    /* Columns a work-item: one block (no copies) against the widest. */
    cand[n] = (clt_gemm_tiling){d.tm, d.nb, d.kc, rb, 0, d.cb > 1 ? 1 : 0};
    if (d.cb == 1) cand[n].cb = AT_PACK_COLS / (16 * d.nb);
    while (cand[n].cb > 1 && s->n / 16 / (size_t)d.nb % (size_t)cand[n].cb) cand[n].cb--;
    if (cand[n].cb != d.cb && clt_cpu_gemm_tiling_valid(r, s, &cand[n])) n++;
  }
  if (n > CLT_GEMM_MAX_TILINGS - 1) n = CLT_GEMM_MAX_TILINGS - 1;
  for (int i = 0; i < n; i++) out[i] = cand[i];
  return n;
}

int clt_cpu_gemm_choose(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_tiling *t,
                        clt_err *e) {
  clt_cpu_state *c = cpu_state(r);
  int at = clt_gemm_table_find(c->tiled, c->ntilings, s);
  if (!t) {
    if (at >= 0) {
      c->ntilings--;
      c->tiled[at] = c->tiled[c->ntilings];
      c->tilings[at] = c->tilings[c->ntilings];
    }
    return CLT_OK;
  }
  char name[64];
  clt_cpu_gemm_tiling_name(t, name, sizeof name);
  if (!clt_cpu_gemm_tiling_valid(r, s, t))
    return clt_fail(e, CLT_ERR_ARG, "device %d (%s): GEMM tiling %s does not fit %zux%zux%zu%s",
                    r->device.index, r->device.name, name, s->m, s->n, s->k,
                    s->trans_a ? " At" : "");
  if (at < 0 && c->ntilings == CLT_GEMM_MAX_SHAPES)
    return clt_fail(e, CLT_ERR_INTERNAL, "more than %d GEMM tilings chosen", CLT_GEMM_MAX_SHAPES);
  if (at < 0) at = c->ntilings++;
  c->tiled[at] = *s;
  c->tilings[at] = *t;
  return CLT_OK;
}

void clt_cpu_gemm_tiling_name(const clt_gemm_tiling *t, char *out, size_t size) {
  snprintf(out, size, "%dx%d kc%d rb%d pack%d cb%d", t->tm, t->nb, t->kc, t->rb, t->pack, t->cb);
}

int clt_cpu_gemm_tiling_parse(const char *text, clt_gemm_tiling *out) {
  char end = 0;
  const int n = sscanf(text, "%dx%d kc%d rb%d pack%d cb%d%c", &out->tm, &out->nb, &out->kc,
                       &out->rb, &out->pack, &out->cb, &end);
  return n == 6 ? 0 : -1;
}

/* ---- the tilings' table for the GEMM tuner (backend.h's clt_gemm_tilings) ---- */

static int cpu_shapes(const clt_replica *r, clt_gemm_shape *out, int *uses, int max) {
  return clt_gemm_list_get(&cpu_state(r)->noted, out, uses, max);
}

static void cpu_shapes_clear(clt_replica *r) { cpu_state(r)->noted.n = 0; }

/* An A^T with a short K runs as a transposed copy's plain product, recorded
 * as that. */
static int cpu_tunable(const clt_gemm_shape *s) {
  return !(s->trans_a && s->k <= 512) && s->m > 0 && s->n >= 16 && s->k > 0;
}

static int cpu_candidates(const clt_replica *r, const clt_gemm_shape *s,
                          char (*out)[CLT_GEMM_TILING_NAME]) {
  clt_gemm_tiling cand[CLT_GEMM_MAX_TILINGS];
  const int n = clt_cpu_gemm_candidates(r, s, cand);
  for (int i = 0; i < n; i++) clt_cpu_gemm_tiling_name(&cand[i], out[i], CLT_GEMM_TILING_NAME);
  return n;
}

static int cpu_valid(const clt_replica *r, const clt_gemm_shape *s, const char *name) {
  clt_gemm_tiling t;
  return clt_cpu_gemm_tiling_parse(name, &t) == 0 && clt_cpu_gemm_tiling_valid(r, s, &t);
}

static int cpu_choose(clt_replica *r, const clt_gemm_shape *s, const char *name, clt_err *e) {
  clt_gemm_tiling t;
  if (name && clt_cpu_gemm_tiling_parse(name, &t) != 0)
    return clt_fail(e, CLT_ERR_ARG, "device %d (%s): \"%s\" is not a GEMM tiling", r->device.index,
                    r->device.name, name);
  return clt_cpu_gemm_choose(r, s, name ? &t : NULL, e);
}

static int cpu_chosen(const clt_replica *r, clt_gemm_shape *shapes,
                      char (*names)[CLT_GEMM_TILING_NAME], int max) {
  const clt_cpu_state *c = cpu_state(r);
  int n = 0;
  for (; n < c->ntilings && n < max; n++) {
    shapes[n] = c->tiled[n];
    clt_cpu_gemm_tiling_name(&c->tilings[n], names[n], CLT_GEMM_TILING_NAME);
  }
  return n;
}

const clt_gemm_tilings clt_cpu_tilings = {
    .shapes = cpu_shapes,
    .shapes_clear = cpu_shapes_clear,
    .tunable = cpu_tunable,
    .candidates = cpu_candidates,
    .valid = cpu_valid,
    .choose = cpu_choose,
    .chosen = cpu_chosen,
};
