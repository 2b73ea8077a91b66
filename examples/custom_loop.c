/* The first reference workload on libcltrain: TensorFlow's custom training loop
 * with MirroredStrategy on Fashion-MNIST (../shared/seeds/01-...), step for step.
 *
 *   custom_loop [--data DIR] [--epochs N] [--devices SPEC] [--split auto|equal]
 *               [--batch-per-replica N] [--train-limit N] [--test-limit N]
 *               [--checkpoint-dir DIR] [--seed N] [--parts 1]
 *
 * The model, the optimizer and the checkpoints live "under the strategy" (a
 * trainer over every chosen device); the loop is the program's own: each step
 * runs every replica's forward and backward pass on its slice of the global
 * batch with the loss divided by the global batch, sums the gradients, applies
 * them (the tutorial's distributed_train_step: one call, cltrain_trainer_step,
 * whose all-reduce overlaps the backward pass; with --parts 1 the three calls
 * one by one, as a loop that works between them makes them); after each epoch
 * it evaluates, saves a checkpoint every 2 epochs and prints the tutorial's line.
 * Then it restores the newest checkpoint on one device, "without the strategy",
 * and evaluates it. docs/api.md walks through it.
 *
 * test-args: --epochs 1 --train-limit 256 --test-limit 128 --checkpoint-dir ck */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cltrain.h>

/* The flags, with the tutorial's values as defaults. */
typedef struct args {
  const char *data, *devices, *split, *checkpoint_dir;
  int epochs, batch_per_replica, parts;
  long train_limit, test_limit, seed;
} args;

static int parse(int argc, char **argv, args *a) {
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value || strncmp(flag, "--", 2) != 0) {
      fprintf(stderr, "custom_loop: expected --flag VALUE, got '%s'\n", flag);
      return 1;
    }
    i++;
    if (strcmp(flag, "--data") == 0) a->data = value;
    else if (strcmp(flag, "--devices") == 0) a->devices = value;
    else if (strcmp(flag, "--split") == 0) a->split = value;
    else if (strcmp(flag, "--checkpoint-dir") == 0) a->checkpoint_dir = value;
    else if (strcmp(flag, "--epochs") == 0) a->epochs = atoi(value);
    else if (strcmp(flag, "--batch-per-replica") == 0) a->batch_per_replica = atoi(value);
    else if (strcmp(flag, "--train-limit") == 0) a->train_limit = atol(value);
    else if (strcmp(flag, "--test-limit") == 0) a->test_limit = atol(value);
    else if (strcmp(flag, "--seed") == 0) a->seed = atol(value);
    else if (strcmp(flag, "--parts") == 0) a->parts = atoi(value);
    else {
      fprintf(stderr, "custom_loop: unknown flag %s\n", flag);
      return 1;
    }
  }
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints the failed call's message (kept on its handle) and says the run failed. */
static int fail(const void *handle, int status) {
  fprintf(stderr, "custom_loop: %s (%s)\n", cltrain_errmsg(handle), cltrain_status_name(status));
  return 1;
}

