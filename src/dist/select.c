/* Choosing a process's devices (select.h), as the train command does. */
#include "select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

int clt_process_device_spec(const char *spec, clt_cluster *c, const char *flag, char *out,
                            size_t size, clt_err *e) {
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
                    "%s %s: %d selections (one per process), but the run has %d process%s", flag,
                    spec, parts, procs, procs == 1 ? "" : "es");
  }
  const char *q = spec;
  for (int r = 0; r < rank; r++) q = strchr(q, ';') + 1;
  const char *end = strchr(q, ';');
  const size_t len = end ? (size_t)(end - q) : strlen(q);
  if (len == 0)
    return clt_fail(e, CLT_ERR_ARG, "%s %s: rank %d's selection is empty", flag, spec, rank);
  snprintf(out, size, "%.*s", (int)len, q);
  return CLT_OK;
}

int clt_select_listed(const char *spec, const char *flag, clt_device_list *list,
                      const clt_device **chosen, int *n, clt_err *e) {
  int idx[CLT_MAX_SELECTED];
  *n = 0;
  if (list->count > CLT_MAX_SELECTED)
    return clt_fail(e, CLT_ERR_DEVICE, "%d OpenCL devices: more than cltrain handles", list->count);
  int count = 0;
  int status = clt_devices_select(list, spec, idx, &count, e);
  if (status) return status;
  if (count > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_DEVICE, "%s %s selects %d devices; cltrain handles up to %d", flag,
                    spec, count, CLT_MAX_REPLICAS);
  }
  for (int i = 0; i < count; i++) chosen[i] = &list->devices[idx[i]];
  *n = count;
  return CLT_OK;
}

int clt_select_by_type(const char *spec) {
  return strcmp(spec, "all") == 0 || strcmp(spec, "cpu") == 0 || strcmp(spec, "gpu") == 0 ||
         strcmp(spec, "accelerator") == 0;
}

int clt_select_devices(const char *spec, clt_cluster *c, clt_device_list *list, const clt_model *m,
                       const clt_device **chosen, int *n, clt_err *e) {
  char mine[1024];
  const clt_device *listed[CLT_MAX_REPLICAS];
  int count = 0;
  *n = 0;
  int status = clt_process_device_spec(spec, c, "devices", mine, sizeof mine, e);
  if (!status) status = clt_select_listed(mine, "devices", list, listed, &count, e);
  if (status) return status;
  const int by_type = clt_select_by_type(mine);
  const double need = m ? clt_trainer_device_need(m) : 0;
  for (int i = 0; i < count; i++) {
    if (by_type && (double)listed[i]->global_mem_bytes < need) continue;
    chosen[(*n)++] = listed[i];
  }
  if (*n == 0) {
    return clt_fail(e, CLT_ERR_DEVICE,
                    "devices %s: no device can hold model %s (one example needs %.0f MiB)", mine,
                    m ? m->name : "", need / 1048576.0);
  }
  return CLT_OK;
}
