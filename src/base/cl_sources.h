/* The .cl files of cl/, embedded into the binary at build time (see cl/embed.cmake),
 * so cltrain runs from any directory. */
#ifndef CLT_CL_SOURCES_H
#define CLT_CL_SOURCES_H

#include <stddef.h>

/* Returns the text of cl/<name> or NULL; *len receives its length. */
const char *clt_cl_source(const char *name, size_t *len);

/* The embedded files in name order: their number, and file i's text (its
 * name and length in *name, *len), NULL past the end. */
size_t clt_cl_source_count(void);
const char *clt_cl_source_at(size_t i, const char **name, size_t *len);

#endif
