/* The cluster's calls with a process that stops answering (run by test_mpi_lost.sh
 * under mpirun on this host): every rank makes CALL once a step; at step 10 rank 1
 * pauses itself (SIGSTOP), as a frozen host would. The others must return within
 * the timeout with CLT_ERR_PEER naming rank 1 and the step, and every later call
 * must fail at once with the same error.
 *   test_mpi_lost CALL TIMEOUT  (CALL: sum, exchange, allgather, bcast, any,
 *   barrier, agree, doubles)
 * Prints "rank R: PID" first, then "rank R: after S s: MESSAGE" when a call fails
 * and "rank R: after fail S s: MESSAGE" for the next; exits 1 after a failure. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "cluster_impl.h"
#include "timing.h"

#define FLOATS 4096

static int call(clt_cluster *c, const char *what, float *buf, clt_err *e) {
  const int rank = clt_cluster_rank(c), size = clt_cluster_size(c);
  int flag = 0;
  double d[2] = {1, 2};
  if (strcmp(what, "sum") == 0) return clt_cluster_sum(c, buf, FLOATS, e);
  if (strcmp(what, "exchange") == 0) {
    /* A ring of one exchange, as cluster_sum.c's steps. */
    return clt_cluster_exchange(c, buf, 64, (rank + 1) % size, buf + 64, 64,
                                (rank + size - 1) % size, 3, e);
  }
  if (strcmp(what, "allgather") == 0) return clt_cluster_allgather(c, buf, 64, buf + 1024, e);
  if (strcmp(what, "bcast") == 0) return clt_cluster_bcast(c, buf, 1024, e);
  if (strcmp(what, "any") == 0) return clt_cluster_any(c, &flag, e);
  if (strcmp(what, "barrier") == 0) return clt_cluster_barrier(c, e);
  if (strcmp(what, "agree") == 0) return clt_cluster_agree(c, CLT_OK, e);
  if (strcmp(what, "doubles") == 0) return clt_cluster_sum_doubles(c, d, 2, e);
  return clt_fail(e, CLT_ERR_ARG, "unknown call %s", what);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_mpi_lost CALL TIMEOUT\n");
    return 2;
  }
  clt_err e = {0};
  clt_cluster *c = NULL;
  if (clt_cluster_join(&c, &e)) {
    fprintf(stderr, "join: %s\n", e.msg);
    return 2;
  }
  const int rank = clt_cluster_rank(c);
  printf("rank %d: %ld\n", rank, (long)getpid());
  fflush(stdout);
  clt_cluster_set_timeout(c, atof(argv[2]));
  static float buf[FLOATS];
  int status = clt_cluster_reserve(c, FLOATS, &e);
  double t0 = 0;
  for (long step = 1; step <= 20 && !status; step++) {
    clt_cluster_set_step(c, step);
    if (rank == 1 && step == 10) raise(SIGSTOP);
    t0 = clt_now_seconds();
    status = call(c, argv[1], buf, &e);
  }
  if (status) {
    printf("rank %d: after %.2f s: %s\n", rank, clt_now_seconds() - t0, e.msg);
    clt_err again = {0};
    t0 = clt_now_seconds();
    const int st = clt_cluster_barrier(c, &again);
    printf("rank %d: after fail %.2f s: %s\n", rank, clt_now_seconds() - t0,
           st == CLT_ERR_PEER && clt_cluster_lost(c) ? again.msg : "(not the lost error)");
  }
  fflush(stdout);
  clt_cluster_leave(c, status != 0);
  return status ? 1 : 0;
}
