#include "user/cli/ps_command.h"

#include <unistd.h>

#include <ostream>

#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/python/discovery.h"
#include "user/text/code_points.h"

namespace lt {

namespace {

constexpr std::size_t kCommandWidth = 48;

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

std::string number_or_dash(int v) {
  return v < 0 ? "-" : std::to_string(v);
}

// Whether ltrace-bpf can profile it, in words; *gone when it exited meanwhile.
std::string profile_verdict(const proc::CensusEntry& e, bool* gone) {
  const pid_t pid = e.probe.pid;
  if (proc::root_deleted(pid)) return "no: its root directory was deleted, its files cannot be read";
  try {
    python::discover(pid);
    return "yes";
  } catch (const Error& err) {
    if (err.code() == ExitCode::no_such_process || !proc::exists(pid)) {
      *gone = true;
      return "";
    }
    return "no: " + proc::printable(err.what());
  } catch (const std::exception& err) {
    // A file changed under us (an ELF cut short): say so, go on.
    if (!proc::exists(pid)) {
      *gone = true;
      return "";
    }
    return "no: " + proc::printable(err.what());
  }
}

}  // namespace

PsRow ps_row(const proc::CensusEntry& e, const std::string& profile) {
  PsRow r;
  r.pid = std::to_string(e.probe.pid);
  r.nspid = e.nspid.size() > 1 ? std::to_string(e.nspid.back()) : "-";
  r.host = or_dash(proc::printable(e.hostname));
  r.container = e.container_id.empty() ? "-" : e.container_id.substr(0, 12);
  r.rank = number_or_dash(e.rank.rank);
  r.local_rank = number_or_dash(e.rank.local_rank);
  r.world_size = number_or_dash(e.rank.world_size);
  r.python = or_dash(proc::printable(e.python_version));
  r.torch = or_dash(proc::printable(e.torch_version));
  r.lightning = or_dash(proc::printable(e.lightning_version));
  r.cuda = e.probe.maps.cuda ? "yes" : "no";
  r.xla = or_dash(proc::printable(e.xla));
  // The interpreter and the script by their names (the PYTHON column has
  // the version; /proc/PID/cmdline the whole line), then the arguments.
  std::string cmd;
  for (std::size_t i = 0; i < e.argv.size(); ++i) {
    const std::string& a = e.argv[i];
    const bool shorten = i == 0 || (i == 1 && !a.empty() && a[0] != '-');
    const auto slash = a.rfind('/');
    cmd += (i ? " " : "") + (shorten && slash != std::string::npos && slash + 1 < a.size() ? a.substr(slash + 1) : a);
  }
  cmd = proc::printable(cmd.empty() ? "[" + e.probe.stat.comm + "]" : cmd);
  if (cp_len(cmd) > kCommandWidth) cmd = cp_prefix(cmd, kCommandWidth - 3) + "...";
  r.command = cmd;
  r.profile = profile;
  return r;
}

std::string render_ps_table(const std::vector<PsRow>& rows) {
  static const PsRow header{"PID",    "NSPID", "HOST",      "CONTAINER", "RANK", "LOCAL",   "WORLD",
                            "PYTHON", "TORCH", "LIGHTNING", "CUDA",      "XLA",  "COMMAND", "PROFILE"};
  auto cells = [](const PsRow& r) {
    return std::vector<const std::string*>{&r.pid,        &r.nspid,      &r.host,    &r.container, &r.rank,
                                           &r.local_rank, &r.world_size, &r.python,  &r.torch,     &r.lightning,
                                           &r.cuda,       &r.xla,        &r.command, &r.profile};
  };
  std::vector<std::size_t> width(14, 0);
  auto measure = [&](const PsRow& r) {
    auto c = cells(r);
    for (std::size_t i = 0; i < c.size(); ++i) width[i] = std::max(width[i], cp_len(*c[i]));
  };
  measure(header);
  for (auto& r : rows) measure(r);
  std::string out;
  auto line = [&](const PsRow& r) {
    auto c = cells(r);
    std::string l;
    for (std::size_t i = 0; i < c.size(); ++i) {
      l += *c[i];
      if (i + 1 < c.size()) l += std::string(width[i] - cp_len(*c[i]) + 2, ' ');
    }
    out += l + "\n";
  };
  line(header);
  for (auto& r : rows) line(r);
  return out;
}

int run_ps(bool verbose, std::ostream& out, std::ostream& err) {
  proc::CensusSkips skips;
  std::vector<PsRow> rows;
  for (const auto& e : proc::take_census(&skips)) {
    bool gone = false;
    std::string verdict = profile_verdict(e, &gone);
    if (gone || !proc::exists(e.probe.pid)) {
      ++skips.counts[proc::Skip::gone];
      continue;
    }
    rows.push_back(ps_row(e, verdict));
  }
  out << render_ps_table(rows);
  out.flush();
  if (rows.empty())
    err << "ltrace-bpf: no process with torch or Lightning loaded here (" << skips.python_not_listed.size()
        << " CPython process(es) without either"
        << (verbose || skips.python_not_listed.empty() ? "" : "; -v lists them") << ")\n";
  if (verbose) {
    for (auto& [pid, comm] : skips.python_not_listed)
      err << "ltrace-bpf: pid " << pid << " (" << proc::printable(comm)
          << "): not listed: CPython without torch mapped or a sign of Lightning\n";
    std::string skipped;
    for (auto& [why, n] : skips.counts)
      if (why != proc::Skip::self)
        skipped += (skipped.empty() ? "" : ", ") + std::to_string(n) + " " + proc::skip_reason(why);
    if (!skipped.empty()) err << "ltrace-bpf: skipped: " << skipped << "\n";
  } else if (auto it = skips.counts.find(proc::Skip::unreadable); it != skips.counts.end()) {
    err << "ltrace-bpf: " << it->second << " process(es) could not be read" << (geteuid() ? " (run as root)" : "")
        << "\n";
  }
  return 0;
}

}  // namespace lt
