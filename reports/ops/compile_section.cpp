#include "reports/ops/compile_section.h"

#include "reports/format/numbers.h"

namespace lt {

namespace {
std::string since(std::uint64_t ts, std::uint64_t begin) {
  if (!begin || ts < begin) return "?";
  return "+" + fixed((ts - begin) / 1e9, 3) + " s";
}
std::string id(unsigned frame, unsigned compile) {
  return std::to_string(frame) + "/" + std::to_string(compile);
}
}  // namespace

std::string render_compile_section(std::uint32_t pid, const CompilesProcess& p, std::uint64_t begin) {
  if (p.regions.empty()) return "";
  std::string s = "\ntorch.compile (pid " + std::to_string(pid) + "): compiled regions run while attached\n";
  s += "  Region                              Calls  First run  Function\n";
  for (const auto& r : p.regions) {
    std::string name = "Torch-Compiled Region: " + id(r.frame, r.compile);
    name.resize(std::max<std::size_t>(name.size(), 34), ' ');
    std::string calls = std::to_string(r.calls);
    std::string first = since(r.first_ns, begin);
    first.resize(std::max<std::size_t>(first.size(), 9), ' ');
    s += "  " + name + std::string(calls.size() < 7 ? 7 - calls.size() : 0, ' ') + calls + "  " + first + "  " +
         (r.function.empty() ? "?" : r.function) + "\n";
  }
  s += "Recompilations seen while attached: " + std::to_string(p.recompiles.size()) + "\n";
  for (const auto& c : p.recompiles) {
    s += "  " + since(c.at_ns, begin) + "  frame " + std::to_string(c.frame) +
         (c.function.empty() ? "" : " (" + c.function + ")") + " recompiled: graph " + id(c.frame, c.compile) +
         " first ran after graph " + id(c.frame, c.after) +
         " (a guard of the graphs before it failed; reason: kept in the target's Python objects, not readable from "
         "outside; TORCH_LOGS=recompiles prints it in the target)\n";
    if (!c.kernels.empty()) {
      s += "    new kernels:";
      for (const auto& k : c.kernels) s += " " + k;
      s += "\n";
    }
  }
  return s;
}

}  // namespace lt
