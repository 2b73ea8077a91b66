/* Tests of the IDX loader (datasets/idx.c) on small synthetic files written here,
 * plain and gzipped, good and broken, plus Fashion-MNIST's t10k split when the
 * real data is installed. Prints "ok: ..." or "FAIL: ..." per check and "N passed,
 * M failed" last; exits non-zero if anything failed. VERBOSE=1 prints each expected
 * error message. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp, opendir */
#endif

#include "check.h"
#include "idx.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define REAL_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[64];

/* Path under the temp dir; each call gets its own buffer (the tests make fewer than 128). */
static const char *tpath(const char *name) {
  static char bufs[128][512];
  static int next;
  if (next == 128) check(0, "tpath: out of buffers, raise the pool size");
  char *b = bufs[next++ % 128];
  snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
  return b;
}

static void put32(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* Writes raw bytes to path, through gzip when gz is set. */
static int write_bytes(const char *path, const unsigned char *p, size_t n, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    if (!f) return -1;
    int ok = n == 0 || gzwrite(f, p, (unsigned)n) == (int)n;
    return (gzclose(f) == Z_OK && ok) ? 0 : -1;
  }
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(p, 1, n, f) == n;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* An IDX file with the given magic and dims followed by `n` payload bytes. */
static void write_idx(const char *path, unsigned magic, const unsigned *dims, int ndims,
                      const unsigned char *payload, size_t n, int gz) {
  size_t hn = 4 + 4 * (size_t)ndims;
  unsigned char *buf = malloc(hn + n + 1);
  if (!buf) {
    check(0, "malloc for %s", path);
    return;
  }
  put32(buf, magic);
  for (int i = 0; i < ndims; i++) put32(buf + 4 + 4 * (size_t)i, dims[i]);
  if (n) memcpy(buf + hn, payload, n);
  if (write_bytes(path, buf, hn + n, gz) != 0) check(0, "cannot write %s", path);
  free(buf);
}

static void write_images(const char *path, unsigned count, unsigned rows, unsigned cols,
                         const unsigned char *px, size_t n, int gz) {
  unsigned dims[3] = {count, rows, cols};
  write_idx(path, 0x803, dims, 3, px, n, gz);
}

static void write_labels(const char *path, unsigned count, const unsigned char *lb, size_t n,
                         int gz) {
  unsigned dims[1] = {count};
  write_idx(path, 0x801, dims, 1, lb, n, gz);
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(len > 0 ? (size_t)len : 1);
  if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return p;
}

static int is_zero(const clt_dataset *d) {
  return d->count == 0 && d->height == 0 && d->width == 0 && d->channels == 0 && d->classes == 0 &&
         !d->pixels && !d->labels;
}

/* Loads a pair that must fail with `code` and a message naming `path` and `word`. */
static void expect_fail(const char *name, const char *img, const char *lab, int classes, int code,
                        const char *path, const char *word) {
  clt_dataset d;
  clt_err e = {0};
  memset(&d, 0xAB, sizeof d); /* must come back zeroed */
  int st = clt_idx_load(img, lab, classes, &d, &e);
  if (getenv("VERBOSE")) printf("%-32s %s\n", name, e.msg); /* to eyeball the wording */
  check(st == code, "%s: status %d (%s), expected %d (%s); msg: %s", name, st, clt_status_name(st),
        code, clt_status_name(code), e.msg);
  check(!path || strstr(e.msg, path), "%s: message lacks path %s: %s", name, path, e.msg);
  check(!word || strstr(e.msg, word), "%s: message lacks \"%s\": %s", name, word, e.msg);
  check(strchr(e.msg, '\n') == NULL, "%s: message is not one line: %s", name, e.msg);
  check(is_zero(&d), "%s: *out not zeroed on error", name);
  if (st == CLT_OK) clt_dataset_free(&d);
}

/* Deterministic pseudo-random bytes (xorshift), reduced mod `mod` if mod < 256. */
static void fill_random(unsigned char *p, size_t n, unsigned mod, unsigned seed) {
  unsigned x = seed ? seed : 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (unsigned char)((x >> 8) % mod);
  }
}

