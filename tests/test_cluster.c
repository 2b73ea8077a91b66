/* src/dist/cluster.c compiled without MPI (as a build without libopenmpi-dev has it):
 * a lone process is a cluster of one whose collectives copy or do nothing, and a
 * process that a launcher started as one of several refuses to run, saying why. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cluster.h"

int main(void) {
  clt_err e = {0};
  static const char *const launchers[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                          "MPI_LOCALNRANKS", "PMIX_RANK"};
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) unsetenv(launchers[i]);

  check(!clt_cluster_built_with_mpi(), "this build of cluster.c has no MPI");
  clt_cluster *c = NULL;
  check(clt_cluster_join(&c, &e) == CLT_OK && c, "a lone process joins: %s", e.msg);
  check(clt_cluster_rank(c) == 0 && clt_cluster_size(c) == 1, "it is rank 0 of 1");
  float v[3] = {1, 2, 3};
  double d[2] = {4, 5};
  int mine = 7, all = 0;
  check(clt_cluster_reserve(c, 3, &e) == CLT_OK && clt_cluster_sum(c, v, 3, &e) == CLT_OK &&
            v[0] == 1 && v[2] == 3,
        "the sum over one process leaves the floats as they are");
  check(clt_cluster_sum_doubles(c, d, 2, &e) == CLT_OK && d[1] == 5, "... and the doubles");
  check(clt_cluster_allgather(c, &mine, sizeof mine, &all, &e) == CLT_OK && all == 7,
        "all-gather copies");
  check(clt_cluster_bcast(c, &mine, sizeof mine, &e) == CLT_OK && clt_cluster_barrier(c, &e) == 0,
        "broadcast and barrier do nothing");
  e = (clt_err){0};
  check(clt_cluster_agree(c, CLT_ERR_IO, &e) == CLT_ERR_IO,
        "agree passes one process's failure on");
  clt_cluster_leave(c, 1);

  for (size_t i = 0; i < 3; i++) {
    setenv(launchers[i], "2", 1);
    c = NULL;
    e = (clt_err){0};
    int status = clt_cluster_join(&c, &e);
    check(status == CLT_ERR_ARG && !c && strstr(e.msg, "one of 2 processes") &&
              strstr(e.msg, "built without MPI") && strstr(e.msg, "libopenmpi-dev"),
          "%s=2: refused (%s)", launchers[i], e.msg);
    unsetenv(launchers[i]);
  }
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  c = NULL;
  check(clt_cluster_join(&c, &e) == CLT_OK && clt_cluster_size(c) == 1, "mpirun -np 1 runs alone");
  clt_cluster_leave(c, 0);
  return check_summary();
}
