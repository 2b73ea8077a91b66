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

static clt_model model, again;             /* large: static */
static char text[1 << 20], text2[1 << 20]; /* a description of any model here */

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

/* Whether two parsed models have the same layers, shapes, padding and flat layout. */
static int same_models(const clt_model *m1, const clt_model *m2) {
  int same = m2->nlayers == m1->nlayers && m2->flat_floats == m1->flat_floats &&
             m2->trainable_floats == m1->trainable_floats && m2->param_count == m1->param_count;
  for (int i = 0; same && i < m1->nlayers; i++) {
    const clt_layer *a = &m1->layers[i], *b = &m2->layers[i];
    same = a->ops == b->ops && a->nparams == b->nparams && a->out.h == b->out.h &&
           a->out.w == b->out.w && a->out.c == b->out.c && a->inputs[0] == b->inputs[0] &&
           a->inputs[1] == b->inputs[1] && a->pad.top == b->pad.top &&
           a->pad.bottom == b->pad.bottom && a->pad.left == b->pad.left &&
           a->pad.right == b->pad.right && strcmp(a->pad_name, b->pad_name) == 0 &&
           a->pad_top == b->pad_top && a->pad_left == b->pad_left &&
           memcmp(a->hp, b->hp, sizeof a->hp) == 0;
    for (int p = 0; same && p < a->nparams; p++)
      same = a->params[p].offset == b->params[p].offset && a->params[p].size == b->params[p].size &&
             strcmp(a->params[p].name, b->params[p].name) == 0;
  }
  return same;
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
  check(same_models(&model, &again),
        "%s: the parsed model has the same layers, shapes and parameter layout", name);
}

/* A description given as text: it parses, describes as `canonical` (NULL: itself),
 * and that parses back into the same model. */
static void desc_round_trip(const char *what, const char *desc, const char *canonical,
                            clt_shape input, int classes) {
  clt_err e = {0};
  char msg[160];
  snprintf(msg, sizeof msg, "%s: parses", what);
  int status = clt_model_parse("t", input, classes, CLT_PRE_UNIT, desc, &model, &e);
  check_detail(status == CLT_OK, msg, e.msg);
  if (status) return;
  clt_model_describe(&model, text, sizeof text);
  snprintf(msg, sizeof msg, "%s: describes as %s", what,
           canonical ? "its canonical form" : "given");
  check_detail(strcmp(text, canonical ? canonical : desc) == 0, msg, text);
  snprintf(msg, sizeof msg, "%s: its description parses back", what);
  status = clt_model_parse("t", input, classes, CLT_PRE_UNIT, text, &again, &e);
  check_detail(status == CLT_OK, msg, e.msg);
  clt_model_describe(&again, text2, sizeof text2);
  check_detail(status == CLT_OK && strcmp(text, text2) == 0 && same_models(&model, &again),
               "... into the same model and description", text2);
}

/* The syntax of Keras model files' layers: asymmetric folded padding, ZeroPadding2D
 * layers of their own, no bias, BatchNormalization without beta or gamma, 'same' and
 * non-square max pooling, depthwise and separable convolutions; and the old syntax
 * unchanged. */
