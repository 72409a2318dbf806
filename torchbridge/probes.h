// The hand-off to the tracer: USDT probes, provider "ltrace", each guarded by
// its semaphore (libbpf's USDT attach finds the semaphore through the probe's
// note and bumps it while a program is attached).  A probe site is a single
// nop; the semaphore read in front of it is the whole cost when no tracer
// listens.
//
//   ltrace:session()                                   semaphore > 0: a tracer is attached (never fired)
//   ltrace:activity(const lt_gpu_activity *recs, u32 count)   1..LT_GPU_BATCH consecutive records
//   ltrace:name(const lt_gpu_name *n)                  one chunk of a name
//   ltrace:launch(u32 correlation, u32 cbid, u32 api)  API entry, calling thread; api |= 0x100 for driver calls
//   ltrace:nvtx(const lt_nvtx *n)
//   ltrace:status(const lt_gpu_status *s)
//   ltrace:clock(const lt_gpu_clock *c)
//   ltrace:ops()                                       semaphore > 0: the op observer is wanted (never fired)
#pragma once

#include <cstdint>
#include <string_view>

#include "bpf/events.h"

extern "C" {
// Defined in probes.cpp, section ".probes".  Hidden: found through the notes.
extern volatile unsigned short ltrace_session_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_activity_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_name_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_launch_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_nvtx_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_status_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_clock_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short ltrace_ops_semaphore __attribute__((visibility("hidden")));
}

namespace ltb::probe {

inline bool session_on() {
  return __builtin_expect(ltrace_session_semaphore != 0, 0);
}
inline bool activity_on() {
  return __builtin_expect(ltrace_activity_semaphore != 0, 0);
}
inline bool name_on() {
  return __builtin_expect(ltrace_name_semaphore != 0, 0);
}
inline bool launch_on() {
  return __builtin_expect(ltrace_launch_semaphore != 0, 0);
}
inline bool nvtx_on() {
  return __builtin_expect(ltrace_nvtx_semaphore != 0, 0);
}
inline bool status_on() {
  return __builtin_expect(ltrace_status_semaphore != 0, 0);
}
inline bool clock_on() {
  return __builtin_expect(ltrace_clock_semaphore != 0, 0);
}
inline bool ops_on() {
  return ltrace_ops_semaphore != 0;
}

// One probe site each (never inlined, so each probe has exactly one note).
// They fire unconditionally; callers check the semaphore first.
void fire_activity(const lt::lt_gpu_activity* recs, uint32_t count);
void fire_name(const lt::lt_gpu_name* n);
void fire_launch(uint32_t correlation, uint32_t cbid, uint32_t api);
void fire_nvtx(const lt::lt_nvtx* n);
void fire_status(const lt::lt_gpu_status* s);
void fire_clock(const lt::lt_gpu_clock* c);

// Helpers over the above (each checks its semaphore).
void emit_name(lt::u16 kind, lt::u32 id, std::string_view text);
void emit_status(lt::u32 state, lt::s32 error, lt::u64 dropped, lt::u32 cupti_version, lt::u32 flags,
                 std::string_view detail);

}  // namespace ltb::probe
