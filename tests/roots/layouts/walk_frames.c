// Walks a live CPython 3.14/3.15 process's thread states and frame chains
// from outside (/proc/PID/mem), using only offsetof/sizeof from the
// interpreter's own internal headers.  Checks what the offsets table claims:
// interpreters.head, threads.head, next, thread ids, current_frame,
// previous, f_executable (tagged), owner, instr_ptr against
// co_code_adaptive (GIL) or co_tlbc->entries[tlbc_index] (free-threaded),
// co_name/co_qualname/co_filename/co_firstlineno, ob_type->tp_name,
// gi_iframe/gi_frame_state, and (3.14) the autoTSSkey.
// usage: walk_frames PID RUNTIME_ADDR
#define Py_BUILD_CORE 1
#include <Python.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_genobject.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_interpframe.h"
#include "internal/pycore_runtime.h"
#include "internal/pycore_stackref.h"
#include "internal/pycore_tstate.h"

static int fd;
static void rd(unsigned long long a, void *buf, size_t n) {
  if (pread(fd, buf, n, (off_t)a) != (ssize_t)n) {
    fprintf(stderr, "read %zu bytes at 0x%llx failed\n", n, a);
    exit(1);
  }
}
static unsigned long long rdp(unsigned long long a) { unsigned long long v; rd(a, &v, 8); return v; }

// A str object's text (compact ASCII or compact 1-byte latin-1 only).
static const char *str(unsigned long long o, char *out, size_t cap) {
  if (!o) return "(null)";
  PyASCIIObject h;
  rd(o, &h, sizeof h);
  if (!h.state.compact || h.state.kind != 1) return "(non-compact or wide str)";
  size_t n = (size_t)h.length < cap - 1 ? (size_t)h.length : cap - 1;
  rd(o + (h.state.ascii ? sizeof(PyASCIIObject) : sizeof(PyCompactUnicodeObject)), out, n);
  out[n] = 0;
  return out;
}
static const char *type_name(unsigned long long obj, char *out, size_t cap) {
  unsigned long long t = rdp(obj + offsetof(PyObject, ob_type));
  unsigned long long nm = rdp(t + offsetof(PyTypeObject, tp_name));
  rd(nm, out, cap - 1);
  out[cap - 1] = 0;
  return out;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: walk_frames PID RUNTIME_ADDR\n"); return 2; }
  char path[64];
  snprintf(path, sizeof path, "/proc/%s/mem", argv[1]);
  fd = open(path, O_RDONLY);
  if (fd < 0) { perror(path); return 1; }
  unsigned long long rt = strtoull(argv[2], 0, 0);
#if PY_VERSION_HEX < 0x030F0000
  Py_tss_t key;
  rd(rt + offsetof(_PyRuntimeState, autoTSSkey), &key, sizeof key);
  printf("autoTSSkey: initialized=%d key=%u\n", key._is_initialized, (unsigned)key._key);
#endif
  unsigned long long interp = rdp(rt + offsetof(_PyRuntimeState, interpreters.head));
  printf("interpreters.head=0x%llx main=0x%llx\n", interp, rdp(rt + offsetof(_PyRuntimeState, interpreters.main)));
  int frames = 0, bad = 0;
  for (unsigned long long ts = rdp(interp + offsetof(PyInterpreterState, threads.head)); ts;
       ts = rdp(ts + offsetof(PyThreadState, next))) {
    PyThreadState t;
    rd(ts, &t, sizeof t);
    printf("thread 0x%llx thread_id=0x%lx native_thread_id=%lu current_frame=%p\n", ts, t.thread_id,
           t.native_thread_id, (void *)t.current_frame);
    for (unsigned long long fa = (unsigned long long)t.current_frame; fa; ) {
      _PyInterpreterFrame f;
      rd(fa, &f, offsetof(_PyInterpreterFrame, localsplus));
      unsigned long long code = f.f_executable.bits & ~(unsigned long long)Py_TAG_BITS;
      char tn[32] = "-", nm[96] = "", qn[96] = "", fn[160] = "";
      if (code) type_name(code, tn, sizeof tn);
      printf("  frame 0x%llx owner=%d f_executable=0x%llx (%s)", fa, f.owner,
             (unsigned long long)f.f_executable.bits, tn);
      if (!strcmp(tn, "code")) {
        PyCodeObject c;
        rd(code, &c, offsetof(PyCodeObject, co_code_adaptive));
        unsigned long long base = code + offsetof(PyCodeObject, co_code_adaptive);
#ifdef Py_GIL_DISABLED
        if (f.tlbc_index != 0) {
          unsigned long long arr = (unsigned long long)c.co_tlbc;
          base = rdp(arr + offsetof(_PyCodeArray, entries) + 8 * (unsigned long long)f.tlbc_index);
        }
        printf(" tlbc_index=%d", f.tlbc_index);
#endif
        long idx = ((long long)(unsigned long long)f.instr_ptr - (long long)base) / 2;
        printf(" %s (%s) %s:%d instr=%ld firsttraceable=%d",
               str((unsigned long long)c.co_name, nm, sizeof nm), str((unsigned long long)c.co_qualname, qn, sizeof qn),
               str((unsigned long long)c.co_filename, fn, sizeof fn), c.co_firstlineno, idx, c._co_firsttraceable);
        if (idx < 0 || idx > 100000) bad++;
        frames++;
      }
      if (f.owner == FRAME_OWNED_BY_GENERATOR) {
        unsigned long long gen = fa - offsetof(PyGenObject, gi_iframe);
        char gt[32];
        signed char st;
        rd(gen + offsetof(PyGenObject, gi_frame_state), &st, 1);
        printf(" [gen 0x%llx type=%s gi_frame_state=%d%s]", gen, type_name(gen, gt, sizeof gt), st,
               st == FRAME_EXECUTING ? " EXECUTING" : " ?");
        if (strcmp(gt, "generator") || st != FRAME_EXECUTING) bad++;
      }
      printf("\n");
      fa = (unsigned long long)f.previous;
    }
  }
  printf("%d code frames, %d problem(s)\n", frames, bad);
  return bad || frames == 0;
}
