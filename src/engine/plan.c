/* The fusion plan (plan.h): which layers run fused with which on a replica. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many inputs of m's layers layer t's output is. */
static int readers(const clt_model *m, int t) {
  int n = 0;
  for (int j = 0; j < m->nlayers; j++)
    for (int k = 0; k < m->layers[j].ninputs; k++) n += m->layers[j].inputs[k] == t;
  return n;
}

/* The index of l's parameter named "bias", or -1. */
static int bias_param(const clt_layer *l) {
  for (int k = 0; k < l->nparams; k++)
    if (strcmp(l->params[k].name, "bias") == 0) return k;
  return -1;
}

/* Whether layer i (a 2x2 max pooling) is pooled in its producer's passes: the
 * layer before it, which reads the model's input and can pool its output,
 * and which nothing else reads. */
static int pooled_by_producer(const clt_model *m, int i) {
  const clt_layer *l = &m->layers[i];
  const int t = l->inputs[0];
  if (l->ninputs != 1 || t < 0 || t != i - 1 || !(clt_layer_fusions(l) & CLT_FUSE_MAX_POOL_2X2))
    return 0;
  const clt_layer *p = &m->layers[t];
  return p->ninputs == 1 && p->inputs[0] < 0 && (clt_layer_fusions(p) & CLT_FUSE_POOL_OUTPUT) &&
         readers(m, t) == 1;
}

/* Whether layer i+1, an Add, is done by layer i's forward; *other gets the
 * Add's other input. */
static int add_by_producer(const clt_model *m, int i, int *other) {
  if (i + 1 >= m->nlayers) return 0;
  const clt_layer *l = &m->layers[i], *a = &m->layers[i + 1];
  if (!(clt_layer_fusions(l) & CLT_FUSE_ADD_RESIDUAL) || !(clt_layer_fusions(a) & CLT_FUSE_SUM) ||
      a->ninputs != 2)
    return 0;
  *other = a->inputs[0] == i ? a->inputs[1] : a->inputs[1] == i ? a->inputs[0] : i;
  return *other != i && readers(m, i) == 1; /* one input of the Add, not both */
}

void clt_plan_free(clt_plan *p) {
  free(p->steps);
  memset(p, 0, sizeof *p);
}

int clt_plan_build(const clt_model *m, const char *backend, int fuses_conv_pool, clt_plan *p,
                   clt_err *e) {
  clt_plan_free(p);
  const size_t n = m->nlayers > 0 ? (size_t)m->nlayers : 1;
  int *pooled = calloc(n, sizeof *pooled), *added = calloc(n, sizeof *added);
  clt_fusion *fusion = calloc(n, sizeof *fusion);
  p->steps = calloc(n, sizeof *p->steps);
  if (!pooled || !added || !fusion || !p->steps) {
    free(pooled);
    free(added);
    free(fusion);
    clt_plan_free(p);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory planning model %s", m->name);
  }
  p->backend = backend;
  for (int i = 0; i < m->nlayers && fuses_conv_pool; i++) {
    if (!pooled_by_producer(m, i)) continue;
    pooled[i] = 1;
    fusion[i - 1].pools = 1;
  }
  /* A ReLU's mask applied by its one reader, where that pair is not pooled. */
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    const int t = l->inputs[0];
    if (pooled[i] || l->ninputs != 1 || t < 0 || !(clt_layer_fusions(l) & CLT_FUSE_MASK_INPUT_RELU))
      continue;
    if (!(clt_layer_fusions(&m->layers[t]) & CLT_FUSE_OUTPUT_RELU) || readers(m, t) != 1) continue;
    fusion[i].masks_input_relu = 1;
    fusion[t].relu_masked = 1;
  }
  /* A bias gradient summed by the one reader that writes its producer's output
   * gradient. */
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    const int t = l->inputs[0];
    if (pooled[i] || l->ninputs != 1 || t < 0 || !(clt_layer_fusions(l) & CLT_FUSE_INPUT_BIAS))
      continue;
    const clt_layer *p = &m->layers[t];
    if (pooled[t] || fusion[t].pools || !(clt_layer_fusions(p) & CLT_FUSE_BIAS_BY_READER) ||
        readers(m, t) != 1)
      continue;
    const int b = bias_param(p);
    if (b < 0 || p->params[b].size != (size_t)l->in.c) continue;
    fusion[i].sums_input_bias = 1;
    fusion[i].input_bias = p->params[b].offset;
    fusion[t].bias_summed = 1;
  }
  for (int i = 0; i < m->nlayers; i++) {
    if (pooled[i]) continue; /* its producer's step runs it */
    clt_plan_step *s = &p->steps[p->nsteps++];
    s->layer = s->forward_out = s->backward_out = i;
    s->forward = !added[i];
    s->backward = 1;
    s->fusion = fusion[i];
    s->residual = -1;
    int other;
    if (!added[i] && add_by_producer(m, i, &other)) {
      s->fusion.adds = 1;
      s->residual = other;
      s->residual_relu = (clt_layer_fusions(&m->layers[i + 1]) & CLT_FUSE_SUM_RELU) != 0;
      s->forward_out = i + 1;
      added[i + 1] = 1;
    }
    if (s->fusion.pools) s->forward_out = s->backward_out = i + 1;
  }
  free(pooled);
  free(added);
  free(fusion);
  return CLT_OK;
}

size_t clt_plan_describe(const clt_model *m, const clt_plan *p, char *buf, size_t size) {
  size_t used = 0;
#define OUT(...)                                                           \
  used += (size_t)snprintf(buf ? buf + (used < size ? used : size) : NULL, \
                           buf && used < size ? size - used : 0, __VA_ARGS__)
  OUT("model %s on the %s backend: %d steps for %d layers\n", m->name, p->backend, p->nsteps,
      m->nlayers);
  for (int k = 0; k < p->nsteps; k++) {
    const clt_plan_step *s = &p->steps[k];
    const clt_layer *l = &m->layers[s->layer];
    OUT("%s %s: %s", l->name, l->ops->kind,
        s->forward && s->backward ? "forward, backward"
        : s->forward              ? "forward"
                                  : "backward");
    if (s->fusion.pools) {
      const clt_layer *q = &m->layers[s->layer + 1];
      OUT("; also runs %s (%s)", q->name, q->ops->kind);
    }
    if (s->fusion.adds) {
      const clt_layer *a = &m->layers[s->layer + 1];
      OUT("; also runs %s's forward (%s of %s%s)", a->name, a->ops->kind,
          s->residual < 0 ? "the input" : m->layers[s->residual].name,
          s->residual_relu ? ", ReLU" : "");
    }
    if (!s->forward) OUT("; its forward run by %s", m->layers[s->layer - 1].name);
    if (s->fusion.relu_masked) OUT("; its ReLU's backward run by its reader");
    if (s->fusion.bias_summed) OUT("; its bias gradient summed by its reader");
    if (s->fusion.sums_input_bias)
      OUT("; sums %s's bias gradient", m->layers[m->layers[s->layer].inputs[0]].name);
    if (s->fusion.masks_input_relu)
      OUT("; runs %s's ReLU backward", m->layers[m->layers[s->layer].inputs[0]].name);
    OUT("\n");
  }
#undef OUT
  return used;
}
