/* The batch balancer against a simulated cost model: devices of given speeds
 * and fixed per-step overheads, with noise and occasional very slow steps.
 * After it settles, the step time of its split must be within 10% of the ideal
 * split (the continuous optimum, computed exactly from the true model) and never
 * worse than MirroredStrategy's equal split. Also: --split parsing, fixed
 * weights, caps, a device too slow to admit and its periodic probe, and its
 * re-admission once it speeds up; and with leaving on (one process), the same
 * device leaving the step, probed off the critical path at a bounded rate, and
 * rejoining once it speeds up. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "check.h"

typedef struct sim {
  int n;
  double rate[8];     /* examples per second */
  double overhead[8]; /* seconds per step when given any examples */
} sim;

static double true_time(const sim *s, int i, double n) {
  return n > 0 ? s->overhead[i] + n / s->rate[i] : 0;
}

static double step_time(const sim *s, const int *slices) {
  double worst = 0;
  for (int i = 0; i < s->n; i++) worst = fmax(worst, true_time(s, i, slices[i]));
  return worst;
}

/* The continuous optimum: water filling on the true model, trying every subset
 * of admitted devices implicitly (a device is admitted iff T > its overhead). */
static double ideal_time(const sim *s, int global) {
  double lo = 0, hi = 1e9;
  for (int it = 0; it < 200; it++) {
    double mid = 0.5 * (lo + hi), sum = 0;
    for (int i = 0; i < s->n; i++) sum += fmax(0, (mid - s->overhead[i]) * s->rate[i]);
    if (sum >= global) hi = mid;
    else lo = mid;
  }
  return hi;
}

static uint64_t rng = 99;
static double noise(void) { /* uniform in [-1, 1] */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) * 0x1.0p-53 * 2 - 1;
}

/* Runs the balancer for `steps` steps with 5% noise and a 10x slow step every 50;
 * returns the true step time of its final split. */
static double settle(const sim *s, int global, int steps, int *slices) {
  clt_balancer b;
  clt_balancer_init(&b, s->n, CLT_SPLIT_AUTO, NULL, NULL);
  for (int k = 0; k < steps; k++) {
    clt_balancer_split(&b, global, slices);
    double t[8];
    for (int i = 0; i < s->n; i++) {
      t[i] = true_time(s, i, slices[i]) * (1 + 0.05 * noise());
      if (k % 50 == 49 && i == 0) t[i] *= 10; /* a hiccup */
    }
    clt_balancer_observe(&b, slices, t);
  }
  clt_balancer_split(&b, global, slices);
  return step_time(s, slices);
}

static void check_case(const char *name, sim s, int global) {
  int slices[8], equal[8];
  double got = settle(&s, global, 300, slices);
  for (int i = 0; i < s.n; i++) equal[i] = global / s.n + (i < global % s.n);
  double ideal = ideal_time(&s, global), even = step_time(&s, equal);
  int sum = 0;
  for (int i = 0; i < s.n; i++) sum += slices[i];
  char split[100] = "";
  for (int i = 0; i < s.n; i++)
    snprintf(split + strlen(split), sizeof split - strlen(split), "%s%d", i ? "," : "", slices[i]);
  /* Integer slices cost up to one example's time above the continuous ideal. */
  double one = 0;
  for (int i = 0; i < s.n; i++) one = fmax(one, 1 / s.rate[i]);
  check(sum == global && got <= 1.10 * ideal + one && got <= even * (1 + 1e-9),
        "%s: split %s, step %.4gs vs ideal %.4gs (equal split %.4gs)", name, split, got, ideal,
        even);
}

/* Probes replica i as the trainer does off the critical path: one example, and
 * `more` examples too when one took under 10 ms; the result arrives when the
 * probe ends. */
static void probe_sim(clt_balancer *b, const sim *s, int i, int more, double now) {
  if (true_time(s, i, 1) > 0.01) more = 0;
  const int n[2] = {1, more};
  const double t[2] = {true_time(s, i, 1), true_time(s, i, more)};
  const double took = t[0] + (more ? t[1] : 0);
  clt_balancer_probed(b, i, more ? 2 : 1, n, t, took, now + took);
}

/* Steps of the trainer's loop with leaving on, from `now`; counts the probes of
 * replicas out, the steps replica 0 was a member, and checks no replica out is
 * ever given examples. Returns the time at the end. */
