/* A line printed only if something takes longer than it should: "compiling
 * kernels ..." appears when a first run's kernel builds pass a second, and
 * never on a warm start. */
#ifndef CLT_NOTICE_H
#define CLT_NOTICE_H

#include <stdio.h>

#include "status.h"

typedef struct clt_notice clt_notice;

/* Prints `text` and a newline to out after `seconds`, unless clt_notice_done
 * came first. */
int clt_notice_start(double seconds, FILE *out, const char *text, clt_notice **out_notice,
                     clt_err *e);

/* Cancels the line if it has not been printed yet; safe to call more than
 * once, and on NULL. */
void clt_notice_done(clt_notice *n);

/* clt_notice_done, then frees n (NULL: nothing). */
void clt_notice_free(clt_notice *n);

#endif
