#include "ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_resnet.h"

static size_t out_size(const clt_model *m, int i, int B) {
  return (i < 0 ? clt_shape_size(m->input) : clt_shape_size(m->layers[i].out)) * (size_t)B;
}

static void relu_inplace(double *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;
}

static void mask_by_output(const double *y, double *dy, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!(y[i] > 0)) dy[i] = 0;
  }
}

static void forward_layer(const clt_model *m, int i, const double *flat, const double *const *in,
                          double *y, int B, int train, double stat_weight, double *grad) {
  const clt_layer *l = &m->layers[i];
  const clt_shape s = l->in, o = l->out;
  const size_t n = clt_shape_size(o) * (size_t)B;
  const double *x = in[0];
  if (l->ops == &clt_conv2d_ops) {
    ref_conv2d_forward(x, B, s.h, s.w, s.c, flat + l->params[0].offset, flat + l->params[1].offset,
                       l->kernel_h, l->kernel_w, l->filters, l->stride, l->pad_top, l->pad_left,
                       o.h, o.w, y);
    if (l->relu) relu_inplace(y, n);
  } else if (l->ops == &clt_maxpool_ops) {
    if (l->pad) {
      ref_maxpool_pad_forward(x, B, s.h, s.w, s.c, l->pool, l->pool_stride, l->pad, o.h, o.w, y);
    } else {
      ref_maxpool_forward(x, B, s.h, s.w, s.c, l->pool, l->pool_stride, o.h, o.w, y);
    }
  } else if (l->ops == &clt_flatten_ops) {
    memcpy(y, x, n * sizeof *y);
  } else if (l->ops == &clt_dense_ops) {
    ref_dense_forward(x, B, (int)clt_shape_size(s), flat + l->params[0].offset,
                      flat + l->params[1].offset, l->units, y);
    if (l->relu) relu_inplace(y, n);
  } else if (l->ops == &clt_batchnorm_ops) {
    const double *gamma = flat + l->params[0].offset, *beta = flat + l->params[1].offset;
    const int rows = B * s.h * s.w;
    if (train) {
      double *mean = malloc(2 * (size_t)s.c * sizeof *mean);
      if (!mean) return;
      double *var_unbiased = mean + s.c;
      ref_batchnorm_forward_train(x, rows, s.c, gamma, beta, l->epsilon, l->relu, y, mean, NULL,
                                  var_unbiased);
      for (int c = 0; c < s.c && grad; c++) {
        grad[l->params[2].offset + c] = stat_weight * mean[c];
        grad[l->params[3].offset + c] = stat_weight * var_unbiased[c];
      }
      free(mean);
    } else {
      ref_batchnorm_forward_infer(x, rows, s.c, gamma, beta, flat + l->params[2].offset,
                                  flat + l->params[3].offset, l->epsilon, l->relu, y);
    }
  } else if (l->ops == &clt_add_ops) {
    ref_add(x, in[1], n, l->relu, y);
  } else if (l->ops == &clt_gap_ops) {
    ref_gap_forward(x, B, s.h, s.w, s.c, y);
  }
}

/* Adds the gradients of layer i's inputs, given its output gradient dy (which
 * may be overwritten), into gin[k] (NULL: not needed). */
