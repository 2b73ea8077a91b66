#include "rng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void clt_rng_seed(clt_rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t clt_rng_next(clt_rng *r) {
  uint64_t *s = r->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double clt_rng_uniform(clt_rng *r) { return (double)(clt_rng_next(r) >> 40) * 0x1.0p-24; }

uint32_t clt_rng_below(clt_rng *r, uint32_t n) {
  /* Lemire's multiply-and-reject: no modulo bias. */
  uint64_t m = (uint64_t)(uint32_t)(clt_rng_next(r) >> 32) * n;
  uint32_t low = (uint32_t)m;
  if (low < n) {
    uint32_t threshold = (uint32_t)(-n) % n;
    while (low < threshold) {
      m = (uint64_t)(uint32_t)(clt_rng_next(r) >> 32) * n;
      low = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

void clt_epoch_order(uint64_t seed, int epoch, int *order, int n) {
  clt_rng r;
  clt_rng_seed(&r, seed, 1 + (uint64_t)epoch);
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)clt_rng_below(&r, (uint32_t)i + 1);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}
