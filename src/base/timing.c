#define _POSIX_C_SOURCE 200809L
#include "timing.h"

#include <time.h>

double clt_now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}
