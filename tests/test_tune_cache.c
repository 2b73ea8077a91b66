#define _POSIX_C_SOURCE 200809L
/* The tuner's cache (src/backend/tune.h): keys separate every part of a
 * device's identity and the batch buckets; results survive a reopen under
 * $XDG_CACHE_HOME; a corrupt or foreign file gets one note and is rewritten; no
 * temporary file stays behind; processes writing at once lose no entry; an
 * unwritable folder keeps results in memory with one note; a pinned file of
 * another identity is refused. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tune.h"

static clt_tune_ident ident(const char *cpu) {
  clt_tune_ident id;
  memset(&id, 0, sizeof id);
  snprintf(id.vendor, sizeof id.vendor, "GenuineIntel");
  snprintf(id.name, sizeof id.name, "pthread-skylake-avx512");
  snprintf(id.cpu_model, sizeof id.cpu_model, "%s", cpu);
  id.compute_units = 2;
  snprintf(id.driver, sizeof id.driver, "6.0");
  snprintf(id.options, sizeof id.options, "-DCLT_GPU=0");
  id.vector_width = 16;
  clt_tune_sources_hash(id.sources);
  return id;
}

/* Lines written to a notes file so far. */
static int lines(FILE *f) {
  fflush(f);
  rewind(f);
  int n = 0, ch;
  while ((ch = fgetc(f)) != EOF) n += ch == '\n';
  fseek(f, 0, SEEK_END);
  return n;
}

static const char *path_of(const char *dir, const clt_tune_ident *id) {
  static char path[4096];
  clt_tune_cache *c = NULL;
  clt_err e = {0};
  if (clt_tune_open(dir, NULL, id, NULL, &c, &e)) return "";
  snprintf(path, sizeof path, "%s", clt_tune_path(c));
  clt_tune_close(c);
  return path;
}

static int temp_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  const struct dirent *ent;
  while (d && (ent = readdir(d))) n += strstr(ent->d_name, ".tmp") != NULL;
  if (d) closedir(d);
  return n;
}