enum { N = 7, R = 5, C = 3 };

static void test_good(int gz) {
  unsigned char px[N * R * C], lb[N];
  for (int i = 0; i < N * R * C; i++) px[i] = (unsigned char)(i * 7 + 3);
  for (int i = 0; i < N; i++) lb[i] = (unsigned char)(i % 10);
  const char *ip = tpath(gz ? "good-img.gz" : "good-img");
  const char *lp = tpath(gz ? "good-lab.gz" : "good-lab");
  write_images(ip, N, R, C, px, sizeof px, gz);
  write_labels(lp, N, lb, sizeof lb, gz);
  clt_dataset d;
  clt_err e = {0};
  int st = clt_idx_load(ip, lp, 10, &d, &e);
  const char *k = gz ? "good gz" : "good plain";
  check(st == CLT_OK, "%s: status %d: %s", k, st, e.msg);
  if (st) return;
  check(d.count == N && d.height == R && d.width == C && d.channels == 1 && d.classes == 10,
        "%s: got count %d %dx%dx%d classes %d", k, d.count, d.height, d.width, d.channels,
        d.classes);
  check(memcmp(d.pixels, px, sizeof px) == 0, "%s: pixel values differ", k);
  check(memcmp(d.labels, lb, sizeof lb) == 0, "%s: label values differ", k);
  clt_dataset_free(&d);
  check(is_zero(&d), "%s: clt_dataset_free did not zero", k);
}

static void test_dir(void) {
  /* A folder with both forms of train: the .gz (labels all 1) must win over the plain
   * files (labels all 2); t10k exists only plain and must be found without ".gz". */
  const char *sub = tpath("dir");
  if (mkdir(sub, 0700) != 0) {
    check(0, "mkdir %s", sub);
    return;
  }
  unsigned char px[N * R * C], one[N], two[N];
  fill_random(px, sizeof px, 256, 7);
  memset(one, 1, sizeof one);
  memset(two, 2, sizeof two);
  write_images(tpath("dir/train-images-idx3-ubyte.gz"), N, R, C, px, sizeof px, 1);
  write_labels(tpath("dir/train-labels-idx1-ubyte.gz"), N, one, N, 1);
  write_images(tpath("dir/train-images-idx3-ubyte"), N, R, C, px, sizeof px, 0);
  write_labels(tpath("dir/train-labels-idx1-ubyte"), N, two, N, 0);
  write_images(tpath("dir/t10k-images-idx3-ubyte"), N, R, C, px, sizeof px, 0);
  write_labels(tpath("dir/t10k-labels-idx1-ubyte"), N, two, N, 0);

  clt_dataset d;
  clt_err e = {0};
  int st = clt_idx_load_dir(sub, "train", &d, &e);
  check(st == CLT_OK, "dir train: status %d: %s", st, e.msg);
  if (!st) {
    check(d.count == N && d.classes == 10 && d.labels[0] == 1,
          "dir train: count %d classes %d label %d (expected the .gz files)", d.count, d.classes,
          d.labels[0]);
    clt_dataset_free(&d);
  }
  /* trailing slash on the folder must not matter */
  char slash[600];
  snprintf(slash, sizeof slash, "%s/", sub);
  st = clt_idx_load_dir(slash, "t10k", &d, &e);
  check(st == CLT_OK, "dir t10k plain: status %d: %s", st, e.msg);
  if (!st) {
    check(d.count == N && d.labels[0] == 2 && memcmp(d.pixels, px, sizeof px) == 0,
          "dir t10k plain: wrong content");
    clt_dataset_free(&d);
  }

  /* split whose files are absent: the message names the missing path */
  memset(&d, 0xAB, sizeof d);
  st = clt_idx_load_dir(sub, "valid", &d, &e);
  check(st == CLT_ERR_IO, "dir missing split: status %d: %s", st, e.msg);
  check(strstr(e.msg, "valid-images-idx3-ubyte") && strstr(e.msg, sub) &&
            strstr(e.msg, "no such file"),
        "dir missing split: message: %s", e.msg);
  check(is_zero(&d), "dir missing split: *out not zeroed");

  /* images present but labels missing */
  write_images(tpath("dir/half-images-idx3-ubyte"), N, R, C, px, sizeof px, 0);
  st = clt_idx_load_dir(sub, "half", &d, &e);
  check(st == CLT_ERR_IO && strstr(e.msg, "half-labels-idx1-ubyte"),
        "dir missing labels: status %d: %s", st, e.msg);

  /* missing folder */
  const char *nodir = tpath("no-such-dir");
  memset(&d, 0xAB, sizeof d);
  st = clt_idx_load_dir(nodir, "train", &d, &e);
  check(st == CLT_ERR_IO, "missing dir: status %d: %s", st, e.msg);
  check(strstr(e.msg, nodir) && strstr(e.msg, "directory"), "missing dir: message: %s", e.msg);
  check(is_zero(&d), "missing dir: *out not zeroed");

  /* a file given as the folder */
  st = clt_idx_load_dir(tpath("dir/t10k-images-idx3-ubyte"), "train", &d, &e);
  check(st == CLT_ERR_IO && strstr(e.msg, "not a directory"), "file as dir: status %d: %s", st,
        e.msg);
}

