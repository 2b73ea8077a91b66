/* The fusion plan of every built-in model on every backend, against the plans
 * stored in tests/plans/ (src/engine/plan.h): a change of what runs fused with
 * what shows in review as a change of those files. Then the gradient plan
 * (clt_net_plan_gradients): where an Add's inputs take its output gradient's
 * buffer, and where they must not. Then where a BatchNormalization's dx pass
 * sums the bias gradient of the Conv2D before it, and where it must not.
 *
 *   test_plans DIR           compares; on a difference prints both and how to
 *                            accept the new plans
 *   test_plans --write DIR   writes DIR/<model>.<backend>.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "model.h"
#include "net.h"
#include "plan.h"

/* The built-in models at the sizes of the reference workloads. */
static const struct {
  const char *name;
  clt_shape input;
  int classes;
} models[] = {
    {"fmnist-cnn", {28, 28, 1}, 10},
    {"resnet50", {96, 96, 3}, 5},
    {"resnet-small", {32, 32, 3}, 5},
};

static const clt_backend *const backends[] = {&clt_backend_cpu, &clt_backend_gpu};

/* The whole of file path, NUL-terminated, or NULL. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1))) {
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
      free(text);
      text = NULL;
    } else {
      text[n] = '\0';
    }
  }
  fclose(f);
  return text;
}

/* Whether the Add named `add` in the model `desc` (8x8x4 input, 3 classes)
 * leaves both inputs' gradients in its output gradient's buffer, against
 * `want`; the model's Add has a ReLU, or none (relu 0). */
static void grad_sharing(const char *what, const char *desc, const char *add, int want) {
  static clt_model m;
  clt_err e = {0};
  if (clt_model_parse("t", (clt_shape){8, 8, 4}, 3, CLT_PRE_UNIT, desc, &m, &e)) {
    check(0, "%s: parses: %s", what, e.msg);
    return;
  }
  clt_grad_plan *plan = calloc((size_t)m.nlayers, sizeof *plan);
  int nbuf = 0, i = clt_model_find(&m, add);
  if (!plan || i < 0 || clt_net_plan_gradients(&m, plan, &nbuf, &e)) {
    check(0, "%s: planned: %s", what, e.msg);
    free(plan);
    return;
  }
  const clt_grad_plan *p = &plan[i];
  const int shared = p->in[0] == p->out && p->in[1] == p->out;
  /* A shared buffer must hold both gradients until both producers have read it:
   * no other layer's gradient or temporary may be given it in between. */
  int reused = 0;
  for (int j = 0; shared && j < m.nlayers; j++) {
    const int lo = m.layers[i].inputs[0] < m.layers[i].inputs[1] ? m.layers[i].inputs[0]
                                                                 : m.layers[i].inputs[1];
    if (j <= lo || j >= i) continue;
    for (int k = 0; k < 2; k++) reused += plan[j].in[k] == p->out && m.layers[j].inputs[k] != lo;
  }
  check(shared == want && !reused, "%s: %s share its output gradient's buffer", what,
        want ? "the inputs" : "the inputs do not");
  free(plan);
}

static void test_grad_sharing(void) {
  /* A bottleneck block: the shortcut's other reader (b) comes before the
   * residual branch's last layer, a BatchNormalization. */
  grad_sharing("residual block",
               "a=Conv2D(4,1x1,s1,valid,relu) b=Conv2D(4,1x1,s1,valid)<a "
               "n=BatchNormalization(eps0.001,m0.99)<b s=Add(relu)<a,n "
               "g=GlobalAveragePooling2D d=Dense(3)",
               "s", 1);
  grad_sharing("residual block, Add without ReLU",
               "a=Conv2D(4,1x1,s1,valid,relu) b=Conv2D(4,1x1,s1,valid)<a "
               "n=BatchNormalization(eps0.001,m0.99)<b s=Add<n,a "
               "g=GlobalAveragePooling2D d=Dense(3)",
               "s", 1);
  /* The later input reads the earlier one itself: its backward would add into
   * the buffer it reads. */
  grad_sharing("Add(x, f(x))",
               "a=Conv2D(4,1x1,s1,valid,relu) n=BatchNormalization(eps0.001,m0.99)<a "
               "s=Add(relu)<a,n g=GlobalAveragePooling2D d=Dense(3)",
               "s", 0);
  /* The earlier input has a reader after the later one: its backward would add
   * into the buffer before the later input's backward reads it. */
  grad_sharing("earlier input read after the later one",
               "a=Conv2D(4,1x1,s1,valid,relu) b=Conv2D(4,1x1,s1,valid)<a "
               "n=BatchNormalization(eps0.001,m0.99)<b c=Conv2D(4,1x1,s1,valid)<a "
               "s=Add(relu)<a,n t=Add<s,c g=GlobalAveragePooling2D d=Dense(3)",
               "s", 0);
  /* The later input's backward may mask dy in place (a Conv2D with its ReLU). */
  grad_sharing("later input a Conv2D",
               "a=Conv2D(4,1x1,s1,valid,relu) b=Conv2D(4,1x1,s1,valid,relu)<a "
               "s=Add(relu)<a,b g=GlobalAveragePooling2D d=Dense(3)",
               "s", 0);
  /* The later input is read twice: its gradient is the sum of two. */
  grad_sharing("later input read twice",
               "a=Conv2D(4,1x1,s1,valid,relu) b=Conv2D(4,1x1,s1,valid)<a "
               "n=BatchNormalization(eps0.001,m0.99)<b s=Add(relu)<a,n t=Add<s,n "
               "g=GlobalAveragePooling2D d=Dense(3)",
               "s", 0);
}