int main(void) {
  char root[] = "/tmp/clt_tune_XXXXXX";
  if (!mkdtemp(root)) return 1;
  char dir[256], xdg[256];
  snprintf(xdg, sizeof xdg, "%s/xdg", root);
  snprintf(dir, sizeof dir, "%s/xdg/cltrain/tune", root);
  setenv("XDG_CACHE_HOME", xdg, 1);
  clt_err e = {0};

  /* Keys. */
  check(clt_tune_batch_bucket(1) == 1 && clt_tune_batch_bucket(17) == 32 &&
            clt_tune_batch_bucket(32) == 32 && clt_tune_batch_bucket(33) == 64,
        "batches bucketed to powers of two");
  char k1[128], k2[128], k3[128];
  clt_tune_conv_key("fwd", 28, 28, 32, 3, 3, 1, 1, 1, 28, 28, 64, 20, k1, sizeof k1);
  clt_tune_conv_key("fwd", 28, 28, 32, 3, 3, 1, 1, 1, 28, 28, 64, 31, k2, sizeof k2);
  clt_tune_conv_key("fwd", 28, 28, 32, 3, 3, 1, 1, 1, 28, 28, 64, 40, k3, sizeof k3);
  check(strcmp(k1, k2) == 0 && strcmp(k1, k3) != 0, "a slice's key holds within its bucket: %s",
        k1);
  clt_tune_conv_key("dw", 28, 28, 32, 3, 3, 1, 1, 1, 28, 28, 64, 20, k3, sizeof k3);
  check(strcmp(k1, k3) != 0, "passes have keys of their own");
  char hash[17], hash2[17];
  clt_tune_sources_hash(hash);
  clt_tune_sources_hash(hash2);
  check(strlen(hash) == 16 && strcmp(hash, hash2) == 0, "kernel sources hash %s", hash);

  const clt_tune_ident intel = ident("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");
  const clt_tune_ident amd = ident("AMD EPYC 9B14");
  char intel_path[4096];
  snprintf(intel_path, sizeof intel_path, "%s", path_of(NULL, &intel));
  check(strncmp(intel_path, dir, strlen(dir)) == 0, "default folder $XDG_CACHE_HOME/cltrain/tune");
  check(strcmp(intel_path, path_of(NULL, &amd)) != 0, "CPU models alike by name keep apart");
  const char *fields[] = {"vendor",  "name",  "cpu", "units",  "driver",
                          "options", "width", "isa", "sources"};
  for (int f = 0; f < 9; f++) {
    clt_tune_ident other = intel;
    switch (f) {
      case 0:
        other.vendor[0] = 'X';
        break;
      case 1:
        other.name[0] = 'X';
        break;
      case 2:
        other.cpu_model[0] = 'X';
        break;
      case 3:
        other.compute_units = 1;
        break;
      case 4:
        other.driver[0] = 'X';
        break;
      case 5:
        other.options[0] = 'X';
        break;
      case 6:
        other.vector_width = 8;
        break;
      case 7:
        snprintf(other.isa, sizeof other.isa, "haswell/");
        break;
      default:
        other.sources[0] = other.sources[0] == '0' ? '1' : '0';
        break;
    }
    check(strcmp(intel_path, path_of(NULL, &other)) != 0, "the %s is part of the key", fields[f]);
  }

  /* A real device's identity: OpenCL's strings, the host's CPU model. */
  clt_device_list list = {0};
  if (clt_devices_enumerate(&list, &e) == CLT_OK && list.count > 0) {
    clt_tune_ident real;
    const int got = clt_tune_ident_of(&list.devices[0], "-DCLT_GPU=0", &real, &e);
    const int cpu = (list.devices[0].type & CL_DEVICE_TYPE_CPU) != 0;
    check(got == CLT_OK && real.vendor[0] && real.driver[0] && real.compute_units > 0 &&
              strcmp(real.sources, hash) == 0 && strcmp(real.options, "-DCLT_GPU=0") == 0 &&
              (!cpu || real.cpu_model[0]),
          "device 0's identity: %s, %s, cpu model '%s', driver %s", real.vendor, real.name,
          real.cpu_model, real.driver);
  }
  clt_devices_free(&list);

  /* Results survive a reopen; no temporary file stays. */
  FILE *notes = tmpfile();
  clt_tune_cache *c = NULL;
  int st = clt_tune_open(NULL, NULL, &intel, notes, &c, &e);
  check(st == CLT_OK && clt_tune_get(c, k1, NULL, NULL) == NULL, "empty cache: nothing tuned");
  st = st ? st : clt_tune_put(c, k1, "im2col", 1.5, 2.0, &e);
  clt_tune_close(c);
  c = NULL;
  double ms = 0, dms = 0;
  st = st ? st : clt_tune_open(NULL, NULL, &intel, notes, &c, &e);
  const char *v = st ? NULL : clt_tune_get(c, k1, &ms, &dms);
  check(v && strcmp(v, "im2col") == 0 && ms == 1.5 && dms == 2.0, "a result survives a reopen");
  check(c && clt_tune_persistent(c) && lines(notes) == 0, "no note on a good file");
  check(temp_files(dir) == 0, "no temporary file left in the folder");
  clt_tune_close(c);

  /* A corrupt file, then a foreign one: one note each, ignored, rewritten. */
  for (int kind = 0; kind < 2; kind++) {
    FILE *f = fopen(intel_path, "w");
    if (kind == 0) {
      fputs("{\"format\": \"cltrain tuning results 1\", \"results\": {", f);
    } else {
      fclose(f);
      f = NULL;
      clt_tune_cache *a = NULL;
      /* An AMD file copied over the Intel one: parses, but another identity. */
      if (!clt_tune_open(NULL, NULL, &amd, NULL, &a, &e) &&
          !clt_tune_put(a, k1, "in_place", 1.0, 1.0, &e)) {
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", clt_tune_path(a), intel_path);
        check(system(cmd) == 0, "copied a foreign file");
      }
      clt_tune_close(a);
    }
    if (f) fclose(f);
    const int before = lines(notes);
    st = clt_tune_open(NULL, NULL, &intel, notes, &c, &e);
    check(st == CLT_OK && clt_tune_get(c, k1, NULL, NULL) == NULL && lines(notes) == before + 1,
          "a %s file: ignored with one note", kind ? "foreign" : "corrupt");
    st = st ? st : clt_tune_put(c, k2, "im2col", 1.0, 1.0, &e);
    clt_tune_close(c);
    c = NULL;
    st = st ? st : clt_tune_open(NULL, NULL, &intel, notes, &c, &e);
    check(st == CLT_OK && clt_tune_get(c, k2, NULL, NULL) && lines(notes) == before + 1,
          "a %s file: rewritten, then read without a note", kind ? "foreign" : "corrupt");
    clt_tune_close(c);
    c = NULL;
  }
  /* A pinned file of another identity is an error naming it. */
  st = clt_tune_open(NULL, intel_path, &amd, NULL, &c, &e);
  check(st == CLT_ERR_FORMAT && strstr(e.msg, intel_path) && strstr(e.msg, "another"),
        "a pinned file of another device: %s", e.msg);
  clt_tune_close(c);
  c = NULL;

  /* Four processes writing 25 entries each into one file at once. */
  for (int p = 0; p < 4; p++) {
    const pid_t pid = fork();
    if (pid == 0) {
      clt_tune_cache *pc = NULL;
      clt_err pe = {0};
      if (clt_tune_open(NULL, NULL, &intel, NULL, &pc, &pe)) _exit(1);
      for (int i = 0; i < 25; i++) {
        char key[64];
        snprintf(key, sizeof key, "proc %d entry %d", p, i);
        if (clt_tune_put(pc, key, "in_place", i, i, &pe) || !clt_tune_persistent(pc)) _exit(1);
      }
      clt_tune_close(pc);
      _exit(0);
    }
  }
  int all_ok = 1, wstatus = 0;
  for (int p = 0; p < 4; p++)
    all_ok &= wait(&wstatus) > 0 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  check(all_ok, "four processes tuning at once succeed");
  st = clt_tune_open(NULL, NULL, &intel, notes, &c, &e);
  int found = 0;
  for (int p = 0; p < 4 && !st; p++)
    for (int i = 0; i < 25; i++) {
      char key[64];
      snprintf(key, sizeof key, "proc %d entry %d", p, i);
      found += clt_tune_get(c, key, NULL, NULL) != NULL;
    }
  check(found == 100 && clt_tune_get(c, k2, NULL, NULL), "no entry lost: %d of 100", found);
  check(temp_files(dir) == 0, "no temporary file left by the processes");
  clt_tune_close(c);
  c = NULL;

  /* An unwritable folder (under a regular file, so root cannot write it
   * either): results stay in memory, one note. */
  char bad[300];
  snprintf(bad, sizeof bad, "%s/file", root);
  FILE *f = fopen(bad, "w");
  if (f) fclose(f);
  snprintf(bad, sizeof bad, "%s/file/tune", root);
  const int before = lines(notes);
  st = clt_tune_open(bad, NULL, &intel, notes, &c, &e);
  st = st ? st : clt_tune_put(c, k1, "im2col", 1.0, 2.0, &e);
  st = st ? st : clt_tune_put(c, k3, "in_place", 1.0, 2.0, &e);
  v = st ? NULL : clt_tune_get(c, k1, NULL, NULL);
  check(st == CLT_OK && v && strcmp(v, "im2col") == 0 && !clt_tune_persistent(c) &&
            lines(notes) == before + 1,
        "an unwritable folder keeps results in memory with one note");
  clt_tune_close(c);
  fclose(notes);

  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  check(system(cmd) == 0, "removed %s", root);
  return check_summary();
}