/* The tutorial's training loop; *trained gets the epochs run. */
static int train(cltrain_ctx *ctx, const args *a, int *trained) {
  char options[512];
  cltrain_dataset *data = NULL;
  cltrain_model *model = NULL;
  cltrain_trainer *strategy = NULL;
  int rc = 1, st;

  /* The dataset: the tutorial's train and test images (x / 255 is the model's
   * preprocessing), shuffled every epoch. */
  snprintf(options, sizeof options, "train-limit=%ld test-limit=%ld", a->train_limit,
           a->test_limit);
  if ((st = cltrain_dataset_open(ctx, a->data, options, &data))) {
    fail(ctx, st);
    goto done;
  }
  /* create_model(), under the strategy: the same weights on every replica. */
  snprintf(options, sizeof options, "seed=%ld", a->seed);
  if ((st = cltrain_model_create(ctx, "fmnist-cnn", data, options, &model))) {
    fail(ctx, st);
    goto done;
  }
  snprintf(options, sizeof options,
           "devices=%s split=%s batch-per-replica=%d optimizer=adam seed=%ld", a->devices, a->split,
           a->batch_per_replica, a->seed);
  if ((st = cltrain_trainer_create(ctx, model, options, &strategy))) {
    fail(ctx, st);
    goto done;
  }
  if (cltrain_rank(ctx) == 0) printf("Number of devices: %d\n", cltrain_trainer_replicas(strategy));

  for (int epoch = 0; epoch < a->epochs; epoch++) {
    /* TRAIN LOOP: distributed_train_step over the distributed dataset. */
    int steps = 0;
    if ((st = cltrain_trainer_begin_epoch(strategy, data, CLTRAIN_TRAIN, epoch, &steps))) {
      fail(strategy, st);
      goto done;
    }
    const double t0 = now();
    for (int s = 0; s < steps; s++) {
      /* No per-step loss asked (NULL): the calls need not wait for the devices,
       * which run this step while the next is enqueued; the epoch's figures come
       * from cltrain_trainer_metrics below. */
      if (a->parts) {
        /* strategy.run(train_step): each replica's loss divided by the global
         * batch, its gradient by the tape ... */
        if (!(st = cltrain_trainer_forward_backward(strategy, NULL, NULL)) &&
            /* ... summed over the replicas (strategy.reduce) ... */
            !(st = cltrain_trainer_allreduce(strategy)))
          /* ... and optimizer.apply_gradients on every replica. */
          st = cltrain_trainer_apply(strategy);
      } else {
        st = cltrain_trainer_step(strategy, NULL, NULL); /* the three in one call */
      }
      if (st == CLTRAIN_ERR_STOPPED) {
        /* Ctrl-C: the step in flight has finished on every replica; keep it. */
        if ((st = cltrain_trainer_save(strategy, a->checkpoint_dir, epoch, 0))) {
          fail(strategy, st);
          goto done;
        }
        if (cltrain_rank(ctx) == 0)
          fprintf(stderr, "custom_loop: stopped after step %ld, saved in %s\n",
                  cltrain_trainer_steps_done(strategy), a->checkpoint_dir);
        rc = 130;
        goto done;
      }
      if (st) {
        fail(strategy, st);
        goto done;
      }
    }
    const double seconds = now() - t0;
    /* The tutorial's train_loss = total_loss / num_batches: the mean of the
     * batches' losses, as the metrics give it. */
    double train_loss = 0, train_acc = 0;
    long examples = 0;
    if ((st = cltrain_trainer_metrics(strategy, &train_loss, &train_acc, &examples, NULL))) {
      fail(strategy, st);
      goto done;
    }

    /* TEST LOOP */
    double test_loss = 0, test_acc = 0;
    if ((st = cltrain_trainer_evaluate(strategy, data, CLTRAIN_TEST, &test_loss, &test_acc))) {
      fail(strategy, st);
      goto done;
    }
    /* checkpoint.save every 2 epochs (the tutorial's epoch % 2 == 0). */
    if (epoch % 2 == 0 && (st = cltrain_trainer_save(strategy, a->checkpoint_dir, epoch + 1, 0))) {
      fail(strategy, st);
      goto done;
    }
    if (cltrain_rank(ctx) == 0) {
      printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f "
             "(%.0f images/s)\n",
             epoch + 1, train_loss, train_acc * 100, test_loss, test_acc * 100, examples / seconds);
      fflush(stdout);
    }
    *trained = epoch + 1;
  }
  rc = 0;
done:
  cltrain_trainer_free(&strategy);
  cltrain_model_free(&model);
  cltrain_dataset_free(&data);
  return rc;
}

/* "Restore the checkpoints": the newest checkpoint's model on one device, without
 * the strategy, evaluated on the test set (under MPI by process 0 alone: local=1). */
static int restore(cltrain_ctx *ctx, const args *a) {
  cltrain_dataset *data = NULL;
  cltrain_model *new_model = NULL;
  cltrain_trainer *one = NULL;
  char options[256];
  int rc = 1, st;
  double loss = 0, accuracy = 0;
  snprintf(options, sizeof options, "train-limit=1 test-limit=%ld", a->test_limit);
  if ((st = cltrain_dataset_open(ctx, a->data, options, &data)) ||
      (st = cltrain_model_from_checkpoint(ctx, a->checkpoint_dir, &new_model))) {
    fail(ctx, st);
    goto done;
  }
  if ((st = cltrain_trainer_create(ctx, new_model, "devices=0 local=1", &one))) {
    fail(ctx, st);
    goto done;
  }
  if ((st = cltrain_trainer_restore(one, a->checkpoint_dir)) ||
      (st = cltrain_trainer_evaluate(one, data, CLTRAIN_TEST, &loss, &accuracy))) {
    fail(one, st);
    goto done;
  }
  printf("Accuracy after restoring the saved model without strategy: %.2f\n", accuracy * 100);
  rc = 0;
done:
  cltrain_trainer_free(&one);
  cltrain_model_free(&new_model);
  cltrain_dataset_free(&data);
  return rc;
}

int main(int argc, char **argv) {
  args a = {.data = "/usr/share/datasets/fashion-mnist",
            .devices = "all",
            .split = "auto",
            .checkpoint_dir = "./training_checkpoints",
            .epochs = 10,
            .batch_per_replica = 64,
            .seed = 42};
  if (parse(argc, argv, &a)) return 2;
  cltrain_handle_signals(); /* Ctrl-C: the step in flight finishes, then the loop stops */
  cltrain_ctx *ctx = NULL;
  int st = cltrain_open(NULL, &ctx);
  if (st) return fail(NULL, st);
  int trained = 0;
  int rc = train(ctx, &a, &trained);
  /* Restoring needs a checkpoint: one was saved after the first epoch. Under MPI,
   * process 0 evaluates alone (the others have nothing left to do). */
  if (!rc && trained > 0 && cltrain_rank(ctx) == 0) rc = restore(ctx, &a);
  if (rc == 1) cltrain_abort(&ctx); /* a failure: the other processes must not wait */
  else cltrain_close(&ctx);
  return rc;
}
