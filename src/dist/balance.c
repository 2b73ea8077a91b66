#include "balance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FORGET 0.85    /* weight of the past per step: about the last 7 steps count */
#define OUTLIER 1.5    /* an observation this far above or below the prediction is suspect */
#define MARGIN 0.03    /* leave the equal split only for a predicted gain above 3% */
#define STICKY 0.01    /* change the previous split only for a predicted gain above 1% */
#define PROBE_EVERY 64 /* a replica left out gets one example this often, to be re-timed */
/* With leaving on, a replica out is probed off the critical path, at most every
 * OUT_PROBE_EVERY full batches and PROBE_DUTY times its probe's duration apart. */
#define OUT_PROBE_EVERY 16
#define PROBE_DUTY 20.0

int clt_split_parse(const char *spec, int n, clt_split_mode *mode, double *weights, clt_err *e) {
  if (strcmp(spec, "auto") == 0) {
    *mode = CLT_SPLIT_AUTO;
    return CLT_OK;
  }
  if (strcmp(spec, "equal") == 0) {
    *mode = CLT_SPLIT_EQUAL;
    return CLT_OK;
  }
  const char *s = spec;
  double sum = 0;
  int count = 0;
  while (*s) {
    char *end = NULL;
    double w = strtod(s, &end);
    if (end == s || (*end != ',' && *end != '\0') || !(w >= 0) || !isfinite(w)) {
      return clt_fail(e, CLT_ERR_ARG,
                      "--split %s: expected auto, equal or non-negative weights like 3,1", spec);
    }
    if (count < CLT_BALANCE_MAX) weights[count] = w;
    count++;
    sum += w;
    s = *end ? end + 1 : end;
    if (*end == ',' && !*s) return clt_fail(e, CLT_ERR_ARG, "--split %s: trailing comma", spec);
  }
  if (count != n) {
    return clt_fail(e, CLT_ERR_ARG, "--split %s: %d weight%s for %d device%s", spec, count,
                    count == 1 ? "" : "s", n, n == 1 ? "" : "s");
  }
  if (!(sum > 0)) return clt_fail(e, CLT_ERR_ARG, "--split %s: the weights sum to zero", spec);
  *mode = CLT_SPLIT_WEIGHTS;
  return CLT_OK;
}

void clt_balancer_init(clt_balancer *b, int n, clt_split_mode mode, const double *weights,
                       const int *caps) {
  memset(b, 0, sizeof *b);
  b->n = n;
  b->mode = mode;
  for (int i = 0; i < n; i++) {
    b->weights[i] = weights ? weights[i] : 1.0;
    b->cap[i] = caps ? caps[i] : 1 << 30;
    b->member[i] = 1;
  }
}

void clt_balancer_leave(clt_balancer *b) { b->leave = b->mode == CLT_SPLIT_AUTO; }

int clt_balancer_member(const clt_balancer *b, int i) { return b->member[i]; }

/* Time of replica i for n examples under the estimates; an empty slice costs nothing. */
static double time_of(const clt_balancer *b, int i, double n) {
  return n > 0 ? b->overhead[i] + n * b->cost[i] : 0.0;
}

double clt_balancer_predict(const clt_balancer *b, const int *slices) {
  double worst = 0;
  for (int i = 0; i < b->n; i++) worst = fmax(worst, time_of(b, i, slices[i]));
  return worst;
}

/* Largest-remainder rounding of non-negative shares to integers summing to
 * total, within caps (cap: b->cap, 0 for a replica out of the step). */
static void round_shares(const clt_balancer *b, const int *cap, const double *share, int total,
                         int *out) {
  double frac[CLT_BALANCE_MAX];
  int sum = 0;
  for (int i = 0; i < b->n; i++) {
    double s = fmin(share[i], cap[i]);
    out[i] = (int)floor(s);
    frac[i] = s - out[i];
    sum += out[i];
  }
  while (sum < total) {
    int best = -1;
    for (int i = 0; i < b->n; i++) {
      if (out[i] < cap[i] && (best < 0 || frac[i] > frac[best])) best = i;
    }
    if (best < 0) break; /* caps below the total: the caller checked they are not */
    out[best]++;
    frac[best] = -1.0 + frac[best]; /* each replica gets at most one per round */
    sum++;
  }
  while (sum > total) { /* only when caps clipped nothing and floors overshot: never, but safe */
    int best = 0;
    for (int i = 1; i < b->n; i++)
      if (out[i] > out[best]) best = i;
    out[best]--;
    sum--;
  }
}

