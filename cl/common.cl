// Included in front of every program cltrain builds (devices/replica.c), alone
// or joint: the kernels' variant and what several files share.
//
// CLT_GPU, set by the replica's backend (src/backend): 0 for the cpu backend,
// where PoCL does not vectorise across work-items, so a work-item takes a row,
// a position or a chunk of CH channels as explicit vectors; 1 for the gpu
// backend, where a work-item takes one element, consecutive work-items
// consecutive channels (the contiguous NHWC dimension, so accesses coalesce),
// and sums meet in local-memory trees of up to CLT_WG work-items. Each kernel
// has the same name, arguments and results in both; the launch shapes it is
// written for are src/backend/backend.h's. No atomics anywhere: every sum has
// a fixed order, so runs repeat bit for bit.
#ifndef CLT_GPU
#define CLT_GPU 0
#endif
#ifndef CLT_WG
#define CLT_WG 64
#endif
#ifndef CLT_CPU_BLOCK_COLS
#define CLT_CPU_BLOCK_COLS 256
#endif

// Channels a CPU work-item takes as one float8.
#define CH 8
// Columns a CPU work-item takes in the long passes over rows
// (clt_launch_row_blocks).
#define CG CLT_CPU_BLOCK_COLS

#if CLT_GPU
// Sum of v over the work-group (dimension 0, a power of two) by a fixed tree
// over local memory: the same order every run. Every work-item must call it
// (barriers); the sum is returned to all, and tile may be reused at once.
static inline float group_sum(const float v, __local float *tile) {
  const int lid = get_local_id(0);
  tile[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) tile[lid] += tile[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = tile[0];
  barrier(CLK_LOCAL_MEM_FENCE); // all have read tile[0] before the next call writes it
  return r;
}

// Sum of v over the LR row lanes (dimension 1) of a (LC, LR) work-group, per
// channel lane, by a fixed tree (LR is a power of two): the same order every
// run. Every work-item must call it (barriers), each sum of a kernel with its
// own tile; the sum is returned to all. static: a plain C99 inline definition
// emits no body when not inlined (-cl-opt-disable).
static inline float lane_sum(const float v, __local float *tile) {
  const int lc = get_local_id(0), lr = get_local_id(1), width = get_local_size(0);
  const int at = lr * width + lc;
  tile[at] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(1) / 2; s > 0; s >>= 1) {
    if (lr < s) tile[at] += tile[at + s * width];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return tile[lc];
}
#endif

