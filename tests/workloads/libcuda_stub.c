// A stand-in for the CUDA driver, for jobs on machines (and in container
// images) without one: a process that maps a file named libcuda.so.1 "uses
// CUDA" for ltrace-bpf, which then injects its bridge.  Nothing here calls
// into libc, so built with
//   cc -shared -fPIC -nostdlib -Wl,-soname,libcuda.so.1 -o libcuda.so.1 libcuda_stub.c
// it imports no symbol at all and loads into any glibc or musl.  Every
// entry point says "no device" (CUDA_ERROR_NO_DEVICE).
enum { kNoDevice = 100 };

int cuInit(unsigned int flags) {
  (void)flags;
  return kNoDevice;
}

int cuDriverGetVersion(int* version) {
  if (version) *version = 0;
  return 0;
}

int cuDeviceGetCount(int* count) {
  if (count) *count = 0;
  return kNoDevice;
}

int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params,
      (void)extra;
  return kNoDevice;
}
