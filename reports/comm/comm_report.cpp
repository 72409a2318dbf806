#include "reports/comm/comm_report.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "reports/format/text_table.h"
#include "reports/format/utf8_text.h"

namespace lt {

std::string render_comm_report(const CommReport& rep, const CommRenderOptions& opt) {
  std::ostringstream out;
  out << "Collectives (c10d process-group calls while attached, counted at their entry)\n";
  out << "Counts and bytes are exact; there are no times: entry probes see a call start, not end.\n";
  if (rep.processes.empty()) {
    out << "\nNo c10d calls (comm probes off, or no collective while attached).\n";
    return out.str();
  }
  for (const ProcessComm& p : rep.processes) {
    out << "\n" << process_title(p.pid, opt.actions) << ": " << p.calls << " calls, " << p.bytes << " bytes\n";
    std::vector<std::vector<std::string>> sizes{{"collective", "size (B)", "count", "type", "calls", "bytes"}};
    bool multi = false;
    for (auto& r : p.sizes) {
      const bool tensor = !r.dtype.empty();
      sizes.push_back({comm_kind_name(r.kind), tensor ? std::to_string(r.bytes) : "-",
                       tensor ? std::to_string(r.count) : "-", tensor ? r.dtype : "-", std::to_string(r.calls),
                       std::to_string(r.bytes * r.calls)});
      multi |= r.multi_tensor_calls > 0;
    }
    TextTable{sizes, "l"}.write(out);
    out << "  (size: bytes of this rank's tensor per call: the buffer of all_reduce, broadcast, reduce, send, recv; "
           "the input of the gathers and all_to_all; the output of the scatters)\n";
    if (multi) out << "  (some calls passed several tensors: only the first is counted)\n";
    if (p.rows_dropped) out << "  (" << p.rows_dropped << " calls of sizes or groups past the bounds: in no row)\n";
    if (p.unreadable) out << "  (" << p.unreadable << " calls with a tensor that could not be decoded: size 0)\n";

    out << "\n  per Lightning action (innermost action open on the calling thread)\n";
    std::vector<std::vector<std::string>> acts{{"action", "collective", "calls", "bytes"}};
    for (auto& a : p.actions)
      acts.push_back({utf8_text(a.action), comm_kind_name(a.kind), std::to_string(a.calls), std::to_string(a.bytes)});
    TextTable{acts, "ll"}.write(out);

    out << "\n  process groups (backend objects in order of first use; seq: our count since the attach)\n";
    for (auto& g : p.groups) {
      out << "  pg " << g.index << ": " << g.calls << " calls, seq " << g.first_seq << "-" << g.last_seq;
      const std::uint64_t span = g.last_seq - g.first_seq + 1;
      if (span > g.calls) out << " (" << span - g.calls << " lost)";
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace lt
