#include "reports/steps/steps_report.h"

#include <numeric>
#include <sstream>

#include "reports/aggregate/steps.h"
#include "user/text/numbers.h"
#include "user/text/text_table.h"

namespace lt {
namespace {

std::string share(std::uint64_t part, std::uint64_t whole) {
  return whole ? percent(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) : "-";
}

std::uint64_t total_ns(const std::vector<StepRecord>& steps) {
  return std::accumulate(steps.begin(), steps.end(), std::uint64_t{0},
                         [](std::uint64_t s, const StepRecord& r) { return s + r.duration_ns(); });
}

void write_process(const ProcessSteps& s, const ActionsReport& rep, std::ostream& out) {
  TextTable t;
  t.align = "lr";
  std::vector<std::string> head{"stage", "steps", "p50 ms", "p90 ms", "p99 ms", "max ms", "slowest", "spikes"};
  for (std::size_t k = 0; k < kStepParts; ++k) head.push_back(step_part_name(static_cast<StepPart>(k)));
  t.rows.push_back(head);
  TextTable g;
  g.align = "l";
  g.rows.push_back({"stage", "kernel", "copy", "GPU idle"});
  for (const auto& [stage, steps] : stages_of(s)) {
    if (steps->empty()) continue;
    const StepStats st = step_stats(*steps);
    std::size_t slowest = 0;
    for (std::size_t i = 1; i < steps->size(); ++i)
      if ((*steps)[i].duration_ns() > (*steps)[slowest].duration_ns()) slowest = i;
    std::vector<std::string> row{stage,
                                 std::to_string(st.count),
                                 ns_as_ms(static_cast<double>(st.p50), 3),
                                 ns_as_ms(static_cast<double>(st.p90), 3),
                                 ns_as_ms(static_cast<double>(st.p99), 3),
                                 ns_as_ms(static_cast<double>(st.max), 3),
                                 std::to_string((*steps)[slowest].index),
                                 std::to_string(spike_indexes(*steps, st).size())};
    const std::uint64_t whole = total_ns(*steps);
    for (std::size_t k = 0; k < kStepParts; ++k) {
      std::uint64_t part = 0;
      for (const auto& r : *steps) part += r.part_ns[k];
      row.push_back(share(part, whole));
    }
    t.rows.push_back(std::move(row));
    std::uint64_t kernel = 0, copy = 0, idle = 0, with_gpu = 0;
    for (const auto& r : *steps)
      if (r.has_gpu) kernel += r.kernel_ns, copy += r.copy_ns, idle += r.gpu_idle_ns, with_gpu += r.duration_ns();
    if (with_gpu) g.rows.push_back({stage, share(kernel, with_gpu), share(copy, with_gpu), share(idle, with_gpu)});
  }
  out << "\n" << process_title(s.pid, &rep) << "\n";
  t.write(out);
  if (g.rows.size() > 1) {
    out << "  on the GPU, as shares of those steps' time:\n";
    g.write(out);
  }
}

}  // namespace

std::string render_steps_report(const ActionsReport& rep, const GpuReport* gpu) {
  std::ostringstream out;
  out << "Steps (each batch of a stage from its fetch to its last hook; measured times, and the share of each part "
         "by the innermost action running)\n";
  bool any = false;
  for (const ProcessActions& p : rep.processes) {
    const ProcessSteps s = numbered_as_the_job(step_records(p, gpu));
    if (!s.any()) continue;
    any = true;
    write_process(s, rep, out);
  }
  if (!any) out << "\nNo steps (no Lightning batch hooks seen while attached).\n";
  return out.str();
}

}  // namespace lt
