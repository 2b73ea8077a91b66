/* Test helper for checkpoints, built on the npz module:
 *
 *   ckpt_tool diff A.npz B.npz
 *       prints "max_rel_diff X": the largest |a - b| over all model parameters
 *       (members without "/" prefix "optimizer/"), divided by the largest |a|.
 *   ckpt_tool poison IN OUT MEMBER [VALUE [INDEX]]
 *                                        value INDEX (default 0) of float32 MEMBER set
 *                                        to VALUE (default nan; strtod: nan, inf, -inf, ...)
 *   ckpt_tool fill IN OUT MEMBER VALUE   every value of float32 MEMBER set to VALUE
 *   ckpt_tool drop IN OUT MEMBER         MEMBER removed
 *   ckpt_tool reshape IN OUT MEMBER      MEMBER's first dimension changed (data kept consistent)
 *   ckpt_tool set-string IN OUT MEMBER FROM TO
 *                                        in string MEMBER, replace FROM by TO
 *   ckpt_tool list IN                    one line per model member, "NAME (d0,d1,...)",
 *                                        then "total N" (values of all model members)
 *
 * Exit 0 on success; errors on stderr with a non-zero exit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npz.h"

static int fail(const clt_err *e) {
  fprintf(stderr, "ckpt_tool: %s\n", e->msg);
  return 1;
}

static int diff(const char *a_path, const char *b_path) {
  clt_err e = {0};
  clt_npz *a = NULL, *b = NULL;
  if (clt_npz_read(a_path, &a, &e) || clt_npz_read(b_path, &b, &e)) return fail(&e);
  double biggest = 0, worst = 0;
  int compared = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < clt_npz_count(a); i++) {
      const clt_npz_array *x = clt_npz_at(a, i);
      if (strcmp(x->dtype, "<f4") != 0 || strncmp(x->name, "optimizer/", 10) == 0) continue;
      const clt_npz_array *y = clt_npz_find(b, x->name);
      if (!y || y->bytes != x->bytes) {
        fprintf(stderr, "ckpt_tool: %s: member %s missing or of another size in %s\n", a_path,
                x->name, b_path);
        return 1;
      }
      for (size_t k = 0; k < x->bytes / 4; k++) {
        float u, v;
        memcpy(&u, (const char *)x->data + 4 * k, 4);
        memcpy(&v, (const char *)y->data + 4 * k, 4);
        if (pass == 0) biggest = fmax(biggest, fabs(u));
        else worst = isnan(u - v) ? INFINITY : fmax(worst, fabs((double)u - v));
      }
      compared += pass;
    }
  }
  printf("max_rel_diff %.3e over %d parameter tensors\n", biggest > 0 ? worst / biggest : worst,
         compared);
  clt_npz_free(a);
  clt_npz_free(b);
  return 0;
}

static int list(const char *path) {
  clt_err e = {0};
  clt_npz *z = NULL;
  if (clt_npz_read(path, &z, &e)) return fail(&e);
  size_t total = 0;
  for (int i = 0; i < clt_npz_count(z); i++) {
    const clt_npz_array *x = clt_npz_at(z, i);
    if (strcmp(x->dtype, "<f4") != 0 || strncmp(x->name, "optimizer/", 10) == 0) continue;
    printf("%s (", x->name);
    for (int d = 0; d < x->rank; d++) printf("%s%lld", d ? "," : "", (long long)x->dims[d]);
    printf(")\n");
    total += x->bytes / 4;
  }
  printf("total %zu\n", total);
  clt_npz_free(z);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "diff") == 0) return diff(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "list") == 0) return list(argv[2]);
  if (argc < 5) {
    fprintf(
        stderr,
        "usage: ckpt_tool diff A B | list IN | poison IN OUT MEMBER [VALUE [INDEX]] | fill IN OUT "
        "MEMBER VALUE | drop|reshape IN OUT MEMBER | set-string IN OUT MEMBER FROM TO\n");
    return 2;
  }
  const char *op = argv[1], *in = argv[2], *out = argv[3], *member = argv[4];
  clt_err e = {0};
  clt_npz *z = NULL;
  if (clt_npz_read(in, &z, &e)) return fail(&e);
  int n = clt_npz_count(z), m = 0;
  clt_npz_array *arrays = calloc((size_t)n, sizeof *arrays);
  char *copy = NULL;
  uint32_t *text = NULL;
  int found = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    clt_npz_array a = *clt_npz_at(z, i);
    if (!found && strcmp(a.name, member) == 0) { /* one match: clt_npz_read refuses duplicates */
      found = 1;
      if (strcmp(op, "drop") == 0) continue;
      copy = malloc(a.bytes + 8);
      memcpy(copy, a.data, a.bytes);
      if (strcmp(op, "poison") == 0 || strcmp(op, "fill") == 0) {
        const int fill = strcmp(op, "fill") == 0;
        const float v = argc > 5 ? strtof(argv[5], NULL) : NAN;
        const size_t at = argc > 6 && !fill ? strtoul(argv[6], NULL, 10) : 0;
        if (strcmp(a.dtype, "<f4") != 0 || at >= a.bytes / 4 || (fill && argc != 6)) {
          fprintf(stderr, "ckpt_tool: %s is not float32, has no value %zu, or no VALUE given\n",
                  member, at);
          rc = 1;
          goto done;
        }
        for (size_t i = fill ? 0 : at; i < (fill ? a.bytes / 4 : at + 1); i++)
          memcpy(copy + 4 * i, &v, 4);
      } else if (strcmp(op, "reshape") == 0) {
        /* One row fewer: a shape the model cannot take, with consistent data. */
        size_t row = a.bytes / (size_t)(a.dims[0] ? a.dims[0] : 1);
        a.dims[0] -= 1;
        a.bytes -= row;
      } else if (strcmp(op, "set-string") == 0 && argc == 7) {
        static char s[65536], t[65536];
        if (clt_npz_get_string(&a, s, sizeof s) != 0) {
          fprintf(stderr, "ckpt_tool: %s is not a string\n", member);
          rc = 1;
          goto done;
        }
        char *at = strstr(s, argv[5]);
        if (!at) {
          fprintf(stderr, "ckpt_tool: '%s' not in %s\n", argv[5], member);
          rc = 1;
          goto done;
        }
        snprintf(t, sizeof t, "%.*s%s%s", (int)(at - s), s, argv[6], at + strlen(argv[5]));
        text = calloc(strlen(t) + 1, sizeof *text);
        char name[128];
        snprintf(name, sizeof name, "%s", a.name);
        clt_npz_string(&a, name, t, text);
        arrays[m++] = a;
        continue;
      } else {
        fprintf(stderr, "ckpt_tool: unknown operation %s\n", op);
        rc = 2;
        goto done;
      }
      a.data = copy;
    }
    arrays[m++] = a;
  }
  if (!found) {
    fprintf(stderr, "ckpt_tool: %s has no member %s\n", in, member);
    rc = 1;
    goto done;
  }
  if (clt_npz_write(out, arrays, m, &e)) rc = fail(&e);
done:
  clt_npz_free(z);
  free(arrays);
  free(copy);
  free(text);
  return rc;
}
