/* Training on images a program makes itself (a simulator, a robot's camera, a
 * data pipeline of its own) on every device, with gradient accumulation written
 * in the program's own loop.
 *
 *   from_memory [--steps N] [--devices SPEC] [--batch N] [--seed N]
 *
 * The task: 32x32 grey images of one of four shapes (a horizontal bar, a vertical
 * bar, a diagonal, a square) at a random place, in noise. Each update
 * accumulates the summed gradients of two batches made on the fly, averages
 * them, and applies the mean: the update of one batch twice the size, which the
 * devices' memory might not hold. A fresh test batch is then predicted.
 *
 * test-args: --steps 10 --batch 16 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cltrain.h>

enum { SIDE = 32, CLASSES = 4 };

/* xorshift64*: the example's own random numbers. */
static uint64_t rng_state = 88172645463325252ull;
static uint32_t next_u32(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

/* n images of random shapes into images (n x SIDE x SIDE) and labels. */
static void make_batch(uint8_t *images, int32_t *labels, int n) {
  for (int i = 0; i < n; i++) {
    uint8_t *img = images + (size_t)i * SIDE * SIDE;
    const int label = (int)(next_u32() % CLASSES);
    for (int p = 0; p < SIDE * SIDE; p++) img[p] = (uint8_t)(next_u32() % 64); /* noise */
    const int x0 = 4 + (int)(next_u32() % 12), y0 = 4 + (int)(next_u32() % 12);
    for (int k = 0; k < 12; k++) {
      for (int w = 0; w < 2; w++) {
        int x = x0, y = y0;
        if (label == 0) x += k, y += w;          /* horizontal bar */
        else if (label == 1) x += w, y += k;     /* vertical bar */
        else if (label == 2) x += k, y += k + w; /* diagonal */
        else x += k % 6 + w * 6, y += k / 6 * 5; /* a square's corners and edges */
        if (x < SIDE && y < SIDE) img[y * SIDE + x] = 255;
      }
    }
    labels[i] = label;
  }
}

static int fail(const void *handle, int status) {
  fprintf(stderr, "from_memory: %s (%s)\n", cltrain_errmsg(handle), cltrain_status_name(status));
  return 1;
}

int main(int argc, char **argv) {
  int steps = 150, batch = 32;
  long seed = 7;
  const char *devices = "all";
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      fprintf(stderr, "from_memory: %s needs a value\n", argv[i]);
      return 2;
    }
    if (strcmp(argv[i], "--steps") == 0) steps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--batch") == 0) batch = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--devices") == 0) devices = argv[i + 1];
    else if (strcmp(argv[i], "--seed") == 0) seed = atol(argv[i + 1]);
    else {
      fprintf(stderr, "from_memory: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || batch < 1) {
    fprintf(stderr, "from_memory: --steps and --batch must be at least 1\n");
    return 2;
  }
  rng_state ^= (uint64_t)seed * 0x9E3779B97F4A7C15ull;

  cltrain_ctx *ctx = NULL;
  cltrain_model *model = NULL;
  cltrain_trainer *t = NULL;
  uint8_t *images = malloc((size_t)batch * SIDE * SIDE);
  int32_t *labels = malloc((size_t)batch * sizeof *labels);
  float *sum = NULL, *grad = NULL, *logits = malloc((size_t)batch * CLASSES * sizeof *logits);
  int rc = 1, st;
  char options[256];
  if (!images || !labels || !logits) {
    fprintf(stderr, "from_memory: out of memory\n");
    goto done;
  }
  if ((st = cltrain_open(NULL, &ctx))) {
    fail(NULL, st);
    goto done;
  }
  /* A small network written as a model description; x / 255 on the way in. */
  snprintf(options, sizeof options, "input=%dx%dx1 classes=%d preprocess=unit seed=%ld", SIDE, SIDE,
           CLASSES, seed);
  st = cltrain_model_create(ctx,
                            "c1=Conv2D(16,3x3,s1,same,relu) p1=MaxPooling2D(2,s2) "
                            "c2=Conv2D(32,3x3,s1,same,relu) p2=MaxPooling2D(2,s2) "
                            "f=Flatten d1=Dense(64,relu) d2=Dense(4)",
                            NULL, options, &model);
  if (st) {
    fail(ctx, st);
    goto done;
  }
  /* Each batch is the global batch, sliced across the devices. */
  snprintf(options, sizeof options, "devices=%s batch-per-replica=%d optimizer=adam lr=0.002",
           devices, batch);
  if ((st = cltrain_trainer_create(ctx, model, options, &t))) {
    fail(ctx, st);
    goto done;
  }
  if (batch % cltrain_trainer_replicas(t) != 0) {
    fprintf(stderr, "from_memory: --batch %d does not divide over %d replicas\n", batch,
            cltrain_trainer_replicas(t));
    goto done;
  }
  /* batch-per-replica above made the global batch batch x replicas: a batch of
   * `batch` examples is a short one, sliced across the replicas all the same. */
  const size_t n = cltrain_trainer_floats(t);
  sum = malloc(n * sizeof *sum);
  grad = malloc(n * sizeof *grad);
  if (!sum || !grad) {
    fprintf(stderr, "from_memory: out of memory\n");
    goto done;
  }
  printf("%d replicas, %zu parameters\n", cltrain_trainer_replicas(t),
         cltrain_model_param_count(model));
  for (int s = 0; s < steps; s++) {
    double loss_sum = 0;
    /* Two batches' summed gradients, averaged, then one update. */
    for (int k = 0; k < 2; k++) {
      double loss = 0;
      make_batch(images, labels, batch);
      if ((st = cltrain_trainer_forward_backward_batch(t, images, CLTRAIN_U8, labels, batch, &loss,
                                                       NULL)) ||
          (st = cltrain_trainer_allreduce(t)) ||
          (st = cltrain_trainer_get_gradients(t, k ? grad : sum, n))) {
        fail(t, st);
        goto done;
      }
      loss_sum += loss;
    }
    for (size_t i = 0; i < n; i++) sum[i] = (sum[i] + grad[i]) * 0.5f;
    if ((st = cltrain_trainer_set_gradients(t, sum, n)) || (st = cltrain_trainer_apply(t))) {
      fail(t, st);
      goto done;
    }
    if ((s + 1) % 25 == 0)
      printf("step %d: loss %.4f, learning rate %g\n", s + 1, loss_sum / 2,
             cltrain_trainer_learning_rate(t));
  }
  /* A fresh batch, predicted. */
  make_batch(images, labels, batch);
  if ((st = cltrain_trainer_predict(t, images, CLTRAIN_U8, batch, logits))) {
    fail(t, st);
    goto done;
  }
  int correct = 0;
  for (int i = 0; i < batch; i++) {
    int best = 0;
    for (int c = 1; c < CLASSES; c++)
      if (logits[i * CLASSES + c] > logits[i * CLASSES + best]) best = c;
    correct += best == labels[i];
  }
  printf("test accuracy on a fresh batch: %d/%d\n", correct, batch);
  rc = 0;
done:
  cltrain_trainer_free(&t);
  cltrain_model_free(&model);
  if (rc) cltrain_abort(&ctx);
  else cltrain_close(&ctx);
  free(images);
  free(labels);
  free(logits);
  free(sum);
  free(grad);
  return rc;
}
