#include "reports/diff/job_identity.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace lt {
namespace {

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_python(const std::string& program) {
  const std::string b = base_name(program);
  return b.rfind("python", 0) == 0 || b.rfind("pypy", 0) == 0;
}

// Interpreter options whose value is the next argument (`-W ignore`, `-X dev`).
bool takes_value(const std::string& opt) {
  return opt == "-W" || opt == "-X" || opt == "-Q";
}

bool intersects(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&b](const std::string& s) { return b.count(s) > 0; });
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

std::string script_of(const std::string& cmdline, bool truncated) {
  std::istringstream in(cmdline);
  std::vector<std::string> argv;
  for (std::string w; in >> w;) argv.push_back(w);
  if (argv.empty()) return "";
  // The word at a cut line's end may itself be cut.
  const auto whole = [&](std::size_t i) { return !truncated || i + 1 < argv.size(); };
  if (!is_python(argv[0])) return whole(0) ? base_name(argv[0]) : "";
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-m") return i + 1 < argv.size() && whole(i + 1) ? argv[i + 1] : "";
    if (a == "-c" || a == "-") return "";
    if (a.rfind("-m", 0) == 0 && a.size() > 2) return whole(i) ? a.substr(2) : "";  // -mpkg.mod
    if (a.rfind("-", 0) == 0) {
      if (takes_value(a)) ++i;
      continue;
    }
    return whole(i) ? base_name(a) : "";
  }
  return "";
}

void JobIdentity::add(const ActionsReport& rep) {
  static const std::string kModule = "[LightningModule]";
  for (const auto& p : rep.processes) {
    // Only the processes that did something: a launcher or a dataloader
    // worker without actions says nothing of the job.
    if (p.actions.empty()) continue;
    // PROC_INFO keeps 255 bytes of the line: one that long may be cut.
    if (const std::string s = script_of(p.meta.cmdline, p.meta.cmdline.size() >= 255); !s.empty()) scripts.insert(s);
    for (const auto& a : p.actions) {
      if (a.name.rfind(kModule, 0) != 0) continue;
      const auto dot = a.name.rfind('.');
      if (dot != std::string::npos && dot > kModule.size())
        modules.insert(a.name.substr(kModule.size(), dot - kModule.size()));
    }
  }
}

std::string different_jobs(const JobIdentity& a, const JobIdentity& b) {
  const bool both_modules = !a.modules.empty() && !b.modules.empty();
  if (both_modules) {
    if (intersects(a.modules, b.modules)) return "";
  } else if (a.scripts.empty() || b.scripts.empty() || intersects(a.scripts, b.scripts)) {
    return "";
  }
  auto side = [&](const JobIdentity& x) {
    std::string s = x.scripts.empty() ? std::string("a script not recorded") : joined(x.scripts);
    if (both_modules) s += " (" + joined(x.modules) + ")";
    return s;
  };
  return "A runs " + side(a) + ", B runs " + side(b);
}

}  // namespace lt
