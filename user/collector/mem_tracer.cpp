#include "user/collector/mem_tracer.h"

#include "bpf/events.h"
#include "user/collector/session_options.h"
#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/sources/memprobe.h"
#include "user/sources/proctrack.h"

namespace lt {

MemTracer::MemTracer(const TracerContext& ctx)
    : stacks_(ctx.opts.sources.memory_stacks),
      source_(std::make_unique<MemProbeSource>(ctx.proctrack, ctx.op_stacks_fd)) {}

// The stack of each allocation: needs the sampler's thread-state lookup.
void MemTracer::fill_target(pid_t, lt_target& t) const {
  t.flags |= LT_TARGET_MEM;
  if (stacks_ && (t.tsd_block || (t.flags & LT_TARGET_TSTATE_MAP))) t.flags |= LT_TARGET_MEM_STACKS;
}
MemTracer::~MemTracer() = default;
void MemTracer::detach() {
  source_.reset();
}

bool MemTracer::attach(pid_t pid, pid_t pid_filter) {
  auto found = proc::find_mapped_library(pid, "libc10.so");  // not libc10_cuda.so
  if (!found) return false;
  const auto& [lib, open_path, file] = *found;
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
    if (!has_new || !has_delete)
      throw Error(ExitCode::unsupported,
                  lib + " has no c10::ProfiledCPUMemoryReporter::New/Delete: memory cannot be tracked");
    last_ = lib + ": " + std::to_string(sites.size()) + " allocator hooks:" + names;
    known = sites_.emplace(file, std::move(sites)).first;
  }
  std::vector<MemProbeSource::Site> sites;
  for (auto& s : known->second) sites.push_back({s.file_offset, s.kind});
  probes_ += source_->attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  return true;
}

}  // namespace lt
