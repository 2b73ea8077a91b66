#include "device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies a string property, trimming the trailing spaces some drivers pad with. */
static void device_string(cl_device_id d, cl_device_info what, char *buf, size_t size) {
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, size, buf, NULL) != CL_SUCCESS) snprintf(buf, size, "?");
  buf[size - 1] = '\0';
  size_t n = strlen(buf);
  while (n > 0 && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
}

int clt_devices_enumerate(clt_device_list *out, clt_err *e) {
  int status = CLT_OK;
  cl_platform_id *platforms = NULL;
  cl_device_id *ids = NULL;
  cl_uint nplat = 0;
  memset(out, 0, sizeof *out);
  /* CLTRAIN_CPU_VECTOR_WIDTH stands in for the width CPU devices report. PoCL
   * reports the host's, also when POCL_LLVM_CPU_NAME and POCL_KERNELLIB_NAME
   * make it compile for a narrower CPU (how the AVX2 tiles are measured on an
   * AVX-512 host): the GEMM tiles must follow the code, not the host. */
  cl_uint cpu_width = 0;
  const char *w = getenv("CLTRAIN_CPU_VECTOR_WIDTH");
  if (w && *w) {
    if (strcmp(w, "4") != 0 && strcmp(w, "8") != 0 && strcmp(w, "16") != 0)
      return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_CPU_VECTOR_WIDTH=%s: not 4, 8 or 16", w);
    cpu_width = (cl_uint)atoi(w);
  }

  cl_int rc = clGetPlatformIDs(0, NULL, &nplat);
  /* The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR when no driver is installed. */
  if (rc == -1001 || nplat == 0) return CLT_OK;
  if (rc != CL_SUCCESS) {
    return clt_fail(e, rc, "cannot list OpenCL platforms: %s", clt_status_name(rc));
  }
  platforms = calloc(nplat, sizeof *platforms);
  if (!platforms) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory listing platforms");
  rc = clGetPlatformIDs(nplat, platforms, NULL);
  if (rc != CL_SUCCESS) {
    status = clt_fail(e, rc, "cannot list OpenCL platforms: %s", clt_status_name(rc));
    goto cleanup;
  }
  for (cl_uint p = 0; p < nplat; p++) {
    cl_uint ndev = 0;
    rc = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev);
    if (rc == CL_DEVICE_NOT_FOUND || ndev == 0) continue; /* a platform without devices */
    if (rc != CL_SUCCESS) {
      status = clt_fail(e, rc, "cannot list devices of platform %u: %s", p, clt_status_name(rc));
      goto cleanup;
    }
    free(ids);
    ids = calloc(ndev, sizeof *ids);
    clt_device *grown = realloc(out->devices, (out->count + ndev) * sizeof *grown);
    if (!ids || !grown) {
      if (grown) out->devices = grown;
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory listing devices");
      goto cleanup;
    }
    out->devices = grown;
    rc = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, ndev, ids, NULL);
    if (rc != CL_SUCCESS) {
      status = clt_fail(e, rc, "cannot list devices of platform %u: %s", p, clt_status_name(rc));
      goto cleanup;
    }
    char pname[128];
    pname[0] = '\0';
    clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    pname[sizeof pname - 1] = '\0';
    for (cl_uint i = 0; i < ndev; i++) {
      clt_device *d = &out->devices[out->count];
      memset(d, 0, sizeof *d);
      d->index = out->count;
      d->parent = -1;
      d->platform = platforms[p];
      d->id = ids[i];
      snprintf(d->platform_name, sizeof d->platform_name, "%s", pname);
      device_string(ids[i], CL_DEVICE_NAME, d->name, sizeof d->name);
      clGetDeviceInfo(ids[i], CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof d->compute_units,
                      &d->compute_units, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof d->global_mem_bytes,
                      &d->global_mem_bytes, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof d->max_alloc_bytes,
                      &d->max_alloc_bytes, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof d->float_vector_width,
                      &d->float_vector_width, NULL);
      if ((d->type & CL_DEVICE_TYPE_CPU) && cpu_width) d->float_vector_width = cpu_width;
      out->count++;
    }
  }

cleanup:
  free(ids);
  free(platforms);
  if (status != CLT_OK) clt_devices_free(out);
  return status;
}

void clt_devices_free(clt_device_list *list) {
  for (int i = 0; i < list->count; i++) {
    if (list->devices[i].parent >= 0) clReleaseDevice(list->devices[i].id);
  }
  free(list->devices);
  list->devices = NULL;
  list->count = 0;
}

const char *clt_device_type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "GPU";
  if (type & CL_DEVICE_TYPE_CPU) return "CPU";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "ACCELERATOR";
  return "OTHER";
}

/* Appends `parts` equal sub-devices of device idx to the list; *first gets the
 * index of the first. */
