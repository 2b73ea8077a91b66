#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static int alloc_floats(clt_net *net, size_t n, const char *what, cl_mem *out, clt_err *e) {
  return clt_replica_alloc(net->replica, n * sizeof(float), what, out, e);
}

/* How many inputs of m's layers layer t's output is, and (*last) the latest of
 * them below layer `below` (-1: none). */
static int readers_below(const clt_model *m, int t, int below, int *last) {
  int n = 0;
  *last = -1;
  for (int j = 0; j < m->nlayers; j++)
    for (int k = 0; k < m->layers[j].ninputs; k++) {
      if (m->layers[j].inputs[k] != t) continue;
      n++;
      if (j < below && j > *last) *last = j;
    }
  return n;
}

/* Whether layer i's inputs may both take its output gradient's buffer as their
 * own (CLT_FUSE_GRAD_IN_PLACE, an Add): neither has a gradient yet (i reads
 * them last), and nothing writes the buffer before both have read it. With
 * hi, lo the later and earlier input: hi's backward reads it first, so i must
 * be hi's only reader and hi's backward must leave it as it is
 * (CLT_FUSE_KEEPS_DY: BatchNormalization, a residual block's last layer);
 * lo's other readers add into it, so all must come before hi (their backward
 * runs after hi's), which also keeps hi from reading lo. */
static int grads_share_out(const clt_model *m, int i, const int *owner) {
  const clt_layer *l = &m->layers[i];
  if (!(clt_layer_fusions(l) & CLT_FUSE_GRAD_IN_PLACE) || l->ninputs != 2) return 0;
  const int t0 = l->inputs[0], t1 = l->inputs[1];
  if (t0 < 0 || t1 < 0 || t0 == t1 || owner[t0] >= 0 || owner[t1] >= 0) return 0;
  const int hi = t0 > t1 ? t0 : t1, lo = t0 > t1 ? t1 : t0;
  int last;
  if (readers_below(m, hi, i, &last) != 1 ||
      !(clt_layer_fusions(&m->layers[hi]) & CLT_FUSE_KEEPS_DY))
    return 0;
  readers_below(m, lo, i, &last);
  return last < hi;
}

/* Plans the activation-gradient buffers of a backward pass (see clt_grad_plan):
 * walking the layers backwards, a layer's input gradient takes a pool buffer
 * when first written and is accumulated through a temporary when a second
 * consumer writes it (ResNet's shortcuts); an aliasing layer's input gradient,
 * and an Add's where grads_share_out, is its output gradient's buffer. A
 * buffer counts the layer outputs it holds the gradient of, and returns to the
 * pool when the last of their producers' backward has read it. */
int clt_net_plan_gradients(const clt_model *m, clt_grad_plan *plan, int *nbuffers, clt_err *e) {
  /* At most one buffer per layer output and per input's temporary is busy. */
  const int most = 3 * m->nlayers + 1;
  int *owner = malloc((size_t)m->nlayers * sizeof *owner),
      *busy = calloc((size_t)most, sizeof *busy);
  int high = 0, status = CLT_OK;
  if (!owner || !busy) {
    free(owner);
    free(busy);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory planning model %s's gradients", m->name);
  }
  for (int i = 0; i < m->nlayers; i++) owner[i] = -1;
#define TAKE(dst)                           \
  do {                                      \
    int b_ = 0;                             \
    while (b_ < most - 1 && busy[b_]) b_++; \
    busy[b_] = 1;                           \
    if (b_ + 1 > high) high = b_ + 1;       \
    (dst) = b_;                             \
  } while (0)
  TAKE(owner[m->nlayers - 1]); /* the loss writes the logits' gradient */
  for (int i = m->nlayers - 1; i >= 0 && !status; i--) {
    const clt_layer *l = &m->layers[i];
    clt_grad_plan *p = &plan[i];
    p->out = owner[i];
    if (p->out < 0) {
      status = clt_fail(e, CLT_ERR_INTERNAL, "model %s: layer %s feeds no other layer", m->name,
                        l->name);
      break;
    }
    const int share = l->ops->aliases_input || grads_share_out(m, i, owner);
    for (int k = 0; k < 2; k++) {
      p->in[k] = p->add_to[k] = -1;
      const int t = k < l->ninputs ? l->inputs[k] : -1;
      if (t < 0) continue; /* the model's input needs no gradient */
      if (share) {
        /* The output gradient's buffer is the input's gradient too. */
        p->in[k] = p->out;
        if (owner[t] < 0) {
          owner[t] = p->out;
          busy[p->out]++;
        } else {
          p->add_to[k] = owner[t];
        }
      } else if (owner[t] < 0) {
        TAKE(owner[t]);
        p->in[k] = owner[t];
      } else {
        TAKE(p->in[k]);
        p->add_to[k] = owner[t];
      }
    }
    for (int k = 0; k < 2; k++) {
      if (p->add_to[k] >= 0 && p->in[k] != p->out) busy[p->in[k]] = 0;
    }
    busy[p->out]--; /* layer i's own gradient has been read */
  }
#undef TAKE
  free(owner);
  free(busy);
  *nbuffers = high;
  return status;
}

