/* Fuzz target: what src/formats/checkpoint.c reads of a checkpoint beyond the .npz
 * container (fuzz_npz covers that): the index file `checkpoint`
 * (clt_checkpoint_resolve), the metadata JSON (clt_checkpoint_model: format,
 * model, input, classes, architecture rebuilt through clt_model_parse, optimizer)
 * and the members clt_checkpoint_load checks against the model.
 *
 * Input: a flags byte, then the index file's text, a NUL, and the metadata text
 * (without a NUL, all of it is the metadata and the index is the one cltrain
 * writes). The harness writes DIR/ckpt/checkpoint and DIR/ckpt/ckpt-1.npz with
 * the metadata and the counters, resolves the folder and reads the model. When
 * that succeeds and the model has at most 2^15 values, it writes the checkpoint
 * again with every parameter and the slots of the optimizer the metadata names
 * (zeros) and loads it. Flags: bit 0 loads with the optimizer; bit 1 adds
 * data/class_names and model/keras_json; bit 2 leaves out member number
 * (flags >> 4) of the parameters and slots, bit 3 gives it another shape. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "fuzz_common.h"
#include "npz.h"

#define LOAD_MAX_FLOATS ((size_t)1 << 15)
#define MAX_MEMBERS 2048

static clt_model model;
static clt_npz_array members[MAX_MEMBERS];

/* The slot variables of the optimizer the metadata names (Adam where it names
 * none), as the optimizers' table has them for its kind and momentum; a slot the
 * load does not need would be an extra member, which the reader refuses. */
static void optimizer_slots(const char *meta, const char *slots[CLT_OPT_SLOTS]) {
  clt_optimizer o = clt_optimizer_defaults(CLT_OPT_ADAM);
  clt_optimizer_kind kind;
  cJSON *root = cJSON_Parse(meta);
  const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(opt, "name");
  const cJSON *momentum = cJSON_GetObjectItemCaseSensitive(opt, "momentum");
  if (cJSON_IsString(name) && clt_optimizer_find(name->valuestring, &kind))
    o = clt_optimizer_defaults(kind);
  if (cJSON_IsNumber(momentum)) o.momentum = momentum->valuedouble;
  int n = 0;
  for (int k = 0; k < CLT_OPT_SLOTS; k++)
    if (clt_optimizer_slot(&o, k)) slots[n++] = clt_optimizer_slot(&o, k);
  while (n < CLT_OPT_SLOTS) slots[n++] = NULL;
  cJSON_Delete(root);
}

/* The checkpoint file: metadata, counters and, when m is given, the model's
 * parameters and its optimizer's slots (zeros), perturbed as flags say. Returns 0
 * if clt_npz_write refused the members (a name too long, or twice). */
static int write_checkpoint(const char *path, const char *meta, const clt_model *m,
                            unsigned flags) {
  static const int64_t iterations = 5, epoch = 1, save_counter = 1;
  static const uint64_t seed = 42;
  static const char class_names[] = "cat\ndog", keras_json[] = "{\"class_name\": \"Sequential\"}";
  static uint32_t names_buf[sizeof class_names], json_buf[sizeof keras_json];
  static float *zeros;
  static size_t zeros_n;
  const char *slots[CLT_OPT_SLOTS + 2] = {NULL};
  optimizer_slots(meta, slots + 1);
  uint32_t *meta_buf = malloc(4 * (strlen(meta) + 1));
  if (!meta_buf) fuzz_fail("fuzz_checkpoint: out of memory");
  int n = 0;
  clt_npz_string(&members[n++], "metadata", meta, meta_buf);
  const struct {
    const char *name, *dtype;
    const void *v;
  } scalars[] = {{"optimizer/iterations", "<i8", &iterations},
                 {"epoch", "<i8", &epoch},
                 {"save_counter", "<i8", &save_counter},
                 {"data/seed", "<u8", &seed}};
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
    clt_npz_array *a = &members[n++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", scalars[i].name);
    snprintf(a->dtype, sizeof a->dtype, "%s", scalars[i].dtype);
    a->data = scalars[i].v;
    a->bytes = 8;
  }
  if (flags & 2) {
    clt_npz_string(&members[n++], "data/class_names", class_names, names_buf);
    clt_npz_string(&members[n++], "model/keras_json", keras_json, json_buf);
  }
  const int first_param = n;
  /* One buffer of zeros, as large as the largest parameter, for them all. */
  for (int i = 0; m && i < m->nlayers; i++) {
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const size_t size = m->layers[i].params[p].size;
      if (size <= zeros_n) continue;
      free(zeros);
      zeros = calloc(size, sizeof *zeros);
      if (!zeros) fuzz_fail("fuzz_checkpoint: out of memory");
      zeros_n = size;
    }
  }
  for (int i = 0; m && i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    for (int p = 0; p < l->nparams; p++) {
      const clt_param *prm = &l->params[p];
      for (int s = 0; s == 0 || (slots[s] && !prm->non_trainable); s++) {
        if (n == MAX_MEMBERS) fuzz_fail("fuzz_checkpoint: more than %d members", MAX_MEMBERS);
        clt_npz_array *a = &members[n++];
        memset(a, 0, sizeof *a);
        if (s)
          snprintf(a->name, sizeof a->name, "optimizer/%s/%s/%s", l->name, prm->name, slots[s]);
        else snprintf(a->name, sizeof a->name, "%s/%s", l->name, prm->name);
        snprintf(a->dtype, sizeof a->dtype, "<f4");
        a->rank = prm->rank;
        for (int d = 0; d < prm->rank; d++) a->dims[d] = prm->dims[d];
        a->data = zeros;
        a->bytes = prm->size * sizeof(float);
      }
    }
  }
  if (m && (flags & 12) && n > first_param) {
    const int k = first_param + (int)(flags >> 4) % (n - first_param);
    if (flags & 4) {
      members[k] = members[--n];
    } else { /* one more dimension of 1: the same data, another shape */
      clt_npz_array *a = &members[k];
      if (a->rank < CLT_NPZ_MAX_RANK) a->dims[a->rank++] = 1;
    }
  }
  clt_err e = {0};
  const int st = clt_npz_write(path, members, n, &e);
  free(meta_buf);
  return st == CLT_OK;
}

