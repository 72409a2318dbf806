#include "reports/export/xla_section.h"

#include <algorithm>
#include <string>

#include "user/text/json_escape.h"
#include "user/text/numbers.h"

namespace lt {
namespace {

constexpr double kW = 900, kH = 140, kPad = 48;

// SVG coordinates and labels: one decimal (user/text/numbers.h).
std::string num(double v) {
  return fixed(v, 1);
}

}  // namespace

void write_xla_section(const XlaReport& rep, std::ostream& out) {
  if (rep.empty()) return;
  out << "<section id=\"xla\"><h2>XLA</h2>\n";
  for (const auto& [pid, p] : rep.procs) {
    const XlaRow& t = p.total;
    out << "<div class=\"xla-process\" data-pid=\"" << pid << "\" data-compiles=\"" << t.compiles.calls
        << "\" data-recompiles=\"" << p.recompiles() << "\" data-compile-ns=\"" << t.compiles.ns
        << "\" data-executions=\"" << t.executions.calls << "\">\n";
    out << "<h4>pid " << pid << ": torch_xla " << html_escape(p.version.empty() ? "?" : p.version) << ", PJRT device "
        << html_escape(p.device.empty() ? "?" : p.device) << " &mdash; " << t.compiles.calls << " compiles ("
        << ns_as_ms(static_cast<double>(t.compiles.ns), 1) << " ms), " << p.recompiles() << " recompilation(s), "
        << t.executions.calls << " executions (" << ns_as_ms(static_cast<double>(t.executions.ns), 1) << " ms), "
        << t.mark_steps << " step marks</h4>\n";
    if (p.compiles.empty()) {
      out << "<p class=\"note\">No compile while attached: every graph came from torch_xla's cache.</p>\n</div>\n";
      continue;
    }
    // Compile time over the run: x = the XLA step (step marks since the
    // attach), a bar per compile (several in one step side by side).
    std::uint64_t last_step = 0, top_ns = 1;
    for (const auto& c : p.compiles) {
      last_step = std::max(last_step, c.step + 1);
      top_ns = std::max(top_ns, c.ns);
    }
    // The axis runs over every step marked while attached (the compiles'
    // steps are where the graphs changed; the rest reused them).
    last_step = std::max(last_step, t.mark_steps);
    const double steps = static_cast<double>(std::max<std::uint64_t>(last_step, 1));
    const double slot = (kW - kPad - 4) / steps;
    out << "<p class=\"note\">Compile time per XLA step: one bar per uncached compile, recompilations in red "
           "(a compile in an action that had run its graphs, after a step that compiled nothing).</p>\n";
    out << "<svg class=\"chart xla-compiles\" width=\"" << kW << "\" height=\"" << kH + 20 << "\" role=\"img\">\n";
    for (double q : {0.0, 0.5, 1.0}) {
      const double y = 4 + (kH - 8) * (1 - q);
      out << "<line class=\"grid\" x1=\"" << kPad << "\" x2=\"" << kW << "\" y1=\"" << num(y) << "\" y2=\"" << num(y)
          << "\"/><text x=\"2\" y=\"" << num(y + 4) << "\">" << num(static_cast<double>(top_ns) * q / 1e6) << "</text>";
    }
    std::uint64_t prev_step = ~std::uint64_t{0};
    int in_step = 0;
    for (const auto& c : p.compiles) {
      in_step = c.step == prev_step ? in_step + 1 : 0;
      prev_step = c.step;
      const double h = (kH - 8) * static_cast<double>(c.ns) / static_cast<double>(top_ns);
      const double w = std::max(2.0, slot * 0.8 / 3);
      const double x = kPad + static_cast<double>(c.step) * slot + std::min(in_step, 2) * w;
      out << "<g class=\"bar\" data-step=\"" << c.step + 1 << "\" data-ns=\"" << c.ns << "\" data-recompile=\""
          << (c.recompile ? 1 : 0) << "\"><rect x=\"" << num(x) << "\" y=\"" << num(4 + (kH - 8) - h) << "\" width=\""
          << num(w) << "\" height=\"" << num(std::max(h, 1.0)) << "\" fill=\"" << (c.recompile ? "#d33" : "#4a90d9")
          << "\"/><title>step " << c.step + 1 << ": " << ns_as_ms(static_cast<double>(c.ns), 3) << " ms in "
          << html_escape(c.action) << (c.recompile ? " (recompilation)" : "") << "</title></g>\n";
    }
    out << "<text x=\"" << kPad << "\" y=\"" << kH + 14 << "\">step 1</text><text x=\"" << num(kW - 60) << "\" y=\""
        << kH + 14 << "\">step " << last_step << "</text></svg>\n";
    out << "<table class=\"xla-compiles\"><tr><th>step</th><th>compile (ms)</th><th>action</th><th></th></tr>\n";
    for (const auto& c : p.compiles)
      out << "<tr" << (c.recompile ? " class=\"recompile\"" : "") << "><td>" << c.step + 1 << "</td><td>"
          << (c.ns ? ns_as_ms(static_cast<double>(c.ns), 3) : "-") << "</td><td>" << html_escape(c.action)
          << "</td><td>" << (c.recompile ? "recompilation" : "") << "</td></tr>\n";
    out << "</table>\n</div>\n";
  }
  out << "</section>\n";
}

}  // namespace lt
