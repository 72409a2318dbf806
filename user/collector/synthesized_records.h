// The records a session makes itself, for what BPF cannot know: each a
// value built from its inputs (and, where named, /proc or the host), with
// no BPF, so each can be checked on its own.  Every one is stamped with
// CLOCK_MONOTONIC like BPF's records.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "bpf/events.h"
#include "user/python/discovery.h"

namespace lt {
namespace cluster {
struct ClockMeasurement;
}  // namespace cluster

std::uint64_t monotonic_ns();

// A user-space record's header: tid = pid, stamped `ts_ns`.
lt_event_header user_header(lt_event_kind kind, std::uint16_t size, pid_t pid, std::uint64_t ts_ns);

// Attach (begin) or detach.
lt_window_event window_record(bool begin, std::uint64_t ts_ns);
// The ring-buffer drop counters at detach.
lt_drops_event drops_record(const lt_drop_counters& drops, std::uint64_t ts_ns);
// An exit found by polling (its exit record was lost).
lt_proc_event polled_exit_record(pid_t pid, std::uint64_t ts_ns);
// weighted: its samples carry weights in units of period_ns (rate_hz is
// then the full rate's: watch).  off_cpu_forks: the blocking of the
// targets' forks only (LT_SAMPLER_OFF_CPU_FORKS).
lt_sampler_info_event sampler_info_record(std::uint64_t period_ns, unsigned rate_hz, bool off_cpu, std::uint64_t ts_ns,
                                          bool weighted = false, bool off_cpu_forks = false);
// The reports a recording is made for ("simple,ops"; cut to fit, at a comma).
lt_recorded_reports_event recorded_reports_record(const std::string& reports, std::uint64_t ts_ns);
// This host: name, boot id, kernel, the clock pair read now.
lt_host_info_event host_info_record();
// A successful clock exchange (m.ok), at attach (phase 0) or detach (1).
lt_clock_sync_event clock_sync_record(const cluster::ClockMeasurement& m, std::uint32_t phase, std::uint64_t ts_ns);

// What we say about one process, read from /proc: PROC_INFO (rank labels,
// command line, Python version when `interp`, LT_PROC_* flags), then its
// PROC_CONTAINER when it runs in one, then PROC_ENV when it is part of a
// distributed job; all at `ts_ns`.  Each goes to `emit` in that order.
using EmitFn = std::function<void(const void* record, std::size_t size)>;
void emit_process_records(pid_t pid, const python::Interpreter* interp, std::uint32_t flags, std::uint64_t ts_ns,
                          const EmitFn& emit);

}  // namespace lt
