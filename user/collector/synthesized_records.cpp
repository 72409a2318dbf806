#include "user/collector/synthesized_records.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

#include "user/cluster/clock_exchange.h"
#include "user/core/clocks.h"
#include "user/proc/census.h"
#include "user/proc/container.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"

namespace lt {

std::uint64_t monotonic_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

lt_event_header user_header(lt_event_kind kind, std::uint16_t size, pid_t pid, std::uint64_t ts_ns) {
  lt_event_header h{};
  h.kind = static_cast<std::uint16_t>(kind);
  h.size = size;
  h.pid = static_cast<std::uint32_t>(pid);
  h.tid = static_cast<std::uint32_t>(pid);
  h.ts_ns = ts_ns;
  return h;
}

lt_window_event window_record(bool begin, std::uint64_t ts_ns) {
  lt_window_event w{};
  w.hdr = user_header(LT_EV_WINDOW, sizeof w, 0, ts_ns);
  w.begin = begin ? 1 : 0;
  return w;
}

lt_recorded_reports_event recorded_reports_record(const std::string& reports, std::uint64_t ts_ns) {
  lt_recorded_reports_event r{};
  r.hdr = user_header(LT_EV_RECORDED_REPORTS, sizeof r, 0, ts_ns);
  std::string fit = reports;
  // Whole names only: a reader must never see half of one.
  while (fit.size() >= sizeof r.reports) fit.erase(fit.rfind(',') == std::string::npos ? 0 : fit.rfind(','));
  std::memcpy(r.reports, fit.data(), fit.size());
  return r;
}

lt_drops_event drops_record(const lt_drop_counters& drops, std::uint64_t ts_ns) {
  lt_drops_event d{};
  d.hdr = user_header(LT_EV_DROPS, sizeof d, 0, ts_ns);
  d.ringbuf_full = drops.ringbuf_full;
  d.read_faults = drops.read_faults;
  return d;
}

lt_proc_event polled_exit_record(pid_t pid, std::uint64_t ts_ns) {
  lt_proc_event e{};
  e.hdr = user_header(LT_EV_PROC_EXIT, sizeof e, pid, ts_ns);
  e.child_pid = static_cast<std::uint32_t>(pid);
  return e;
}

lt_sampler_info_event sampler_info_record(std::uint64_t period_ns, unsigned rate_hz, bool off_cpu, std::uint64_t ts_ns,
                                          bool weighted, bool off_cpu_forks) {
  lt_sampler_info_event si{};
  si.hdr = user_header(LT_EV_SAMPLER_INFO, sizeof si, 0, ts_ns);
  si.period_ns = period_ns;
  si.rate_hz = rate_hz;
  si.flags = (rate_hz ? LT_SAMPLER_ON_CPU : 0) | (off_cpu ? LT_SAMPLER_OFF_CPU : 0) |
             (weighted ? LT_SAMPLER_WEIGHTED : 0) | (off_cpu_forks ? LT_SAMPLER_OFF_CPU_FORKS : 0);
  return si;
}

lt_host_info_event host_info_record() {
  lt_host_info_event e{};
  e.hdr = user_header(LT_EV_HOST_INFO, sizeof e, 0, monotonic_ns());
  e.monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  e.realtime_ns = clock_ns(CLOCK_REALTIME);
  gethostname(e.hostname, sizeof e.hostname - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  std::strncpy(e.host_id, id.c_str(), sizeof e.host_id - 1);
  utsname u{};
  if (uname(&u) == 0) {
    std::string release = std::string(u.release).substr(0, sizeof e.kernel - 1);  // fits with its NUL
    std::memcpy(e.kernel, release.c_str(), release.size() + 1);
  }
  std::strncpy(e.tool, "ltrace-bpf 0.1.0", sizeof e.tool - 1);
  return e;
}

lt_clock_sync_event clock_sync_record(const cluster::ClockMeasurement& m, std::uint32_t phase, std::uint64_t ts_ns) {
  lt_clock_sync_event e{};
  e.hdr = user_header(LT_EV_CLOCK_SYNC, sizeof e, 0, ts_ns);
  e.offset_ns = m.offset_ns;
  e.delay_ns = static_cast<std::uint64_t>(m.delay_ns);
  e.samples = m.samples;
  e.phase = phase;
  std::strncpy(e.reference, m.reference.c_str(), sizeof e.reference - 1);
  return e;
}

void emit_process_records(pid_t pid, const python::Interpreter* interp, std::uint32_t flags, std::uint64_t ts_ns,
                          const EmitFn& emit) {
  lt_proc_info_event e{};
  e.hdr = user_header(LT_EV_PROC_INFO, sizeof e, pid, ts_ns);
  e.ppid = static_cast<std::uint32_t>(proc::read_ppid(pid));
  // One environ read for both records: rank labels with the launchers'
  // fallbacks (Slurm, Open MPI) here, the job identity in PROC_ENV.
  const proc::RankEnv renv = proc::parse_rank_env(proc::read_environ(pid));
  e.rank = renv.rank;
  e.local_rank = renv.local_rank;
  e.world_size = renv.world_size;
  if (interp) {
    e.py_major = static_cast<std::uint16_t>(interp->major);
    e.py_minor = static_cast<std::uint16_t>(interp->minor);
  }
  e.flags = flags;
  std::strncpy(e.comm, proc::read_comm(pid).c_str(), sizeof e.comm - 1);
  std::string cmd;
  for (auto& a : proc::read_cmdline(pid)) cmd += (cmd.empty() ? "" : " ") + a;
  std::strncpy(e.cmdline, cmd.c_str(), sizeof e.cmdline - 1);
  std::strncpy(e.torch_version, proc::torch_version(pid).c_str(), sizeof e.torch_version - 1);
  emit(&e, sizeof e);
  // The container it runs in, if any (reports name it).
  if (auto c = proc::container_of(pid)) {
    c->hdr.ts_ns = e.hdr.ts_ns;
    emit(&*c, sizeof *c);
  }
  // Right after its PROC_INFO, at the same time, only for a process that is
  // part of a distributed job.
  if (renv.any()) {
    lt_proc_env_event pe = proc::to_event(pid, renv, proc::process_hostname(pid));
    pe.hdr.ts_ns = e.hdr.ts_ns;
    emit(&pe, sizeof pe);
  }
}

}  // namespace lt
