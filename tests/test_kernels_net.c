/* test_kernels, part 3 (see test_kernels.c): the whole fmnist-cnn model through
 * clt_net against the reference CNN, and the programs a replica builds: a failed
 * build's message, and a net's sources built as one program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_sources.h"
#include "harness.h"
#include "idx.h"
#include "model.h"
#include "net.h"
#include "ref.h"
#include "test_kernels.h"

/* ---- 6. The whole model -------------------------------------------------------------- */

/* Copies between the model's aligned flat layout and ref_cnn_loss_grad's packed one
 * (the same tensors in the same order, without gaps). */
static void flat_to_packed(const clt_model *m, const float *flat, double *packed) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      for (size_t j = 0; j < prm->size; j++) packed[at++] = flat[prm->offset + j];
    }
}

/* Compares each parameter tensor of a flat (device) vector with a packed (reference). */
static void check_tensors(const clt_model *m, const char *what, const double *flat,
                          const double *packed, double tol) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      char name[96];
      snprintf(name, sizeof name, "%s %s/%s", what, m->layers[i].name, prm->name);
      check(name, flat + prm->offset, packed + at, prm->size, tol);
      at += prm->size;
    }
}

/* Zeroes the Adam moves (device: flat, reference: packed) of the entries whose reference
 * gradient is below ADAM_G_MIN, where Adam magnifies rounding (see test_model). Returns
 * how many. */
#define ADAM_G_MIN 1e-4
static size_t skip_small_gradients(const clt_model *m, const double *grad_ref, double *flat,
                                   double *packed) {
  size_t at = 0, skipped = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      for (size_t j = 0; j < prm->size; j++, at++) {
        if (fabs(grad_ref[at]) >= ADAM_G_MIN) continue;
        flat[prm->offset + j] = packed[at] = 0.0;
        skipped++;
      }
    }
  return skipped;
}

/* Number of flat entries outside every tensor that do not hold `value`. */
static size_t gaps_not(const clt_model *m, const float *flat, float value) {
  char *inside = calloc(m->flat_floats, 1);
  if (!inside) fatal("allocating a mask");
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      memset(inside + prm->offset, 1, prm->size);
    }
  size_t bad = 0;
  for (size_t i = 0; i < m->flat_floats; i++) bad += !inside[i] && flat[i] != value;
  free(inside);
  return bad;
}

