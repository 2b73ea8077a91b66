/* --weights FILE.npz: starting weights for a model, from Keras or from cltrain. */
#ifndef CLT_WEIGHTS_H
#define CLT_WEIGHTS_H

#include "model.h"

/* Fills the parameters of m in flat (m->flat_floats floats) from an .npz holding
 * either Keras' `model.get_weights()` list as `np.savez(path, *weights)` writes it
 * (members arr_0, arr_1, ...: every layer's weights in the model's layer order,
 * moving statistics included) or cltrain's member names "<layer>/<param>" (as in
 * checkpoints, which are such files). Every weight must be there with its exact
 * shape, as float32, and finite (but those a Keras model file's config gave their
 * values, keras_config: Keras has no weights for them, a checkpoint has; absent,
 * they keep their values); no other member may be (a checkpoint's optimizer
 * state, counters and metadata excepted); nothing is written to flat unless all
 * of that holds. */
int clt_weights_load(const clt_model *m, const char *path, float *flat, clt_err *e);

#endif
