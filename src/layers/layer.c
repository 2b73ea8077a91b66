/* Kernels shared by several layers: the bias gradient (with the ReLU backward fused in). */
#include "layer.h"

#define BIAS_GRAD_ROWS_PER_BLOCK 256

size_t clt_bias_grad_scratch(int rows, int cols) {
  return (size_t)((rows + BIAS_GRAD_ROWS_PER_BLOCK - 1) / BIAS_GRAD_ROWS_PER_BLOCK) * cols;
}

int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem relu_y, cl_mem scratch,
                  size_t scratch_offset, int rows, int cols, size_t grad_offset, clt_err *e) {
  cl_kernel kp, kf;
  int status = clt_replica_kernel(io->replica, "conv.cl", "", "bias_grad_partial", &kp, e);
  if (!status) status = clt_replica_kernel(io->replica, "conv.cl", "", "bias_grad_final", &kf, e);
  if (status) return status;
  int per_block = BIAS_GRAD_ROWS_PER_BLOCK;
  int nblocks = (rows + per_block - 1) / per_block;
  int part = (int)scratch_offset, relu = relu_y != NULL;
  cl_mem y = relu ? relu_y : dy; /* any valid buffer when unused */
  clt_karg pargs[] = {CLT_ARG(dy),        CLT_ARG(y),       CLT_ARG(relu), CLT_ARG(rows),
                      CLT_ARG(cols),      CLT_ARG(per_block), CLT_ARG(scratch), CLT_ARG(part)};
  status = clt_launch1d(io->replica, kp, relu ? "relu and bias gradient" : "bias_grad_partial", pargs,
                        8, (size_t)nblocks * ((cols + 7) / 8), e);
  if (status) return status;
  int off = (int)grad_offset;
  clt_karg fargs[] = {CLT_ARG(scratch), CLT_ARG(part), CLT_ARG(nblocks), CLT_ARG(cols),
                      CLT_ARG(io->grads), CLT_ARG(off)};
  return clt_launch1d(io->replica, kf, "bias_grad_final", fargs, 6, (size_t)cols, e);
}