static double run_leaving(clt_balancer *b, const sim *s, int global, int steps, double now,
                          int *probes, int *member0, int *bad_split) {
  int slices[8];
  for (int k = 0; k < steps; k++) {
    clt_balancer_regroup(b, global, now);
    clt_balancer_split(b, global, slices);
    double t[8], worst = 0;
    for (int i = 0; i < s->n; i++) {
      if (!clt_balancer_member(b, i) && slices[i]) *bad_split = 1;
      t[i] = true_time(s, i, slices[i]) * (1 + 0.05 * noise());
      worst = fmax(worst, t[i]);
    }
    *member0 += clt_balancer_member(b, 0);
    clt_balancer_observe(b, slices, t);
    now += worst;
    for (int i = 0; i < s->n; i++) {
      if (clt_balancer_probe_due(b, i, now)) {
        ++*probes;
        probe_sim(b, s, i, 16, now);
      }
    }
  }
  return now;
}

static void check_leaving(void) {
  /* Timed by a set-up probe, a device too slow to help leaves before the first
   * step; it is probed rarely (its probe takes 0.1 s: every 2 s of training at
   * most), stays out while slow, and rejoins within a probe once fast. */
  sim slow = {2, {20, 10000}, {0.05, 0.002}};
  clt_balancer b;
  clt_balancer_init(&b, 2, CLT_SPLIT_AUTO, NULL, NULL);
  clt_balancer_leave(&b);
  for (int i = 0; i < 2; i++) probe_sim(&b, &slow, i, 32, 0);
  int probes = 0, member0 = 0, bad = 0, slices[8];
  double now = run_leaving(&b, &slow, 64, 600, 0, &probes, &member0, &bad);
  /* 600 steps of 8.4 ms: 5 s, so 2 or 3 probes. */
  check(member0 == 0 && !bad && probes >= 1 && probes <= 3,
        "a too slow device leaves before the first step and stays out (%d steps in, %d probes "
        "in %.1f s)",
        member0, probes, now);
  clt_balancer_split(&b, 1, slices);
  check(slices[0] == 0 && slices[1] == 1, "a short batch goes to the members only (%d,%d)",
        slices[0], slices[1]);

  slow.rate[0] = 10000;
  slow.overhead[0] = 0.002;
  probes = member0 = 0;
  run_leaving(&b, &slow, 64, 600, now, &probes, &member0, &bad);
  clt_balancer_split(&b, 64, slices);
  check(!bad && probes <= 3 && member0 > 0 && slices[0] >= 24 && slices[1] >= 24,
        "it rejoins once a probe shows it fast (split %d,%d, %d probes)", slices[0], slices[1],
        probes);

  /* Equal devices never leave, and nothing is probed. */
  sim same = {3, {500, 500, 500}, {0.001, 0.001, 0.001}};
  clt_balancer_init(&b, 3, CLT_SPLIT_AUTO, NULL, NULL);
  clt_balancer_leave(&b);
  for (int i = 0; i < 3; i++) probe_sim(&b, &same, i, 32, 0);
  probes = member0 = bad = 0;
  run_leaving(&b, &same, 96, 300, 0, &probes, &member0, &bad);
  clt_balancer_split(&b, 96, slices);
  check(member0 == 300 && probes == 0 && !bad && slices[0] == 32 && slices[1] == 32 &&
            slices[2] == 32,
        "equal devices stay in with equal slices");

  /* Of three, the slow one leaves and the other two share the batch by speed. */
  sim three = {3, {4000, 20, 8000}, {0.002, 0.05, 0.002}};
  clt_balancer_init(&b, 3, CLT_SPLIT_AUTO, NULL, NULL);
  clt_balancer_leave(&b);
  for (int i = 0; i < 3; i++) probe_sim(&b, &three, i, 32, 0);
  probes = member0 = bad = 0;
  run_leaving(&b, &three, 192, 200, 0, &probes, &member0, &bad);
  clt_balancer_split(&b, 192, slices);
  check(clt_balancer_member(&b, 0) && !clt_balancer_member(&b, 1) && clt_balancer_member(&b, 2) &&
            slices[1] == 0 && slices[0] + slices[2] == 192 && slices[2] > slices[0] && !bad,
        "of three, the slow one leaves and the others share by speed (%d,%d,%d)", slices[0],
        slices[1], slices[2]);
}

