#include "torchbridge/util.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ltb {
namespace {
std::atomic<int> g_debug{0};
thread_local lt::u32 t_tid = 0;
}  // namespace

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

lt::u32 current_tid() {
  if (t_tid == 0) t_tid = static_cast<lt::u32>(syscall(SYS_gettid));
  return t_tid;
}

void reset_tid_cache() {
  t_tid = 0;
}

void init_debug() {
  const char* v = getenv("LTRACE_BRIDGE_DEBUG");
  int level = (v != nullptr && v[0] >= '1' && v[0] <= '9') ? v[0] - '0' : 0;
  g_debug.store(level, std::memory_order_relaxed);
}

bool debug_enabled() {
  return g_debug.load(std::memory_order_relaxed) > 0;
}
int debug_level() {
  return g_debug.load(std::memory_order_relaxed);
}

void debug(const char* fmt, ...) {
  if (!debug_enabled()) return;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "ltrace-bridge[%d]: ", static_cast<int>(getpid()));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  // One write(2): no stdio buffers or locks shared with the target.
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w;
}

const char* state_name(lt::u32 state) {
  switch (state) {
    case LT_BRIDGE_ACTIVE:
      return "ACTIVE";
    case LT_BRIDGE_CUPTI_BUSY:
      return "CUPTI_BUSY";
    case LT_BRIDGE_NO_CUPTI:
      return "NO_CUPTI";
    case LT_BRIDGE_CUPTI_ERROR:
      return "CUPTI_ERROR";
    case LT_BRIDGE_DORMANT:
      return "DORMANT";
    case LT_BRIDGE_NVTX:
      return "NVTX";
    case LT_BRIDGE_DROPPED:
      return "DROPPED";
    default:
      return "?";
  }
}

}  // namespace ltb
