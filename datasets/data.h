/* A data folder opened into batch sources: IDX files (Fashion-MNIST's train- and
 * t10k- pairs) or a photo folder (one subfolder per class), recognised by content. */
#ifndef CLT_DATA_H
#define CLT_DATA_H

#include <stdint.h>

#include "augment.h"
#include "source.h"

typedef struct clt_data_spec {
  const char *dir;              /* kept by the clt_data: must outlive it */
  int with_train;               /* 0 (evaluation): a test set only: the validation subset if
                                   validation_split > 0, else a photo folder's whole or the IDX
                                   test files */
  long train_limit, test_limit; /* use the first N examples; 0: all */
  int image_size;               /* photo folders: images resized to this square */
  double validation_split;      /* fraction of the training examples held out as the test set
                                   (a photo folder's before the limits; IDX files' the last,
                                   as Keras' validation_split) */
  uint64_t seed;                /* photo folders: chooses that fraction */
  int image_size_given, validation_split_given; /* set by the user (image size: refused for IDX
                                                   files) */
  long max_image_pixels; /* photo folders: refuse bigger images (0: the default limit); set: refused
                            for IDX files */
  clt_augment augment;   /* photo folders: the training images' augmentation (n 0: none; the
                            test images' only where it crops); set: refused for IDX files */
} clt_data_spec;

typedef struct clt_data {
  clt_data_spec spec;          /* as opened */
  int photos;                  /* a photo folder, else IDX */
  int validation;              /* the test set is a validation split of the training examples */
  int test_first;              /* IDX: the test set's first example's index in its files */
  clt_source *train, *test;    /* NULL where there is none */
  int ntrain, ntest;           /* examples, after the limits */
  int height, width, channels; /* the sources' images: after augment's crops */
  int classes;
  const char *const *class_names; /* classes names (photo folders), or NULL */
} clt_data;

/* Opens spec->dir. IDX files come sized, so asking to resize them is refused
 * rather than ignored. On failure *d is closed. */
int clt_data_open(const clt_data_spec *spec, clt_data *d, clt_err *e);
/* Opens a photo folder again for another image size or split seed (a resumed
 * checkpoint's); IDX data depends on neither and is kept. */
int clt_data_reopen(clt_data *d, int image_size, uint64_t seed, clt_err *e);
/* Opens the folder again with another augmentation (a model file's layers). */
int clt_data_set_augment(clt_data *d, const clt_augment *aug, clt_err *e);
void clt_data_close(clt_data *d);

/* The images must have the shape a model was built for, and the labels its
 * number of outputs; the error names the folder and the model. */
int clt_data_check_input(const clt_data *d, const char *model, int height, int width, int channels,
                         int classes, clt_err *e);

/* The class names one per line (malloc'd; checkpoints keep them), or *names NULL
 * where the data has none. */
int clt_data_class_names(const clt_data *d, char **names, clt_err *e);

/* A checkpoint trained on a photo folder must meet the same classes in the same
 * order: the same count with other names would be scored wrongly. trained: its
 * names, one per line (NULL: none kept); ckpt names it in the error. */
int clt_data_check_classes(const clt_data *d, const char *trained, const char *ckpt, clt_err *e);

#endif
