/* Deterministic pseudo-random numbers (xoshiro256**, seeded by splitmix64), so
 * initial weights and data order depend only on the seed, never on devices. */
#ifndef CLT_RNG_H
#define CLT_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct clt_rng {
  uint64_t s[4];
} clt_rng;

/* A generator for (seed, stream): distinct streams are independent sequences
 * (stream 0 initialises weights, stream 1 + epoch orders the data, ...). */
void clt_rng_seed(clt_rng *r, uint64_t seed, uint64_t stream);
uint64_t clt_rng_next(clt_rng *r);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
double clt_rng_uniform(clt_rng *r);
/* Uniform integer in [0, n), unbiased. n > 0. */
uint32_t clt_rng_below(clt_rng *r, uint32_t n);

/* order[i] = a permutation of 0..n-1 for this seed and epoch (Fisher-Yates). */
void clt_epoch_order(uint64_t seed, int epoch, int *order, int n);

#endif