static void test_bad(void) {
  enum { BN = 100 };
  unsigned char px[BN * R * C], lb[BN];
  fill_random(px, sizeof px, 256, 1);
  for (int i = 0; i < BN; i++) lb[i] = (unsigned char)(i % 10);
  const char *good_img = tpath("b-img");
  const char *good_lab = tpath("b-lab");
  write_images(good_img, BN, R, C, px, sizeof px, 0);
  write_labels(good_lab, BN, lb, BN, 0);

  const char *missing = tpath("missing-img");
  expect_fail("missing file", missing, good_lab, 10, CLT_ERR_IO, missing, "No such file");
  expect_fail("missing labels", good_img, missing, 10, CLT_ERR_IO, missing, "No such file");
  expect_fail("classes 0", good_img, good_lab, 0, CLT_ERR_ARG, NULL, "classes");

  /* labels file passed as images */
  expect_fail("wrong magic", good_lab, good_lab, 10, CLT_ERR_FORMAT, good_lab, "magic 0x00000801");
  expect_fail("wrong magic (labels)", good_img, good_img, 10, CLT_ERR_FORMAT, good_img,
              "expected 0x00000801");

  const char *p = tpath("empty");
  write_bytes(p, px, 0, 0);
  expect_fail("empty file", p, good_lab, 10, CLT_ERR_FORMAT, p, "truncated");

  p = tpath("short-header");
  write_images(p, BN, R, C, px, 0, 0);
  {
    /* cut inside the dims */
    size_t n;
    unsigned char *b = read_file(p, &n);
    if (b) write_bytes(p, b, 9, 0);
    free(b);
  }
  expect_fail("truncated header", p, good_lab, 10, CLT_ERR_FORMAT, p, "truncated");

  p = tpath("trunc-img");
  write_images(p, BN, R, C, px, sizeof px - 40, 0);
  expect_fail("truncated plain payload", p, good_lab, 10, CLT_ERR_FORMAT, p, "truncated");
  expect_fail("truncated plain payload (count)", p, good_lab, 10, CLT_ERR_FORMAT, NULL,
              "1460 bytes of pixel data");

  p = tpath("trail-img");
  {
    unsigned char big[sizeof px + 5];
    memcpy(big, px, sizeof px);
    memset(big + sizeof px, 0, 5);
    write_images(p, BN, R, C, big, sizeof big, 0);
  }
  expect_fail("trailing data", p, good_lab, 10, CLT_ERR_FORMAT, p, "trailing data after 100");

  p = tpath("trunc-lab");
  write_labels(p, BN, lb, BN - 1, 0);
  expect_fail("truncated labels", good_img, p, 10, CLT_ERR_FORMAT, p, "truncated");

  /* gzip cut in half: the stream ends mid-deflate */
  const char *gzp = tpath("b-img.gz");
  write_images(gzp, BN, R, C, px, sizeof px, 1);
  size_t gn;
  unsigned char *gzb = read_file(gzp, &gn);
  check(gzb && gn > 1000, "gzip test file too small (%zu bytes)", gn);
  if (gzb) {
    p = tpath("half.gz");
    write_bytes(p, gzb, gn / 2, 0);
    expect_fail("truncated gzip", p, good_lab, 10, CLT_ERR_FORMAT, p, "truncated gzip");

    /* only the 8-byte trailer missing: all pixels decode, the end check must notice */
    p = tpath("notrailer.gz");
    write_bytes(p, gzb, gn - 8, 0);
    expect_fail("gzip without trailer", p, good_lab, 10, CLT_ERR_FORMAT, p, "truncated gzip");

    /* CRC-32 in the trailer flipped */
    p = tpath("badcrc.gz");
    gzb[gn - 8] ^= 0xFF;
    write_bytes(p, gzb, gn, 0);
    gzb[gn - 8] ^= 0xFF;
    expect_fail("gzip CRC error", p, good_lab, 10, CLT_ERR_FORMAT, p, "CRC");
    free(gzb);
  }

  /* Corrupt deflate data: low-entropy random pixels (16 values) make zlib emit Huffman
   * coded blocks rather than stored ones, so flipped bytes break the code itself. */
  {
    enum { CN = 2000, CR = 28, CC = 28 };
    unsigned char *cpx = malloc((size_t)CN * CR * CC);
    unsigned char clb[CN];
    if (cpx) {
      fill_random(cpx, (size_t)CN * CR * CC, 16, 99);
      for (int i = 0; i < CN; i++) clb[i] = (unsigned char)(i % 10);
      const char *cp = tpath("c-img.gz"), *cl = tpath("c-lab.gz");
      write_images(cp, CN, CR, CC, cpx, (size_t)CN * CR * CC, 1);
      write_labels(cl, CN, clb, CN, 1);
      /* the intact pair loads */
      clt_dataset d;
      clt_err e = {0};
      int st = clt_idx_load(cp, cl, 10, &d, &e);
      check(st == CLT_OK && d.count == CN && memcmp(d.pixels, cpx, (size_t)CN * CR * CC) == 0,
            "large gz pair: status %d: %s", st, e.msg);
      if (!st) clt_dataset_free(&d);
      size_t cn;
      unsigned char *cb = read_file(cp, &cn);
      check(cb && cn > 100000 && cn < (size_t)CN * CR * CC * 3 / 4,
            "corrupt-gzip source: %zu compressed bytes (expected a long Huffman-coded stream)", cn);
      if (cb) {
        for (size_t i = cn / 2; i < cn / 2 + 16; i++) cb[i] ^= 0x5A;
        p = tpath("corrupt.gz");
        write_bytes(p, cb, cn, 0);
        expect_fail("corrupt gzip", p, cl, 10, CLT_ERR_FORMAT, p, "corrupt gzip data");
        for (size_t i = cn / 2; i < cn / 2 + 16; i++) cb[i] ^= 0x5A;
        /* Mid-stream flips of Huffman-coded literals often still decode and are only
         * caught by the CRC; to exercise inflate's own errors deterministically, make
         * the first block header (byte 10, after gzip's 10-byte header) say BTYPE=11. */
        cb[10] |= 0x06;
        p = tpath("badblock.gz");
        write_bytes(p, cb, cn, 0);
        expect_fail("corrupt gzip block", p, cl, 10, CLT_ERR_FORMAT, p,
                    "corrupt gzip data (invalid block type)");
        free(cb);
      }
      free(cpx);
    }
  }

  /* counts disagree */
  p = tpath("lab99");
  write_labels(p, BN - 1, lb, BN - 1, 0);
  expect_fail("count mismatch", good_img, p, 10, CLT_ERR_FORMAT, p, "has 100 images");
  expect_fail("count mismatch (labels)", good_img, p, 10, CLT_ERR_FORMAT, good_img, "99 labels");

  /* one label past the class range */
  {
    unsigned char bad[BN];
    memcpy(bad, lb, BN);
    bad[5] = 12;
    p = tpath("lab-range.gz");
    write_labels(p, BN, bad, BN, 1);
    expect_fail("label out of range", good_img, p, 10, CLT_ERR_FORMAT, p,
                "label 12 at index 5 is out of range [0,10)");
    /* the same labels pass with more classes */
    clt_dataset d;
    clt_err e = {0};
    int st = clt_idx_load(good_img, p, 13, &d, &e);
    check(st == CLT_OK && d.classes == 13, "labels < 13 with classes 13: %d: %s", st, e.msg);
    if (!st) clt_dataset_free(&d);
  }

  p = tpath("zero-rows");
  write_images(p, BN, 0, C, px, 0, 0);
  expect_fail("zero rows", p, good_lab, 10, CLT_ERR_FORMAT, p, "zero rows");
  p = tpath("zero-count");
  write_images(p, 0, R, C, px, 0, 0);
  expect_fail("zero images", p, good_lab, 10, CLT_ERR_FORMAT, p, "zero images");

  /* header claiming 4 GB of pixels: rejected before any allocation or read */
  p = tpath("huge");
  write_images(p, 65536, 256, 256, px, 16, 0);
  expect_fail("absurd size", p, good_lab, 10, CLT_ERR_FORMAT, p, "too large");
  p = tpath("huge2");
  write_images(p, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, px, 16, 0);
  expect_fail("overflowing size", p, good_lab, 10, CLT_ERR_FORMAT, p, "too large");

  /* a directory given as a file */
  expect_fail("directory as file", tmpdir, good_lab, 10, CLT_ERR_IO, tmpdir, NULL);
}

