/* A plain-C double-precision interpreter of a whole clt_model graph, walking the
 * layers' reference passes (ops->ref_forward, ref_backward; test builds only): the
 * reference a network on any device is checked against, for every model. */
#ifndef CLT_REF_MODEL_H
#define CLT_REF_MODEL_H

#include "model.h"

/* Runs model m on B examples x (B, input), already preprocessed, with labels.
 * flat holds the parameters in the model's flat layout (m->flat_floats).
 * train: BatchNormalization normalises with the batch's statistics; otherwise
 * with the moving ones.
 * Returns scale * (sum of the examples' softmax cross-entropy losses). If grad
 * is not NULL (train only), it receives, in the flat layout, the gradient of that
 * value for every trainable parameter and, in the slots of the moving statistics,
 * what a device writes there: stat_weight * batch mean and stat_weight * unbiased
 * batch variance. Alignment gaps are left untouched, and so are the slots of
 * frozen layers (l->frozen), which train nothing: a frozen BatchNormalization
 * normalises with its moving statistics in training too and writes no batch
 * statistics. correct, if not NULL, gets
 * the number of examples classified correctly. Returns NAN when out of memory. */
double ref_model_loss_grad(const clt_model *m, const double *flat, const double *x,
                           const int *labels, int B, double scale, int train, double stat_weight,
                           double *grad, int *correct);

#endif
