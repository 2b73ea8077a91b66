/* The Keras-style progress bar of a training pass, redrawn a few times a second:
 * due() says whether to draw now (reading the figures drains the queues, so not
 * every step); the last step always draws, and ends the line. */
#ifndef CLT_PROGRESS_H
#define CLT_PROGRESS_H

#include <stdio.h>

typedef struct clt_progress {
  FILE *out; /* NULL: no bar */
  double last_draw;
} clt_progress;

int clt_progress_due(const clt_progress *p, int step, int steps);
void clt_progress_draw(clt_progress *p, int step, int steps, double elapsed, double loss,
                       double acc);

#endif
