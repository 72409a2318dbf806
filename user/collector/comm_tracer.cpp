#include "user/collector/comm_tracer.h"

#include <algorithm>

#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/sources/commprobe.h"

namespace lt {

bool CommTracer::attach(pid_t pid, pid_t pid_filter) {
  auto found = proc::find_mapped_library(pid, "libtorch_cpu.so");
  if (!found) return false;
  const auto& [lib, open_path, file] = *found;
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1}))
    return true;
  auto known = sites_.find(file);
  if (known == sites_.end()) {
    auto sites = find_comm_sites(open_path);
    if (sites.empty())
      throw Error(ExitCode::unsupported, lib + " has no c10d::ProcessGroupGloo: collectives cannot be traced");
    const auto marks = std::count_if(sites.begin(), sites.end(), [](const CommSite& s) { return s.mark; });
    last_ = lib + ": " + std::to_string(sites.size() - static_cast<std::size_t>(marks)) + " c10d backend methods, " +
            std::to_string(marks) + " timing points";
    known = sites_.emplace(file, std::move(sites)).first;
  }
  std::vector<CommProbeSource::Site> sites;
  for (auto& s : known->second) sites.push_back({s.file_offset, s.cookie, s.mark});
  probes_ += source_.attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  return true;
}

}  // namespace lt
