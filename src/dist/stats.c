/* What a pass's figures are made of: each step's loss and correct count, read
 * back from the replicas and summed over the run, and each replica's statistics
 * for the epoch's report. */
#include "trainer_impl.h"

/* Each step's summed loss and correct count over the run's replicas, from the
 * replica-major metrics array (2 floats per slot) of `steps` batches, into
 * out; members (NULL: every replica) says which replicas took part in each step
 * (the slots of one out of it hold older figures). */
int trainer_step_sums(clt_trainer *t, int from, int steps, const unsigned long long *members,
                      double *out, clt_err *e) {
  for (int s = from; s < steps; s++) {
    double l = 0, correct = 0;
    for (int r = 0; r < t->n; r++) {
      if (members && !((members[s] >> r) & 1)) continue;
      const float *m = t->metrics + ((size_t)r * t->slots + s) * 2;
      l += m[0];
      correct += m[1];
    }
    out[(size_t)2 * s] = l;
    out[(size_t)2 * s + 1] = correct;
  }
  return steps > from ? clt_cluster_sum_doubles(t->cluster, out + (size_t)2 * from,
                                                (size_t)2 * (steps - from), e)
                      : CLT_OK;
}

/* The figures of a pass of `steps` batches from its step sums. */
void trainer_sum_metrics(const clt_trainer *t, const double *sums, int steps, int count,
                         double *mean_batch_loss, double *example_loss, double *acc) {
  const int global = clt_trainer_global_batch(t);
  double batch_losses = 0, loss = 0, correct = 0;
  for (int s = 0; s < steps; s++) {
    const double l = sums[(size_t)2 * s];
    correct += sums[(size_t)2 * s + 1];
    const int n = count - s * global < global ? count - s * global : global;
    loss += l;
    batch_losses += l / n;
  }
  *mean_batch_loss = steps ? batch_losses / steps : 0;
  *example_loss = count ? loss / count : 0;
  *acc = count ? correct / count : 0;
}

/* Reads the metrics of slots [0, steps) of the ranks in `ranks`. */
int trainer_read_metrics(clt_trainer *t, unsigned long long ranks, int steps, clt_err *e) {
  for (int r = 0; r < t->n; r++) {
    if (!((ranks >> r) & 1)) continue;
    int status = clt_net_read_metrics(t->local[r].net, t->metrics + (size_t)r * t->slots * 2, steps,
                                      e);
    if (status) return status;
  }
  return CLT_OK;
}

/* Per replica of the run, summed over the processes: examples, compute and busy
 * time, and the leaving and probing figures; then per process its source's work. */
enum { STAT_FIELDS = 13, WORK_FIELDS = 3 };

/* Each replica's examples and times in res, and each process's source work,
 * over every process. */
int trainer_replica_stats(clt_trainer *t, const pass *p, clt_epoch_result *res, clt_err *e) {
  double v[(STAT_FIELDS + WORK_FIELDS) * CLT_MAX_REPLICAS] = {0};
  for (int r = 0; r < t->n; r++) {
    const int g = t->base + r;
    const clt_profile *prof = t->local[r].replica->profile;
    const pass_rank *pr = &p->ranks[r];
    double *x = v + (size_t)STAT_FIELDS * g;
    x[0] = (double)pr->examples;
    /* Device time from the profile; the test knob's delays stand for more of it
     * (they are spent while the device idles, so busy stays within the pass). */
    x[1] = prof->compute_seconds + pr->slowed;
    x[2] = pr->slowed;
    for (int i = 0; i < prof->nnames; i++) x[2] += prof->seconds[i];
    x[3] = clt_balancer_member(&t->balancer, g);
    x[4] = pr->left;
    x[5] = pr->joined;
    x[6] = (double)pr->left_step;
    x[7] = (double)pr->joined_step;
    x[8] = pr->probes;
    x[9] = pr->probe_seconds;
    x[10] = pr->ring_seconds;
    x[11] = pr->ring_hidden;
    x[12] = (double)pr->ring_calls;
  }
  double *work = v + (size_t)STAT_FIELDS * t->total;
  const int procs = clt_cluster_size(t->cluster);
  double *w = work + (size_t)WORK_FIELDS * clt_cluster_rank(t->cluster);
  w[0] = (double)p->work.images;
  w[1] = (double)p->work.decoded;
  w[2] = p->work.cpu_seconds;
  int status = clt_cluster_sum_doubles(t->cluster, v,
                                       (size_t)STAT_FIELDS * t->total + (size_t)WORK_FIELDS * procs,
                                       e);
  for (int g = 0; g < t->total && !status; g++) {
    const double *x = v + (size_t)STAT_FIELDS * g;
    clt_replica_stats *st = &res->replicas[g];
    st->examples = (long)x[0];
    st->compute_seconds = x[1];
    st->busy_seconds = x[2];
    st->member = x[3] != 0;
    st->left = (int)x[4];
    st->joined = (int)x[5];
    st->left_step = (long)x[6];
    st->joined_step = (long)x[7];
    st->probes = (int)x[8];
    st->probe_seconds = x[9];
    st->allreduce_seconds = x[10];
    st->allreduce_hidden_seconds = x[11];
    st->allreduce_calls = (long)x[12];
  }
  for (int r = 0; r < procs && !status; r++) {
    const double *x = work + (size_t)WORK_FIELDS * r;
    res->processes[r] = (clt_source_work){(long)x[0], (long)x[1], x[2]};
  }
  return status;
}
