/* OpenCL device discovery and selection. */
#ifndef CLT_DEVICE_H
#define CLT_DEVICE_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "status.h"

typedef struct clt_device {
  int index; /* position in the enumeration, as `cltrain devices` prints it */
  cl_platform_id platform;
  cl_device_id id;
  cl_device_type type;
  char platform_name[128];
  char name[256];
  cl_uint compute_units;
  cl_ulong global_mem_bytes;
  cl_ulong max_alloc_bytes;
  cl_uint
      float_vector_width; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: 16 with AVX-512, 8 with AVX2 */
  int parent;             /* a sub-device: the index of the device it was cut from; else -1 */
} clt_device;

typedef struct clt_device_list {
  int count;
  clt_device *devices;
} clt_device_list;

/* Every device of every platform, in platform then device order. Finding no
 * platform at all is not an error (count = 0); the caller decides. */
int clt_devices_enumerate(clt_device_list *out, clt_err *e);
void clt_devices_free(clt_device_list *list);

/* Parses a selection: "all", "cpu", "gpu", "accelerator" or a comma list of
 * indices ("0,2"), where "I/P" stands for device I partitioned into P equal
 * sub-devices (clCreateSubDevices, CL_DEVICE_PARTITION_EQUALLY), each a replica:
 * "0/2" runs two replicas on one CPU, each on half its cores. Sub-devices are
 * appended to the list. Writes the indices into `chosen` (which must hold
 * CLT_MAX_SELECTED ints) and their number into *n. An empty result, an unknown
 * word, a bad or repeated index, or a device that cannot be partitioned so is
 * an error naming the spec. */
#define CLT_MAX_SELECTED 256
int clt_devices_select(clt_device_list *list, const char *spec, int *chosen, int *n, clt_err *e);

/* "CPU", "GPU", "ACCELERATOR" or "OTHER". */
const char *clt_device_type_name(cl_device_type type);

#endif
