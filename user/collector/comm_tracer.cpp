#include "user/collector/comm_tracer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "bpf/events.h"
#include "user/collector/session_options.h"
#include "user/core/errors.h"
#include "user/sources/commprobe.h"
#include "user/sources/proctrack.h"
#include "user/torch/nccl_sites.h"

namespace lt {

CommTracer::CommTracer(const TracerContext& ctx)
    : source_(std::make_unique<CommProbeSource>(ctx.proctrack, ctx.op_stacks_fd)) {}
CommTracer::~CommTracer() = default;
void CommTracer::detach() {
  source_.reset();
}

namespace {

std::string describe_sites(const std::string& lib, const std::vector<CommSite>& sites, bool nccl) {
  if (nccl) return lib + ": " + std::to_string(sites.size()) + " NCCL API functions";
  const auto marks = std::count_if(sites.begin(), sites.end(), [](const CommSite& s) { return s.mark; });
  return lib + ": " + std::to_string(sites.size() - static_cast<std::size_t>(marks)) + " c10d backend methods, " +
         std::to_string(marks) + " timing points";
}

}  // namespace

std::size_t CommTracer::attach_file(const proc::MappedLibrary& m, Library kind, pid_t pid_filter) {
  auto known = sites_.find(m.file);
  if (known == sites_.end())
    known = sites_.emplace(m.file, kind == Library::nccl ? find_nccl_sites(m.open_path) : find_comm_sites(m.open_path))
                .first;
  const auto& found = known->second;
  if (found.empty()) return 0;
  if (!last_.empty()) last_ += "; ";
  last_ += describe_sites(m.path, found, kind == Library::nccl);
  if (attached_.count({m.file.first, m.file.second, pid_filter}) || attached_.count({m.file.first, m.file.second, -1}))
    return found.size();
  std::vector<CommProbeSource::Site> sites;
  const auto prog = kind == Library::nccl ? CommProbeSource::Program::nccl : CommProbeSource::Program::call;
  for (const auto& s : found)
    sites.push_back({s.file_offset, s.cookie, s.mark ? CommProbeSource::Program::mark : prog});
  probes_ += source_->attach(m.open_path, pid_filter, sites);
  attached_.insert({m.file.first, m.file.second, pid_filter});
  return found.size();
}

bool CommTracer::attach(pid_t pid, pid_t pid_filter) {
  auto cpu = proc::find_mapped_library(pid, "libtorch_cpu.so");
  if (!cpu) return false;
  last_.clear();
  std::size_t sites = attach_file(*cpu, Library::torch, pid_filter);
  // A CUDA build maps both at import (libtorch_cuda needs libnccl): NCCL's
  // probes are in place before any communicator exists.
  if (auto cuda = proc::find_mapped_library(pid, "libtorch_cuda.so"))
    sites += attach_file(*cuda, Library::torch, pid_filter);
  if (auto nccl = proc::find_mapped_library(pid, "libnccl.so")) sites += attach_file(*nccl, Library::nccl, pid_filter);
  if (!sites)
    throw Error(ExitCode::unsupported,
                cpu->path + " has no c10d::ProcessGroupGloo and no NCCL is mapped: collectives cannot be traced");
  return true;
}

}  // namespace lt
