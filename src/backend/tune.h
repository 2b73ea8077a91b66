/* The tuner's cache: which kernel variant won on a device for a shape, kept on
 * disk so that a device measures its candidates once.
 *
 * A result is keyed by everything that changes the answer: the device's
 * identity (clt_tune_ident: vendor, name, the CPU model for a CPU device, since
 * PoCL names an Intel Xeon and an AMD EPYC alike, compute units, driver
 * version, the kernels' build options and vector width, the code generation
 * PoCL is told to use, the embedded kernel sources' hash) picks the file; the
 * shape per example with the batch bucketed (clt_tune_conv_key) picks the entry
 * within it.
 *
 * Files are JSON under $XDG_CACHE_HOME/cltrain/tune/ (else ~/.cache/cltrain/
 * tune/), one per identity, named by the identity's hash and holding the
 * identity in full: a file whose identity differs (a hash collision, an edited
 * file) or that does not parse is foreign or corrupt, ignored with one note and
 * rewritten. Every write re-reads the file under a lock, merges and replaces it
 * atomically (a temporary file renamed into place), so two processes tuning at
 * once lose nothing and never leave half a file. A folder that cannot be
 * written keeps the results in memory, with one note. */
#ifndef CLT_TUNE_H
#define CLT_TUNE_H

#include <stdint.h>
#include <stdio.h>

#include "device.h"

/* What a tuning result holds for: one device as the kernels are built for it. */
typedef struct clt_tune_ident {
  char vendor[128];
  char name[256];
  char cpu_model[128]; /* /proc/cpuinfo's model name for a CPU device, else "" */
  unsigned compute_units;
  char driver[128];
  char options[256]; /* the kernels' build options (the backend's defines) */
  unsigned vector_width;
  char isa[160];    /* POCL_LLVM_CPU_NAME and POCL_KERNELLIB_NAME, as set */
  char sources[17]; /* 64-bit FNV-1a of every embedded kernel source, in hex */
} clt_tune_ident;

/* d's identity with the build options `options`, asked of OpenCL and the host. */
int clt_tune_ident_of(const clt_device *d, const char *options, clt_tune_ident *out, clt_err *e);

/* The identity's hash (the one naming its file), 16 hex digits: two replicas
 * with the same hash build the same kernels. */
void clt_tune_ident_hash(const clt_tune_ident *id, char out[17]);

/* 64-bit FNV-1a of n bytes, continued from h (CLT_FNV_START for a new hash):
 * the tuning keys' hashes. */
#define CLT_FNV_START 14695981039346656037ULL
uint64_t clt_fnv1a(uint64_t h, const void *data, size_t n);

/* The hash of the embedded kernel sources (names and texts), 16 hex digits. */
void clt_tune_sources_hash(char out[17]);

/* The batch bucket a tuning result of `batch` examples counts for: the next
 * power of two (a slice whose size changes from step to step keeps its
 * results). */
int clt_tune_batch_bucket(int batch);

/* The folder results live in: $XDG_CACHE_HOME/cltrain/tune, else
 * $HOME/.cache/cltrain/tune. Fails without either variable. */
int clt_tune_default_dir(char *out, size_t size, clt_err *e);

typedef struct clt_tune_cache clt_tune_cache;

/* Opens the results of `ident` in folder `dir` (NULL: clt_tune_default_dir),
 * reading its file if there is one. A corrupt or foreign file gets one note on
 * `notes` (NULL: none) and is rewritten at the next put. `path`, when not NULL,
 * pins one file instead of the folder (--tune-file): the same rules, and a file
 * pinned for another identity is an error naming it. */
int clt_tune_open(const char *dir, const char *path, const clt_tune_ident *ident, FILE *notes,
                  clt_tune_cache **out, clt_err *e);
void clt_tune_close(clt_tune_cache *c);

/* The file the results go to. */
const char *clt_tune_path(const clt_tune_cache *c);

/* Whether results reach the disk (0 once a write failed: in memory only). */
int clt_tune_persistent(const clt_tune_cache *c);

/* The variant chosen for `key`, or NULL when it was never tuned; its time and
 * the default's (milliseconds) in *ms and *default_ms when not NULL. */
const char *clt_tune_get(const clt_tune_cache *c, const char *key, double *ms, double *default_ms);

/* Records `variant` for `key` (ms its time, default_ms the default's) and
 * writes the file. A failed write is not an error: one note, and the results
 * stay in memory. */
int clt_tune_put(clt_tune_cache *c, const char *key, const char *variant, double ms,
                 double default_ms, clt_err *e);

/* A result chosen inside training steps (tuner.h's clt_tune_net): `variant`
 * as clt_tune_put's, and the verdict of the whole-step confirmation:
 * decision "confirmed" (the step with the tuned choices was faster) or "kept
 * default" (it was not, and variant is the one kept), why in words, and the
 * confirmation's median step times (milliseconds). */
int clt_tune_put_step(clt_tune_cache *c, const char *key, const char *variant, double ms,
                      double default_ms, const char *decision, const char *why, double step_ms,
                      double default_step_ms, clt_err *e);

/* The decision of a result chosen in the step ("confirmed", "kept default"),
 * or NULL for one timed alone (an older cltrain) or none; its step times in
 * *step_ms and *default_step_ms when not NULL. */
const char *clt_tune_get_decision(const clt_tune_cache *c, const char *key, double *step_ms,
                                  double *default_step_ms);

/* A list of integers recorded under `key` (an entry {"variant": variant,
 * "list": [...]}), as clt_tune_put writes; clt_tune_get_list copies it to
 * v[0 .. max) and returns its length, or -1 when there is none, it is not a
 * list of numbers or it is longer than max. */
int clt_tune_put_list(clt_tune_cache *c, const char *key, const char *variant, const long *v, int n,
                      clt_err *e);
int clt_tune_get_list(const clt_tune_cache *c, const char *key, long *v, int max);

/* The key of one pass of a convolution: its geometry per example, the filters
 * and the batch bucketed: "conv fwd 28x28x32 k3x3 s1 p1,1 o28x28 f64 b32". */
void clt_tune_conv_key(const char *pass, int h, int w, int c, int kh, int kw, int stride,
                       int pad_top, int pad_left, int oh, int ow, int filters, int batch, char *out,
                       size_t size);

#endif
