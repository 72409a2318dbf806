#include "user/collector/gpu_tracer.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "user/collector/bridge_files.h"
#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/core/errors.h"
#include "user/inject/inject_library.h"
#include "user/model/cuda_sites.h"
#include "user/proc/procfs.h"
#include "user/python/elf_file.h"
#include "user/sources/gpu.h"

namespace lt {

GpuTracer::GpuTracer(const TracerContext& ctx) : ctx_(ctx), bridge_path_(find_bridge_library()) {
  if (!ctx.opts.preloaded_bridge.empty()) expect_bridge(ctx.opts.preloaded_bridge);
}
GpuTracer::~GpuTracer() = default;

GpuSource& GpuTracer::source() {
  if (!source_)
    source_ = std::make_unique<GpuSource>(ctx_.proctrack, ctx_.op_stacks_fd, ctx_.opts.launch_stack_interval_ns);
  return *source_;
}

void GpuTracer::fill_target(pid_t, lt_target& t) const {
  t.flags |= LT_TARGET_GPU;
  // The stack of each launch: needs the sampler's thread-state lookup.
  if (ctx_.opts.launch_stacks && (t.tsd_block || (t.flags & LT_TARGET_TSTATE_MAP))) t.flags |= LT_TARGET_LAUNCH_STACKS;
}

bool GpuTracer::settling(pid_t pid) const {
  return injected_.count(pid) && !heard_.count(pid) && proc::exists(pid);
}

void GpuTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  if (h.kind != LT_EV_GPU_STATUS) return;
  const auto pid = static_cast<pid_t>(h.pid);
  lt_gpu_status_event e;
  std::memcpy(static_cast<void*>(&e), record.data(), sizeof e);
  heard_.insert(pid);
  if (e.s.state == LT_BRIDGE_ACTIVE) active_[pid] = true;
  if (e.s.state == LT_BRIDGE_DORMANT || e.s.state == LT_BRIDGE_CUPTI_BUSY || e.s.state == LT_BRIDGE_NO_CUPTI ||
      e.s.state == LT_BRIDGE_CUPTI_ERROR)
    active_[pid] = false;
  if (ctx_.opts.verbose || e.s.state == LT_BRIDGE_CUPTI_BUSY || e.s.state == LT_BRIDGE_DROPPED)
    std::fprintf(stderr, "ltrace-bpf: pid %d: GPU bridge: %s\n", pid,
                 std::string(e.s.detail, strnlen(e.s.detail, sizeof e.s.detail)).c_str());
  on_status(pid, e.s);
}

void GpuTracer::detach() {
  source_.reset();
}

// Detach from the bridges in order: their session probe first, so each
// flushes CUPTI and releases it while the data probes still carry what it
// flushes; we drain until every active bridge said DORMANT (at most ~1.5 s).
void GpuTracer::flush(const std::function<bool()>& drain) {
  constexpr std::uint64_t kBridgeFlushNs = 1'500'000'000;
  constexpr std::uint64_t kNapNs = 20'000'000;
  if (!source_) return;
  source_->release_sessions();
  const auto until = monotonic_ns() + kBridgeFlushNs;
  while (monotonic_ns() < until) {
    bool waiting = false;
    for (auto& [pid, active] : active_) waiting |= active && proc::exists(pid);
    if (!waiting) break;
    struct timespec t = {0, static_cast<long>(kNapNs)};
    nanosleep(&t, nullptr);
    if (!drain()) break;
  }
  for (auto& [pid, active] : active_)
    if (active && proc::exists(pid))
      ctx_.note("pid " + std::to_string(pid) + ": GPU: the bridge did not confirm its last flush in time; " +
                "the last GPU records of the window may be missing");
}

std::string GpuTracer::describe(pid_t pid) const {
  auto it = how_.find(pid);
  std::string out = "GPU: ";
  out += it == how_.end() ? std::string_view("no CUDA") : std::string_view(it->second);
  return out;
}

