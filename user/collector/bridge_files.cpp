#include "user/collector/bridge_files.h"

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "user/proc/procfs.h"

namespace lt {

bool is_lib(const std::string& path, const char* stem) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind(stem, 0) == 0;
}

bool is_bridge(const std::string& path) {
  const std::string_view p = path;
  return is_lib(path, "libltrace-bridge") || (p.starts_with("/memfd:") && p.substr(7).starts_with(kBridgeMemfdName));
}

std::string find_bridge_library() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("LTRACE_BRIDGE"); env && *env) return fs::exists(env) ? env : "";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto candidate : {exe.parent_path() / "libltrace-bridge.so",
                         exe.parent_path().parent_path() / "lib" / "ltrace-bpf" / "libltrace-bridge.so"})
    if (fs::exists(candidate, ec)) return fs::canonical(candidate, ec).string();
  return "";
}

std::string mapped_bridge(pid_t pid) {
  for (const auto& m : proc::read_maps(pid))
    if (!m.path.empty() && m.path[0] == '/' && is_bridge(m.path)) return proc::mapped_file(pid, m);
  return "";
}

}  // namespace lt
