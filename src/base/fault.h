/* Fault injection, a test facility: $CLTRAIN_FAULT makes one OpenCL call of one
 * replica fail, or its all-reduce stall, so that the failure paths of training
 * run on working devices. Read once per process; not meant for real runs.
 *
 *   CLTRAIN_FAULT="replica=R,step=S,call=C"   (any order; replica and step default to 0)
 *
 * R: the replica's index in the run, as the "Replica R:" lines number them.
 * S: the fault fires at the first such call replica R makes at optimizer step S
 *    of the run (1-based, steps of a resumed run included) or later; 0: from
 *    set-up on. Evaluation after an epoch counts as that epoch's last step.
 * C: enqueue  a kernel launch fails (CL_OUT_OF_RESOURCES)
 *    read     a device-to-host read fails (CL_OUT_OF_RESOURCES)
 *    map      mapping host memory fails (CL_MAP_FAILURE): the all-reduce's
 *             staging memory, mapped at set-up with 2 or more replicas or
 *             processes (one replica in one process maps nothing)
 *    alloc    a device allocation fails (CL_MEM_OBJECT_ALLOCATION_FAILURE)
 *    stall    the replica's thread blocks for good on entering the step's
 *             all-reduce, as one in a hung driver would (see clt_ring_join)
 * map and alloc happen only at set-up, so they take no step (or step=0).
 * A failure goes through the path a real one takes; its message ends with
 * " (injected by CLTRAIN_FAULT)". The fault fires once. */
#ifndef CLT_FAULT_H
#define CLT_FAULT_H

#include "status.h"

typedef enum clt_fault_call {
  CLT_FAULT_NONE = 0,
  CLT_FAULT_ENQUEUE,
  CLT_FAULT_READ,
  CLT_FAULT_MAP,
  CLT_FAULT_ALLOC,
  CLT_FAULT_STALL,
} clt_fault_call;

/* Checks $CLTRAIN_FAULT: CLT_ERR_ARG naming the variable when it is malformed. */
int clt_fault_check(clt_err *e);

/* Whether the fault is `call` of `replica` at `step` and has not fired yet; true
 * once per process (thread-safe). A malformed variable injects nothing. */
int clt_fault_hit(int replica, long step, clt_fault_call call);

/* Marks e's message as injected (appends " (injected by CLTRAIN_FAULT)");
 * returns e's code. */
int clt_fault_mark(clt_err *e);

#endif
