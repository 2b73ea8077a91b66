/* cltrain_open in a program that initialised MPI itself (under mpirun -np 2):
 * the context is the program's world, and cltrain_close leaves MPI to the
 * program, which can still use it and then finalises it. Between the two, the
 * trainer's wire=fp16 option: refused where the processes differ, and where
 * they agree a summed gradient near wire=fp32's, with the same bits in every
 * process.
 *   mpirun -np 2 test_api_mpi */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cltrain.h"

#define COUNT 8

/* One step's summed gradient of a small CNN on procedural images with the
 * given wire into grads (n floats); returns the trainer's status. */
static int summed_gradient(cltrain_ctx *ctx, cltrain_dataset *d, const char *wire, float *grads,
                           size_t n) {
  cltrain_model *m = NULL;
  cltrain_trainer *t = NULL;
  char options[128];
  int steps = 0;
  snprintf(options, sizeof options, "devices=0 split=equal batch-per-replica=4 seed=3 wire=%s",
           wire);
  int st = cltrain_model_create(ctx, "fmnist-cnn", d, "seed=3", &m);
  if (!st) st = cltrain_trainer_create(ctx, m, options, &t);
  if (!st && cltrain_trainer_floats(t) != n) st = CLTRAIN_ERR_ARG;
  if (!st) st = cltrain_trainer_begin_epoch(t, d, CLTRAIN_TRAIN, 0, &steps);
  if (!st) st = cltrain_trainer_forward_backward(t, NULL, NULL);
  if (!st) st = cltrain_trainer_allreduce(t);
  if (!st) st = cltrain_trainer_get_gradients(t, grads, n);
  cltrain_trainer_free(&t);
  cltrain_model_free(&m);
  return st;
}

static void wire_option(cltrain_ctx *ctx, int rank) {
  static uint8_t images[COUNT * 28 * 28];
  int32_t labels[COUNT];
  for (int i = 0; i < COUNT; i++) labels[i] = i % 10;
  for (size_t i = 0; i < sizeof images; i++)
    images[i] = (uint8_t)((i * 37u + i / 28u * 11u) % 251u);
  cltrain_dataset *d = NULL;
  int st = cltrain_dataset_from_memory(ctx, images, labels, COUNT, 28, 28, 1, 10, &d);
  check(st == CLTRAIN_OK, "rank %d: dataset from memory (%s)", rank, cltrain_errmsg(ctx));
  if (st) return;
  cltrain_model *m = NULL;
  cltrain_trainer *t = NULL;
  st = cltrain_model_create(ctx, "fmnist-cnn", d, "seed=3", &m);
  const size_t n = st ? 0 : cltrain_model_param_count(m);
  /* Processes that differ: every one refuses, naming the option. */
  const int rc = st ? st
                    : cltrain_trainer_create(ctx, m, rank ? "devices=0 wire=fp16" : "devices=0",
                                             &t);
  check(rc == CLTRAIN_ERR_ARG &&
            strstr(cltrain_errmsg(ctx), "option wire: rank 1 has fp16 and rank 0 fp32"),
        "rank %d: differing wires refused (%d: %s)", rank, rc, cltrain_errmsg(ctx));
  cltrain_trainer_free(&t);
  cltrain_model_free(&m);
  float *g32 = malloc(n * sizeof *g32), *g16 = malloc(n * sizeof *g16),
        *first = malloc(n * sizeof *first);
  if (n && g32 && g16 && first) {
    const int a = summed_gradient(ctx, d, "fp32", g32, n);
    const int b = a ? a : summed_gradient(ctx, d, "fp16", g16, n);
    check(!a && !b, "rank %d: a step with each wire (%s)", rank,
          a || b ? cltrain_errmsg(ctx) : "ok");
    double worst = 0, largest = 0;
    int differ = 0;
    for (size_t i = 0; i < n; i++) {
      worst = fmax(worst, fabs((double)g16[i] - g32[i]));
      largest = fmax(largest, fabs((double)g32[i]));
      differ |= g16[i] != g32[i];
    }
    check(differ && worst <= 2e-3 * largest,
          "rank %d: fp16's gradient is fp32's, rounded (differs: %d, worst %.3g of %.3g)", rank,
          differ, worst, largest);
    memcpy(first, g16, n * sizeof *first);
    MPI_Bcast(first, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    check(memcmp(first, g16, n * sizeof *first) == 0, "rank %d: fp16's gradient = rank 0's bits",
          rank);
  } else {
    check(0, "rank %d: model (%s) or memory", rank, cltrain_errmsg(ctx));
  }
  free(g32);
  free(g16);
  free(first);
  cltrain_dataset_free(&d);
}

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
  if (!rc && size == 2) wire_option(ctx, rank);
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