int main(void) {
  /* Speeds like this machine's PoCL pair (basic ~ 70/s, pthread ~ 300/s) and GPUs
   * 10x and 30x a CPU, with launch overheads. */
  check_case("basic + pthread", (sim){2, {70, 300}, {0.002, 0.004}}, 128);
  check_case("CPU + GPU 10x", (sim){2, {400, 4000}, {0.003, 0.002}}, 128);
  check_case("CPU + GPU 30x", (sim){2, {400, 12000}, {0.003, 0.002}}, 128);
  check_case("CPU + 2 GPUs of different speeds", (sim){3, {400, 4000, 8000}, {0.003, 0.002, 0.002}},
             192);
  check_case("equal devices", (sim){3, {500, 500, 500}, {0.001, 0.001, 0.001}}, 96);
  check_case("large global batch", (sim){2, {400, 12000}, {0.003, 0.002}}, 4096);

  /* A device whose overhead alone exceeds the others' whole step gets nothing,
   * but for one example every 64 steps that re-times it. */
  sim slow = {2, {20, 10000}, {0.05, 0.002}};
  int slices[8];
  {
    clt_balancer b;
    clt_balancer_init(&b, 2, CLT_SPLIT_AUTO, NULL, NULL);
    int given = 0, probes = 0, last_out = 0;
    for (int k = 0; k < 300; k++) {
      clt_balancer_split(&b, 64, slices);
      if (k >= 44) { /* settled: 2 warm-up/equal steps and a few to converge */
        given += slices[0];
        probes += slices[0] > 0;
      }
      last_out = slices[0] == 0 && slices[1] == 64;
      double t[2] = {true_time(&slow, 0, slices[0]), true_time(&slow, 1, slices[1])};
      clt_balancer_observe(&b, slices, t);
    }
    check(last_out && probes >= 3 && probes <= 5 && given == probes,
          "too slow a device is left out but for probes (%d probes of %d examples in 256 steps)",
          probes, given);

    /* The same device becomes fast (a driver's slow start, say): probes bring it back. */
    slow.rate[0] = 10000;
    slow.overhead[0] = 0.002;
    for (int k = 0; k < 400; k++) {
      clt_balancer_split(&b, 64, slices);
      double t[2] = {true_time(&slow, 0, slices[0]), true_time(&slow, 1, slices[1])};
      clt_balancer_observe(&b, slices, t);
    }
    clt_balancer_split(&b, 64, slices);
    check(slices[0] >= 24 && slices[1] >= 24,
          "a left-out device that speeds up is re-admitted (split %d,%d)", slices[0], slices[1]);
  }

  check_leaving();

  clt_split_mode mode;
  double w[CLT_BALANCE_MAX];
  clt_err e = {0};
  check(clt_split_parse("auto", 2, &mode, w, &e) == CLT_OK && mode == CLT_SPLIT_AUTO, "parse auto");
  check(clt_split_parse("equal", 3, &mode, w, &e) == CLT_OK && mode == CLT_SPLIT_EQUAL,
        "parse equal");
  check(clt_split_parse("3,1,0", 3, &mode, w, &e) == CLT_OK && mode == CLT_SPLIT_WEIGHTS &&
            w[0] == 3 && w[1] == 1 && w[2] == 0,
        "parse weights");
  check(clt_split_parse("3,1", 3, &mode, w, &e) == CLT_ERR_ARG &&
            strstr(e.msg, "2 weights for 3 devices"),
        "weights count must match devices");
  check(clt_split_parse("3,-1", 2, &mode, w, &e) == CLT_ERR_ARG, "negative weight refused");
  check(clt_split_parse("0,0", 2, &mode, w, &e) == CLT_ERR_ARG, "zero weights refused");
  check(clt_split_parse("fast", 2, &mode, w, &e) == CLT_ERR_ARG, "garbage refused");

  clt_balancer b;
  double weights[3] = {3, 1, 0};
  clt_balancer_init(&b, 3, CLT_SPLIT_WEIGHTS, weights, NULL);
  clt_balancer_split(&b, 100, slices);
  check(slices[0] == 75 && slices[1] == 25 && slices[2] == 0, "weights 3,1,0 split 100 as 75,25,0");
  clt_balancer_split(&b, 5, slices);
  check(slices[0] + slices[1] + slices[2] == 5 && slices[2] == 0,
        "weights split a short batch exactly");
  int caps[2] = {10, 1000};
  clt_balancer_init(&b, 2, CLT_SPLIT_WEIGHTS, (double[]){9, 1}, caps);
  clt_balancer_split(&b, 100, slices);
  check(slices[0] == 10 && slices[1] == 90, "caps are respected");
  clt_balancer_init(&b, 3, CLT_SPLIT_EQUAL, NULL, NULL);
  clt_balancer_split(&b, 7, slices);
  check(slices[0] == 3 && slices[1] == 2 && slices[2] == 2, "equal split of 7 over 3 is 3,2,2");

  return check_summary();
}