static void proportional(const clt_balancer *b, const int *cap, const double *w, int total,
                         int *out) {
  double sum = 0, share[CLT_BALANCE_MAX];
  for (int i = 0; i < b->n; i++) sum += cap[i] > 0 ? w[i] : 0;
  for (int i = 0; i < b->n; i++) share[i] = sum > 0 && cap[i] > 0 ? total * w[i] / sum : 0;
  if (!(sum > 0)) {
    int in = 0;
    for (int i = 0; i < b->n; i++) in += cap[i] > 0;
    for (int i = 0; i < b->n; i++) share[i] = cap[i] > 0 ? (double)total / in : 0;
  }
  round_shares(b, cap, share, total, out);
}

/* Water filling: the finishing time T at which the replicas together take
 * `total` examples, each n_i = clamp((T - overhead_i) / cost_i, 0, cap_i). */
static void water_fill(const clt_balancer *b, const int *cap, int total, double *share) {
  double lo = 0, hi = 0;
  for (int i = 0; i < b->n; i++) {
    if (cap[i] > 0) hi = fmax(hi, b->overhead[i] + total * b->cost[i]);
  }
  for (int iter = 0; iter < 100; iter++) {
    double mid = 0.5 * (lo + hi), sum = 0;
    for (int i = 0; i < b->n; i++)
      sum += fmin(cap[i], fmax(0.0, (mid - b->overhead[i]) / b->cost[i]));
    if (sum >= total) hi = mid;
    else lo = mid;
  }
  for (int i = 0; i < b->n; i++)
    share[i] = fmin(cap[i], fmax(0.0, (hi - b->overhead[i]) / b->cost[i]));
}

/* Moves single examples off the slowest replica while that shortens the step:
 * rounding can hand a replica one example that costs it a whole overhead. */
static void repair(const clt_balancer *b, const int *cap, int *slices) {
  for (int guard = 0; guard < 100000; guard++) {
    int slow = 0;
    for (int i = 1; i < b->n; i++) {
      if (time_of(b, i, slices[i]) > time_of(b, slow, slices[slow])) slow = i;
    }
    double before = time_of(b, slow, slices[slow]);
    int to = -1;
    double best = before;
    for (int j = 0; j < b->n; j++) {
      if (j == slow || slices[j] >= cap[j]) continue;
      double after = time_of(b, j, slices[j] + 1);
      if (after < best) {
        best = after;
        to = j;
      }
    }
    if (to < 0 || slices[slow] == 0) return;
    /* The slow replica's own time drops; the step improves if no one else is now slower. */
    slices[slow]--;
    slices[to]++;
    double worst = clt_balancer_predict(b, slices);
    if (!(worst < before)) {
      slices[slow]++;
      slices[to]--;
      return;
    }
  }
}

/* A replica left out is never timed again, so it would stay out even if it
 * sped up (or only had a bad moment when it was judged): every PROBE_EVERY
 * splits it gets one example, taken from the largest slice, and is re-timed.
 * The cost is one example on a slow device once in PROBE_EVERY steps. */
static void probe(clt_balancer *b, int *slices) {
  for (int i = 0; i < b->n; i++) {
    if (slices[i] > 0 || b->observed[i] == 0) {
      b->idle[i] = 0;
      continue;
    }
    if (++b->idle[i] < PROBE_EVERY || b->cap[i] < 1) continue;
    int big = 0;
    for (int j = 1; j < b->n; j++) {
      if (slices[j] > slices[big]) big = j;
    }
    if (slices[big] < 2) continue;
    slices[big]--;
    slices[i]++;
    b->idle[i] = 0;
  }
}

/* The caps a split honours: a replica out of the step takes nothing. in: the
 * members to split over (b->member, or a trial set). */
