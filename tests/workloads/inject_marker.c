// Test library for the late injector (user/inject/). Built by the tests with
// `cc -shared -fPIC`; its constructor appends "loaded <pid>\n" to
// /tmp/inject_marker.<pid>, so a test sees that (and how often) it ran.
//   -DINJECT_UNRESOLVED   references a missing symbol: dlopen(RTLD_NOW) fails
//   -DINJECT_SLOW_MS=N    the constructor sleeps N ms after writing the line
//   -DINJECT_SET_ERRNO=N  the constructor leaves errno at N
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#ifdef INJECT_UNRESOLVED
extern int lt_inject_no_such_symbol(void);
int lt_inject_use_missing(void) { return lt_inject_no_such_symbol(); }
#endif

static void append(const char* text, int len) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/inject_marker.%d", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t n = write(fd, text, (size_t)len);
  (void)n;
  close(fd);
}

__attribute__((constructor)) static void inject_marker_init(void) {
  char line[64];
  int n = snprintf(line, sizeof line, "loaded %d\n", (int)getpid());
  append(line, n);
  // The ABI promises a 16-byte aligned stack; say so if the call broke it.
  _Alignas(16) volatile char probe[16];
  if ((uintptr_t)probe & 15) append("misaligned stack\n", 17);
#ifdef INJECT_SLOW_MS
  struct timespec ts = {INJECT_SLOW_MS / 1000, (INJECT_SLOW_MS % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
#endif
}

int lt_inject_marker_value(void) { return 42; }
