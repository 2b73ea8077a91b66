/* Projection of the heterogeneous split for hosts this machine does not have:
 * a CPU replica of measured speed next to a GPU `factor` times faster, each with
 * a fixed per-step overhead, plus the all-reduce's time when both take part.
 * Runs the real balancer (src/dist/balance.c) against that cost model, with 5%
 * noise, and prints images/s for the equal split, the auto split and the GPU
 * alone.
 *
 *   split_projection --cpu-rate 300 --factor 10 [--global 128] [--overhead-ms 2]
 *                    [--allreduce-ms 5] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"

static double rate[2], overhead, allreduce;

/* Both replicas stay in the ring whatever their slices (as in cltrain), so a
 * two-replica step always pays the all-reduce. */
static double step_time(const int *slices) {
  double worst = 0;
  for (int i = 0; i < 2; i++) {
    if (slices[i] > 0) worst = fmax(worst, overhead + slices[i] / rate[i]);
  }
  return worst + allreduce;
}

int main(int argc, char **argv) {
  double cpu = 300, factor = 10, overhead_ms = 2, allreduce_ms = 5;
  int global = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cpu-rate") == 0) cpu = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--factor") == 0) factor = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--global") == 0) global = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--overhead-ms") == 0) overhead_ms = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--allreduce-ms") == 0) allreduce_ms = atof(argv[i + 1]);
    else {
      fprintf(stderr, "split_projection: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  rate[0] = cpu;
  rate[1] = cpu * factor;
  overhead = overhead_ms * 1e-3;
  allreduce = allreduce_ms * 1e-3;
  clt_balancer b;
  clt_balancer_init(&b, 2, CLT_SPLIT_AUTO, NULL, NULL);
  uint64_t rng = 7;
  int slices[2];
  for (int k = 0; k < 300; k++) {
    clt_balancer_split(&b, global, slices);
    double t[2];
    for (int i = 0; i < 2; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      double noise = 1 + 0.05 * ((double)(rng >> 11) * 0x1.0p-53 * 2 - 1);
      t[i] = slices[i] ? (overhead + slices[i] / rate[i]) * noise : 0;
    }
    clt_balancer_observe(&b, slices, t);
  }
  clt_balancer_split(&b, global, slices);
  int equal[2] = {global / 2, global - global / 2};
  double t_equal = step_time(equal), t_auto = step_time(slices);
  double t_alone = overhead + global / rate[1]; /* one device: no all-reduce */
  printf("GPU %gx the CPU (%.0f vs %.0f images/s), global batch %d, all-reduce %.1f ms: equal %.0f "
         "images/s, auto %.0f images/s (split %d/%d), GPU alone %.0f images/s\n",
         factor, rate[1], rate[0], global, allreduce_ms, global / t_equal, global / t_auto,
         slices[0], slices[1], global / t_alone);
  return 0;
}
