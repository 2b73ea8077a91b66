/* What every layer kind shares: the lookup of kinds by name, the description
 * entries "name=Kind(args)", and the bias-gradient kernels (ReLU backward fused in). */
#include "layer.h"

#include <stdio.h>
#include <string.h>

const clt_layer_ops *clt_layer_kind(const char *kind) {
  for (int i = 0; clt_layer_kinds[i]; i++) {
    if (strcmp(clt_layer_kinds[i]->kind, kind) == 0) return clt_layer_kinds[i];
  }
  return NULL;
}

/* The kinds' names, for errors: "Add, BatchNormalization, ...". */
static void kind_names(char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; clt_layer_kinds[i] && used < size; i++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                             clt_layer_kinds[i]->kind);
  }
}

int clt_layer_init(clt_layer *l, const char *entry, clt_err *e) {
  memset(l, 0, sizeof *l);
  l->ninputs = 1;
  l->inputs[0] = l->inputs[1] = -1;
  const char *eq = strchr(entry, '=');
  const size_t name_len = eq ? (size_t)(eq - entry) : 0;
  if (name_len == 0 || name_len >= sizeof l->name) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "layer '%s': expected name=Kind(arguments), with a name of 1 to %zu "
                    "characters",
                    entry, sizeof l->name - 1);
  }
  memcpy(l->name, entry, name_len);
  const char *kind = eq + 1, *open = strchr(kind, '(');
  char kname[48], args[128] = "";
  const size_t kind_len = open ? (size_t)(open - kind) : strlen(kind);
  if (kind_len == 0 || kind_len >= sizeof kname) {
    return clt_fail(e, CLT_ERR_FORMAT, "layer %s: bad kind in '%s'", l->name, entry);
  }
  memcpy(kname, kind, kind_len);
  kname[kind_len] = '\0';
  if (open) {
    const size_t args_len = strlen(open + 1);
    if (args_len == 0 || open[args_len] != ')' || args_len > sizeof args) {
      return clt_fail(e, CLT_ERR_FORMAT, "layer %s: bad arguments in '%s'", l->name, entry);
    }
    memcpy(args, open + 1, args_len - 1);
    args[args_len - 1] = '\0';
  }
  if (!(l->ops = clt_layer_kind(kname))) {
    char known[512];
    kind_names(known, sizeof known);
    return clt_fail(e, CLT_ERR_FORMAT, "layer %s: unknown kind %s (cltrain knows %s)", l->name,
                    kname, known);
  }
  l->ninputs = l->ops->ninputs;
  return l->ops->parse(l, args, e);
}

int clt_layer_build_kernels(clt_replica *r, const char *file, const char *const *names, int n,
                            clt_err *e) {
  cl_kernel k;
  int status = CLT_OK;
  for (int i = 0; i < n && !status; i++) status = clt_replica_kernel(r, file, "", names[i], &k, e);
  return status;
}

size_t clt_layer_scratch_floats(const clt_layer *l, int batch) {
  return l->ops->scratch_floats ? l->ops->scratch_floats(l, batch) : 0;
}

size_t clt_layer_state_floats(const clt_layer *l) {
  return l->ops->state_floats ? l->ops->state_floats(l) : 0;
}

int clt_layer_parse_none(clt_layer *l, const char *args, clt_err *e) {
  if (args[0] == '\0') return CLT_OK;
  return clt_fail(e, CLT_ERR_FORMAT, "%s: %s takes no arguments, got (%s)", l->name, l->ops->kind,
                  args);
}

void clt_layer_describe_none(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "%s", l->ops->kind);
}

int clt_parse_relu_tail(const char *rest, int *relu) {
  *relu = 0;
  if (*rest == ',') rest++;
  else if (*rest == '\0') return 0;
  if (strcmp(rest, "relu") != 0) return -1;
  *relu = 1;
  return 0;
}

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
  clt_karg pargs[] = {CLT_ARG(dy),   CLT_ARG(y),         CLT_ARG(relu),    CLT_ARG(rows),
                      CLT_ARG(cols), CLT_ARG(per_block), CLT_ARG(scratch), CLT_ARG(part)};
  /* CPU: a work-item per (8 columns, block); GPU: (LC, LR) groups per block. */
  status = clt_launch_blocks(io->replica, kp, relu ? "relu and bias gradient" : "bias_grad_partial",
                             pargs, 8, (size_t)cols, (size_t)nblocks, e);
  if (status) return status;
  int off = (int)grad_offset;
  clt_karg fargs[] = {CLT_ARG(scratch), CLT_ARG(part),      CLT_ARG(nblocks),
                      CLT_ARG(cols),    CLT_ARG(io->grads), CLT_ARG(off)};
  /* CPU: a work-item per column; GPU: the blocks are the rows of one block. */
  if (io->replica->flavor == CLT_KERNELS_GPU)
    return clt_launch_blocks(io->replica, kf, "bias_grad_final", fargs, 6, (size_t)cols, 1, e);
  return clt_launch1d(io->replica, kf, "bias_grad_final", fargs, 6, (size_t)cols, e);
}
