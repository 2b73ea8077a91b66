/* --resume across processes: process 0 reads the newest checkpoint of its
 * --checkpoint-dir and sends the file's bytes to every other process with their
 * hash, which each checks, so no other host needs the checkpoint (or the folder).
 * The file holds all that a run resumes from (weights, optimizer state, counters,
 * the data it trained on and its order), so nothing else of the folder is sent. */
#include <stdlib.h>
#include <string.h>

#include "npz.h"
#include "train_impl.h"

/* A 64-bit hash of the bytes: FNV-1a over 8-byte words in 4 interleaved lanes
 * (several times faster than bytewise over a checkpoint of hundreds of MB), the
 * lanes and the tail folded in bytewise. */
static uint64_t hash_bytes(const unsigned char *b, size_t n) {
  const uint64_t prime = 1099511628211ull;
  uint64_t lane[4] = {1469598103934665603ull, 1469598103934665603ull ^ 1,
                      1469598103934665603ull ^ 2, 1469598103934665603ull ^ 3};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; k++) {
      uint64_t w;
      memcpy(&w, b + i + (size_t)8 * k, sizeof w); /* may be unaligned */
      lane[k] = (lane[k] ^ w) * prime;
    }
  }
  uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
  for (int k = 0; k < 4; k++) {
    for (int byte = 0; byte < 8; byte++) h = (h ^ ((lane[k] >> (8 * byte)) & 0xff)) * prime;
  }
  for (; i < n; i++) h = (h ^ b[i]) * prime;
  return h;
}

/* What process 0 sends before the bytes. */
typedef struct sent_header {
  uint64_t size, hash;
  char path[4096];
} sent_header;

/* Test facility: CLTRAIN_TEST_RESUME_DAMAGE=N flips byte N of the checkpoint a
 * process other than 0 received, as a transfer that went wrong would. */
static void test_damage(train_resume_file *f) {
  const char *v = getenv("CLTRAIN_TEST_RESUME_DAMAGE");
  if (!v || !*v) return;
  const unsigned long long at = strtoull(v, NULL, 10);
  if (at < f->size) f->bytes[at] ^= 0x5a;
}

int train_fetch_checkpoint(const clt_train_opts *o, train_resume_file *f, clt_err *e) {
  clt_cluster *c = o->cluster;
  const int rank = clt_cluster_rank(c);
  int status = CLT_OK;
  sent_header h;
  memset(&h, 0, sizeof h);
  memset(f, 0, sizeof *f);
  if (rank == 0) {
    status = clt_checkpoint_resolve(o->checkpoint_dir, f->path, sizeof f->path, e);
    if (status) clt_wrap(e, "--resume");
    if (!status) status = clt_npz_read_bytes(f->path, &f->bytes, &f->size, e);
    if (!status) {
      h.size = f->size;
      h.hash = hash_bytes(f->bytes, f->size);
      snprintf(h.path, sizeof h.path, "%s", f->path);
    }
  }
  if (clt_cluster_size(c) == 1) return status;
  /* Every process reaches each collective, or none. */
  if ((status = clt_cluster_agree(c, status, e))) return status;
  if ((status = clt_cluster_bcast(c, &h, sizeof h, e))) return status;
  if (rank != 0) {
    snprintf(f->path, sizeof f->path, "%s", h.path);
    f->size = (size_t)h.size;
    if ((uint64_t)f->size != h.size || !(f->bytes = malloc(f->size + 1)))
      status = clt_fail(e, CLT_ERR_NOMEM, "--resume: out of host memory for %s (%llu bytes)",
                        h.path, (unsigned long long)h.size);
  }
  if ((status = clt_cluster_agree(c, status, e))) return status;
  if ((status = clt_cluster_bcast(c, f->bytes, f->size, e))) return status;
  if (rank != 0) {
    test_damage(f);
    const uint64_t got = hash_bytes(f->bytes, f->size);
    if (got != h.hash) {
      status = clt_fail(e, CLT_ERR_IO,
                        "--resume: the checkpoint rank 0 sent (%s, %llu bytes) arrived damaged: "
                        "hash %016llx, rank 0's %016llx",
                        h.path, (unsigned long long)h.size, (unsigned long long)got,
                        (unsigned long long)h.hash);
    }
  }
  return clt_cluster_agree(c, status, e);
}

void train_resume_file_free(train_resume_file *f) {
  free(f->bytes);
  f->bytes = NULL;
  f->size = 0;
}
