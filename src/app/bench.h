/* `cltrain bench allreduce`: times the all-reduce training uses (device buffers of
 * every replica of every process summed: each host's ring, then the ring across
 * processes) against MPI_Allreduce of the same floats alone. */
#ifndef CLT_BENCH_H
#define CLT_BENCH_H

int cmd_bench(int argc, char **argv);

#endif
