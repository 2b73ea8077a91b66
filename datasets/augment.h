/* Image augmentation: Keras 3's preprocessing layers RandomFlip, RandomRotation,
 * RandomZoom, RandomTranslation, RandomCrop, RandomContrast and RandomBrightness,
 * applied on the host to each decoded photo (the photo loader's threads run them,
 * see photos.h), from the --augment flag or a model file's layers.
 *
 * Each stage computes what its Keras layer computes, in float32 with the same
 * arithmetic (TensorFlow's ImageProjectiveTransformV3 for the geometric ones, its
 * fill modes and bilinear or nearest sampling; tf.image.resize for RandomCrop's
 * resize), on the image as floats; the last stage's result is rounded to uint8
 * (round half up), as the decoder rounds its resize. Stages run in the order given.
 *
 * The draws differ from Keras on purpose: every image's transform depends only on
 * (seed, epoch, the example's index in its subset), drawn from its own clt_rng
 * stream, so any device layout, batch split and --resume sees the same images.
 * Keras draws per batch from a seed generator, and its RandomCrop takes one offset
 * for the whole batch; here each image takes its own.
 *
 * Outside training (an evaluation pass, eval, predict) every stage is the
 * identity except RandomCrop, which does what Keras documents for inference (and
 * tf.keras computes): the largest centred window of the target's aspect ratio,
 * resized (bilinear) to the target size. RandomCrop in training: a random window
 * when the image is at least the target size both ways, else that same resize. */
#ifndef CLT_AUGMENT_H
#define CLT_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "status.h"

#define CLT_AUG_MAX_STAGES 16
#define CLT_AUG_TEXT_MAX 1024 /* clt_augment_format's longest text, NUL included */
#define CLT_AUG_MAX_SIDE 8192 /* a crop's side, as photos.h's CLT_PHOTOS_MAX_SIZE */

typedef enum clt_aug_kind {
  CLT_AUG_FLIP,       /* RandomFlip(mode) */
  CLT_AUG_ROTATE,     /* RandomRotation(factor) */
  CLT_AUG_ZOOM,       /* RandomZoom(height_factor, width_factor) */
  CLT_AUG_TRANSLATE,  /* RandomTranslation(height_factor, width_factor) */
  CLT_AUG_CROP,       /* RandomCrop(height, width) */
  CLT_AUG_CONTRAST,   /* RandomContrast(factor, value_range) */
  CLT_AUG_BRIGHTNESS, /* RandomBrightness(factor, value_range) */
} clt_aug_kind;

enum { CLT_FLIP_HORIZONTAL = 1, CLT_FLIP_VERTICAL = 2 }; /* RandomFlip's mode, as bits */

/* fill_mode of the geometric stages, as TensorFlow names them. */
typedef enum clt_aug_fill {
  CLT_FILL_REFLECT,
  CLT_FILL_WRAP,
  CLT_FILL_CONSTANT,
  CLT_FILL_NEAREST
} clt_aug_fill;

typedef struct clt_aug_stage {
  clt_aug_kind kind;
  int flip; /* FLIP: CLT_FLIP_* bits (both: one draw flips both ways, as Keras 3) */
  /* The ranges draws come from (lo <= hi):
   *   ROTATE      the angle, in fractions of a full turn (Keras' factor)
   *   ZOOM        the height's zoom is 1 + [lo, hi]; wlo, whi the width's
   *   TRANSLATE   the shift down, a fraction of the height; wlo, whi right, of the width
   *   CONTRAST    the factor is drawn from [1 - lo, 1 + hi]
   *   BRIGHTNESS  the shift, a fraction of the value range */
  double lo, hi, wlo, whi;
  int width_given;   /* ZOOM: width_factor given (else the width takes the height's zoom) */
  int height, width; /* CROP: the output's size */
  clt_aug_fill fill; /* ROTATE, ZOOM, TRANSLATE: fill_mode, interpolation, fill_value */
  int nearest;       /* interpolation "nearest", else "bilinear" */
  double fill_value; /* CLT_FILL_CONSTANT's value, in [0, 255] */
  double vmin, vmax; /* CONTRAST, BRIGHTNESS: value_range, within [0, 255] */
} clt_aug_stage;

typedef struct clt_augment {
  int n; /* 0: none */
  clt_aug_stage stage[CLT_AUG_MAX_STAGES];
} clt_augment;

