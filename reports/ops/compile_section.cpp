#include "reports/ops/compile_section.h"

#include <map>

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
  // A graph break leaves the rest of the function to a resume function that
  // Dynamo compiles as a frame of its own: one per break that ran.
  std::map<unsigned, std::string> breaks;
  for (const auto& r : p.regions)
    if (r.function.find(" [after graph break] (") != std::string::npos) breaks.emplace(r.frame, r.function);
  if (!breaks.empty()) {
    s += "Graph breaks seen (a frame resuming a function after a break): " + std::to_string(breaks.size()) + "\n";
    for (const auto& [frame, function] : breaks)
      s += "  frame " + std::to_string(frame) + ": " + function + " (file:line = where it resumes)\n";
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