/* Small enough to write and load, and with parameters whose sizes add up: a model
 * read from metadata with a negative input dimension has parameters of negative
 * sizes (reported, tests/fuzz/crashes/checkpoint/), which are not written. */
static int loadable(const clt_model *m) {
  if (m->flat_floats > LOAD_MAX_FLOATS) return 0;
  for (int i = 0; i < m->nlayers; i++) {
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      if (prm->size > m->flat_floats) {
        fuzz_note("parameter larger than the model", -1, prm->name);
        return 0;
      }
    }
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char dir[600], index[700], file[700];
  if (!dir[0]) {
    fuzz_path(dir, sizeof dir, "ckpt");
    if (mkdir(dir, 0700) != 0) fuzz_fail("fuzz_checkpoint: cannot create %s", dir);
    snprintf(index, sizeof index, "%s/checkpoint", dir);
    snprintf(file, sizeof file, "%s/ckpt-1.npz", dir);
  }
  if (size < 1) return 0;
  const unsigned flags = data[0];
  /* index NUL metadata; the text after a second NUL is ignored */
  char *text = malloc(size);
  if (!text) fuzz_fail("fuzz_checkpoint: out of memory");
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  const uint8_t *nul = memchr(data + 1, 0, size - 1);
  const char *meta = text;
  if (nul) {
    const size_t index_len = (size_t)(nul - (data + 1));
    fuzz_write(index, text, index_len);
    meta = text + index_len + 1;
  } else {
    static const char standard[] =
        "model_checkpoint_path: \"ckpt-1\"\nall_model_checkpoint_paths: \"ckpt-1\"\n";
    fuzz_write(index, standard, sizeof standard - 1);
  }
  if (!write_checkpoint(file, meta, NULL, flags)) {
    free(text);
    return 0;
  }

  /* The index may name any file; only ckpt-1 is read, so no input reaches outside DIR. */
  char path[4096];
  clt_err e = {0};
  const int rs = clt_checkpoint_resolve(dir, path, sizeof path, &e);
  fuzz_note("resolve", rs, e.msg);
  if (rs == CLT_OK && strcmp(path, file) != 0) {
    struct stat st;
    if (stat(path, &st) != 0) fuzz_fail("fuzz_checkpoint: resolved to a missing %s", path);
  }
  if (clt_checkpoint_resolve(file, path, sizeof path, &e) != CLT_OK || strcmp(path, file) != 0)
    fuzz_fail("fuzz_checkpoint: a file does not resolve to itself: %s", e.msg);

  memset(&e, 0, sizeof e);
  int st = clt_checkpoint_model(file, &model, &e);
  fuzz_note("model", st, e.msg);
  if (st != CLT_OK) {
    if (!e.msg[0]) fuzz_fail("fuzz_checkpoint: model status %d without a message", st);
    free(text);
    return 0;
  }
  if (loadable(&model) && write_checkpoint(file, meta, &model, flags)) {
    clt_checkpoint ck;
    memset(&e, 0, sizeof e);
    st = clt_checkpoint_load(file, &model, flags & 1, &ck, &e);
    fuzz_note("load", st, e.msg);
    if (st == CLT_OK) {
      fuzz_touch(ck.params, model.flat_floats * sizeof(float));
      for (int k = 0; k < CLT_OPT_SLOTS && (flags & 1); k++)
        fuzz_touch(ck.opt_state[k], model.flat_floats * sizeof(float));
      if (ck.class_names) fuzz_touch(ck.class_names, strlen(ck.class_names));
      if (ck.keras_json) fuzz_touch(ck.keras_json, strlen(ck.keras_json));
      if (ck.iterations != 5 || ck.epoch != 1 || ck.save_counter != 1 || ck.seed != 42)
        fuzz_fail("fuzz_checkpoint: counters read back wrong");
      clt_checkpoint_free(&ck);
    } else if (!e.msg[0] || ck.params) {
      fuzz_fail("fuzz_checkpoint: load status %d: no message, or arrays left", st);
    }
  }
  free(text);
  return 0;
}