static void caps_of(const clt_balancer *b, const int *in, int *cap) {
  for (int i = 0; i < b->n; i++) cap[i] = in[i] ? b->cap[i] : 0;
}

/* The split of a timed auto balancer over members `in`: water filling, rounded
 * and repaired, unless the equal split is predicted within MARGIN of it. */
static void auto_split(const clt_balancer *b, const int *in, int global, int *slices) {
  int cap[CLT_BALANCE_MAX] = {0}, equal[CLT_BALANCE_MAX] = {0};
  double share[CLT_BALANCE_MAX], ones[CLT_BALANCE_MAX];
  caps_of(b, in, cap);
  water_fill(b, cap, global, share);
  round_shares(b, cap, share, global, slices);
  repair(b, cap, slices);
  /* Estimates carry noise: move away from the equal split only for a clear
   * predicted gain, so equal devices stay equal. */
  for (int i = 0; i < b->n; i++) ones[i] = 1.0;
  proportional(b, cap, ones, global, equal);
  if (clt_balancer_predict(b, slices) > (1.0 - MARGIN) * clt_balancer_predict(b, equal)) {
    memcpy(slices, equal, sizeof(int) * (size_t)b->n);
  }
}

void clt_balancer_split(clt_balancer *b, int global, int *slices) {
  int known = 1, cap[CLT_BALANCE_MAX];
  for (int i = 0; i < b->n; i++) known &= b->observed[i] > 0 || !b->member[i];
  caps_of(b, b->member, cap);
  if (b->mode == CLT_SPLIT_WEIGHTS) {
    proportional(b, cap, b->weights, global, slices);
  } else if (b->mode == CLT_SPLIT_EQUAL || !known) {
    /* MirroredStrategy's slices; auto starts here until every replica was timed. */
    double ones[CLT_BALANCE_MAX];
    for (int i = 0; i < b->n; i++) ones[i] = 1.0;
    proportional(b, cap, ones, global, slices);
  } else {
    auto_split(b, b->member, global, slices);
    /* Change the previous split only for a small predicted gain, so slices do
     * not jitter but still converge. */
    int last_sum = 0, same_members = 1;
    for (int i = 0; i < b->n; i++) {
      last_sum += b->last[i];
      same_members &= b->member[i] || b->last[i] == 0;
    }
    if (last_sum == global && same_members &&
        clt_balancer_predict(b, b->last) <= (1.0 + STICKY) * clt_balancer_predict(b, slices)) {
      memcpy(slices, b->last, sizeof(int) * (size_t)b->n);
    }
    if (!b->leave) probe(b, slices);
  }
  memcpy(b->last, slices, sizeof(int) * (size_t)b->n);
}

int clt_balancer_excluded(const clt_balancer *b, int replica) {
  if (b->leave) return !b->member[replica];
  return b->mode == CLT_SPLIT_AUTO && b->observed[replica] > 0 && b->last[replica] == 0;
}

double clt_balancer_time(const clt_balancer *b, int i, int n) { return time_of(b, i, n); }

int clt_balancer_regroup(clt_balancer *b, int global, double now) {
  if (!b->leave) return 0;
  int in = 0;
  for (int i = 0; i < b->n; i++) {
    if (b->member[i] && b->observed[i] == 0) return 0; /* not every member timed yet */
    in += b->member[i];
    if (!b->member[i]) b->since[i]++;
  }
  int slices[CLT_BALANCE_MAX] = {0}, kept = 0;
  auto_split(b, b->member, global, slices);
  for (int i = 0; i < b->n; i++) kept += b->member[i] && slices[i] > 0;
  if (kept > 0 && kept < in) {
    for (int i = 0; i < b->n; i++) {
      if (!b->member[i] || slices[i] > 0) continue;
      b->member[i] = 0;
      b->fresh[i] = 0;
      b->since[i] = 0;
      /* Paced as if just probed: re-timing it costs about one example. */
      b->probe_took[i] = time_of(b, i, 1);
      b->probe_end[i] = now;
    }
    return 1;
  }
  /* Re-admission: one replica whose probe predicts a clearly shorter step. */
  const double now_time = clt_balancer_predict(b, slices);
  for (int i = 0; i < b->n; i++) {
    if (b->member[i] || !b->fresh[i]) continue;
    b->fresh[i] = 0;
    int trial[CLT_BALANCE_MAX], with[CLT_BALANCE_MAX] = {0};
    memcpy(trial, b->member, sizeof trial);
    trial[i] = 1;
    auto_split(b, trial, global, with);
    if (with[i] > 0 && clt_balancer_predict(b, with) < (1.0 - MARGIN) * now_time) {
      b->member[i] = 1;
      b->outliers[i] = 0;
      return 1;
    }
  }
  return 0;
}

