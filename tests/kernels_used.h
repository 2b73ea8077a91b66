/* Which kernels a test ran: tests/oclgrind.sh runs the device tests under Oclgrind
 * and checks that together they ran every kernel of cl/. */
#ifndef CLT_TEST_KERNELS_USED_H
#define CLT_TEST_KERNELS_USED_H

#include "replica.h"

/* With $CLT_TEST_KERNELS_USED naming a file, appends "<backend> <kernel>" for each
 * kernel r created (backend: cpu or gpu); without it, does nothing. Call before
 * destroying r. */
void log_kernels_used(const clt_replica *r);

#endif