/* Whether the Conv2D `conv` of model `desc` (8x8x4 input, 3 classes; a layer
 * frozen when `frozen` names it) has its bias gradient summed by its reader
 * `bn`, against `want`: both ends of the fusion and the gradient's offset. */
static void bias_sums(const char *what, const char *desc, const char *frozen, const char *conv,
                      const char *bn, int want) {
  static clt_model m;
  static clt_plan plan;
  clt_err e = {0};
  if (clt_model_parse("t", (clt_shape){8, 8, 4}, 3, CLT_PRE_UNIT, desc, &m, &e)) {
    check(0, "%s: parses: %s", what, e.msg);
    return;
  }
  if (frozen) m.layers[clt_model_find(&m, frozen)].frozen = 1;
  clt_model_layout(&m);
  const int c = clt_model_find(&m, conv), b = clt_model_find(&m, bn);
  if (c < 0 || b < 0 || clt_plan_build(&m, "cpu", 1, &plan, &e)) {
    check(0, "%s: planned: %s", what, e.msg);
    return;
  }
  clt_fusion fc = {0}, fb = {0};
  for (int k = 0; k < plan.nsteps; k++) {
    if (plan.steps[k].layer == c) fc = plan.steps[k].fusion;
    if (plan.steps[k].layer == b) fb = plan.steps[k].fusion;
  }
  const int at = fb.input_bias == m.layers[c].params[m.layers[c].nparams - 1].offset;
  check(fc.bias_summed == want && fb.sums_input_bias == want && (!want || at),
        "%s: %s's bias gradient %s by %s", what, conv, want ? "summed" : "not summed", bn);
}

static void test_bias_sums(void) {
  /* Each model's Conv2D c and BatchNormalization n, before the same head. */
  static const struct {
    const char *what, *layers, *frozen;
    int want;
  } cases[] = {
      {"Conv2D -> BatchNormalization(relu)",
       "c=Conv2D(4,3x3,s1,same) n=BatchNormalization(eps0.001,m0.99,relu)<c", NULL, 1},
      {"Conv2D -> BatchNormalization -> Add",
       "a=Conv2D(4,1x1,s1,valid,relu) c=Conv2D(4,1x1,s1,valid)<a "
       "n=BatchNormalization(eps0.001,m0.99)<c s=Add(relu)<a,n",
       NULL, 1},
      /* The BatchNormalization frozen (Keras' inference mode): its dx pass still runs. */
      {"frozen BatchNormalization",
       "c=Conv2D(4,3x3,s1,same) n=BatchNormalization(eps0.001,m0.99,relu)<c", "n", 1},
      /* A frozen Conv2D wants no bias gradient. */
      {"frozen Conv2D", "c=Conv2D(4,3x3,s1,same) n=BatchNormalization(eps0.001,m0.99,relu)<c", "c",
       0},
      {"Conv2D without a bias",
       "c=Conv2D(4,3x3,s1,same,nobias) n=BatchNormalization(eps0.001,m0.99,relu)<c", NULL, 0},
      /* Its ReLU's mask comes between: dy is not the bias gradient's. */
      {"Conv2D with a ReLU", "c=Conv2D(4,3x3,s1,same,relu) n=BatchNormalization(eps0.001,m0.99)<c",
       NULL, 0},
      /* Two readers: the output gradient is the sum of two. */
      {"Conv2D read twice",
       "c=Conv2D(4,3x3,s1,same) n=BatchNormalization(eps0.001,m0.99,relu)<c s=Add<n,c", NULL, 0},
      {"grouped Conv2D", "c=Conv2D(4,3x3,s1,same,g2) n=BatchNormalization(eps0.001,m0.99,relu)<c",
       NULL, 0},
  };
  char desc[512];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(desc, sizeof desc, "%s g=GlobalAveragePooling2D d=Dense(3)", cases[i].layers);
    bias_sums(cases[i].what, desc, cases[i].frozen, "c", "n", cases[i].want);
  }
}

int main(int argc, char **argv) {
  const int write = argc == 3 && strcmp(argv[1], "--write") == 0;
  if (argc != 2 && !write) {
    fprintf(stderr, "usage: %s [--write] DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[argc - 1];
  static clt_model m;
  static clt_plan plan;
  static char text[1 << 16];
  int changed = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    clt_err e = {0};
    if (clt_model_build(models[i].name, models[i].input, models[i].classes, &m, &e)) {
      check(0, "%s builds: %s", models[i].name, e.msg);
      continue;
    }
    for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++) {
      check(!clt_plan_build(&m, backends[b]->name, backends[b]->fuses_conv_pool, &plan, &e),
            "planned");
      const size_t len = clt_plan_describe(&m, &plan, text, sizeof text);
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.%s.txt", dir, models[i].name, backends[b]->name);
      if (write) {
        FILE *f = fopen(path, "w");
        const int ok = f && fwrite(text, 1, len, f) == len;
        check(ok && fclose(f) == 0, "%s written", path);
        continue;
      }
      char *stored = read_file(path);
      const int same = stored && len < sizeof text && strcmp(stored, text) == 0;
      check(same, "%s: the plan of %s on the %s backend is the stored one", path, models[i].name,
            backends[b]->name);
      if (!same) {
        printf("--- stored %s:\n%s--- built now:\n%s", path, stored ? stored : "(none)\n", text);
        changed = 1;
      }
      free(stored);
    }
  }
  test_grad_sharing();
  test_bias_sums();
  if (changed) {
    printf("The plans changed: if that is intended, accept them with\n"
           "  %s --write %s\nand commit the files.\n",
           argv[0], dir);
  }
  return check_summary();
}
