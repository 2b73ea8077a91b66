/* cltrain_open in a program that initialised MPI itself (under mpirun -np 2):
 * the context is the program's world, and cltrain_close leaves MPI to the
 * program, which can still use it and then finalises it.
 *   mpirun -np 2 test_api_mpi */
#include <mpi.h>
#include <stdio.h>

#include "check.h"
#include "cltrain.h"

int main(int argc, char **argv) {
  int provided = 0, rank = -1, size = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cltrain_ctx *ctx = NULL;
  const int rc = cltrain_open(NULL, &ctx);
  check(rc == CLTRAIN_OK, "rank %d: cltrain_open (%s)", rank, rc ? cltrain_errmsg(NULL) : "ok");
  check(cltrain_rank(ctx) == rank && cltrain_processes(ctx) == size,
        "rank %d: the context is the program's world (rank %d of %d)", rank, cltrain_rank(ctx),
        cltrain_processes(ctx));
  cltrain_close(&ctx);
  int finalized = 1, sum = 0, one = 1;
  MPI_Finalized(&finalized);
  const int reduced = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check(!finalized && reduced == MPI_SUCCESS && sum == size,
        "rank %d: after cltrain_close MPI is still the program's (sum %d)", rank, sum);
  const int failed = check_summary();
  MPI_Finalize();
  return failed;
}
