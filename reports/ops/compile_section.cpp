#include "reports/ops/compile_section.h"

#include <cstdio>
#include <map>

#include "user/text/numbers.h"

namespace lt {

namespace {
std::string since(std::uint64_t ts, std::uint64_t begin) {
  if (!begin || ts < begin) return "?";
  return "+" + fixed((ts - begin) / 1e9, 3) + " s";
}
std::string id(unsigned frame, unsigned compile) {
  return std::to_string(frame) + "/" + std::to_string(compile);
}
constexpr const char* kNoLog =
    "no compile log was read: torch without torch._dynamo.utils._compilation_metrics, or the process ended first";
constexpr const char* kNotInLog = "Dynamo keeps its newest 64 compiles";

// A name from the trace on one line: control characters (a newline would
// fake a report line) as \xNN.
std::string flat(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A reason on one line: Dynamo's texts run over several ("Call to ...\n
// Explanation: ...\n  Hint: ..."); the first line and the explanation say it.
std::string one_line(const std::string& text) {
  std::string out;
  std::size_t at = 0;
  for (int line = 0; at <= text.size(); ++line) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string l = text.substr(at, nl - at);
    at = nl + 1;
    const auto b = l.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    l = l.substr(b);
    if (out.empty())
      out = l;
    else if (l.rfind("Explanation:", 0) == 0)
      out += " -- " + l.substr(12 + (l.size() > 12 && l[12] == ' '));
    if (line > 8) break;
  }
  return flat(out);
}

// Dynamo's own record: every compile it kept (before the attach too), and
// the graph breaks it met, including those met only while compiling.
std::string render_dynamo_log(const CompilesProcess& p, std::uint64_t begin) {
  std::string s;
  if (!p.compiles.empty()) {
    s += "Compiles Dynamo recorded (its newest 64, read from torch._dynamo.utils._compilation_metrics): " +
         std::to_string(p.compiles.size()) + "\n";
    s += "  Id      Started      Took  Breaks  Function / reason\n";
    for (const auto& c : p.compiles) {
      auto pad = [](std::string v, std::size_t w, bool right) {
        if (v.size() >= w) return v;
        return right ? std::string(w - v.size(), ' ') + v : v + std::string(w - v.size(), ' ');
      };
      const std::string started = c.start_ns > 0 && begin && static_cast<std::uint64_t>(c.start_ns) < begin
                                      ? "-" + fixed((begin - static_cast<std::uint64_t>(c.start_ns)) / 1e9, 3) + " s"
                                  : c.start_ns > 0 ? since(static_cast<std::uint64_t>(c.start_ns), begin)
                                                   : "?";
      s += "  " + pad(c.id.empty() ? "?" : c.id, 6, false) + pad(started, 11, true) + "  " +
           pad(c.duration_us >= 0 ? fixed(c.duration_us / 1e6, 3) + " s" : "?", 9, true) + "  " +
           pad(c.graph_breaks >= 0 ? std::to_string(c.graph_breaks) : "-", 6, true) + "  " +
           (c.function.empty() ? "?" : flat(c.function)) + "\n";
      s += "                                        " +
           (c.reason.empty() ? std::string("first compile of this frame") : "recompiled: " + one_line(c.reason)) + "\n";
      if (!c.failure.empty()) s += "                                        failed: " + one_line(c.failure) + "\n";
    }
    s += "  (Started: from the attach, on the wall clock; negative = before it.  Breaks: graph breaks in the "
         "compile, - = not recorded)\n";
  }
  if (!p.graph_breaks.empty()) {
    s += "Graph breaks Dynamo met (times since the process began, torch._dynamo.utils.counters; "
         "while compiling, so also those in calls it could not inline): " +
         std::to_string(p.graph_breaks.size()) + "\n";
    for (const auto& b : p.graph_breaks) {
      std::string n = std::to_string(b.count);
      s += "  " + std::string(n.size() < 6 ? 6 - n.size() : 0, ' ') + n + "  " + one_line(b.reason) + "\n";
    }
  }
  return s;
}
}  // namespace

std::string render_compile_section(std::uint32_t pid, const CompilesProcess& p, std::uint64_t begin) {
  if (p.regions.empty() && p.compiles.empty() && !p.graph_replays_outside) return "";
  std::string s = "\ntorch.compile (pid " + std::to_string(pid) + "): compiled regions run while attached\n";
  s += "  Region                              Calls  First run  Function\n";
  for (const auto& r : p.regions) {
    std::string name = "Torch-Compiled Region: " + id(r.frame, r.compile);
    name.resize(std::max<std::size_t>(name.size(), 34), ' ');
    std::string calls = std::to_string(r.calls);
    std::string first = since(r.first_ns, begin);
    first.resize(std::max<std::size_t>(first.size(), 9), ' ');
    s += "  " + name + std::string(calls.size() < 7 ? 7 - calls.size() : 0, ' ') + calls + "  " + first + "  " +
         (r.function.empty() ? "?" : flat(r.function)) + "\n";
  }
  std::uint64_t replays = p.graph_replays_outside;
  for (const auto& r : p.regions) replays += r.graph_replays;
  if (replays) {
    s += "CUDA graphs replayed (cudaGraphLaunch; their kernels joined by CUPTI correlation id):\n";
    s += "  Region                            Replays  Kernels  Kernel time\n";
    auto row = [&](std::string name, std::uint64_t n, std::uint64_t k, std::string t) {
      name.resize(std::max<std::size_t>(name.size(), 32), ' ');
      std::string a = std::to_string(n), b = std::to_string(k);
      s += "  " + name + std::string(a.size() < 9 ? 9 - a.size() : 0, ' ') + a +
           std::string(b.size() < 9 ? 9 - b.size() : 0, ' ') + b + (t.empty() ? "" : "  " + t) + "\n";
    };
    for (const auto& r : p.regions)
      if (r.graph_replays)
        row("Torch-Compiled Region: " + id(r.frame, r.compile), r.graph_replays, r.graph_kernels,
            fixed(r.graph_kernel_ns / 1e6, 3) + " ms");
    if (p.graph_replays_outside) row("outside compiled regions", p.graph_replays_outside, p.graph_kernels_outside, "");
  }
  // A graph break leaves the rest of the function to a resume function that
  // Dynamo compiles as a frame of its own: one per break that ran.
  std::map<unsigned, std::string> breaks;
  for (const auto& r : p.regions)
    if (r.function.find(" [after graph break] (") != std::string::npos) breaks.emplace(r.frame, r.function);
  if (!breaks.empty()) {
    s += "Graph breaks seen (a frame resuming a function after a break): " + std::to_string(breaks.size()) + "\n";
    for (const auto& [frame, function] : breaks)
      s += "  frame " + std::to_string(frame) + ": " + flat(function) + " (file:line = where it resumes)\n";
  }
  s += "Recompilations seen while attached: " + std::to_string(p.recompiles.size()) + "\n";
  std::map<std::string, unsigned> per_action;
  for (const auto& c : p.recompiles) {
    const DynamoCompileNote* note = c.note >= 0 ? &p.compiles[static_cast<std::size_t>(c.note)] : nullptr;
    s += "  " + since(c.at_ns, begin) + "  frame " + std::to_string(c.frame) +
         (c.function.empty() ? "" : " (" + flat(c.function) + ")") + " recompiled" +
         (c.action.empty() ? "" : " in " + flat(c.action)) + ": graph " + id(c.frame, c.compile) +
         " first ran after graph " + id(c.frame, c.after) + "\n";
    ++per_action[c.action.empty() ? "(no action)" : flat(c.action)];
    if (note && !note->reason.empty())
      s += "    reason (Dynamo's recompile_reason): " + one_line(note->reason) + "\n";
    else if (note)
      s += "    reason: Dynamo recorded none for this compile\n";
    else
      s += "    reason: not in what Dynamo kept (" + std::string(p.compiles.empty() ? kNoLog : kNotInLog) + ")\n";
    if (note && note->duration_us >= 0) s += "    the compile took " + fixed(note->duration_us / 1e6, 3) + " s\n";
    if (!c.kernels.empty()) {
      s += "    new kernels:";
      for (const auto& k : c.kernels) s += " " + flat(k);
      s += "\n";
    }
  }
  if (!per_action.empty() && !(per_action.size() == 1 && per_action.count("(no action)"))) {
    s += "Recompilations per Lightning action:";
    for (const auto& [action, n] : per_action) s += " " + action + " " + std::to_string(n) + ";";
    s.back() = '\n';
  }
  s += render_dynamo_log(p, begin);
  return s;
}

}  // namespace lt
