/* Models as data: every layer kind's ops table is complete; every built-in model's
 * description reads back into the same model; bad descriptions are refused with a
 * message naming the layer and the cause; and a model cltrain does not know by name
 * is saved and rebuilt from its checkpoint's description alone. Host only. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "model.h"

/* check(), with `detail` (an error message, a description read back) after the
 * message of a failed check. */
static void check_detail(int ok, const char *what, const char *detail) {
  if (!ok && detail && *detail) check(ok, "%s: %s", what, detail);
  else check(ok, "%s", what);
}

static clt_model model, again; /* large: static */
static char text[CLT_DESCRIBE_MAX], text2[CLT_DESCRIBE_MAX];

/* Every kind has what the model, the network and the reference interpreter call. */
static void test_kinds(void) {
  int kinds = 0;
  for (int i = 0; clt_layer_kinds[i]; i++, kinds++) {
    const clt_layer_ops *k = clt_layer_kinds[i];
    check(k->parse && k->describe && k->setup &&
              (k->aliases_input || (k->forward && k->backward)) && k->ref_forward &&
              k->ref_backward && (k->ninputs == 1 || k->ninputs == 2),
          "kind %s: parse, describe, setup, passes and references present", k->kind);
    check_detail(clt_layer_kind(k->kind) == k, "clt_layer_kind finds it by name", k->kind);
  }
  check(kinds >= 7, "every kind of the built-in models is known");
  int duplicates = 0;
  for (int i = 0; clt_layer_kinds[i]; i++) {
    for (int j = 0; j < i; j++)
      duplicates += strcmp(clt_layer_kinds[i]->kind, clt_layer_kinds[j]->kind) == 0;
  }
  check(duplicates == 0, "kind names are unique");
}

/* describe -> parse -> describe is the identity, and the parsed model has the
 * same layers, shapes and flat layout. */
static void test_round_trip(const char *name, clt_shape input, int classes) {
  clt_err e = {0};
  char what[128];
  snprintf(what, sizeof what, "%s: built", name);
  check_detail(clt_model_build(name, input, classes, &model, &e) == CLT_OK, what, e.msg);
  clt_model_describe(&model, text, sizeof text);
  snprintf(what, sizeof what, "%s: its description parses", name);
  check_detail(clt_model_parse("copy", input, classes, model.preprocess, text, &again, &e) ==
                   CLT_OK,
               what, e.msg);
  clt_model_describe(&again, text2, sizeof text2);
  snprintf(what, sizeof what, "%s: describe(parse(describe(m))) == describe(m)", name);
  check_detail(strcmp(text, text2) == 0, what, text2);
  int same = again.nlayers == model.nlayers && again.flat_floats == model.flat_floats &&
             again.trainable_floats == model.trainable_floats &&
             again.param_count == model.param_count;
  for (int i = 0; same && i < model.nlayers; i++) {
    const clt_layer *a = &model.layers[i], *b = &again.layers[i];
    same = a->ops == b->ops && a->nparams == b->nparams && a->out.h == b->out.h &&
           a->out.w == b->out.w && a->out.c == b->out.c && a->inputs[0] == b->inputs[0] &&
           a->inputs[1] == b->inputs[1] && a->pad == b->pad &&
           memcmp(a->hp, b->hp, sizeof a->hp) == 0;
    for (int p = 0; same && p < a->nparams; p++) same = a->params[p].offset == b->params[p].offset;
  }
  check(same, "%s: the parsed model has the same layers, shapes and parameter layout", name);
}

/* A description refused with an error that contains `want`. */
static void refused(const char *description, const char *want) {
  clt_err e = {0};
  int status = clt_model_parse("bad", (clt_shape){8, 8, 3}, 4, CLT_PRE_UNIT, description, &model,
                               &e);
  char what[256];
  snprintf(what, sizeof what, "refused: '%s' (\"%s\")", description, want);
  check_detail(status != CLT_OK && strstr(e.msg, want) != NULL, what, e.msg);
  if (status != CLT_OK) printf("      message: %s\n", e.msg);
}