/* clt_idx_load_dir_async: the header's figures at once, the pixels after
 * clt_dataset_wait; a payload cut short fails there, naming the file, and a set
 * freed without waiting is freed whole (the sanitizer build checks leaks). */
static void test_async(void) {
  enum { AN = 200 };
  const char *sub = tpath("async");
  if (mkdir(sub, 0700) != 0) {
    check(0, "mkdir %s", sub);
    return;
  }
  unsigned char px[AN * R * C], lb[AN];
  fill_random(px, sizeof px, 256, 3);
  fill_random(lb, sizeof lb, 10, 4);
  write_images(tpath("async/train-images-idx3-ubyte.gz"), AN, R, C, px, sizeof px, 1);
  write_labels(tpath("async/train-labels-idx1-ubyte.gz"), AN, lb, AN, 1);
  clt_dataset d;
  clt_err e = {0};
  int st = clt_idx_load_dir_async(sub, "train", &d, &e);
  check(st == CLT_OK, "async good: status %d: %s", st, e.msg);
  if (!st) {
    check(d.count == AN && d.height == R && d.width == C && d.classes == 10 &&
              memcmp(d.labels, lb, AN) == 0,
          "async good: count %d %dx%d classes %d, or labels differ", d.count, d.height, d.width,
          d.classes);
    st = clt_dataset_wait(&d, &e);
    check(st == CLT_OK && d.pixels && memcmp(d.pixels, px, sizeof px) == 0,
          "async good: wait status %d (%s), or pixels differ", st, e.msg);
    check(clt_dataset_wait(&d, &e) == CLT_OK, "async good: a second wait fails");
    clt_dataset_free(&d);
    check(is_zero(&d) && !d.pending, "async good: clt_dataset_free did not zero");
  }
  st = clt_idx_load_dir_async(sub, "train", &d, &e);
  check(st == CLT_OK, "async free unwaited: status %d: %s", st, e.msg);
  if (!st) clt_dataset_free(&d);

  /* the gzip stream cut in half: the header reads, the pixels do not */
  size_t n;
  unsigned char *gz = read_file(tpath("async/train-images-idx3-ubyte.gz"), &n);
  check(gz && n > 1000, "async: gzip test file too small");
  if (!gz) return;
  const char *cut = tpath("async/t10k-images-idx3-ubyte.gz");
  write_bytes(cut, gz, n / 2, 0);
  free(gz);
  write_labels(tpath("async/t10k-labels-idx1-ubyte.gz"), AN, lb, AN, 1);
  st = clt_idx_load_dir_async(sub, "t10k", &d, &e);
  check(st == CLT_OK && d.count == AN, "async truncated: open status %d: %s", st, e.msg);
  if (st) return;
  st = clt_dataset_wait(&d, &e);
  check(st == CLT_ERR_FORMAT && strstr(e.msg, cut) && strstr(e.msg, "truncated gzip") &&
            !strchr(e.msg, '\n'),
        "async truncated: wait status %d: %s", st, e.msg);
  check(!d.pixels, "async truncated: pixels set after a failed read");
  clt_dataset_free(&d);

  /* header and label errors come at once, as from clt_idx_load_dir */
  write_labels(tpath("async/short-labels-idx1-ubyte"), AN - 1, lb, AN - 1, 0);
  write_images(tpath("async/short-images-idx3-ubyte"), AN, R, C, px, sizeof px, 0);
  memset(&d, 0xAB, sizeof d);
  st = clt_idx_load_dir_async(sub, "short", &d, &e);
  check(st == CLT_ERR_FORMAT && strstr(e.msg, "labels") && is_zero(&d) && !d.pending,
        "async label count: status %d: %s", st, e.msg);
}

