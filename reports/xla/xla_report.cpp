#include "reports/xla/xla_report.h"

#include <sstream>
#include <vector>

#include "user/text/numbers.h"
#include "user/text/text_table.h"
#include "user/text/utf8_text.h"

namespace lt {
namespace {

std::string ms_or_dash(const XlaCalls& c) {
  return c.timed ? ns_as_ms(static_cast<double>(c.ns), 3) : "-";
}

// "-" where no call was timed; "~" marks a sum over some of the calls only.
std::string time_cell(const XlaCalls& c) {
  if (!c.calls) return "0";
  std::string s = ms_or_dash(c);
  if (c.timed && c.timed < c.calls) s += " (" + std::to_string(c.timed) + " timed)";
  return s;
}

// Bytes where torch_xla recorded them for every call; "~N" for some.
std::string bytes_cell(const XlaCalls& c) {
  if (!c.calls) return "0";
  if (!c.sized) return "-";
  return (c.sized < c.calls ? "~" : "") + std::to_string(c.bytes);
}

std::vector<std::string> row_cells(const std::string& name, const XlaRow& r) {
  return {name,
          std::to_string(r.compiles.calls),
          time_cell(r.compiles),
          std::to_string(r.executions.calls),
          time_cell(r.executions),
          std::to_string(r.to_device.calls),
          std::to_string(r.to_device.tensors),
          bytes_cell(r.to_device),
          time_cell(r.to_device),
          std::to_string(r.from_device.calls),
          std::to_string(r.from_device.tensors),
          bytes_cell(r.from_device),
          time_cell(r.from_device),
          std::to_string(r.mark_steps)};
}

}  // namespace

std::string render_xla_report(const XlaReport& rep, const XlaRenderOptions& opt) {
  std::ostringstream out;
  out << "XLA (torch_xla runtime calls while attached, counted at their entry)\n";
  out << "Counts are exact; times are torch_xla's own timers (CompileTime, ExecuteTime, TransferToDeviceTime, "
         "TransferFromDeviceTime) as they ended while attached, '-' where none ended.\n";
  if (rep.procs.empty()) {
    out << "\nNo torch_xla runtime calls (XLA probes off, no torch_xla in the target, or no call while attached).\n";
    return out.str();
  }
  for (const auto& [pid, p] : rep.procs) {
    out << "\n"
        << process_title(pid, opt.actions) << ": torch_xla " << (p.version.empty() ? "(version unknown)" : p.version)
        << ", PJRT device " << (p.device.empty() ? "unknown" : p.device) << "\n";
    std::vector<std::vector<std::string>> rows{{"action", "compiles", "compile (ms)", "executions", "execute (ms)",
                                                "to device", "tensors", "bytes", "to device (ms)", "from device",
                                                "tensors", "bytes", "from device (ms)", "step marks"}};
    for (const auto& r : p.actions)
      if (!r.empty()) rows.push_back(row_cells(utf8_text(r.action), r));
    rows.push_back(row_cells("total", p.total));
    TextTable{rows, "l"}.write(out);
    out << "  (compiles: uncached ones, torch_xla looked each graph up in its cache first; executions: graphs run; "
           "bytes: torch_xla's own count of each transfer (OutboundData, InboundData), '~' where some are missing; "
           "a call is charged to the innermost action open on its thread at its entry)\n";

    // torch_xla looks every graph up before it runs it: each execution is a
    // cache hit (CachedCompile) or follows its uncached compile.
    const std::uint64_t hits =
        p.total.executions.calls > p.total.compiles.calls ? p.total.executions.calls - p.total.compiles.calls : 0;
    out << "  compiles: " << p.total.compiles.calls << ", recompilations: " << p.recompiles()
        << ", graph cache hits: " << hits << " (executions - compiles)\n";
    if (!p.compiles.empty()) {
      std::vector<std::vector<std::string>> c{{"step", "at (s)", "compile (ms)", "action", ""}};
      for (const auto& x : p.compiles) {
        const double at = rep.window_begin_ns && x.ts_ns >= rep.window_begin_ns
                              ? static_cast<double>(x.ts_ns - rep.window_begin_ns) / 1e9
                              : -1.0;
        c.push_back({std::to_string(x.step + 1), at >= 0 ? fixed(at, 3) : "-",
                     x.ns ? ns_as_ms(static_cast<double>(x.ns), 3) : "-", utf8_text(x.action),
                     x.recompile ? "recompilation" : ""});
      }
      TextTable{c, "rrrl"}.write(out, "    ");
      out << "    (step: XLA steps, counted by torch_xla's step marks since the attach; at: seconds since the attach; "
             "a recompilation is a compile in an action that had run its graphs before, after a step that "
             "compiled nothing)\n";
      if (p.compiles_dropped) out << "    (" << p.compiles_dropped << " more compiles, past the list's bound)\n";
    }
    if (!p.timers.empty()) {
      out << "  torch_xla's timers that ended while attached:";
      bool first = true;
      for (const auto& [name, n] : p.timers) {
        out << (first ? " " : ", ") << utf8_text(name) << " " << n;
        first = false;
      }
      out << "\n";
    }
    if (p.values_lost)
      out << "  (" << p.values_lost << " transfer byte counts that could not be read back from the target)\n";
    if (p.ends_unpaired)
      out << "  (" << p.ends_unpaired << " timer ends of calls that began before the attach: not in the times)\n";
  }
  return out.str();
}

}  // namespace lt
