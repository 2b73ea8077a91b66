/* Choosing a process's devices (select.h), as the train command does. */
#include "select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

/* This process's part of spec (select.h) into out. */
static int process_spec(const char *spec, clt_cluster *c, char *out, size_t size, clt_err *e) {
  const char *env = getenv("CLTRAIN_DEVICES");
  if (env && *env) spec = env;
  const int rank = clt_cluster_rank(c), procs = clt_cluster_size(c);
  if (!strchr(spec, ';')) {
    snprintf(out, size, "%s", spec);
    return CLT_OK;
  }
  int parts = 1;
  for (const char *q = spec; *q; q++) parts += *q == ';';
  if (parts != procs) {
    return clt_fail(e, CLT_ERR_ARG,
                    "devices %s: %d selections (one per process), but the run has %d process%s",
                    spec, parts, procs, procs == 1 ? "" : "es");
  }
  const char *q = spec;
  for (int r = 0; r < rank; r++) q = strchr(q, ';') + 1;
  const char *end = strchr(q, ';');
  const size_t len = end ? (size_t)(end - q) : strlen(q);
  if (len == 0)
    return clt_fail(e, CLT_ERR_ARG, "devices %s: rank %d's selection is empty", spec, rank);
  snprintf(out, size, "%.*s", (int)len, q);
  return CLT_OK;
}

int clt_select_devices(const char *spec, clt_cluster *c, clt_device_list *list, const clt_model *m,
                       const clt_device **chosen, int *n, clt_err *e) {
  char mine[1024];
  int idx[CLT_MAX_SELECTED];
  *n = 0;
  int status = process_spec(spec, c, mine, sizeof mine, e);
  if (status) return status;
  if (list->count > CLT_MAX_SELECTED)
    return clt_fail(e, CLT_ERR_DEVICE, "%d OpenCL devices: more than cltrain handles", list->count);
  int count = 0;
  if ((status = clt_devices_select(list, mine, idx, &count, e))) return status;
  if (count > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_DEVICE, "devices %s selects %d devices; cltrain handles up to %d",
                    mine, count, CLT_MAX_REPLICAS);
  }
  const int by_type = strcmp(mine, "all") == 0 || strcmp(mine, "cpu") == 0 ||
                      strcmp(mine, "gpu") == 0 || strcmp(mine, "accelerator") == 0;
  const double need = m ? clt_trainer_device_need(m) : 0;
  for (int i = 0; i < count; i++) {
    const clt_device *d = &list->devices[idx[i]];
    if (by_type && (double)d->global_mem_bytes < need) continue;
    chosen[(*n)++] = d;
  }
  if (*n == 0) {
    return clt_fail(e, CLT_ERR_DEVICE,
                    "devices %s: no device can hold model %s (one example needs %.0f MiB)", mine,
                    m ? m->name : "", need / 1048576.0);
  }
  return CLT_OK;
}