void test_model(void) {
  /* fmnist-cnn itself; in small mode the same architecture at 10x10 with 4, 5 and 6
   * units and 3 classes (8x8, 4x4, 2x2, 1x1: every layer still there). */
  const int small = small_mode();
  const int B = small ? 3 : 5, CLASSES = small ? 3 : 10, HW = small ? 100 : 784;
  const ref_cnn_shape shape = small ? (ref_cnn_shape){10, 10, 1, 4, 5, 6, 3}
                                    : (ref_cnn_shape){28, 28, 1, 64, 80, 64, 10};
  set_case("%s B%d:", small ? "fmnist-cnn architecture, small" : "fmnist-cnn", B);
  static clt_model model; /* large: not on the stack */
  clt_net *net = NULL;
  clt_source *source = NULL;
  const clt_shape input = {shape.H, shape.W, 1};
  const int built =
      small ? clt_model_parse("small-cnn", input, CLASSES, CLT_PRE_UNIT,
                              "conv2d=Conv2D(4,3x3,s1,valid,relu) max_pooling2d=MaxPooling2D(2,s2) "
                              "conv2d_1=Conv2D(5,3x3,s1,valid,relu) "
                              "max_pooling2d_1=MaxPooling2D(2,s2) flatten=Flatten "
                              "dense=Dense(6,relu) dense_1=Dense(3)",
                              &model, &E)
            : clt_model_build("fmnist-cnn", input, CLASSES, &model, &E);
  if (api_failed(built, "building the model")) goto done;
  const size_t nflat = model.flat_floats, npacked = ref_cnn_param_count(&shape);
  expect("parameter count matches the reference's", model.param_count != npacked, 1);
  if (model.param_count != npacked) goto done;
  if (api_failed(clt_net_create(&model, R, B, 4, &net, &E), "clt_net_create")) goto done;

  /* Glorot kernels, and biases made non-zero so a bias bug cannot hide. */
  float *flat = hnew(nflat * sizeof(float)), *back = hnew(nflat * sizeof(float));
  clt_model_init_params(&model, 42, flat);
  for (int i = 0; i < model.nlayers; i++)
    for (int p = 0; p < model.layers[i].nparams; p++) {
      const clt_param *prm = &model.layers[i].params[p];
      if (prm->glorot_fan_in != 0) continue;
      for (size_t j = 0; j < prm->size; j++) flat[prm->offset + j] = (float)urand(-0.05, 0.05);
    }
  double *params = dnew(npacked), *grad_ref = dnew(npacked), *x = dnew((size_t)B * HW);
  double *grad = dnew(nflat), *p_after = dnew(nflat), *p_before = dnew(nflat);
  flat_to_packed(&model, flat, params);
  for (size_t i = 0; i < nflat; i++) p_before[i] = flat[i];

  unsigned char *pixels = hnew((size_t)B * HW), *labels = hnew((size_t)B);
  int *ilabels = inew((size_t)B), *order = inew((size_t)B);
  for (int i = 0; i < B * HW; i++) {
    pixels[i] = (unsigned char)irand(256);
    x[i] = pixels[i] / 255.0;
  }
  for (int i = 0; i < B; i++) {
    labels[i] = (unsigned char)irand(CLASSES);
    ilabels[i] = labels[i];
    order[i] = i;
  }
  const double scale = 1.0 / B;
  int correct_ref = 0;
  const double loss_ref = ref_cnn_loss_grad(&shape, params, x, ilabels, B, scale, grad_ref,
                                            &correct_ref);

  if (api_failed(clt_net_write_params(net, flat, &E), "clt_net_write_params")) goto done;
  /* The batch through the device-resident IDX source, as training loads it. */
  clt_dataset set = {.count = B,
                     .height = shape.H,
                     .width = shape.W,
                     .channels = 1,
                     .classes = CLASSES,
                     .pixels = malloc((size_t)B * HW),
                     .labels = malloc((size_t)B)};
  if (!set.pixels || !set.labels) fatal("allocating a dataset");
  memcpy(set.pixels, pixels, (size_t)B * HW);
  memcpy(set.labels, labels, (size_t)B);
  const int max_slice = B;
  if (api_failed(clt_idx_source(&set, &source, &E), "clt_idx_source")) goto done;
  if (api_failed(clt_source_attach(source, &R, 1, B, &max_slice, model.preprocess, &E),
                 "clt_source_attach"))
    goto done;
  if (api_failed(clt_source_begin(source, order, &E), "clt_source_begin")) goto done;
  if (api_failed(clt_source_load(source, 0, 0, 0, B, net->input, net->labels, NULL, &E),
                 "clt_source_load"))
    goto done;
  /* Every gradient entry must be written, not accumulated, and the gaps left alone. */
  dev_fill(net->grads, 0, nflat, GARBAGE);

  /* Evaluation only (slot 1): metrics, and no gradient written. */
  if (api_failed(clt_net_forward_backward(net, B, (float)scale, 1, 0, &E), "evaluation pass"))
    goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  size_t touched = 0;
  for (size_t i = 0; i < nflat; i++) touched += back[i] != GARBAGE;
  expect("evaluation writes no gradient", touched, nflat);

  if (api_failed(clt_net_forward_backward(net, B, (float)scale, 0, 1, &E), "training pass"))
    goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  for (size_t i = 0; i < nflat; i++) grad[i] = back[i];
  check_tensors(&model, "gradient", grad, grad_ref, TOL_MODEL);
  expect("gradient gaps untouched", gaps_not(&model, back, GARBAGE), nflat - model.param_count);

  float metrics[4];
  if (api_failed(clt_net_read_metrics(net, metrics, 2, &E), "clt_net_read_metrics")) goto done;
  double loss_sum[2] = {metrics[0], metrics[2]}, want = loss_ref / scale;
  check("loss sum (training slot)", &loss_sum[0], &want, 1, TOL_ELEMWISE * 10);
  check("loss sum (evaluation slot)", &loss_sum[1], &want, 1, TOL_ELEMWISE * 10);
  expect("correct count (both slots)",
         (metrics[1] != (float)correct_ref) + (metrics[3] != (float)correct_ref), 2);

  /* One Adam step from zero moments. Against ref_adam on the device's own gradient the
   * update must match tightly, everywhere. Against ref_adam on the reference gradient
   * it is compared where |g| >= ADAM_G_MIN only: step 1 moves by lr * g / (|g| + 3.2e-6),
   * which near g = 0 magnifies a gradient error d to lr * d / 3.2e-6 (a 1e-8 rounding
   * difference of a tiny g shows as 3e-3 of lr), while above ADAM_G_MIN it shrinks it
   * to at most lr * 300 * d. Most entries below it are exact zeros (dead ReLU units). */
  const clt_optimizer opt = clt_optimizer_defaults(CLT_OPT_ADAM);
  for (size_t i = 0; i < nflat; i++) grad[i] = back[i];
  /* The update counts the non-finite values of the whole gradient buffer (the
   * trainer's guard) into slot 0. */
  if (api_failed(clt_net_update_checked(net, &opt, 1, 0, &E), "clt_net_update_checked")) goto done;
  if (api_failed(clt_net_read_params(net, back, &E), "clt_net_read_params")) goto done;
  double *m0 = dnew(nflat), *v0 = dnew(nflat), *p_dev_ref = dnew(nflat);
  memcpy(p_dev_ref, p_before, nflat * sizeof *p_dev_ref);
  ref_adam(p_dev_ref, grad, m0, v0, nflat, opt.lr, opt.beta1, opt.beta2, opt.epsilon, 1);
  for (size_t i = 0; i < nflat; i++) {
    p_after[i] = (double)back[i] - p_before[i]; /* device's move */
    p_dev_ref[i] -= p_before[i];                /* reference move from the same gradient */
  }
  check("adam step (device gradient): parameter change", p_after, p_dev_ref, nflat, TOL_ADAM);
  double *m1 = dnew(npacked), *v1 = dnew(npacked), *p_ref = dnew(npacked);
  memcpy(p_ref, params, npacked * sizeof *p_ref);
  ref_adam(p_ref, grad_ref, m1, v1, npacked, opt.lr, opt.beta1, opt.beta2, opt.epsilon, 1);
  for (size_t i = 0; i < npacked; i++) p_ref[i] -= params[i];
  size_t skipped = skip_small_gradients(&model, grad_ref, p_after, p_ref);
  char what[96];
  snprintf(what, sizeof what,
           "adam step (reference gradient, the %zu of %zu with |g| >= %g):", npacked - skipped,
           npacked, ADAM_G_MIN);
  check_tensors(&model, what, p_after, p_ref, TOL_ADAM);

  /* An empty slice: zero gradient everywhere and a zeroed metrics slot 0; slot 1 kept. */
  if (api_failed(clt_net_forward_backward(net, 0, 1.0f, 0, 1, &E), "empty slice")) goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  if (api_failed(clt_net_read_metrics(net, metrics, 2, &E), "clt_net_read_metrics")) goto done;
  size_t nonzero = 0;
  for (size_t i = 0; i < nflat; i++) nonzero += back[i] != 0.0f;
  expect("empty slice: gradient all zero", nonzero, nflat);
  expect("empty slice: metrics slot zeroed, other slot kept",
         (metrics[0] != 0.0f) + (metrics[1] != 0.0f) + (metrics[3] != (float)correct_ref), 3);

  /* A NaN at the first entry, -inf inside the first 8-float lane group and +inf at
   * the last entry (the partial blocks' edges, the scalar tail when nflat % 8 != 0)
   * are counted into slot 1; slot 0 kept the count of the finite training gradient. */
  const float bad[3] = {NAN, -INFINITY, INFINITY};
  upload_bytes(net->grads, 0, &bad[0], sizeof bad[0]);
  upload_bytes(net->grads, 5 * sizeof(float), &bad[1], sizeof bad[1]);
  upload_bytes(net->grads, (nflat - 1) * sizeof(float), &bad[2], sizeof bad[2]);
  if (api_failed(clt_net_update_checked(net, &opt, 2, 1, &E), "clt_net_update_checked")) goto done;
  float counts[2];
  if (api_failed(clt_net_read_grad_checks(net, counts, 2, &E), "clt_net_read_grad_checks"))
    goto done;
  expect("gradient check: 0 non-finite in training, then NaN, -inf and inf counted",
         (counts[0] != 0.0f) + (counts[1] != 3.0f), 2);
done:
  clt_source_free(source);
  clt_net_destroy(net);
  case_end();
}