static size_t scratch_floats(const clt_model *m, int max_batch) {
  size_t scratch = 0;
  for (int i = 0; i < m->nlayers; i++) {
    size_t s = clt_layer_scratch_floats(&m->layers[i], max_batch);
    if (s > scratch) scratch = s;
  }
  return scratch;
}

/* Plans an inference net's activation buffers: layer i's output takes a free
 * pool buffer and returns it once its last reader (or, for an aliasing layer,
 * the alias's last reader) has run; the logits stay. buf[i] gets the index. */
static int plan_activations(const clt_model *m, int *buf, int *nbuffers, clt_err *e) {
  const int n = m->nlayers;
  int high = 0;
  if (n < 1) return clt_fail(e, CLT_ERR_INTERNAL, "model %s has %d layers", m->name, n);
  int *last_use = malloc((size_t)n * sizeof *last_use), *busy = calloc((size_t)n, sizeof *busy);
  if (!last_use || !busy) {
    free(last_use);
    free(busy);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory planning model %s's activations",
                    m->name);
  }
  for (int i = 0; i < n; i++) last_use[i] = i == n - 1 ? n : i;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < m->layers[i].ninputs; k++) {
      const int t = m->layers[i].inputs[k];
      if (t >= 0 && last_use[t] < i) last_use[t] = i;
    }
  /* An alias is read through its input's memory: extend the owner's life. */
  for (int i = n - 1; i >= 0; i--) {
    const int t = m->layers[i].inputs[0];
    if (m->layers[i].ops->aliases_input && t >= 0 && last_use[t] < last_use[i])
      last_use[t] = last_use[i];
  }
  for (int i = 0; i < n; i++) {
    const clt_layer *l = &m->layers[i];
    if (l->ops->aliases_input) {
      buf[i] = l->inputs[0] >= 0 ? buf[l->inputs[0]] : -1; /* -1: the input batch */
    } else {
      int b = 0; /* one per layer at most */
      while (b < n - 1 && busy[b]) b++;
      busy[b] = 1;
      buf[i] = b;
      if (b + 1 > high) high = b + 1;
    }
    /* Inputs read for the last time are free for the next layer's output. */
    for (int k = 0; k < l->ninputs; k++) {
      const int t = l->inputs[k];
      if (t >= 0 && last_use[t] == i && buf[t] >= 0 && !m->layers[t].ops->aliases_input)
        busy[buf[t]] = 0;
    }
  }
  free(last_use);
  free(busy);
  *nbuffers = high;
  return CLT_OK;
}

size_t clt_net_bytes(const clt_model *m, int max_batch, int train) {
  clt_grad_plan *plan = malloc((size_t)m->nlayers * sizeof *plan);
  int *act = malloc((size_t)m->nlayers * sizeof *act), nbuf = 0;
  clt_err ignored;
  const size_t in = clt_shape_size(m->input) * max_batch;
  const size_t max_act = clt_model_max_activation(m) * max_batch;
  /* Parameters; in training, the gradient and the optimizer's two slots. */
  size_t floats = m->flat_floats + in + 3 * (size_t)max_batch + scratch_floats(m, max_batch);
  if (train) floats += m->grad_floats + CLT_OPT_SLOTS * m->trainable_floats;
  /* Without host memory to plan: the most buffers a plan can take. */
  if (!train && (!act || plan_activations(m, act, &nbuf, &ignored))) nbuf = m->nlayers;
  if (train && (!plan || clt_net_plan_gradients(m, plan, &nbuf, &ignored)))
    nbuf = 3 * m->nlayers + 1;
  free(plan);
  free(act);
  if (!train) return (floats + (size_t)nbuf * max_act) * sizeof(float);
  floats += (size_t)nbuf * max_act;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    if (!l->ops->aliases_input) floats += clt_shape_size(l->out) * max_batch;
    floats += clt_layer_state_floats(l);
  }
  return floats * sizeof(float);
}

static int create(const clt_model *m, clt_replica *r, int max_batch, int metric_slots, int train,
                  clt_net **out, clt_err *e);
static void release(clt_net *net);

/* The moving statistics (BatchNormalization's) in runs of one momentum each: the
 * update runs one kernel per run, so layers may differ (Keras allows it) while the
 * usual model, all at one momentum, takes one launch. Those of layers not frozen
 * are laid out layer by layer before grad_floats, in offset order; a frozen
 * layer's are never updated. */
static void moving_runs(const clt_model *m, clt_net *net) {
  net->stat_runs = 0;
  for (int i = 0; i < m->nlayers; i++) {
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      const float momentum = (float)prm->moving_momentum;
      if (!prm->non_trainable || m->layers[i].frozen) continue;
      if (net->stat_runs && net->stat_momentum[net->stat_runs - 1] == momentum) continue;
      net->stat_first[net->stat_runs] = (int)prm->offset;
      net->stat_momentum[net->stat_runs++] = momentum;
    }
  }
}

