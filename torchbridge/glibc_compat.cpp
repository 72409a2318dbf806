// What the static libstdc++ and libgcc_eh objects inside the bridge import
// from glibc with versions newer than 2.28 (they were built against the
// build machine's glibc).  A definition here wins over libc.so's at link
// time, and the version script keeps it local, so none of these becomes an
// import:
//   __libc_single_threaded (2.32)  libstdc++'s "skip the atomics" hint
//   arc4random (2.36)              std::random_device's default source
//   _dl_find_object (2.35)         libgcc's unwinder: the FDE of a PC
//   pthread_once, __pthread_key_create (2.34, weak)  libgcc's unwinder
// See glibc_compat.h for the bridge's own calls.
#include <link.h>  // dl_iterate_phdr; <dlfcn.h>: struct dl_find_object (glibc >= 2.35)
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__linux__)

extern "C" {

// Never "single threaded": libstdc++ then always takes the atomic path
// (what it does anyway in a process that ever started a thread; ours has
// one).
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

// Only std::random_device("default") would call it; the bridge does not.
__attribute__((visibility("hidden"))) std::uint32_t arc4random(void) __THROW {
  std::uint32_t v = 0;
  for (;;) {
    long n = syscall(SYS_getrandom, &v, sizeof v, 0);
    if (n == static_cast<long>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) break;
  }
  // No getrandom (kernels before 3.17): the time stamp counter, better
  // than a constant.
  std::uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return lo ^ hi ^ static_cast<std::uint32_t>(getpid());
}

// The oldest versions of the two pthread functions libgcc's unwinder uses
// (in libpthread.so.0 before glibc 2.34, in libc since).
int ltb_pthread_once_225(pthread_once_t*, void (*)(void));
int ltb_pthread_key_create_225(pthread_key_t*, void (*)(void*));
__asm__(".symver ltb_pthread_once_225,pthread_once@GLIBC_2.2.5");
__asm__(".symver ltb_pthread_key_create_225,__pthread_key_create@GLIBC_2.2.5");

__attribute__((visibility("hidden"))) int pthread_once(pthread_once_t* once, void (*init)(void)) {
  return ltb_pthread_once_225(once, init);
}

__attribute__((visibility("hidden"))) int __pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return ltb_pthread_key_create_225(key, destructor);
}

// glibc 2.35's _dl_find_object, for libgcc's unwinder, from
// dl_iterate_phdr (glibc 2.2.5; what libgcc itself used before GCC 12):
// the loaded object whose PT_LOAD segments hold `pc`, and its
// PT_GNU_EH_FRAME.  Returns -1 when no object holds it.  Only built
// against glibc >= 2.35 headers: libgcc built on older ones does not use it.
#ifdef DLFO_EH_SEGMENT_TYPE
static_assert(!DLFO_STRUCT_HAS_EH_DBASE, "x86-64 has no dlfo_eh_dbase");

struct FindData {
  std::uintptr_t pc;
  dl_find_object* out;
  bool found;
};

static int find_object(struct dl_phdr_info* info, std::size_t, void* arg) {
  auto* d = static_cast<FindData*>(arg);
  std::uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool holds = false;
  const ElfW(Phdr)* eh = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_GNU_EH_FRAME) eh = &ph;
    if (ph.p_type != PT_LOAD) continue;
    std::uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
    if (start < lo) lo = start;
    if (end > hi) hi = end;
    if (d->pc >= start && d->pc < end) holds = true;
  }
  if (!holds) return 0;
  d->out->dlfo_flags = 0;
  d->out->dlfo_map_start = reinterpret_cast<void*>(lo);
  d->out->dlfo_map_end = reinterpret_cast<void*>(hi);
  d->out->dlfo_link_map = nullptr;
  d->out->dlfo_eh_frame = eh ? reinterpret_cast<void*>(info->dlpi_addr + eh->p_vaddr) : nullptr;
  d->found = true;
  return 1;
}

__attribute__((visibility("hidden"))) int _dl_find_object(void* pc, dl_find_object* result) __THROW {
  FindData d{reinterpret_cast<std::uintptr_t>(pc), result, false};
  dl_iterate_phdr(find_object, &d);
  return d.found ? 0 : -1;
}
#endif  // DLFO_EH_SEGMENT_TYPE

}  // extern "C"

#endif
