/* The fusion plan of every built-in model on every backend, against the plans
 * stored in tests/plans/ (src/engine/plan.h): a change of what runs fused with
 * what shows in review as a change of those files.
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
  if (changed) {
    printf("The plans changed: if that is intended, accept them with\n"
           "  %s --write %s\nand commit the files.\n",
           argv[0], dir);
  }
  return check_summary();
}