int clt_net_prepare(clt_net *net, clt_err *e) {
  for (int k = 0; k < net->plan.nsteps; k++) {
    const clt_plan_step *s = &net->plan.steps[k];
    const clt_layer *l = &net->model->layers[s->layer];
    const int status = clt_layer_prepare(l, net->replica, net->max_batch, &s->fusion, e);
    if (status) return status;
  }
  return CLT_OK;
}

int clt_net_create(const clt_model *m, clt_replica *r, int max_batch, int metric_slots,
                   clt_net **out, clt_err *e) {
  return create(m, r, max_batch, metric_slots, 1, out, e);
}

int clt_net_create_inference(const clt_model *m, clt_replica *r, int max_batch, int metric_slots,
                             clt_net **out, clt_err *e) {
  return create(m, r, max_batch, metric_slots, 0, out, e);
}

/* Whether the plan's step for layer i pools its output in its own passes
 * (fusion.pools): layer i's output is then never written. */
static int pools_output(const clt_plan *p, int i) {
  for (int k = 0; k < p->nsteps; k++)
    if (p->steps[k].layer == i) return p->steps[k].fusion.pools;
  return 0;
}

/* The largest activation, or activation gradient, the net keeps: not the
 * output of a convolution that pools it (never written). */
static size_t max_activation(const clt_model *m, const clt_plan *p) {
  size_t best = clt_shape_size(m->input);
  for (int i = 0; i < m->nlayers; i++) {
    const size_t s = clt_shape_size(m->layers[i].out);
    if (s > best && !pools_output(p, i)) best = s;
  }
  return best;
}

/* The sources of the kernels a net of m on r runs, as one joint program:
 * the layer kinds', the backend's own, and the network's (the loss, the
 * optimizers, the reductions, and the batch sources' conversions). */
static void build_joint_program(const clt_model *m, clt_replica *r) {
  static const char *const net_sources[] = {"loss.cl", "reduce.cl", CLT_OPTIMIZER_SOURCE,
                                            "data.cl"};
  const char *names[64];
  int n = 0;
#define ADD(name)                                                                 \
  do {                                                                            \
    int seen_ = 0;                                                                \
    for (int j_ = 0; j_ < n && !seen_; j_++) seen_ = !strcmp(names[j_], (name));  \
    if (!seen_ && n < (int)(sizeof names / sizeof names[0])) names[n++] = (name); \
  } while (0)
  for (int i = 0; i < m->nlayers; i++)
    for (const char *const *src = m->layers[i].ops->sources; src && *src; src++) ADD(*src);
  for (const char *const *src = r->backend->sources; *src; src++) ADD(*src);
  for (size_t i = 0; i < sizeof net_sources / sizeof net_sources[0]; i++) ADD(net_sources[i]);
#undef ADD
  clt_replica_build_joint(r, names, n);
}

static int create(const clt_model *m, clt_replica *r, int max_batch, int metric_slots, int train,
                  clt_net **out, clt_err *e) {
  int status = CLT_OK;
  *out = NULL;
  clt_net *net = calloc(1, sizeof *net);
  const size_t n = (size_t)m->nlayers;
  /* set by plan_activations for an inference net */
  int *act_buf = net ? calloc(n, sizeof *act_buf) : NULL;
  if (net) {
    net->model = m;
    net->act = calloc(n, sizeof *net->act);
    net->state = calloc(n, sizeof *net->state);
    net->grad_plan = calloc(n, sizeof *net->grad_plan);
    net->grads_needed = calloc(n, sizeof *net->grads_needed);
    /* one run per parameter at most */
    net->stat_first = calloc(n * CLT_MAX_LAYER_PARAMS, sizeof *net->stat_first);
    net->stat_momentum = calloc(n * CLT_MAX_LAYER_PARAMS, sizeof *net->stat_momentum);
  }
  if (!net || !act_buf || !net->act || !net->state || !net->grad_plan || !net->grads_needed ||
      !net->stat_first || !net->stat_momentum) {
    free(act_buf);
    release(net); /* nothing on the device yet */
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a network of model %s", m->name);
  }
  net->model = m;
  net->replica = r;
  net->max_batch = max_batch;
  net->metric_slots = metric_slots;
  net->train = train;
  if ((status = clt_plan_build(m, r->backend->name, r->backend->fuses_conv_pool, &net->plan, e)))
    goto cleanup;
  build_joint_program(m, r);
  if (train && (status = clt_net_plan_gradients(m, net->grad_plan, &net->grad_buffers, e)))
    goto cleanup;
  if (!train && (status = plan_activations(m, act_buf, &net->act_buffers, e))) goto cleanup;
  moving_runs(m, net);
  clt_model_grads_needed(m, net->grads_needed);
  net->grad_pool = calloc(net->grad_buffers ? (size_t)net->grad_buffers : 1, sizeof(cl_mem));
  net->act_pool = calloc(net->act_buffers ? (size_t)net->act_buffers : 1, sizeof(cl_mem));
  if (!net->grad_pool || !net->act_pool) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a network of model %s",
                      m->name);
    goto cleanup;
  }
  /* Fail before allocating when the device cannot hold it all: on CPU devices an
   * allocation past the RAM may only fail when touched, taking the host down. */
  const size_t need = clt_net_bytes(m, max_batch, train);
  if (r->device.global_mem_bytes && need > r->device.global_mem_bytes) {
    status =
        clt_fail(e, CL_MEM_OBJECT_ALLOCATION_FAILURE,
                 "device %d (%s): model %s with slices of %d example%s needs %.0f MiB, the device "
                 "has %.0f MiB",
                 r->device.index, r->device.name, m->name, max_batch, max_batch == 1 ? "" : "s",
                 need / 1048576.0, r->device.global_mem_bytes / 1048576.0);
    goto cleanup;
  }

  const size_t max_act = max_activation(m, &net->plan) * max_batch;
  const size_t in_floats = clt_shape_size(m->input) * max_batch;
  const size_t held = r->allocated_bytes;
