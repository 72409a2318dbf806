#include "user/collector/comm_tracer.h"

#include <sys/stat.h>

#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/sources/commprobe.h"

namespace lt {

namespace {
bool is_libtorch_cpu(const std::string& path) {
  auto slash = path.rfind('/');
  return path.compare(slash == std::string::npos ? 0 : slash + 1, 16, "libtorch_cpu.so") == 0;
}
}  // namespace

bool CommTracer::attach(pid_t pid, pid_t pid_filter) {
  std::string lib, open_path;
  for (auto& m : proc::read_maps(pid))
    if (is_libtorch_cpu(m.path)) {
      lib = m.path;
      open_path = proc::mapped_file(pid, m);  // the file the target runs (containers, chroots)
      break;
    }
  if (lib.empty() || open_path.empty()) return false;
  struct stat st {};
  if (stat(open_path.c_str(), &st) != 0) return false;
  const auto file = std::make_pair(static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino));
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1}))
    return true;
  auto known = sites_.find(file);
  if (known == sites_.end()) {
    auto sites = find_comm_sites(open_path);
    if (sites.empty())
      throw Error(ExitCode::unsupported, lib + " has no c10d::ProcessGroupGloo: collectives cannot be traced");
    last_ = lib + ": " + std::to_string(sites.size()) + " c10d backend methods";
    known = sites_.emplace(file, std::move(sites)).first;
  }
  std::vector<CommProbeSource::Site> sites;
  for (auto& s : known->second) sites.push_back({s.file_offset, s.cookie});
  probes_ += source_.attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  return true;
}

}  // namespace lt
