#include "ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

static size_t out_size(const clt_model *m, int i, int B) {
  return (i < 0 ? clt_shape_size(m->input) : clt_shape_size(m->layers[i].out)) * (size_t)B;
}

/* Adds the gradients of layer i's inputs, given its output gradient dy (which
 * may be overwritten), into gin[k] (NULL: not needed). */
static int backward_layer(const clt_model *m, int i, clt_ref_io *io, double *const *gin) {
  const clt_layer *l = &m->layers[i];
  const size_t nin = clt_shape_size(l->in) * (size_t)io->batch;
  double *dx = malloc(nin * 2 * sizeof *dx);
  /* A frozen layer's weights get no gradient: its kind's reference writes them
   * to a buffer thrown away. */
  double *unused = l->frozen ? calloc(m->flat_floats, sizeof *unused) : NULL;
  if (!dx || (l->frozen && !unused)) {
    free(dx);
    free(unused);
    return -1;
  }
  io->dx = dx;
  io->dx2 = l->ninputs > 1 ? dx + nin : NULL;
  if (unused) io->grads = unused;
  l->ops->ref_backward(l, io);
  free(unused);
  for (int k = 0; k < l->ninputs && k < 2; k++) { /* 2: dx and dx2 */
    const double *d = k ? io->dx2 : io->dx;
    for (size_t j = 0; gin[k] && j < nin; j++) gin[k][j] += d[j];
  }
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
    clt_ref_io io = {.batch = B,
                     .train = train,
                     .stat_weight = stat_weight,
                     .params = flat,
                     .grads = train ? grad : NULL,
                     .y = act[i]};
    io.x = l->inputs[0] < 0 ? x : act[l->inputs[0]];
    if (l->ninputs > 1) io.x2 = l->inputs[1] < 0 ? x : act[l->inputs[1]];
    l->ops->ref_forward(l, &io);
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
      clt_ref_io io = {.batch = B,
                       .train = train,
                       .stat_weight = stat_weight,
                       .params = flat,
                       .grads = grad,
                       .y = act[i],
                       .dy = g[i]};
      double *gin[2] = {NULL, NULL};
      for (int k = 0; k < l->ninputs; k++) {
        const int t = l->inputs[k];
        *(k ? &io.x2 : &io.x) = t < 0 ? x : act[t];
        if (t < 0) continue; /* the input needs no gradient */
        if (!g[t] && !(g[t] = calloc(out_size(m, t, B), sizeof(double)))) goto cleanup;
        gin[k] = g[t];
      }
      if (!g[i]) continue; /* feeds nothing */
      if (backward_layer(m, i, &io, gin)) goto cleanup;
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
