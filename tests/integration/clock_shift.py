"""An LD_PRELOAD shim that moves CLOCK_REALTIME of the process it is loaded
into by $LT_TEST_REALTIME_SHIFT_NS: a simulated node whose wall clock is off,
as an unsynchronised node's would be.  CLOCK_MONOTONIC (the traces' clock)
is left alone, so only the recorder's clock pair and clock exchange see it."""
import os
import shutil
import subprocess

SHIFT_SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
int clock_gettime(clockid_t c, struct timespec* ts) {
  static int (*real)(clockid_t, struct timespec*);
  if (!real) real = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real(c, ts);
  const char* s = getenv("LT_TEST_REALTIME_SHIFT_NS");
  if (r == 0 && c == CLOCK_REALTIME && s) {
    long long ns = ts->tv_nsec + atoll(s);
    ts->tv_sec += ns / 1000000000LL;
    ns %= 1000000000LL;
    if (ns < 0) { ns += 1000000000LL; ts->tv_sec -= 1; }
    ts->tv_nsec = ns;
  }
  return r;
}
'''


def build_shift_shim(directory):
    """Compiles the shim into directory/shift.so; returns its path, or None
    when there is no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    src, lib = os.path.join(str(directory), "shift.c"), os.path.join(str(directory), "shift.so")
    with open(src, "w") as f:
        f.write(SHIFT_SHIM)
    if not cc or subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl"]).returncode:
        return None
    return lib