#define ALLOC(n, what, dst) \
  if ((status = alloc_floats(net, (n), (what), (dst), e))) goto cleanup
  ALLOC(m->flat_floats, "parameters", &net->params);
  if (train) {
    /* Frozen layers have neither gradient nor slots. Whatever the optimizer:
     * Adam's two moments are the most any keeps. */
    ALLOC(m->grad_floats ? m->grad_floats : 1, "gradients", &net->grads);
    for (int k = 0; k < CLT_OPT_SLOTS; k++) {
      ALLOC(m->trainable_floats ? m->trainable_floats : 1, "optimizer state", &net->opt_state[k]);
    }
  }
  ALLOC(in_floats, "input batch", &net->input);
  ALLOC((size_t)max_batch, "labels", &net->labels);
  for (int b = 0; b < net->grad_buffers; b++) {
    ALLOC(max_act, "activation gradients", &net->grad_pool[b]);
  }
  ALLOC(scratch_floats(m, max_batch), "layer scratch", &net->scratch);
  ALLOC((size_t)max_batch, "per-example losses", &net->losses);
  ALLOC((size_t)max_batch, "per-example correctness", &net->correct);
  ALLOC(2 * (size_t)metric_slots, "metrics", &net->metrics);
  if (train) {
    ALLOC((size_t)metric_slots, "gradient checks", &net->grad_checks);
    ALLOC((m->grad_floats + CLT_CHECK_BLOCK) / CLT_CHECK_BLOCK, "gradient check partials",
          &net->check_partial);
  }
  for (int b = 0; b < net->act_buffers; b++) {
    ALLOC(max_act, "activations", &net->act_pool[b]);
  }
  for (int i = 0; i < m->nlayers && !train; i++) {
    net->act[i] = act_buf[i] >= 0 ? net->act_pool[act_buf[i]] : net->input;
  }
  for (int i = 0; i < m->nlayers && train; i++) {
    const clt_layer *l = &m->layers[i];
    if (clt_layer_state_floats(l)) {
      ALLOC(clt_layer_state_floats(l), "layer state", &net->state[i]);
    }
    if (l->ops->aliases_input) {
      net->act[i] = l->inputs[0] >= 0 ? net->act[l->inputs[0]] : net->input;
      continue;
    }
    char what[64];
    snprintf(what, sizeof what, "%s activations", l->name);
    /* A convolution pooling its own output writes the pooling's buffer. */
    const size_t floats = pools_output(&net->plan, i) ? 1 : clt_shape_size(l->out) * max_batch;
    ALLOC(floats, what, &net->act[i]);
  }
#undef ALLOC
  net->device_bytes = r->allocated_bytes - held;
  if ((status = clt_net_prepare(net, e))) goto cleanup;
  /* Built now, as later steps use them: the moving averages' kernel with the
   * options clt_net_update uses, and after these every optimizer's. */
  const char *const exact = r->exact_options;
  const char *kernels[][3] = {{"loss.cl", "", "softmax_xent"},
                              {"loss.cl", "", "metrics_accumulate"},
                              {CLT_OPTIMIZER_SOURCE, exact, "moving_average"},
                              {"reduce.cl", "", "add_into"},
                              {"reduce.cl", "", "count_final"}};
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    cl_kernel k;
    status = clt_replica_kernel(r, kernels[i][0], kernels[i][1], kernels[i][2], &k, e);
    if (status) goto cleanup;
  }
  if ((status = clt_optimizer_kernels(r, e))) goto cleanup;
  free(act_buf);
  *out = net;
  return CLT_OK;

cleanup:
  free(act_buf);
  release(net);
  return status;
}

void clt_net_destroy(clt_net *net) {
  if (net && !(net->replica && net->replica->hung)) release(net); /* see clt_replica.hung */
}

