#include "reports/comm/comm_stacks_section.h"

#include <sstream>

#include "user/text/utf8_text.h"

namespace lt {

namespace {

constexpr std::size_t kMaxStacksShown = 20;  // per process
constexpr std::size_t kMaxFramesShown = 12;  // per stack, innermost first

std::string frame_line(const StackFrame& f) {
  std::string s = utf8_text(f.native ? f.function : python_function_name(f.function));
  if (!f.file.empty()) {
    s += " (" + utf8_text(f.file);
    if (f.line > 0) s += ":" + std::to_string(f.line);
    s += ")";
  }
  return s;
}

}  // namespace

std::string render_comm_stacks(const CommStacksReport& rep, const CommRenderOptions& opt) {
  if (rep.processes.empty()) return "";
  std::ostringstream out;
  out << "Collectives by Python stack (--launch-stacks: the calling thread's stack at each call's entry; exact "
         "counts)\n";
  for (const ProcessCommStacks& p : rep.processes) {
    out << "\n" << process_title(p.pid, opt.actions) << ": " << p.calls << " calls with a stack";
    if (p.calls_without) out << ", " << p.calls_without << " without (not taken, or its record was lost)";
    out << "\n";
    std::size_t shown = 0;
    for (const CommStackRow& r : p.rows) {
      if (shown++ == kMaxStacksShown) {
        out << "  ... " << p.rows.size() - kMaxStacksShown << " more stacks\n";
        break;
      }
      out << "  " << comm_kind_name(r.kind) << ": " << r.calls << " calls, " << r.bytes << " bytes\n";
      if (r.stack.empty()) out << "    [no Python frames]\n";
      std::size_t n = 0;
      for (auto it = r.stack.rbegin(); it != r.stack.rend(); ++it) {
        if (n++ == kMaxFramesShown) {
          out << "    ... " << r.stack.size() - kMaxFramesShown << " more frames\n";
          break;
        }
        out << "    " << frame_line(*it) << "\n";
      }
    }
    if (p.rows_dropped) out << "  (" << p.rows_dropped << " calls of stacks past the bound: in no row)\n";
  }
  return out.str();
}

}  // namespace lt