static void test_new_syntax(void) {
  const clt_shape in = {16, 16, 3};
  desc_round_trip(
      "MobileNet-like",
      "pad0=ZeroPadding2D(0,1,0,1) c0=Conv2D(8,3x3,s2,valid,nobias) "
      "bn0=BatchNormalization(eps0.001,m0.99,relu) dw_pad=ZeroPadding2D(0,1,0,1) "
      "dw=DepthwiseConv2D(3x3,s2,valid,m2,nobias) "
      "bn1=BatchNormalization(eps0.001,m0.99,nocenter,noscale) "
      "dw2=DepthwiseConv2D(3x3,s1,same,relu) bn2=BatchNormalization(eps1e-05,m0.9,noscale) "
      "sp_pad=ZeroPadding2D(1,0,1,0) sp=SeparableConv2D(6,3x3,s1,valid,m2,nobias,relu) "
      "zp=ZeroPadding2D(1,2,0,1)<sp pool=MaxPooling2D(2x3,s1x2,same) "
      "mp=MaxPooling2D(3,s2,same) gap=GlobalAveragePooling2D d=Dense(16,nobias,relu) "
      "logits=Dense(3)",
      NULL, in, 3);
  /* A ZeroPadding2D feeding two layers cannot fold: a layer of its own. */
  desc_round_trip("shared padding",
                  "zp=ZeroPadding2D(1)<input a=Conv2D(4,3x3,s1,valid) "
                  "b=MaxPooling2D(3,s1)<zp c=Conv2D(4,1x1,s1,valid) s=Add(relu)<a,c "
                  "g=GlobalAveragePooling2D d=Dense(3)",
                  NULL, in, 3);
  /* Equal sides describe in the short form; the old form is all sides. */
  desc_round_trip("equal sides",
                  "p=ZeroPadding2D(2,2,2,2) c=Conv2D(4,5x5,s1,valid) f=Flatten "
                  "d=Dense(3)",
                  "p=ZeroPadding2D(2) c=Conv2D(4,5x5,s1,valid) f=Flatten d=Dense(3)",
                  (clt_shape){4, 4, 1}, 3);
  clt_err e = {0};
  int status = clt_model_parse("t", (clt_shape){5, 6, 2}, 3, CLT_PRE_UNIT,
                               "p=ZeroPadding2D(0,1,2,3) c=Conv2D(3,2x2,s2,valid) "
                               "q=ZeroPadding2D(1,0,0,2)<c r=ZeroPadding2D(3) "
                               "m=MaxPooling2D(2,s1) f=Flatten d=Dense(3)",
                               &model, &e);
  check_detail(status == CLT_OK, "folded and standalone padding parse", e.msg);
  if (status == CLT_OK) {
    const clt_layer *c = &model.layers[0], *q = &model.layers[1], *m = &model.layers[2];
    check(c->pad.top == 0 && c->pad.bottom == 1 && c->pad.left == 2 && c->pad.right == 3 &&
              c->out.h == 3 && c->out.w == 5 && strcmp(c->pad_name, "p") == 0,
          "ZeroPadding2D(0,1,2,3) folds as top 0, bottom 1, left 2, right 3: 6x11 -> 3x5");
    check(model.nlayers == 5 && strcmp(q->ops->kind, "ZeroPadding2D") == 0 &&
              !clt_pad_any(q->pad) && q->out.h == 4 && q->out.w == 7 && q->inputs[0] == 0,
          "ZeroPadding2D(1,0,0,2)<c is a layer of its own: 3x5 -> 4x7");
    check(m->pad.top == 3 && m->pad.right == 3 && m->inputs[0] == 1 && m->out.h == 9 &&
              m->out.w == 12,
          "ZeroPadding2D(3) after it folds into the pool, all sides 3");
  }
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

/* A checkpoint's metadata may declare any input and class count (found by fuzz_checkpoint). */
static void refused_shape(clt_shape input, int classes, const char *want) {
  clt_err e = {0};
  int status = clt_model_parse("bad", input, classes, CLT_PRE_UNIT,
                               "c=Conv2D(4,3x3,s1,valid) g=GlobalAveragePooling2D o=Dense(2)",
                               &model, &e);
  char what[256];
  snprintf(what, sizeof what, "refused: input %dx%dx%d, %d classes", input.h, input.w, input.c,
           classes);
  check_detail(status != CLT_OK && strstr(e.msg, want) != NULL, what, e.msg);
}

/* 0 classes: as many as the last layer outputs. */
static void test_own_classes(void) {
  clt_err e = {0};
  int status = clt_model_parse("own", (clt_shape){6, 6, 3}, 0, CLT_PRE_UNIT,
                               "c=Conv2D(4,3x3,s1,valid) g=GlobalAveragePooling2D o=Dense(5)",
                               &model, &e);
  check_detail(status == CLT_OK && model.classes == 5, "0 classes: the last layer's 5", e.msg);
  status = clt_model_parse("own", (clt_shape){6, 6, 3}, 0, CLT_PRE_UNIT, "c=Conv2D(4,3x3,s1,valid)",
                           &model, &e);
  check_detail(status != CLT_OK && strstr(e.msg, "outputs 4x4x4, not class logits"),
               "0 classes: a last layer of more than logits refused", e.msg);
}

static void test_bad_descriptions(void) {
  refused_shape((clt_shape){6, 6, -3}, 2, "input 6x6x-3 is outside");
  refused_shape((clt_shape){0, 6, 3}, 2, "input 0x6x3 is outside");
  refused_shape((clt_shape){6, 100000, 3}, 2, "input 6x100000x3 is outside");
  refused_shape((clt_shape){6, 6, 3}, 100000000, "100000000 classes is outside");
  refused_shape((clt_shape){6, 6, 3}, -2, "-2 classes is outside");
  refused("", "no layers");
  /* Sizes that would overflow (found by fuzz_checkpoint and fuzz_keras). */
  refused(
      "p=ZeroPadding2D(2000000000) c=Conv2D(4,3x3,s1,valid) g=GlobalAveragePooling2D d=Dense(4)",
      "expected ZeroPadding2D(p)");
  refused(
      "p=ZeroPadding2D(5555555551) c=Conv2D(4,3x3,s1,valid) g=GlobalAveragePooling2D d=Dense(4)",
      "expected ZeroPadding2D(p)");
  refused("p=ZeroPadding2D(16384)<input f=Flatten d=Dense(4)",
          "p: output 32776x32776x3 is outside what cltrain handles");
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
  refused("p=ZeroPadding2D(0,0,0,0) c=Conv2D(4,3x3,s1,valid)", "must not be 0 on every side");
  refused("p=ZeroPadding2D(1,-1,0,0) c=Conv2D(4,3x3,s1,valid)",
          "expected ZeroPadding2D(p) or ZeroPadding2D(top,bottom,left,right)");
  refused("p=ZeroPadding2D(1,2) c=Conv2D(4,3x3,s1,valid)", "expected ZeroPadding2D(p)");
  refused("p=ZeroPadding2D(1,-1,0,0)<input g=GlobalAveragePooling2D d=Dense(4)",
          "p: ZeroPadding2D(1,-1,0,0): expected");
  refused("p=ZeroPadding2D(1) q=ZeroPadding2D(1)<p g=GlobalAveragePooling2D d=Dense(4)",
          "ZeroPadding2D cannot follow ZeroPadding2D p");
  refused("p=ZeroPadding2D(1) c=Conv2D(4,3x3,s1,same) g=GlobalAveragePooling2D d=Dense(4)",
          "'same' padding and a folded ZeroPadding2D p");
  refused("c=Conv2D(4,3x3,s1,valid,relu,nobias) g=GlobalAveragePooling2D d=Dense(4)",
          "expected Conv2D(filters,KHxKW,sSTRIDE,same|valid[,gGROUPS][,nobias][,relu])");
  refused("c=Conv2D(6,3x3,s1,same,g4) g=GlobalAveragePooling2D d=Dense(4)",
          "c: groups 4 must divide the 3 input channels and 6 filters");
  refused("c=DepthwiseConv2D(3x3,s1,same,m0) g=GlobalAveragePooling2D d=Dense(4)",
          "bad kernel 3x3, stride 1 or depth multiplier 0");
  refused("b=BatchNormalization(eps0.001,m0.99,noscale,nocenter) g=GlobalAveragePooling2D "
          "d=Dense(4)",
          "[,nocenter][,noscale][,relu]");
  refused("m=MaxPooling2D(2,s2,valid) g=GlobalAveragePooling2D d=Dense(4)",
          "expected MaxPooling2D(POOL[xPOOL_W],sSTRIDE[xSTRIDE_W][,same])");
  /* Dense on a 4-D input keeps the positions (Keras' last axis). */
  refused("c=Conv2D(4,3x3,s1,same) d=Dense(4)",
          "the last layer outputs 8x8x4, not the 4 class logits");
  refused("g=GlobalAveragePooling2D d=Dense(5)",
          "the last layer outputs 1x1x5, not the 4 class logits");
  refused("c=Conv2D(4,9x9,s1,valid) g=GlobalAveragePooling2D d=Dense(4)",
          "smaller than its 9x9 kernel");
  refused("noname", "expected name=Kind(arguments)");
}

/* A model known by no name: its checkpoint alone rebuilds it. */
static void test_checkpoint_rebuild(void) {
  const char *desc =
      "stem_pad=ZeroPadding2D(1) stem=Conv2D(8,3x3,s2,valid) "
      "stem_bn=BatchNormalization(eps0.001,m0.9,relu) "
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
  st.opt_state[0] = calloc(model.flat_floats, sizeof(float));
  st.opt_state[1] = calloc(model.flat_floats, sizeof(float));
  st.seed = 7;
  if (!mkdtemp(root) || !st.params || !st.opt_state[0] || !st.opt_state[1]) {
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
  test_new_syntax();
  test_bad_descriptions();
  test_own_classes();
  test_checkpoint_rebuild();
  return check_summary();
}
