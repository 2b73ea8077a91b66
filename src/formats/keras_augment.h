/* Keras' augmentation layers in model files (src/formats/keras.c takes them out of
 * the model into an augment.h augmentation; internal to src/formats). */
#ifndef CLT_KERAS_AUGMENT_H
#define CLT_KERAS_AUGMENT_H

#include "augment.h"
#include "kconfig.h"

/* Whether a Keras class is one of the augmentation layers cltrain runs. */
int clt_keras_is_augmentation(const char *cls);

/* Reads an augmentation layer's config (RandomFlip, RandomRotation, RandomZoom,
 * RandomTranslation, RandomCrop, RandomContrast, RandomBrightness) into a stage
 * appended to a; every option read, each refusal one line naming the layer. */
int clt_keras_augment_stage(const clt_keras_config *c, clt_augment *a, clt_err *e);

#endif