static void release(clt_net *net) {
  if (!net) return;
  if (net->replica && net->replica->queue) clFinish(net->replica->queue);
  cl_mem *all[] = {&net->params,  &net->grads,   &net->opt_state[0], &net->opt_state[1],
                   &net->input,   &net->labels,  &net->scratch,      &net->losses,
                   &net->correct, &net->metrics, &net->grad_checks,  &net->check_partial};
  for (int i = 0; i < net->model->nlayers && net->train && net->act && net->state; i++) {
    if (net->act[i] && !net->model->layers[i].ops->aliases_input) clReleaseMemObject(net->act[i]);
    if (net->state[i]) clReleaseMemObject(net->state[i]);
  }
  for (int b = 0; b < net->act_buffers && net->act_pool; b++) {
    if (net->act_pool[b]) clReleaseMemObject(net->act_pool[b]);
  }
  for (int b = 0; b < net->grad_buffers && net->grad_pool; b++) {
    if (net->grad_pool[b]) clReleaseMemObject(net->grad_pool[b]);
  }
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (*all[i]) clReleaseMemObject(*all[i]);
  }
  free(net->act);
  free(net->state);
  free(net->grad_plan);
  free(net->grads_needed);
  free(net->stat_first);
  free(net->stat_momentum);
  free(net->act_pool);
  free(net->grad_pool);
  clt_plan_free(&net->plan);
  free(net);
}