bool GpuTracer::attach(pid_t pid, pid_t) {
  // CUDA is in use once the driver library is mapped (libcudart loads it at
  // the first CUDA call).  A CUDA build of torch maps libcudart at import,
  // so libcudart alone says nothing: a CPU-only job stays untouched.
  // LTRACE_GPU_WITHOUT_DRIVER=1 (tests on machines without a GPU) accepts
  // libcudart alone.
  static const bool without_driver = std::getenv("LTRACE_GPU_WITHOUT_DRIVER") != nullptr;
  std::string bridge, cuda;
  for (const auto& m : proc::read_maps(pid)) {
    if (m.path.empty() || m.path[0] != '/') continue;
    if (is_bridge(m.path) && bridge.empty()) bridge = proc::mapped_file(pid, m);
    if (is_lib(m.path, "libcuda.so") || (without_driver && is_lib(m.path, "libcudart.so"))) cuda = m.path;
  }
  try {
    // A bridge the op observer put into a job that has not used CUDA (yet)
    // is not a GPU source until the driver is there.
    if (!bridge.empty() && cuda.empty() && !proc::read_environ(pid).count("CUDA_INJECTION64_PATH")) return false;
    if (!bridge.empty()) {
      source().attach_bridge(bridge);
      auto env = proc::read_environ(pid);
      auto inj = env.find("CUDA_INJECTION64_PATH");
      if (inj != env.end() && inj->second.find("libltrace-bridge") != std::string::npos) {
        how_[pid] = "CUPTI bridge (loaded at launch)";
        return true;
      }
      // Put in by an ltrace-bpf after the launch: the op observer's just
      // now (a CUDA job's op times), or an earlier session's.  As with our
      // own injection, its first report is waited for before "attached".
      how_[pid] = "CUPTI bridge (put into the running process by ltrace-bpf)";
      injected_.insert(pid);
      ctx_.note("pid " + std::to_string(pid) +
                ": GPU: CUPTI through the bridge already in the process (put in by ltrace-bpf; NVTX ranges "
                "cannot be captured from a process attached late: launch it with `ltrace-bpf run -- ...` or "
                "NVTX_INJECTION64_PATH for those)");
      return true;
    }
    if (cuda.empty()) return false;  // no CUDA yet: poll again
    // Launched with a CUDA injection library (ours from `run`, or another
    // tool's): the driver loads it itself; never inject on top of it.
    auto env = proc::read_environ(pid);
    if (auto it = env.find("CUDA_INJECTION64_PATH"); it != env.end() && !it->second.empty()) {
      if (it->second.find("libltrace-bridge") != std::string::npos) return false;  // ours: it maps soon
      fall_back_to_uprobes(pid, "CUDA_INJECTION64_PATH names another tool (" + it->second + ")");
      return true;
    }
    if (!ctx_.opts.inject || bridge_path_.empty()) {
      fall_back_to_uprobes(pid, ctx_.opts.inject ? "libltrace-bridge.so not found next to ltrace-bpf" : "--no-inject");
      return true;
    }
    // The bridge goes in as a memfd: the target may be in a container that
    // does not see our file, and nothing is left in its file system.  The
    // probes go on that very file before the dlopen, so the bridge finds its
    // semaphores set at once.
    GpuSource& src = source();  // loaded before the target's thread is stopped
    inject::InjectOptions io;
    io.handoff = inject::Handoff::memfd_or_path;
    io.memfd_name = kBridgeMemfdName;
    io.before_dlopen = [&src](const std::string& file) { src.attach_bridge(file); };
    auto r = inject::inject_library(pid, bridge_path_, io);
    how_[pid] = "CUPTI bridge (injected into the running process)";
    injected_.insert(pid);
    ctx_.note("pid " + std::to_string(pid) + ": GPU: injected " + bridge_path_ +
              (r.memfd ? " (as a memfd: nothing written to its file system)" : " (by its path)") +
              " (CUPTI from now on; NVTX ranges cannot be captured from a process attached late: launch it with "
              "`ltrace-bpf run -- ...` or NVTX_INJECTION64_PATH for those)");
    if (ctx_.opts.verbose) ctx_.note("pid " + std::to_string(pid) + ": GPU: " + r.detail);
  } catch (const Error& e) {
    fall_back_to_uprobes(pid, e.what());
  }
  return true;
}

void GpuTracer::expect_bridge(const std::string& path) {
  try {
    source().attach_bridge(path);
  } catch (const Error& e) {
    ctx_.note(std::string("GPU: ") + e.what());
  }
}

void GpuTracer::on_status(pid_t pid, const lt_gpu_status& s) {
  std::string detail(s.detail, strnlen(s.detail, sizeof s.detail));
  switch (s.state) {
    case LT_BRIDGE_CUPTI_BUSY:
    case LT_BRIDGE_NO_CUPTI:
    case LT_BRIDGE_CUPTI_ERROR:
      fall_back_to_uprobes(pid, detail.empty() ? "CUPTI unavailable" : detail);
      break;
    default:
      break;
  }
}

void GpuTracer::fall_back_to_uprobes(pid_t pid, const std::string& why) {
  if (!uprobed_.insert(pid).second) return;
  std::size_t n = 0;
  std::set<std::string> done;
  for (const auto& m : proc::read_maps(pid)) {
    if (m.path.empty() || m.path[0] != '/' || !done.insert(m.path).second) continue;
    const bool cudart = is_lib(m.path, "libcudart.so"), libcuda = is_lib(m.path, "libcuda.so");
    if (!cudart && !libcuda) continue;
    const std::string path = proc::root_path(pid, m.path);
    try {
      elf::ElfFile f(path);
      std::vector<GpuSource::Site> sites;
      auto all = cuda_sites();
      for (std::uint32_t i = 0; i < all.size(); ++i) {
        if (all[i].source != (cudart ? LT_LAUNCH_CUDART : LT_LAUNCH_LIBCUDA)) continue;
        auto sym = f.symbol(all[i].symbol);
        if (!sym || !sym->value) continue;
        auto off = f.file_offset(sym->value);
        if (off) sites.push_back({*off, all[i].api, all[i].source, i});
      }
      n += source().attach_entries(path, pid, sites);
    } catch (const Error&) {
    }
  }
  how_[pid] = "uprobes on libcudart/libcuda (" + std::to_string(n) + " sites; no GPU times)";
  ctx_.note("pid " + std::to_string(pid) + ": GPU: " + why + "; falling back to " + std::to_string(n) +
            " entry uprobes on libcudart/libcuda: launches, copies and syncs are counted and joined to ops, stacks and "
            "actions, without GPU times");
}

}  // namespace lt
