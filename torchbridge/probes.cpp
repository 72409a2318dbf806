#include "torchbridge/probes.h"

#include <cstring>

#include "torchbridge/names.h"
#include "torchbridge/util.h"

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

extern "C" {
#define LTB_SEMAPHORE(name)                                       \
  __extension__ volatile unsigned short ltrace_##name##_semaphore \
      __attribute__((unused, section(".probes"), visibility("hidden"))) = 0
LTB_SEMAPHORE(session);
LTB_SEMAPHORE(activity);
LTB_SEMAPHORE(name);
LTB_SEMAPHORE(launch);
LTB_SEMAPHORE(nvtx);
LTB_SEMAPHORE(status);
LTB_SEMAPHORE(clock);
LTB_SEMAPHORE(ops);
#undef LTB_SEMAPHORE
}

namespace ltb::probe {

// ltrace:session is never fired; its site exists so the tracer can attach to
// it, which raises the semaphore the bridge polls.  `used` keeps the site.
__attribute__((used, noinline)) static void session_site() {
  STAP_PROBE(ltrace, session);
}

// ltrace:ops likewise: its semaphore > 0 asks for the op observer
// (op_observer.h), whose records go through shared memory, not probes.
__attribute__((used, noinline)) static void ops_site() {
  STAP_PROBE(ltrace, ops);
}

__attribute__((noinline)) void fire_activity(const lt::lt_gpu_activity* recs, uint32_t count) {
  STAP_PROBE2(ltrace, activity, recs, count);
  if (debug_level() >= 2)
    for (uint32_t i = 0; i < count; ++i) {
      const lt::lt_gpu_activity& a = recs[i];
      debug(
          "activity kind=%u corr=%u start=%llu end=%llu name=%u cbid=%u tid=%u bytes=%llu dev=%u ctx=%u "
          "stream=%u grid=%ux%ux%u block=%ux%ux%u regs=%u smem=%u graph=%u copy=%u sync=%u",
          a.kind, a.correlation, static_cast<unsigned long long>(a.start_ns), static_cast<unsigned long long>(a.end_ns),
          a.name_id, a.cbid, a.tid, static_cast<unsigned long long>(a.bytes), a.device, a.context, a.stream, a.grid[0],
          a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2], a.registers, a.shared_mem, a.graph_id, a.copy_kind,
          a.sync_type);
    }
}
__attribute__((noinline)) void fire_name(const lt::lt_gpu_name* n) {
  STAP_PROBE1(ltrace, name, n);
  if (debug_level() >= 2)
    debug("name kind=%u id=%u offset=%u len=%u total=%u text=%.*s", n->kind, n->id, n->offset, n->len, n->total_len,
          n->len < 80 ? static_cast<int>(n->len) : 80, n->text);
}
__attribute__((noinline)) void fire_launch(uint32_t correlation, uint32_t cbid, uint32_t api) {
  STAP_PROBE3(ltrace, launch, correlation, cbid, api);
  if (debug_level() >= 2) debug("launch corr=%u cbid=%u api=%#x tid=%u", correlation, cbid, api, current_tid());
}
__attribute__((noinline)) void fire_nvtx(const lt::lt_nvtx* n) {
  STAP_PROBE1(ltrace, nvtx, n);
  if (debug_level() >= 2)
    debug("nvtx type=%u domain=%u string=%u range=%llu color=%#x category=%u tid=%u ts=%llu msg_len=%u msg=%.60s",
          n->type, n->domain, n->string_id, static_cast<unsigned long long>(n->range_id), n->color, n->category, n->tid,
          static_cast<unsigned long long>(n->ts_ns), n->msg_len, n->msg);
}
__attribute__((noinline)) void fire_status(const lt::lt_gpu_status* s) {
  STAP_PROBE1(ltrace, status, s);
}
__attribute__((noinline)) void fire_clock(const lt::lt_gpu_clock* c) {
  STAP_PROBE1(ltrace, clock, c);
  if (debug_level() >= 2)
    debug("clock cupti=%llu mono=%llu offset=%lld error=%llu", static_cast<unsigned long long>(c->cupti_ns),
          static_cast<unsigned long long>(c->monotonic_ns), static_cast<long long>(c->offset_ns),
          static_cast<unsigned long long>(c->error_ns));
}

namespace {
void fire_chunk(const lt::lt_gpu_name& chunk, void*) {
  fire_name(&chunk);
}
}  // namespace

void emit_name(lt::u16 kind, lt::u32 id, std::string_view text) {
  if (!name_on()) return;
  split_name(kind, id, text, fire_chunk, nullptr);
}

void emit_status(lt::u32 state, lt::s32 error, lt::u64 dropped, lt::u32 cupti_version, lt::u32 flags,
                 std::string_view detail) {
  debug("status %s error=%d dropped=%llu flags=%#x: %.*s", state_name(state), error,
        static_cast<unsigned long long>(dropped), flags, static_cast<int>(detail.size()), detail.data());
  if (!status_on()) return;
  lt::lt_gpu_status s;
  std::memset(&s, 0, sizeof s);
  s.state = state;
  s.error = error;
  s.dropped = dropped;
  s.cupti_version = cupti_version;
  s.flags = flags;
  std::size_t n = detail.size() < sizeof s.detail - 1 ? detail.size() : sizeof s.detail - 1;
  std::memcpy(s.detail, detail.data(), n);
  fire_status(&s);
}

}  // namespace ltb::probe