/* ---- 7. Programs: a failed build, a net's joint program ------------------------------ */

/* A program that fails to compile must name the device and carry the build log;
 * the same source with good options must still build (the failure is not cached). */
void test_build_failure(void) {
  set_case("build failure:");
  cl_kernel k;
  clt_err err = {0};
  /* Redefining float breaks every declaration in optimizer.cl. */
  int status = clt_replica_kernel(R, "optimizer.cl", "-Dfloat=no_such_type", "adam_update", &k,
                                  &err);
  char device[300];
  snprintf(device, sizeof device, "(%s)", R->device.name);
  expect("status is CL_BUILD_PROGRAM_FAILURE", status != CL_BUILD_PROGRAM_FAILURE, 1);
  expect("message names the device", strstr(err.msg, device) == NULL, 1);
  expect("message names the source and options",
         strstr(err.msg, "building cl/optimizer.cl [-Dfloat=no_such_type] failed") == NULL, 1);
  const char *log = strstr(err.msg, "build log: ");
  expect("message carries the build log, however long",
         log == NULL || strstr(log, "no_such_type") == NULL, 1);
  expect("message is one line", strchr(err.msg, '\n') != NULL, 1);
  /* A kernel's name defined away is a syntax error at its line: the log names
   * the file and line of the source, not of the program's text (devices/replica.c
   * puts a #line before each source). Oclgrind's compiler ignores #line and
   * names its own copy of the text; there the error alone is checked. */
  status = clt_replica_kernel(R, "reduce.cl", "-Dcount_final=1", "add_into", &k, &err);
  log = strstr(err.msg, "build log: ");
  size_t len = 0;
  const char *text = clt_cl_source("reduce.cl", &len);
  const char *decl = text ? strstr(text, "__kernel void count_final") : NULL;
  int want = 1, line = 0;
  for (const char *c = text; decl && c < decl; c++) want += *c == '\n';
  const char *at = log ? strstr(log, "cl/reduce.cl:") : NULL;
  if (at) sscanf(at + strlen("cl/reduce.cl:"), "%d", &line);
  expect("the log names the source file and the line of the error",
         status == CLT_OK || !log || !strstr(log, "error") || !decl || (at && line != want), 1);
  status = clt_replica_kernel(R, "optimizer.cl", "", "adam_update", &k, &err);
  expect("good options still build", status != CLT_OK, 1);
  status = clt_replica_kernel(R, "no_such.cl", "", "x", &k, &err);
  expect("unknown source is an error", status == CLT_OK, 1);
}

