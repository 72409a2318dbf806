#include "user/collector/mem_tracer.h"

#include "bpf/events.h"
#include "user/collector/session_options.h"
#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/sources/memprobe.h"
#include "user/sources/proctrack.h"

namespace lt {

MemTracer::MemTracer(const TracerContext& ctx)
    : ctx_(ctx),
      stacks_(ctx.opts.sources.memory_stacks),
      oom_only_(!ctx.opts.sources.memory),
      source_(std::make_unique<MemProbeSource>(ctx.proctrack, ctx.op_stacks_fd)) {}

// The stack of each allocation: needs the sampler's thread-state lookup.
// Escalated (watch), always with it: what the capture is for.
void MemTracer::fill_target(pid_t pid, lt_target& t) const {
  t.flags |= LT_TARGET_MEM;
  const bool want = oom_only_ ? escalated_.count(pid) > 0 : stacks_;
  if (want && (t.tsd_block || (t.flags & LT_TARGET_TSTATE_MAP))) t.flags |= LT_TARGET_MEM_STACKS;
}

// The allocation hooks for pid alone while escalated: the probes first,
// then the stacks flag; the flag off, then the probes.
std::string MemTracer::escalate(pid_t pid, bool on) {
  if (!oom_only_ || !source_ || on == static_cast<bool>(escalated_.count(pid))) return "";
  if (!on) {
    escalated_.erase(pid);
    if (ctx_.retarget) ctx_.retarget(pid);
    source_->drop(pid);
    return "allocations off";
  }
  auto lib = libs_.find(pid);
  if (lib == libs_.end()) return "";  // no libc10 (yet): no torch allocations to see
  std::vector<MemProbeSource::Site> sites;
  for (auto& s : sites_[lib->second.file])
    if (s.kind == LT_MEM_SITE_CPU_NEW || s.kind == LT_MEM_SITE_CPU_DELETE || s.kind == LT_MEM_SITE_REPORT_USAGE)
      sites.push_back({s.file_offset, s.kind});
  if (sites.empty()) return "allocations not seen (libc10 has no allocator hooks)";
  try {
    source_->attach_for(pid, lib->second.open_path, sites);
  } catch (const Error& e) {
    return std::string("allocations not seen (") + e.what() + ")";
  }
  escalated_.insert(pid);
  if (ctx_.retarget) ctx_.retarget(pid);
  return "allocations: " + std::to_string(sites.size()) + " allocator hooks";
}

void MemTracer::forget(pid_t pid) {
  libs_.erase(pid);
  escalated_.erase(pid);
  if (source_) source_->drop(pid);
}
MemTracer::~MemTracer() = default;
void MemTracer::detach() {
  source_.reset();
}

bool MemTracer::attach(pid_t pid, pid_t pid_filter) {
  auto found = proc::find_mapped_library(pid, "libc10.so");  // not libc10_cuda.so
  if (!found) return false;
  const auto& [lib, open_path, file] = *found;
  libs_[pid] = {open_path, file};
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1}))
    return true;
  auto known = sites_.find(file);
  if (known == sites_.end()) {
    auto sites = find_mem_hooks(open_path);
    bool has_new = false, has_delete = false;
    std::string names;
    for (auto& s : sites) {
      has_new |= s.kind == LT_MEM_SITE_CPU_NEW;
      has_delete |= s.kind == LT_MEM_SITE_CPU_DELETE;
      names += " " + s.symbol;
    }
    if ((!has_new || !has_delete) && !oom_only_)
      throw Error(ExitCode::unsupported,
                  lib + " has no c10::ProfiledCPUMemoryReporter::New/Delete: memory cannot be tracked");
    last_ = lib + ": " + std::to_string(sites.size()) + " allocator hooks:" + names;
    known = sites_.emplace(file, std::move(sites)).first;
  }
  std::vector<MemProbeSource::Site> sites;
  for (auto& s : known->second)
    if (!oom_only_ || s.kind == LT_MEM_SITE_CPU_OOM || s.kind == LT_MEM_SITE_REPORT_OOM)
      sites.push_back({s.file_offset, s.kind});
  if (sites.empty()) {  // an out-of-memory source on a libc10 without those hooks
    last_ = lib + ": no out-of-memory hooks: an allocation that fails is not seen";
    attached_.insert({file.first, file.second, pid_filter});
    return true;
  }
  probes_ += source_->attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  return true;
}

}  // namespace lt