int clt_balancer_probe_due(const clt_balancer *b, int i, double now) {
  return b->leave && !b->member[i] && b->since[i] >= OUT_PROBE_EVERY &&
         now - b->probe_end[i] >= PROBE_DUTY * b->probe_took[i];
}

/* Refits overhead and cost of replica i from its weighted sums. */
static void refit(clt_balancer *b, int i) {
  double sw = b->sw[i], sn = b->sn[i], st = b->st[i];
  double det = sw * b->snn[i] - sn * sn;
  double cost = 0, overhead = 0;
  /* The line is identifiable only once slice sizes varied enough; until then
   * (and if the fit is unphysical) assume no overhead. */
  if (det > 1e-9 * sw * b->snn[i]) {
    cost = (sw * b->snt[i] - sn * st) / det;
    overhead = (st - cost * sn) / sw;
  }
  if (!(cost > 0) || !(overhead >= 0)) {
    overhead = 0;
    cost = st / sn;
  }
  b->cost[i] = fmax(cost, 1e-12);
  b->overhead[i] = overhead;
}

void clt_balancer_observe(clt_balancer *b, const int *slices, const double *seconds) {
  for (int i = 0; i < b->n; i++) {
    if (slices[i] <= 0 || !(seconds[i] > 0)) continue;
    /* A replica's first step is a warm-up, not its speed: PoCL and other drivers
     * compile kernels at their first launch, and buffers are touched first. */
    if (!b->warmed[i]) {
      b->warmed[i] = 1;
      continue;
    }
    double n = slices[i], t = seconds[i];
    if (b->observed[i] > 0) {
      /* A lone step far off the prediction (a hiccup: page faults, another
       * process) is ignored; a second one in a row means the device changed. */
      double p = time_of(b, i, n);
      if (t > p * OUTLIER || t < p / OUTLIER) {
        if (!b->outliers[i]++) continue;
        /* The device changed: its past says nothing now (and a replica left
         * out, timed once per probe, would take dozens of probes to outweigh it). */
        b->sw[i] = b->sn[i] = b->st[i] = b->snn[i] = b->snt[i] = 0;
      } else {
        b->outliers[i] = 0;
      }
    }
    b->sw[i] = FORGET * b->sw[i] + 1;
    b->sn[i] = FORGET * b->sn[i] + n;
    b->st[i] = FORGET * b->st[i] + t;
    b->snn[i] = FORGET * b->snn[i] + n * n;
    b->snt[i] = FORGET * b->snt[i] + n * t;
    b->observed[i]++;
    refit(b, i);
  }
}

void clt_balancer_probed(clt_balancer *b, int i, int points, const int *n, const double *seconds,
                         double took, double now) {
  double sw = 0, sn = 0, st = 0, snn = 0, snt = 0;
  for (int k = 0; k < points; k++) {
    if (n[k] <= 0 || !(seconds[k] > 0)) continue;
    const double x = n[k], t = seconds[k];
    sw += 1;
    sn += x;
    st += t;
    snn += x * x;
    snt += x * t;
  }
  if (!(sw > 0)) return; /* nothing timed: keep what was known */
  b->sw[i] = sw;
  b->sn[i] = sn;
  b->st[i] = st;
  b->snn[i] = snn;
  b->snt[i] = snt;
  b->observed[i]++;
  b->warmed[i] = 1;
  b->outliers[i] = 0;
  refit(b, i);
  if (!b->member[i]) {
    b->fresh[i] = 1;
    b->since[i] = 0;
    b->probe_took[i] = took;
    b->probe_end[i] = now;
  }
}
