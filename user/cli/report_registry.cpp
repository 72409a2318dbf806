#include "user/cli/report_registry.h"

#include <iostream>

#include "reports/comm/comm_report.h"
#include "reports/comm/comm_stacks_section.h"
#include "reports/comm/nccl_section.h"
#include "reports/gpu/device_stats_report.h"
#include "reports/memory/memory_report.h"
#include "reports/ops/compile_section.h"
#include "reports/steps/steps_report.h"
#include "reports/verdict/findings.h"
#include "reports/verdict/step_cause.h"
#include "reports/xla/xla_report.h"

namespace lt {

std::vector<Finding> verdict_findings(const ReportResults& r) {
  return find_issues(r.actions, &r.device_stats, &r.comm, &r.compiles, &r.gc, &r.logging, &r.gpu, &r.loader_waits);
}

namespace {

bool named(const Options& o, std::string_view name) {
  return o.wants_report(std::string(name));
}

void write_simple(const Options&, const ReportResults& r, const OutputOptions& out) {
  write_simple_reports(r.actions, out);
}

void write_advanced(const Options& o, const ReportResults& r, const OutputOptions& out) {
  write_advanced_reports(r.actions, r.stacks, out, o.line_count_restriction);
}

// PyTorchProfiler's tables, then a compiled job's regions and
// recompilations (the region rows come from the op probes;
// docs/design-compile.md).
void write_ops(const Options& o, const ReportResults& r, const OutputOptions& out) {
  write_ops_reports(r.actions, r.ops, out,
                    {o.sort_by, o.row_limit, o.group_by_input_shapes, o.profile_memory, o.memory_bytes, o.ops_records});
  for (const auto& [pid, p] : r.compiles.procs) std::cout << render_compile_section(pid, p, r.compiles.window_begin_ns);
}

void write_gpu(const Options&, const ReportResults& r, const OutputOptions&) {
  write_gpu_reports(r.actions, r.gpu);
}

void write_memory(const Options& o, const ReportResults& r, const OutputOptions&) {
  std::cout << render_memory_report(r.memory, {&r.actions, o.row_limit}) << "\n";
}

void write_comm(const Options&, const ReportResults& r, const OutputOptions&) {
  std::cout << render_comm_report(r.comm, {&r.actions}) << "\n";
  if (auto st = render_comm_stacks(r.comm_stacks, {&r.actions}); !st.empty()) std::cout << st << "\n";
  if (auto nc = render_nccl_section(r.nccl, {&r.actions}); !nc.empty()) std::cout << nc << "\n";
}

// Lightning's DeviceStatsMonitor keys per action, from --device-stats
// recordings.
void write_device_stats(const Options&, const ReportResults& r, const OutputOptions&) {
  std::cout << render_device_stats(r.device_stats, {&r.actions, {}, 0}) << "\n";
}

void write_steps(const Options&, const ReportResults& r, const OutputOptions&) {
  std::cout << render_steps_report(r.actions, &r.gpu) << "\n";
}

void write_verdict(const Options& o, const ReportResults& r, const OutputOptions&) {
  std::cout << render_findings(r.actions, verdict_findings(r), unjudged(&r.device_stats, &r.gc, &r.logging)) << "\n";
  if (o.why_step >= 0) std::cout << render_step_causes(r.actions, o.why_step, &r.device_stats) << "\n";
}

// torch_xla's compiles, executions and transfers (docs/design-xla.md).
void write_xla(const Options&, const ReportResults& r, const OutputOptions&) {
  std::cout << render_xla_report(r.xla, {&r.actions}) << "\n";
}

void write_cuda_memory(const Options&, const ReportResults& r, const OutputOptions&) {
  if (auto cuda = render_cuda_memory_stats(r.memory, {&r.actions}); !cuda.empty()) std::cout << cuda << "\n";
}

constexpr ReportEntry kReports[] = {
    // What is wrong, ranked by step time at stake (reports/verdict/findings.h): first.
    // The c10d probes for the collective-bound and straggler findings; the
    // gc probes for the GC one; stack samples for the logging one; the
    // DataLoader workers' waits for the input-bound one; /proc samples for
    // memory growth and CPU contention.
    {.name = "verdict",
     .help = "what is wrong, ranked by train step time at stake, with evidence and what to try (printed first)",
     .sources =
         {.stacks = true, .comm = true, .gc = true, .fork_waits = true, .proc_samples = true, .untraced_forks = true},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "verdict"); },
     .write = write_verdict,
     .keeps_intervals = true},
    {.name = "simple",
     .help = "SimpleProfiler's table per action (the default)",
     .sources = {},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "simple"); },
     .write = write_simple},
    {.name = "advanced",
     .help = "where each action's time went, by Python function (AdvancedProfiler's layout, from sampled stacks)",
     .sources = {.stacks = true},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "advanced"); },
     .write = write_advanced},
    // --ops, --profile-memory and --module-names ask for it too.
    {.name = "ops",
     .help = "PyTorchProfiler's operator table per step function (exact calls; CPU times measured by the op "
             "observer in the job, else sampled estimates)",
     .sources = {.ops = true},
     .printed = [](const Options& o, const ReportResults&) { return o.wants_ops(); },
     .write = write_ops},
    // Also by default whenever a target used CUDA.
    {.name = "gpu",
     .help = "kernel, copy, CUDA API and NVTX summaries (nsys stats layout) and GPU time per action; shown by "
             "default when the targets used CUDA",
     .sources = {},
     .printed = [](const Options& o,
                   const ReportResults& r) { return named(o, "gpu") || (!o.report_given && r.gpu.any()); },
     .write = write_gpu},
    // The op and the Python stack of each allocation.
    {.name = "memory",
     .help = "bytes allocated and freed and peak live bytes per action and device (CPU, each CUDA device), "
             "allocations still alive at the end by op and allocating line, out-of-memory events",
     .sources = {.ops = true, .memory = true, .memory_stacks = true},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "memory"); },
     .write = write_memory},
    {.name = "comm",
     .help = "every c10d collective and point-to-point call per rank, by kind and message size (nccl-tests' "
             "layout) and per action",
     .sources = {.comm = true},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "comm"); },
     .write = write_comm},
    // Each stage's steps: percentiles, spikes, the share of each part.
    {.name = "steps",
     .help = "each stage's step times (p50, p90, p99, max, spikes) and the share of dataloader, step, backward, "
             "optimizer and hooks in them, measured",
     .sources = {},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "steps"); },
     .write = write_steps,
     .keeps_intervals = true},
    // torch_xla's compiles, executions, transfers (docs/design-xla.md).
    {.name = "xla",
     .help = "torch_xla's uncached compiles, graph executions, host-device transfers and step marks per action, "
             "with torch_xla's own timers and the recompilations",
     .sources = {.xla = true},
     .printed = [](const Options& o, const ReportResults&) { return named(o, "xla"); },
     .write = write_xla},
    {.name = "",
     .help = "",
     .sources = {},
     // Samples taken for the verdict alone print no report of their own.
     .printed =
         [](const Options& o, const ReportResults& r) {
           return !r.device_stats.processes.empty() && (!r.device_stats.for_verdict || o.device_stats);
         },
     .write = write_device_stats},
    {.name = "",
     .help = "",
     .sources = {},
     .printed = [](const Options& o, const ReportResults&) { return o.device_stats; },
     .write = write_cuda_memory},
};

}  // namespace