static void test_real(void) {
  struct stat sb;
  if (stat(REAL_DIR, &sb) != 0) {
    printf("note: %s absent, real-data test skipped\n", REAL_DIR);
    return;
  }
  clt_dataset d;
  clt_err e = {0};
  int st = clt_idx_load_dir(REAL_DIR, "t10k", &d, &e);
  check(st == CLT_OK, "fashion-mnist t10k: status %d: %s", st, e.msg);
  if (st) return;
  check(d.count == 10000 && d.height == 28 && d.width == 28 && d.channels == 1 && d.classes == 10,
        "fashion-mnist t10k: count %d %dx%dx%d classes %d", d.count, d.height, d.width, d.channels,
        d.classes);
  int hist[256] = {0};
  for (int i = 0; i < d.count; i++) hist[d.labels[i]]++;
  int bad = 0;
  for (int c = 0; c < 256; c++)
    if (hist[c] != (c < 10 ? 1000 : 0)) bad++;
  check(bad == 0, "fashion-mnist t10k: class counts are not 1000 each");
  long sum = 0;
  for (size_t i = 0; i < (size_t)d.count * 28 * 28; i++) sum += d.pixels[i];
  check(sum > 0, "fashion-mnist t10k: all pixels zero");
  clt_dataset_free(&d);
}

/* Removes the flat temp tree (one sub-folder deep). */
static void remove_tree(const char *path) {
  DIR *dp = opendir(path);
  if (dp) {
    struct dirent *ent;
    while ((ent = readdir(dp)) != NULL) {
      if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
      char child[1024];
      snprintf(child, sizeof child, "%s/%s", path, ent->d_name);
      struct stat sb;
      if (lstat(child, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(child);
      else unlink(child);
    }
    closedir(dp);
  }
  rmdir(path);
}

int main(void) {
  strcpy(tmpdir, "/tmp/clt_test_dataset_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_good(1);
  test_good(0);
  test_dir();
  test_bad();
  test_async();
  test_real();
  remove_tree(tmpdir);
  return check_summary();
}
