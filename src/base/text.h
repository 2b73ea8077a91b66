/* Texts of lines: the records a run keeps of its choices (convolution
 * algorithms, GEMM tilings, replicas) are lines, each ending in '\n'. */
#ifndef CLT_TEXT_H
#define CLT_TEXT_H

#include <stddef.h>

/* The next line of *text (the last line may lack its '\n'): its start in *line,
 * its length without the '\n' in *len, and *text moved past it. 0 when *text is
 * NULL or at its end. */
int clt_text_line(const char **text, const char **line, size_t *len);

#endif
