/* Starting weights from an .npz (see weights.h). */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "npz.h"

/* "(3,3,1,64)" */
static void shape_text(const int64_t *dims, int rank, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "(");
  for (int d = 0; d < rank && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)dims[d]);
  if (used < size) snprintf(buf + used, size - used, ")");
}

/* Checks member a against parameter p and copies it into flat. */
static int take(const char *path, const clt_npz_array *a, const clt_layer *l, const clt_param *p,
                float *flat, clt_err *e) {
  int64_t want[4];
  for (int d = 0; d < p->rank; d++) want[d] = p->dims[d];
  int same = a->rank == p->rank;
  for (int d = 0; same && d < p->rank; d++) same = a->dims[d] == want[d];
  /* A scalar int64 (Normalization's count, as get_weights gives it) is taken as a float. */
  if (p->rank == 0 && a->rank == 0 && strcmp(a->dtype, "<i8") == 0 && a->bytes == 8) {
    const unsigned char *d = a->data;
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--) u = u << 8 | d[i]; /* little-endian */
    flat[p->offset] = (float)(int64_t)u;
    return CLT_OK;
  }
  if (strcmp(a->dtype, "<f4") != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s (for %s/%s) has dtype %s, expected float32",
                    path, a->name, l->name, p->name, a->dtype);
  }
  if (!same) {
    char got[96], need[96];
    shape_text(a->dims, a->rank, got, sizeof got);
    shape_text(want, p->rank, need, sizeof need);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s has shape %s, %s/%s needs %s", path, a->name,
                    got, l->name, p->name, need);
  }
  /* A NaN or infinity would be trained on as if it were a weight. */
  int status = clt_npz_check_finite(path, a, e);
  if (status) return status;
  memcpy(flat + p->offset, a->data, p->size * sizeof(float));
  return CLT_OK;
}

/* The first member not yet taken named "<layer>/<alias>_<digits>": Keras 3 names a
 * weight made without a name "variable", "variable_1", ... (unique in the session
 * that built the model), so a model of several LayerScale layers holds
 * "..._layer_scale/variable_3". NULL if none. */
static const clt_npz_array *take_numbered(const clt_npz *z, const char *layer, const char *alias,
                                          char *used) {
  const size_t nl = strlen(layer), na = strlen(alias);
  for (int i = 0; i < clt_npz_count(z); i++) {
    const char *n = clt_npz_at(z, i)->name;
    if (used[i] || strncmp(n, layer, nl) != 0 || n[nl] != '/' ||
        strncmp(n + nl + 1, alias, na) != 0 || n[nl + 1 + na] != '_')
      continue;
    const char *d = n + nl + 2 + na;
    if (!*d || strspn(d, "0123456789") != strlen(d)) continue;
    used[i] = 1;
    return clt_npz_at(z, i);
  }
  return NULL;
}

int clt_weights_load(const clt_model *m, const char *path, float *flat, clt_err *e) {
  clt_npz *z = NULL;
  char *used = NULL; /* per member: a weight taken, or a checkpoint's other member */
  float *staged = malloc(m->flat_floats * sizeof(float));
  if (!staged) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
  memcpy(staged, flat, m->flat_floats * sizeof(float));
  int status = clt_npz_read(path, &z, e), k = 0;
  if (status) goto cleanup;
  if (!(used = calloc((size_t)clt_npz_count(z) + 1, 1))) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
    goto cleanup;
  }
  const int positional = clt_npz_find(z, "arr_0") != NULL;
  for (int i = 0; i < m->nlayers && !status; i++) {
    const clt_layer *l = &m->layers[i];
    for (int p = 0; p < l->nparams && !status; p++) {
      /* Not among Keras' get_weights: the model file's config gave it. */
      if (positional && l->params[p].keras_config) continue;
      const int at = k++;
      char name[96];
      if (positional) snprintf(name, sizeof name, "arr_%d", at);
      else snprintf(name, sizeof name, "%s/%s", l->name, l->params[p].name);
      const clt_npz_array *a = clt_npz_take(z, name, used);
      if (!a && !positional && l->params[p].alias[0]) {
        snprintf(name, sizeof name, "%s/%s", l->name, l->params[p].alias);
        a = clt_npz_take(z, name, used);
        if (!a) a = take_numbered(z, l->name, l->params[p].alias, used);
        if (!a) snprintf(name, sizeof name, "%s/%s", l->name, l->params[p].name);
      }
      /* Keras names no weight of a layer its config gave values (a checkpoint does). */
      if (!a && !positional && l->params[p].keras_config) continue;
      if (!a && positional) {
        int have = 0;
        while (snprintf(name, sizeof name, "arr_%d", have), clt_npz_find(z, name)) have++;
        status = clt_fail(e, CLT_ERR_FORMAT,
                          "%s: %d arrays (Keras get_weights order), model %s has more: %s/%s "
                          "is weight %d",
                          path, have, m->name, l->name, l->params[p].name, at);
      } else if (!a) {
        status = clt_fail(e, CLT_ERR_FORMAT,
                          "%s: no member %s (weights are arr_0, arr_1, ... "
                          "in Keras' get_weights order, or named <layer>/<weight>)",
                          path, name);
      } else {
        status = take(path, a, l, &l->params[p], staged, e);
      }
    }
  }
  if (!status && positional) {
    char name[32];
    snprintf(name, sizeof name, "arr_%d", k);
    if (clt_npz_find(z, name)) {
      int have = k;
      while (snprintf(name, sizeof name, "arr_%d", have), clt_npz_find(z, name)) have++;
      status = clt_fail(e, CLT_ERR_FORMAT, "%s: %d array%s, model %s has %d weight%s", path, have,
                        have == 1 ? "" : "s", m->name, k, k == 1 ? "" : "s");
    }
  }
  /* Exactly the weights, as Keras refuses a weights file that does not match; a
   * checkpoint (it has metadata) may also hold its optimizer state and counters. */
  const int checkpoint = !positional && clt_npz_find(z, "metadata") != NULL;
  for (int i = 0; !status && i < clt_npz_count(z); i++) {
    const char *name = clt_npz_at(z, i)->name;
    if (used[i] || (checkpoint && clt_checkpoint_extra_member(m, name))) continue;
    char shown[160];
    clt_npz_printable(shown, sizeof shown, name);
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: unexpected member %s: not a weight of model %s%s",
                      path, shown, m->name,
                      positional ? " (arr_0, arr_1, ... in Keras' get_weights order)" : "");
  }
  if (!status) memcpy(flat, staged, m->flat_floats * sizeof(float));
cleanup:
  clt_npz_free(z);
  free(used);
  free(staged);
  return status;
}
