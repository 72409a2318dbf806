#include "user/cli/stack_output.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "reports/flame/collapsed.h"
#include "reports/flame/flamegraph_svg.h"
#include "reports/flame/named_profile.h"
#include "reports/flame/speedscope.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"

namespace lt {

std::string offcpu_sibling(const std::string& path, const char* tag) {
  std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + tag + p.extension().string())).string();
}

namespace {

enum class Which { on_cpu, off_cpu, gpu };

std::vector<NamedProfile> named(const StacksReport& stacks, Which which, const std::string& prefix = "") {
  std::vector<NamedProfile> out;
  const bool many = stacks.processes.size() > 1;
  for (const auto& p : stacks.processes)
    for (const auto& prof : which == Which::off_cpu ? p.off_cpu : which == Which::gpu ? p.gpu : p.on_cpu)
      out.push_back({prefix + (many ? "pid " + std::to_string(p.pid) + ": " : "") + prof.name, &prof});
  return out;
}

}  // namespace

void write_stack_exports(const StacksReport& stacks, const StackOutputPaths& paths) {
  auto on = named(stacks, Which::on_cpu), off = named(stacks, Which::off_cpu), gpu = named(stacks, Which::gpu);
  const std::string rate = stacks.rate_hz ? std::to_string(stacks.rate_hz) + " Hz" : "no sampling";
  if (!paths.collapsed.empty()) {
    write_output(paths.collapsed, [&](std::ostream& f) { write_collapsed(on, f); });
    if (!off.empty())
      write_output(offcpu_sibling(paths.collapsed, ".offcpu"), [&](std::ostream& f) { write_collapsed(off, f); });
    if (!gpu.empty())
      write_output(offcpu_sibling(paths.collapsed, ".gpu"), [&](std::ostream& f) { write_collapsed(gpu, f); });
  }
  if (!paths.flamegraph.empty()) {
    write_output(paths.flamegraph, [&](std::ostream& f) {
      write_flamegraph_svg(on, "ltrace-bpf: on-CPU Python stacks per Lightning action (" + rate + ")", "samples", f);
    });
    if (!off.empty())
      write_output(offcpu_sibling(paths.flamegraph, ".offcpu"), [&](std::ostream& f) {
        write_flamegraph_svg(off, "ltrace-bpf: off-CPU (blocked) Python stacks per Lightning action", "ns", f);
      });
    if (!gpu.empty())
      write_output(offcpu_sibling(paths.flamegraph, ".gpu"), [&](std::ostream& f) {
        write_flamegraph_svg(gpu, "ltrace-bpf: GPU kernel time by launching Python stack, per Lightning action", "ns",
                             f);
      });
  }
  if (!paths.speedscope.empty()) {
    auto all = on;
    for (auto& n : named(stacks, Which::off_cpu, "off-CPU: ")) all.push_back(n);
    for (auto& n : named(stacks, Which::gpu, "GPU: ")) all.push_back(n);
    write_output(paths.speedscope, [&](std::ostream& f) { write_speedscope(all, f); });
  }
}

}  // namespace lt
