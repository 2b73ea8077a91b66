/* The .cl files of cl/, embedded into the binary at build time (see cl/embed.cmake),
 * so cltrain runs from any directory. */
#ifndef CLT_CL_SOURCES_H
#define CLT_CL_SOURCES_H

#include <stddef.h>

/* Returns the text of cl/<name> or NULL; *len receives its length. */
const char *clt_cl_source(const char *name, size_t *len);

#endif