static void test_bad_descriptions(void) {
  refused("", "no layers");
  refused("c=Conv3D(4) f=Flatten d=Dense(4)", "unknown kind Conv3D");
  refused("c=Conv2D(4,3x3,s1,full) f=Flatten d=Dense(4)", "c: Conv2D(4,3x3,s1,full)");
  refused("c=Conv2D(4,3x3,s1,valid,gelu) f=Flatten d=Dense(4)", "expected Conv2D(");
  refused("f=Flatten d=Dense(4,relu,relu)", "d: Dense(4,relu,relu)");
  refused("f=Flatten(2) d=Dense(4)", "f: Flatten takes no arguments");
  refused("f=Flatten d=Dense(4)<nowhere", "input nowhere is not an earlier layer");
  refused("f=Flatten f=Dense(4)", "layer name f is used twice");
  refused("f=Flatten d=Dense(4)<f,f", "Dense takes 1 input, the description names 2");
  refused("c=Conv2D(3,1x1,s1,valid) a=Add g=GlobalAveragePooling2D d=Dense(4)",
          "Add takes 2 inputs");
  refused("p=ZeroPadding2D(1) g=GlobalAveragePooling2D d=Dense(4)",
          "cannot follow ZeroPadding2D p");
  refused("g=GlobalAveragePooling2D d=Dense(4) p=ZeroPadding2D(1)",
          "ZeroPadding2D p ends the model");
  refused("p=ZeroPadding2D(0) c=Conv2D(4,3x3,s1,valid)", "padding must be at least 1");
  refused("g=GlobalAveragePooling2D d=Dense(5)",
          "the last layer outputs 1x1x5, not the 4 class logits");
  refused("c=Conv2D(4,9x9,s1,valid) g=GlobalAveragePooling2D d=Dense(4)",
          "smaller than its 9x9 kernel");
  refused("noname", "expected name=Kind(arguments)");
}

/* A model known by no name: its checkpoint alone rebuilds it. */
static void test_checkpoint_rebuild(void) {
  const char *desc =
      "stem_pad=ZeroPadding2D(1) stem=Conv2D(8,3x3,s2,valid) stem_bn=BatchNormalization(eps0.001,m0.9,relu) "
      "a=Conv2D(8,3x3,s1,same,relu) b=Conv2D(8,1x1,s1,valid)<stem_bn sum=Add(relu)<a,b "
      "pool=MaxPooling2D(2,s2) gap=GlobalAveragePooling2D logits=Dense(3)";
  const clt_shape input = {9, 9, 3};
  clt_err e = {0};
  char root[] = "/tmp/cltrain-desc-XXXXXX", path[4200];
  check_detail(clt_model_parse("my-net", input, 3, CLT_PRE_CAFFE, desc, &model, &e) == CLT_OK,
               "a custom graph parses", e.msg);
  clt_model_describe(&model, text, sizeof text);
  check_detail(strcmp(text, desc) == 0, "its description is the one given", text);
  clt_checkpoint st = {0};
  st.params = malloc(model.flat_floats * sizeof(float));
  st.adam_m = calloc(model.flat_floats, sizeof(float));
  st.adam_v = calloc(model.flat_floats, sizeof(float));
  st.seed = 7;
  if (!mkdtemp(root) || !st.params || !st.adam_m || !st.adam_v) {
    check(0, "set-up: no temporary folder or memory");
    clt_checkpoint_free(&st);
    return;
  }
  clt_model_init_params(&model, 7, st.params);
  int status = clt_checkpoint_save(root, 0, &model, &st, path, sizeof path, &e);
  check_detail(status == CLT_OK, "its checkpoint is saved", e.msg);
  status = clt_checkpoint_model(path, &again, &e);
  check_detail(status == CLT_OK, "the checkpoint rebuilds the model by its description", e.msg);
  clt_model_describe(&again, text2, sizeof text2);
  check_detail(status == CLT_OK && strcmp(text, text2) == 0 && strcmp(again.name, "my-net") == 0 &&
                   again.preprocess == CLT_PRE_CAFFE && again.flat_floats == model.flat_floats,
               "... with the same description, name and preprocessing", text2);
  clt_checkpoint loaded = {0};
  status = clt_checkpoint_load(path, &again, 1, &loaded, &e);
  check_detail(status == CLT_OK &&
                   memcmp(loaded.params, st.params, model.flat_floats * sizeof(float)) == 0,
               "and its weights load into the rebuilt model, unchanged", e.msg);
  clt_checkpoint_free(&loaded);
  clt_checkpoint_free(&st);
  snprintf(path, sizeof path, "rm -rf '%s'", root);
  if (system(path) != 0) printf("note: could not remove %s\n", root);
}

int main(void) {
  test_kinds();
  test_round_trip("fmnist-cnn", (clt_shape){28, 28, 1}, 10);
  test_round_trip("resnet50", (clt_shape){224, 224, 3}, 5);
  test_round_trip("resnet-small", (clt_shape){32, 32, 3}, 3);
  test_bad_descriptions();
  test_checkpoint_rebuild();
  return check_summary();
}