static int write_buffer(clt_net *net, cl_mem dst, const void *src, size_t bytes, const char *what,
                        clt_err *e) {
  cl_int rc = clEnqueueWriteBuffer(net->replica->queue, dst, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
  return rc ? clt_replica_fail(net->replica, e, rc, what) : CLT_OK;
}

static int read_buffer(clt_net *net, cl_mem src, void *dst, size_t bytes, const char *what,
                       clt_err *e) {
  clt_replica *r = net->replica;
  if (clt_fault_hit(r->index, r->step, CLT_FAULT_READ))
    return clt_replica_fail_injected(r, e, CL_OUT_OF_RESOURCES, what);
  cl_int rc = clEnqueueReadBuffer(r->queue, src, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  return rc ? clt_replica_fail(r, e, rc, what) : CLT_OK;
}

int clt_net_write_params(clt_net *net, const float *flat, clt_err *e) {
  return write_buffer(net, net->params, flat, net->model->flat_floats * sizeof(float),
                      "uploading parameters", e);
}

int clt_net_read_params(clt_net *net, float *flat, clt_err *e) {
  return read_buffer(net, net->params, flat, net->model->flat_floats * sizeof(float),
                     "reading parameters", e);
}

int clt_net_read_grads(clt_net *net, float *flat, clt_err *e) {
  if (!net->train) return clt_fail(e, CLT_ERR_INTERNAL, "no gradients in an inference-only net");
  return read_buffer(net, net->grads, flat, net->model->grad_floats * sizeof(float),
                     "reading gradients", e);
}

int clt_net_write_grads(clt_net *net, const float *flat, clt_err *e) {
  if (!net->train) return clt_fail(e, CLT_ERR_INTERNAL, "no gradients in an inference-only net");
  return write_buffer(net, net->grads, flat, net->model->grad_floats * sizeof(float),
                      "uploading gradients", e);
}

/* dst[0..n) += src[0..n) */
static int accumulate(clt_net *net, cl_mem dst, cl_mem src, size_t n, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(net->replica, "reduce.cl", "", "add_into", &k, e);
  if (status) return status;
  int zero = 0, count = (int)n;
  clt_karg args[] = {CLT_ARG(dst), CLT_ARG(zero), CLT_ARG(src), CLT_ARG(zero), CLT_ARG(count)};
  return clt_launch_elems(net->replica, k, "gradient accumulate", args, 5, n, e);
}

static int run_loss(clt_net *net, cl_mem logits, cl_mem dlogits, int count, float scale, int slot,
                    clt_err *e) {
  cl_kernel kx, km;
  int status = clt_replica_kernel(net->replica, "loss.cl", "", "softmax_xent", &kx, e);
  if (!status)
    status = clt_replica_kernel(net->replica, "loss.cl", "", "metrics_accumulate", &km, e);
  if (status) return status;
  int classes = net->model->classes;
  clt_karg xargs[] = {CLT_ARG(logits),      CLT_ARG(net->labels), CLT_ARG(count),
                      CLT_ARG(classes),     CLT_ARG(scale),       CLT_ARG(dlogits),
                      CLT_ARG(net->losses), CLT_ARG(net->correct)};
  status = clt_launch1d(net->replica, kx, "softmax_xent", xargs, 8, (size_t)count, e);
  if (status) return status;
  clt_karg margs[] = {CLT_ARG(net->losses), CLT_ARG(net->correct), CLT_ARG(count),
                      CLT_ARG(net->metrics), CLT_ARG(slot)};
  return clt_launch_single_group(net->replica, km, "metrics_accumulate", margs, 5, e);
}

void clt_net_set_position(clt_net *net, uint64_t seed, long step, long example0) {
  net->seed = seed;
  net->step = step;
  net->example0 = example0;
}

int clt_net_buckets(const clt_model *m, size_t min_floats, clt_bucket *out) {
  const clt_bucket whole = {0, m->grad_floats, 0};
  for (;;) {
    int n = 0, lowest = 0;
    size_t top = m->grad_floats; /* the open bucket ends here */
    for (int i = m->nlayers - 1; i >= 0; i--) {
      const clt_layer *l = &m->layers[i];
      size_t lo = m->grad_floats;
      for (int p = 0; p < l->nparams && !l->frozen; p++) {
        if (!l->params[p].non_trainable && l->params[p].offset < lo) lo = l->params[p].offset;
      }
      if (lo == m->grad_floats) continue; /* nothing to train */
      if (lo >= top) {                    /* not laid out in model order: one bucket */
        out[0] = whole;
        return 1;
      }
      lowest = i;
      if (top - lo < min_floats || n == CLT_MAX_BUCKETS) continue;
      out[n++] = (clt_bucket){lo, top - lo, i};
      top = lo;
    }
    if (top > 0) {
      if (n == CLT_MAX_BUCKETS) {
        min_floats = 2 * min_floats + 1; /* too many: larger ones */
        continue;
      }
      out[n++] = (clt_bucket){0, top, lowest}; /* the first layers' */
    }
    if (n == 0) out[n++] = whole; /* nothing to train at all */
    return n;
  }
}

/* Whether layer l's backward adds its input's gradient into the buffer that
 * already holds it (CLT_FUSE_ACCUMULATE_DX), rather than writing a temporary
 * that a separate pass adds in. */
static int adds_in_place(const clt_layer *l, const clt_grad_plan *p) {
  return p->in[0] >= 0 && p->add_to[0] >= 0 && (clt_layer_fusions(l) & CLT_FUSE_ACCUMULATE_DX);
}

static int forward_backward(clt_net *net, int count, float loss_scale, int metric_slot, int train,
                            const clt_bucket *buckets, int nbuckets, cl_event *done, clt_err *e);

int clt_net_forward_backward(clt_net *net, int count, float loss_scale, int metric_slot, int train,
                             clt_err *e) {
  return forward_backward(net, count, loss_scale, metric_slot, train, NULL, 0, NULL, e);
}

int clt_net_forward_backward_marked(clt_net *net, int count, float loss_scale, int metric_slot,
                                    const clt_bucket *buckets, int nbuckets, cl_event *done,
                                    clt_err *e) {
  for (int b = 0; b < nbuckets; b++) done[b] = NULL;
  int status = forward_backward(net, count, loss_scale, metric_slot, 1, buckets, nbuckets, done, e);
  if (status) {
    for (int b = 0; b < nbuckets; b++) {
      if (done[b]) clReleaseEvent(done[b]);
      done[b] = NULL;
    }
  }
  return status;
}

/* Markers for buckets [*next, until) (done[b] of each) on the replica's queue. */
static int mark_buckets(clt_net *net, int *next, int until, cl_event *done, clt_err *e) {
  for (; *next < until; (*next)++) {
    cl_int rc = clEnqueueMarkerWithWaitList(net->replica->queue, 0, NULL, &done[*next]);
    if (rc) return clt_replica_fail(net->replica, e, rc, "marking a gradient bucket");
  }
  /* Flushed, so the device starts what is queued before the host waits on it. */
  cl_int rc = clFlush(net->replica->queue);
  return rc ? clt_replica_fail(net->replica, e, rc, "clFlush") : CLT_OK;
}

static int forward_backward(clt_net *net, int count, float loss_scale, int metric_slot, int train,
                            const clt_bucket *buckets, int nbuckets, cl_event *done, clt_err *e) {
  const clt_model *m = net->model;
  int status = CLT_OK, marked = 0;
  if (metric_slot < 0 || metric_slot >= net->metric_slots) {
    return clt_fail(e, CLT_ERR_INTERNAL, "metric slot %d of %d", metric_slot, net->metric_slots);
  }
  if (train && !net->train)
    return clt_fail(e, CLT_ERR_INTERNAL, "training step on an inference-only net");
  if (count == 0) {
    /* An empty slice: zero metrics, and zero gradients so the replica can still
     * join the gradient sum. */
    status = clt_replica_fill(net->replica, net->metrics, 2 * (size_t)metric_slot, 2, 0.0f,
                              "the metrics of an empty slice", e);
    if (!status && train) {
      status = clt_replica_fill(net->replica, net->grads, 0, m->grad_floats, 0.0f,
                                "the gradients of an empty slice", e);
    }
    if (!status && nbuckets) status = mark_buckets(net, &marked, nbuckets, done, e);
    return status;
  }
  clt_layer_io io = {.replica = net->replica,
                     .batch = count,
                     .train = train,
                     .stat_weight = loss_scale * (float)count,
                     .params = net->params,
                     .grads = net->grads,
                     .scratch = net->scratch,
                     .seed = net->seed,
                     .step = net->step,
                     .example0 = net->example0};
  const clt_plan *plan = &net->plan;
  for (int k = 0; k < plan->nsteps && !status; k++) {
    const clt_plan_step *s = &plan->steps[k];
    const clt_layer *l = &m->layers[s->layer];
    if (!s->forward || !l->ops->forward) continue;
    io.fusion = s->fusion;
    io.x = l->inputs[0] >= 0 ? net->act[l->inputs[0]] : net->input;
    io.x2 = l->ninputs > 1 ? net->act[l->inputs[1]] : NULL;
    io.y = net->act[s->forward_out];
    io.state = net->state[s->layer];
    io.residual = !s->fusion.adds ? NULL : s->residual >= 0 ? net->act[s->residual] : net->input;
    io.residual_relu = s->residual_relu;
    clt_replica_scope(net->replica, l->name, "forward");
    status = l->ops->forward(l, &io, e);
  }
  io.residual = NULL;
  io.residual_relu = 0;
  if (status) return status;
  const int last = m->nlayers - 1;
  clt_replica_scope(net->replica, "loss", "forward and backward");
  status = run_loss(net, net->act[last], train ? net->grad_pool[net->grad_plan[last].out] : NULL,
                    count, loss_scale, metric_slot, e);
  if (status || !train) return status;
  for (int k = plan->nsteps - 1; k >= 0 && !status; k--) {
    const clt_plan_step *s = &plan->steps[k];
    const int i = s->layer;
    const clt_layer *l = &m->layers[i];
    const clt_grad_plan *p = &net->grad_plan[i];
    /* Input j's gradient, where some layer below trains (frozen layers below the
     * lowest trainable one need none: the pass stops there). */
    int wanted[2];
    for (int j = 0; j < 2; j++)
      wanted[j] = j < l->ninputs && l->inputs[j] >= 0 && net->grads_needed[l->inputs[j]] &&
                  p->in[j] >= 0;
    const int in_place = wanted[0] && adds_in_place(l, p);
    clt_replica_scope(net->replica, l->name, "backward");
    if (net->grads_needed[i] && s->backward && l->ops->backward) {
      io.fusion = s->fusion;
      io.x = l->inputs[0] >= 0 ? net->act[l->inputs[0]] : net->input;
      io.x2 = l->ninputs > 1 ? net->act[l->inputs[1]] : NULL;
      io.y = net->act[s->backward_out];
      io.state = net->state[i];
      io.dy = net->grad_pool[net->grad_plan[s->backward_out].out];
      io.dx = wanted[0] ? net->grad_pool[p->in[0]] : NULL;
      io.dx2 = wanted[1] ? net->grad_pool[p->in[1]] : NULL;
      io.dx_accumulate = in_place;
      if (in_place) io.dx = net->grad_pool[p->add_to[0]];
      status = l->ops->backward(l, &io, e);
      io.dx_accumulate = 0;
    }
    for (int j = 0; j < 2 && !status; j++) {
      if (!wanted[j] || p->add_to[j] < 0 || (j == 0 && in_place)) continue;
      const size_t n = clt_shape_size(m->layers[l->inputs[j]].out) * (size_t)count;
      status = accumulate(net, net->grad_pool[p->add_to[j]], net->grad_pool[p->in[j]], n, e);
    }
    /* Buckets whose lowest layer has run its backward are complete. */
    int until = marked;
    while (until < nbuckets && buckets[until].layer >= i) until++;
    if (!status && until > marked) status = mark_buckets(net, &marked, until, done, e);
  }
  if (!status && marked < nbuckets) status = mark_buckets(net, &marked, nbuckets, done, e);
  return status;
}

/* Launches kernel `name` of optimizer.cl, built with the exact options, over n items. */
static int launch_update(clt_net *net, const char *name, const clt_karg *args, int nargs, int n,
                         clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(net->replica, CLT_OPTIMIZER_SOURCE, net->replica->exact_options,
                                  name, &k, e);
  return status ? status : clt_launch1d(net->replica, k, name, args, nargs, (size_t)n, e);
}

int clt_net_update_checked(clt_net *net, const clt_optimizer *opt, long step, int slot,
                           clt_err *e) {
  if (!net->train) return clt_fail(e, CLT_ERR_INTERNAL, "optimizer step on an inference-only net");
  if (slot >= net->metric_slots) return clt_fail(e, CLT_ERR_INTERNAL, "check slot %d", slot);
  cl_kernel kf;
  int status = clt_replica_kernel(net->replica, "reduce.cl", "", "count_final", &kf, e);
  if (status) return status;
  clt_replica_scope(net->replica, "optimizer", "update");
  /* The update's kernel counts the non-finite values of the whole gradient
   * (the moving statistics' slots after the trainable ones too). */
  clt_optimizer_buffers buffers = {.params = net->params,
                                   .grads = net->grads,
                                   .n = (int)net->model->trainable_floats,
                                   .count_n = (int)net->model->grad_floats,
                                   .partial = net->check_partial};
  for (int k = 0; k < CLT_OPT_SLOTS; k++) buffers.slots[k] = net->opt_state[k];
  status = clt_optimizer_update(net->replica, opt, step, &buffers, e);
  if (!status && slot >= 0) {
    const int n = (int)net->model->grad_floats;
    const int nblocks = (n + CLT_CHECK_BLOCK - 1) / CLT_CHECK_BLOCK;
    clt_karg fargs[] = {CLT_ARG(net->check_partial), CLT_ARG(nblocks), CLT_ARG(net->grad_checks),
                        CLT_ARG(slot)};
    status = clt_launch_single_group(net->replica, kf, "gradient check", fargs, 4, e);
  }
  cl_mem p = net->params, g = net->grads;
  for (int k = 0; k < net->stat_runs && !status; k++) {
    int first = net->stat_first[k];
    int total = k + 1 < net->stat_runs ? net->stat_first[k + 1] : (int)net->model->grad_floats;
    float momentum = net->stat_momentum[k];
    clt_karg margs[] = {CLT_ARG(p), CLT_ARG(g), CLT_ARG(first), CLT_ARG(total), CLT_ARG(momentum)};
    status = launch_update(net, "moving_average", margs, 5, total - first, e);
  }
  return status;
}

int clt_net_update(clt_net *net, const clt_optimizer *opt, long step, clt_err *e) {
  return clt_net_update_checked(net, opt, step, -1, e);
}

int clt_net_set_metric_slots(clt_net *net, int slots, clt_err *e) {
  if (slots < 1) return clt_fail(e, CLT_ERR_INTERNAL, "%d metric slots", slots);
  if (slots == net->metric_slots) return CLT_OK;
  cl_int rc = clFinish(net->replica->queue); /* no kernel may still write the old ones */
  if (rc) return clt_replica_fail(net->replica, e, rc, "clFinish");
  cl_mem *old[] = {&net->metrics, &net->grad_checks};
  for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
    if (*old[i]) clReleaseMemObject(*old[i]);
    *old[i] = NULL;
  }
  net->metric_slots = 0;
  int status = alloc_floats(net, 2 * (size_t)slots, "metrics", &net->metrics, e);
  if (!status && net->train)
    status = alloc_floats(net, (size_t)slots, "gradient checks", &net->grad_checks, e);
  if (!status) net->metric_slots = slots;
  return status;
}

int clt_net_read_slot(clt_net *net, int slot, float *metrics, float *check, cl_event *done,
                      clt_err *e) {
  if (slot < 0 || slot >= net->metric_slots)
    return clt_fail(e, CLT_ERR_INTERNAL, "metric slot %d of %d", slot, net->metric_slots);
  clt_replica *r = net->replica;
  if (clt_fault_hit(r->index, r->step, CLT_FAULT_READ))
    return clt_replica_fail_injected(r, e, CL_OUT_OF_RESOURCES, "reading metrics");
  const int checks = check && net->train;
  cl_int rc = clEnqueueReadBuffer(r->queue, net->metrics, CL_FALSE,
                                  2 * (size_t)slot * sizeof(float), 2 * sizeof(float), metrics, 0,
                                  NULL, done && !checks ? done : NULL);
  if (!rc && checks)
    rc = clEnqueueReadBuffer(r->queue, net->grad_checks, CL_FALSE, (size_t)slot * sizeof(float),
                             sizeof(float), check, 0, NULL, done);
  if (!rc && done) rc = clFlush(r->queue);
  else if (!rc) rc = clFinish(r->queue);
  return rc ? clt_replica_fail(r, e, rc, "reading metrics") : CLT_OK;
}

int clt_net_read_metrics(clt_net *net, float *out, int n, clt_err *e) {
  if (n > net->metric_slots)
    return clt_fail(e, CLT_ERR_INTERNAL, "metrics %d > %d", n, net->metric_slots);
  return read_buffer(net, net->metrics, out, 2 * (size_t)n * sizeof(float), "reading metrics", e);
}

int clt_net_read_logits(clt_net *net, int count, float *out, clt_err *e) {
  const clt_model *m = net->model;
  if (count < 0 || count > net->max_batch)
    return clt_fail(e, CLT_ERR_INTERNAL, "logits of %d examples, batch %d", count, net->max_batch);
  if (count == 0) return CLT_OK;
  const size_t bytes = (size_t)count * m->classes * sizeof(float);
  clt_replica *r = net->replica;
  if (clt_fault_hit(r->index, r->step, CLT_FAULT_READ))
    return clt_replica_fail_injected(r, e, CL_OUT_OF_RESOURCES, "reading logits");
  cl_int rc = clEnqueueReadBuffer(net->replica->queue, net->act[m->nlayers - 1], CL_FALSE, 0, bytes,
                                  out, 0, NULL, NULL);
  return rc ? clt_replica_fail(net->replica, e, rc, "reading logits") : CLT_OK;
}

int clt_net_read_grad_checks(clt_net *net, float *out, int n, clt_err *e) {
  if (n > net->metric_slots)
    return clt_fail(e, CLT_ERR_INTERNAL, "checks %d > %d", n, net->metric_slots);
  return read_buffer(net, net->grad_checks, out, (size_t)n * sizeof(float),
                     "reading gradient checks", e);
}