static int partition(clt_device_list *list, const char *spec, int idx, int parts, int *first,
                     clt_err *e) {
  const clt_device parent = list->devices[idx];
  if (parent.compute_units < 2) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--devices %s: device %d (%s) has 1 compute unit: it cannot be split into "
                    "sub-devices",
                    spec, idx, parent.name);
  }
  if (parts < 2 || (cl_uint)parts > parent.compute_units) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--devices %s: device %d (%s) has %u compute units: it splits "
                    "into 2 to %u sub-devices",
                    spec, idx, parent.name, parent.compute_units, parent.compute_units);
  }
  cl_device_partition_property props[] = {
      CL_DEVICE_PARTITION_EQUALLY, (cl_device_partition_property)(parent.compute_units / parts), 0};
  cl_device_id ids[64];
  cl_uint got = 0;
  cl_int rc = clCreateSubDevices(parent.id, props, (cl_uint)parts, ids, &got);
  if (rc != CL_SUCCESS || got < (cl_uint)parts) {
    for (cl_uint i = 0; rc == CL_SUCCESS && i < got; i++) clReleaseDevice(ids[i]);
    return clt_fail(e, rc ? rc : CLT_ERR_DEVICE,
                    "--devices %s: device %d (%s) cannot be partitioned "
                    "into %d sub-devices: %s",
                    spec, idx, parent.name, parts, rc ? clt_status_name(rc) : "too few returned");
  }
  clt_device *grown = realloc(list->devices, (size_t)(list->count + parts) * sizeof *grown);
  if (!grown) {
    for (int i = 0; i < parts; i++) clReleaseDevice(ids[i]);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory listing sub-devices");
  }
  list->devices = grown;
  *first = list->count;
  for (int i = 0; i < parts; i++) {
    clt_device *d = &list->devices[list->count];
    *d = parent;
    d->index = list->count++;
    d->id = ids[i];
    d->parent = idx;
    char name[sizeof d->name];
    snprintf(name, sizeof name, "%s", parent.name);
    snprintf(d->name, sizeof d->name, "%.200s [sub-device %d/%d of %d]", name, i + 1, parts, idx);
    clGetDeviceInfo(ids[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof d->compute_units, &d->compute_units,
                    NULL);
  }
  for (int i = parts; i < (int)got; i++) clReleaseDevice(ids[i]);
  return CLT_OK;
}

int clt_devices_select(clt_device_list *list, const char *spec, int *chosen, int *n, clt_err *e) {
  *n = 0;
  if (list->count == 0) {
    return clt_fail(e, CLT_ERR_DEVICE,
                    "no OpenCL device found (is an ICD such as pocl-opencl-icd installed?)");
  }
  cl_device_type want = 0;
  if (strcmp(spec, "all") == 0) want = CL_DEVICE_TYPE_ALL;
  else if (strcmp(spec, "cpu") == 0) want = CL_DEVICE_TYPE_CPU;
  else if (strcmp(spec, "gpu") == 0) want = CL_DEVICE_TYPE_GPU;
  else if (strcmp(spec, "accelerator") == 0) want = CL_DEVICE_TYPE_ACCELERATOR;
  if (want) {
    for (int i = 0; i < list->count; i++) {
      if (list->devices[i].type & want) chosen[(*n)++] = i;
    }
    if (*n == 0) {
      return clt_fail(e, CLT_ERR_DEVICE,
                      "--devices %s: no device of that type (see `cltrain devices`)", spec);
    }
    return CLT_OK;
  }
  const char *s = spec;
  const int listed = list->count; /* sub-devices appended below are not selectable by index */
  while (*s) {
    char *end = NULL;
    if (!isdigit((unsigned char)*s)) goto bad;
    long idx = strtol(s, &end, 10);
    long parts = -1; /* no "/P": the whole device ("/0" and "/1" are refused below) */
    if (end != s && *end == '/') {
      const char *p = end + 1;
      if (!isdigit((unsigned char)*p)) goto bad;
      parts = strtol(p, &end, 10);
    }
    if (end == s || (*end != ',' && *end != '\0')) goto bad;
    if (idx < 0 || idx >= listed) {
      return clt_fail(e, CLT_ERR_DEVICE, "--devices %s: no device %ld (found %d device%s, 0..%d)",
                      spec, idx, list->count, list->count == 1 ? "" : "s", list->count - 1);
    }
    for (int j = 0; j < *n; j++) {
      if (chosen[j] == idx || list->devices[chosen[j]].parent == idx) {
        return clt_fail(e, CLT_ERR_ARG, "--devices %s: device %ld listed twice", spec, idx);
      }
    }
    if (*n + (parts >= 0 ? parts : 1) > CLT_MAX_SELECTED) goto bad;
    if (parts >= 0) {
      int first, status = partition(list, spec, (int)idx, (int)parts, &first, e);
      if (status) {
        *n = 0;
        return status;
      }
      for (int i = 0; i < parts; i++) chosen[(*n)++] = first + i;
    } else {
      chosen[(*n)++] = (int)idx;
    }
    s = *end ? end + 1 : end;
    if (*end == ',' && *s == '\0') goto bad;
  }
  if (*n == 0) goto bad;
  return CLT_OK;
bad:
  *n = 0;
  return clt_fail(e, CLT_ERR_ARG,
                  "--devices %s: expected all, cpu, gpu, accelerator or a list of indices like 0,2 "
                  "(I/P: device I in P sub-devices)",
                  spec);
}
