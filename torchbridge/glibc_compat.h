// Force-included into every bridge translation unit (-include, see the
// Makefile): the bridge must load into any glibc >= 2.28 (RHEL 8, Ubuntu
// 20.04, manylinux_2_28 images), while the build machine's glibc gave the
// functions below new symbol versions (2.32: pthread_sigmask; 2.34: dl*
// moved into libc, pthread_* too).  Each reference is pinned to the oldest
// version, which every glibc since then still exports (the newer ones as
// compat symbols of the same function), so the linker records that one.
// The functions live in libdl.so.2 / libpthread.so.0 before 2.34: the
// library names both as DT_NEEDED.  References made by the static
// libstdc++ / libgcc_eh objects are resolved by glibc_compat.cpp instead.
// `make bridge` fails if any import still needs a version above 2.28
// (tests/check_glibc_versions.sh).  A pin on a function that a unit does
// not call emits nothing.
#pragma once

#if defined(__x86_64__) && defined(__linux__)
#define LTB_PIN_SYMBOL(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)
LTB_PIN_SYMBOL(dlopen, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(dlsym, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(dladdr, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(dlclose, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(dlerror, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_create, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_attr_setstacksize, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_mutex_timedlock, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_sigmask, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_setname_np, "GLIBC_2.12");
LTB_PIN_SYMBOL(pthread_join, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_detach, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_key_create, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_getspecific, "GLIBC_2.2.5");
LTB_PIN_SYMBOL(pthread_setspecific, "GLIBC_2.2.5");
#undef LTB_PIN_SYMBOL
#endif