/* A stage's defaults (Keras'): reflect, bilinear, fill value 0, value range [0, 255]. */
clt_aug_stage clt_aug_stage_default(clt_aug_kind kind);

/* Appends s after checking its values against Keras' bounds; the error (CLT_ERR_ARG)
 * says which value and the bound, e.g. "factor 2 outside [-1, 1] (fractions of a
 * full turn)". */
int clt_augment_add(clt_augment *a, const clt_aug_stage *s, clt_err *e);

/* Parses --augment's text (docs/photos.md): comma-separated items
 *   flip[=horizontal|vertical|horizontal_and_vertical]   (bare: horizontal_and_vertical)
 *   rotate=F | rotate=LO:HI                               F: [-F, F], fractions of a turn
 *   zoom=H[/W]                 H, W: F or LO:HI; without W the width zooms as the height
 *   translate=H[/W]            without W, W = H
 *   crop=HxW
 *   contrast=F | contrast=LO:HI                           factor in [1 - F, 1 + F]
 *   brightness=F | brightness=LO:HI
 * and options for the stages after them: fill=reflect|wrap|constant|nearest,
 * fill_value=V, interpolation=bilinear|nearest, value_range=LO:HI. Errors
 * (CLT_ERR_ARG) name the item and the cause, one line. */
int clt_augment_parse(const char *text, clt_augment *a, clt_err *e);

/* The canonical text of a (what clt_augment_parse reads back as a); "" for none. */
void clt_augment_format(const clt_augment *a, char *buf, size_t size);

/* Keeps only a's crops: what acts outside training. */
void clt_augment_only_crops(clt_augment *a);

/* Whether a has a stage of this kind. */
int clt_augment_has(const clt_augment *a, clt_aug_kind kind);

/* The size of the images a makes of h x w images (its crops'). */
void clt_augment_out_size(const clt_augment *a, int h, int w, int *oh, int *ow);

/* The floats clt_augment_image needs as workspace for h x w x c images. */
size_t clt_augment_work_floats(const clt_augment *a, int h, int w, int c);

/* RandomCrop's inference window in an h x w image for a th x tw target (Keras'
 * smart_resize): the largest centred window of the target's aspect ratio, rows
 * [*y0, *y0 + *wh), columns [*x0, *x0 + *ww); it is then resized to th x tw. */
void clt_augment_crop_window(int h, int w, int th, int tw, int *y0, int *x0, int *wh, int *ww);

/* One stage's draw for one image. */
typedef struct clt_aug_draw {
  int flip;   /* FLIP: flip this image */
  float a, b; /* ROTATE: a = the angle in degrees; ZOOM: a = the width's zoom, b = the
                 height's; TRANSLATE: a = dx, b = dy in pixels; CONTRAST: a = the factor;
                 BRIGHTNESS: a = the shift in values */
  int y0, x0; /* CROP: the window's top-left corner; -1: the centred window resized */
} clt_aug_draw;

/* The generator of one example's draws: stream CLT_AUGMENT_STREAM ^ (epoch << 32 | example)
 * of seed, apart from the weights' (0), the epochs' orders (1 + epoch) and the split's. */
#define CLT_AUGMENT_STREAM 0xA000000000000000ull
void clt_augment_rng(clt_rng *r, uint64_t seed, int epoch, int example);

/* Stage s's training draw for an h x w input, from r. */
void clt_augment_draw(const clt_aug_stage *s, clt_rng *r, int h, int w, clt_aug_draw *d);

/* Applies stage s to in (h x w x c floats, HWC) into out (which must not overlap
 * in), with draw d, or as at inference when d is NULL; *oh, *ow get the output's size. */
void clt_augment_stage(const clt_aug_stage *s, const clt_aug_draw *d, const float *in, int h, int w,
                       int c, float *out, int *oh, int *ow);

/* Augments one uint8 image (h x w x c, HWC) into out (clt_augment_out_size's size):
 * epoch >= 0: training, with example's draws for (seed, epoch); epoch < 0: as at
 * inference. work: clt_augment_work_floats floats. */
void clt_augment_image(const clt_augment *a, uint64_t seed, int epoch, int example,
                       const unsigned char *in, int h, int w, int c, unsigned char *out,
                       float *work);

#endif
