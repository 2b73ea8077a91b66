/* Which devices of the host a process trains on: --devices (and the train
 * command's rules for it under MPI and $CLTRAIN_DEVICES), from a list already
 * enumerated. */
#ifndef CLT_SELECT_H
#define CLT_SELECT_H

#include "cluster.h"
#include "device.h"
#include "model.h"
#include "status.h"

#include <stddef.h>

/* This process's part of a selection, into out: $CLTRAIN_DEVICES when set, else
 * spec's part for this rank where it reads "A;B;..." (one selection per process
 * of c), else spec itself. flag names the setting in messages ("--devices"). */
int clt_process_device_spec(const char *spec, clt_cluster *c, const char *flag, char *out,
                            size_t size, clt_err *e);
/* The devices one selection picks from list, in selection order; chosen must
 * hold CLT_MAX_REPLICAS. */
int clt_select_listed(const char *spec, const char *flag, clt_device_list *list,
                      const clt_device **chosen, int *n, clt_err *e);
/* Whether a selection picks devices by type (all, cpu, gpu, accelerator), not by index. */
int clt_select_by_type(const char *spec);

/* This process's devices for spec, in selection order, from list (which a
 * partitioning selection such as "0/2" appends sub-devices to): spec is
 * $CLTRAIN_DEVICES when set, else spec's part for this rank where it reads
 * "A;B;..." (one selection per process of c), else spec itself. chosen must
 * hold CLT_MAX_REPLICAS. Under a selection by type (all, cpu, gpu, accelerator)
 * a device too small to train m on one example (m NULL: no check) is left out;
 * one named by index stays, to fail when its replica is made. */
int clt_select_devices(const char *spec, clt_cluster *c, clt_device_list *list, const clt_model *m,
                       const clt_device **chosen, int *n, clt_err *e);

#endif