/* The program kernel k came from. */
static cl_program program_of(cl_kernel k) {
  cl_program p = NULL;
  clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof p, &p, NULL);
  return p;
}

/* A net builds the sources its model's layer kinds, its backend and the network
 * use as one program, on a fresh replica: kernels of those files come from the
 * same cl_program, a source no kind of the model uses is not in it, and a file
 * built with other options is a program of its own. */
void test_joint_program(void) {
  set_case("joint program:");
  static clt_model m; /* large: not on the stack */
  clt_replica *r = NULL;
  clt_net *net = NULL;
  clt_err err = {0};
  int status = clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &err);
  if (!status) status = clt_backend_create_replica(&R->device, &r, &err);
  if (!status) status = clt_net_create(&m, r, 4, 1, &net, &err);
  expect("a fmnist-cnn net on a fresh replica", status != CLT_OK, 1);
  if (status) {
    printf("  %s\n", err.msg);
    goto done;
  }
  static const char *const used[][2] = {
      {"conv2d.cl", "im2col"},     {"maxpool.cl", "maxpool_forward"}, {"bias.cl", "bias_act"},
      {"loss.cl", "softmax_xent"}, {"reduce.cl", "count_final"},      {"data.cl", "gather_batch"}};
  cl_kernel k;
  cl_program joint = NULL;
  for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
    status = clt_replica_kernel(r, used[i][0], "", used[i][1], &k, &err);
    if (status) break;
    if (!joint) joint = program_of(k);
    expect(used[i][0], program_of(k) != joint, 1);
  }
  if (!status)
    status = clt_replica_kernel(r, "optimizer.cl", r->exact_options, "adam_update", &k, &err);
  expect("the optimizers' source, with the exact options, in it too",
         status != CLT_OK || program_of(k) != joint, 1);
  if (!status) status = clt_replica_kernel(r, "depthwise.cl", "", "depthwise_forward", &k, &err);
  expect("a source the model does not use: a program of its own",
         status != CLT_OK || program_of(k) == joint, 1);
  if (!status)
    status = clt_replica_kernel(r, "reduce.cl", "-DCLT_TEST_OWN=1", "count_final", &k, &err);
  expect("other options: a program of its own", status != CLT_OK || program_of(k) == joint, 1);
  if (status) printf("  %s\n", err.msg);
done:
  clt_net_destroy(net);
  clt_backend_destroy_replica(r);
}