std::span<const ReportEntry> report_entries() {
  return kReports;
}

bool is_report_name(std::string_view name) {
  for (const auto& e : kReports)
    if (!e.name.empty() && e.name == name) return true;
  return false;
}

std::string report_names_text() {
  std::string s;
  for (const auto& e : kReports)
    if (!e.name.empty()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string report_help_text() {
  std::string s, names;
  for (const auto& e : kReports) {
    if (e.name.empty()) continue;
    s += (s.empty() ? "" : "; ") + std::string(e.name) + ": " + std::string(e.help);
    names += (names.empty() ? "" : ",") + std::string(e.name);
  }
  return s + "; several at once: " + names;
}

ReportSources report_sources(const Options& opts) {
  ReportSources s;
  for (const auto& e : kReports) {
    if (e.name.empty() || !named(opts, e.name)) continue;
    s |= e.sources;
  }
  return s;
}

bool reports_keep_intervals(const Options& opts) {
  for (const auto& e : kReports)
    if (!e.name.empty() && e.keeps_intervals && named(opts, e.name)) return true;
  return false;
}

void write_reports(const Options& opts, const ReportResults& results, const OutputOptions& out) {
  for (const auto& e : kReports)
    if (e.printed(opts, results)) e.write(opts, results, out);
}

}  // namespace lt
