/* devices: the OpenCL devices libcltrain sees, as `cltrain devices` lists them.
 *
 *   devices [OPTIONS]     OPTIONS: cltrain_open's, e.g. "verbose=1"
 *
 * The smallest program on the installed library: open a context, read its
 * devices, close it. Build it with pkg-config or CMake (README.md, "Installing
 * the library"; examples/CMakeLists.txt builds every example here). */
#include <cltrain.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc > 2) {
    fprintf(stderr, "usage: %s [OPTIONS]\n", argv[0]);
    return 2;
  }
  printf("libcltrain %s (header %s)\n", cltrain_version(), CLTRAIN_VERSION);

  cltrain_ctx *ctx = NULL;
  int status = cltrain_open(argc > 1 ? argv[1] : NULL, &ctx);
  if (status != CLTRAIN_OK) {
    /* No handle yet: the message is the thread's. */
    fprintf(stderr, "devices: %s (%s)\n", cltrain_errmsg(NULL), cltrain_status_name(status));
    return 1;
  }
  const int count = cltrain_device_count(ctx);
  printf("%d device%s; process %d of %d\n", count, count == 1 ? "" : "s", cltrain_rank(ctx),
         cltrain_processes(ctx));
  for (int i = 0; i < count; i++)
    printf("%d  %-11s  %s  %s  %u compute units  %.1f GiB\n", i, cltrain_device_type(ctx, i),
           cltrain_device_platform(ctx, i), cltrain_device_name(ctx, i),
           cltrain_device_compute_units(ctx, i),
           cltrain_device_memory(ctx, i) / (1024.0 * 1024.0 * 1024.0));
  cltrain_close(&ctx);
  if (count <= 0) fprintf(stderr, "devices: no OpenCL device\n");
  return count > 0 ? 0 : 1;
}