static int backward_layer(const clt_model *m, int i, const double *flat, const double *const *in,
                          const double *y, double *dy, double *const *gin, int B, double *grad) {
  const clt_layer *l = &m->layers[i];
  const clt_shape s = l->in, o = l->out;
  const size_t nin = clt_shape_size(s) * (size_t)B, nout = clt_shape_size(o) * (size_t)B;
  double *dx = malloc((nin > nout ? nin : nout) * 2 * sizeof *dx);
  if (!dx) return -1;
  double *dx2 = dx + (nin > nout ? nin : nout);
  const double *x = in[0];
  int wrote = 1, wrote2 = 0;
  if (l->ops == &clt_conv2d_ops) {
    if (l->relu) mask_by_output(y, dy, nout);
    ref_conv2d_backward(x, B, s.h, s.w, s.c, flat + l->params[0].offset, l->kernel_h, l->kernel_w,
                        l->filters, l->stride, l->pad_top, l->pad_left, o.h, o.w, dy, dx,
                        grad + l->params[0].offset, grad + l->params[1].offset);
  } else if (l->ops == &clt_maxpool_ops) {
    if (l->pad) {
      ref_maxpool_pad_backward(x, B, s.h, s.w, s.c, l->pool, l->pool_stride, l->pad, o.h, o.w, dy, dx);
    } else {
      ref_maxpool_backward(x, B, s.h, s.w, s.c, l->pool, l->pool_stride, o.h, o.w, dy, dx);
    }
  } else if (l->ops == &clt_flatten_ops) {
    memcpy(dx, dy, nout * sizeof *dx);
  } else if (l->ops == &clt_dense_ops) {
    if (l->relu) mask_by_output(y, dy, nout);
    ref_dense_backward(x, B, (int)clt_shape_size(s), flat + l->params[0].offset, l->units, dy, dx,
                       grad + l->params[0].offset, grad + l->params[1].offset);
  } else if (l->ops == &clt_batchnorm_ops) {
    ref_batchnorm_backward(x, B * s.h * s.w, s.c, flat + l->params[0].offset,
                           flat + l->params[1].offset, l->epsilon, l->relu, dy, dx,
                           grad + l->params[0].offset, grad + l->params[1].offset);
  } else if (l->ops == &clt_add_ops) {
    ref_add_backward(y, dy, nout, l->relu, dx, dx2);
    wrote2 = 1;
  } else if (l->ops == &clt_gap_ops) {
    ref_gap_backward(dy, B, s.h, s.w, s.c, dx);
  } else {
    wrote = 0;
  }
  for (size_t j = 0; wrote && gin[0] && j < nin; j++) gin[0][j] += dx[j];
  for (size_t j = 0; wrote2 && gin[1] && j < nin; j++) gin[1][j] += dx2[j];
  free(dx);
  return 0;
}

double ref_model_loss_grad(const clt_model *m, const double *flat, const double *x,
                           const int *labels, int B, double scale, int train, double stat_weight,
                           double *grad, int *correct) {
  const int n = m->nlayers;
  double result = NAN;
  double **act = calloc((size_t)n, sizeof *act), **g = calloc((size_t)n, sizeof *g);
  double *loss = malloc((size_t)B * sizeof *loss);
  int *ok = malloc((size_t)B * sizeof *ok);
  if (!act || !g || !loss || !ok) goto cleanup;
  for (int i = 0; i < n; i++) {
    const clt_layer *l = &m->layers[i];
    if (!(act[i] = malloc(out_size(m, i, B) * sizeof(double)))) goto cleanup;
    const double *in[2] = {NULL, NULL};
    for (int k = 0; k < l->ninputs; k++) in[k] = l->inputs[k] < 0 ? x : act[l->inputs[k]];
    forward_layer(m, i, flat, in, act[i], B, train, stat_weight, train ? grad : NULL);
  }
  const int K = m->classes;
  if (grad && !(g[n - 1] = calloc(out_size(m, n - 1, B), sizeof(double)))) goto cleanup;
  ref_softmax_xent(act[n - 1], labels, B, K, scale, loss, grad ? g[n - 1] : NULL, ok);
  double sum = 0;
  int right = 0;
  for (int b = 0; b < B; b++) sum += loss[b], right += ok[b];
  if (correct) *correct = right;
  if (grad) {
    for (int i = n - 1; i >= 0; i--) {
      const clt_layer *l = &m->layers[i];
      const double *in[2] = {NULL, NULL};
      double *gin[2] = {NULL, NULL};
      for (int k = 0; k < l->ninputs; k++) {
        const int t = l->inputs[k];
        in[k] = t < 0 ? x : act[t];
        if (t < 0) continue; /* the input needs no gradient */
        if (!g[t] && !(g[t] = calloc(out_size(m, t, B), sizeof(double)))) goto cleanup;
        gin[k] = g[t];
      }
      if (!g[i]) continue; /* feeds nothing */
      if (backward_layer(m, i, flat, in, act[i], g[i], gin, B, grad)) goto cleanup;
    }
  }
  result = scale * sum;

cleanup:
  for (int i = 0; i < n && act; i++) free(act[i]);
  for (int i = 0; i < n && g; i++) free(g[i]);
  free(act);
  free(g);
  free(loss);
  free(ok);
  return result;
}
