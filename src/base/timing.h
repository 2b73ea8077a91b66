/* Wall-clock time for measurements: one monotonic clock for every module. */
#ifndef CLT_TIMING_H
#define CLT_TIMING_H

/* Seconds on CLOCK_MONOTONIC (not wall time: immune to clock changes). */
double clt_now_seconds(void);

#endif
