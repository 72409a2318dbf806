// `ltrace-bpf diff A B` / `diff A1 A2 ... --vs B1 B2 ...`: what changed from
// A's recordings to B's (reports/diff/step_diff.h), as a table; with
// --fail-if-slower PCT, exit 17 when B's train step is significantly slower
// by PCT % or more. With --html FILE, the table and a differential flame
// graph of the train steps' stacks as one page (reports/diff/diff_html.h).
#include <cstdio>
#include <iostream>
#include <set>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/aggregate/device_stats.h"
#include "reports/aggregate/gpu.h"
#include "reports/diff/cpu_wait.h"
#include "reports/diff/diff_flame.h"
#include "reports/diff/diff_html.h"
#include "reports/diff/job_identity.h"
#include "reports/diff/step_diff.h"
#include "user/cli/builtin.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/tracefile/trace_reader.h"

namespace lt {
namespace {

// One recording: its actions, op calls, stack samples and c10d calls,
// every interval kept.
struct Run {
  ActionsReport actions;
  OpCalls ops;
  LineSamples lines;
  CommReport comm;
  GpuReport gpu;
  DeviceStatsReport stats;  // the /proc samples: each side's wait for a CPU
};

// The table's "of A's step" for the step row: its change of the mean per
// step, as a share of A's.
double step_pct_of_mean(const DiffRow& step) {
  return step.per_step_a > 0 ? 100 * (step.per_step_b - step.per_step_a) / step.per_step_a : 0;
}

Run read_run_of(const std::string& path, bool& damaged);

// With two sides and several files, a refusal names its file (an audit:
// "empty input: not an ltrace-bpf trace file", of which of the two?).
Run read_run(const std::string& path, bool& damaged) {
  try {
    return read_run_of(path, damaged);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw Error(e.code(), path + ": " + what);
  }
}

Run read_run_of(const std::string& path, bool& damaged) {
  ActionAggregator agg(/*keep_intervals=*/true);
  CommAggregator comm(agg, CommAggregatorOptions{.keep_calls = true});
  GpuAggregator gpu(agg, /*keep_slices=*/true);
  DeviceStatsAggregator stats(agg);
  OpCalls ops;
  LineSamples lines(/*keep_stacks=*/true);  // stack rows, and --html's flame graph
  const auto r = tracefile::read_trace_file(
      path,
      [&](const lt_event_header& h, const std::byte* p) {
        agg.add(h, p);
        comm.add(h, p);  // right after the actions (it charges calls to the open action)
        gpu.add(h, p);
        stats.add(h, p);
        ops.add(h, p);
        lines.add(h, p);
      },
      [&agg](const tracefile::DamagedRange&) { agg.gap(); });
  for (const auto& w : r.warnings) std::cerr << "ltrace-bpf: " << path << ": " << w << "\n";
  // A file cut inside a chunk (a killed recorder, a copy cut short) lost
  // its last records: `report` reads it with a warning, but a regression
  // gate must not pass on part of a recording.
  damaged |= r.data_lost() || r.bytes_cut > 0;
  CommReport calls = comm.finish();
  GpuReport kernels = gpu.finish();
  DeviceStatsReport samples = stats.finish();
  return Run{agg.finish(), std::move(ops), std::move(lines), std::move(calls), std::move(kernels), std::move(samples)};
}

// Appends another trace's names and the items that index them (op calls,
// line samples), each index moved past the names already there.
template <class Item>
void append_rebased(std::vector<std::string>& names, std::vector<Item>& items,
                    const std::vector<std::string>& more_names, const std::vector<Item>& more,
                    std::uint32_t Item::*index) {
  const auto base = static_cast<std::uint32_t>(names.size());
  names.insert(names.end(), more_names.begin(), more_names.end());
  for (Item it : more) {
    it.*index += base;
    items.push_back(it);
  }
}

// A side's name in the table: its file, or its first and last; and the
// part of them compared.
std::string label(const std::vector<std::string>& files, const ExportRange& r, int rank) {
  std::string s = files.size() == 1 ? files[0] : files.front() + " ... " + files.back();
  if (rank >= 0) s += " rank " + std::to_string(rank);
  char part[96] = "";
  if (r.kind == ExportRange::Kind::steps)
    std::snprintf(part, sizeof part, " steps %u-%u", r.first_step, r.last_step);
  else if (r.kind == ExportRange::Kind::window)
    std::snprintf(part, sizeof part, " %g-%g s after attach", r.start_s, r.end_s);
  return s + part;
}

}  // namespace

void check_diff(Options& o) {
  if (!o.diff_vs) {
    if (o.diff_b_rank >= 0 && o.diff_b.empty()) {
      o.diff_b = o.diff_a;  // two ranks of the same traces
      return;
    }
    if (o.diff_a.size() == 1 && o.diff_b_range) {
      o.diff_b = o.diff_a;  // two parts of one trace
      return;
    }
    if (o.diff_a.size() != 2)
      throw Error(ExitCode::usage,
                  "diff needs two trace files: ltrace-bpf diff A B (or several a side: A1 A2 ... --vs B1 B2 ...; "
                  "or one trace and --vs-steps / --vs-window; or the traces of a job and --vs-rank)");
    o.diff_b.push_back(o.diff_a.back());
    o.diff_a.pop_back();
  } else if (o.diff_a.empty()) {
    throw Error(ExitCode::usage, "diff: no trace before --vs (ltrace-bpf diff A1 A2 ... --vs B1 B2 ...)");
  }
}

int cmd_diff(Options& opts) {
  bool damaged = false;
  // A's part of each trace is --steps / --window (all by default); B's is
  // --vs-steps / --vs-window, else the same as A's.
  const ExportRange range_b = opts.diff_b_range.value_or(opts.export_range);
  // A's rank is --rank (all by default); B's is --vs-rank, else A's. With
  // a rank chosen, a side's traces are one run: a job recorded per node.
  const int rank_b = opts.diff_b_rank >= 0 ? opts.diff_b_rank : opts.diff_rank;
  const bool html = !opts.html_path.empty();
  DiffFlameBuilder flame;
  // What each side holds, checked before anything is compared: a part that
  // matched nothing, or a trace of another job, would make a regression
  // gate pass or fail on nothing.
  struct Side {
    JobIdentity job;
    std::size_t intervals = 0;
    std::string matched;             // what its --steps / --window matched (the last file's)
    std::vector<std::string> notes;  // said once the side is known to hold something
  };
  Side side_a, side_b;
  CpuWait wait_a, wait_b;
  auto read_side = [&](const std::vector<std::string>& files, const ExportRange& range, int rank, const char* side,
                       Side& seen) {
    // What diff keeps of each run (its samples per row); a recording itself
    // (every interval, op call and sample) lives only while it is read: a
    // diff of two big traces holds one at a time.
    std::vector<DiffSamples> samples;
    auto keep = [&samples](const Run& run) {
      samples.push_back(collect_diff_samples({&run.actions, &run.ops, &run.lines, &run.comm, &run.gpu}));
    };
    std::vector<Run> out;  // a rank's run, merged from the files of its job's nodes
    for (const auto& f : files) {
      std::string matched;
      Run run = read_run(f, damaged);
      seen.job.add(run.actions);
      run.actions = within(std::move(run.actions), range, &matched);
      if (!matched.empty()) {
        seen.notes.push_back(std::string(side) + " = " + f + ": " + matched);
        seen.matched = matched;
      }
      const int side_index = side[0] == 'A' ? 0 : 1;
      if (rank < 0) {
        (side_index ? wait_b : wait_a) += cpu_wait_in_steps(run.actions, run.stats);
        for (const auto& p : run.actions.processes) seen.intervals += p.intervals.size();
        if (html) flame.add(side_index, run.actions, run.lines);
        keep(run);
        continue;
      }
      // A launcher's rank (Lightning's rank 0 has no RANK in its environment)
      // is its ranked children's, as the reports label it.
      std::vector<bool> of_rank;
      {
        const ProcessIndex index(run.actions);
        for (const auto& p : run.actions.processes) of_rank.push_back(index.with_rank_labels(p.meta).rank == rank);
      }
      std::vector<ProcessActions> kept_processes;
      for (std::size_t i = 0; i < of_rank.size(); ++i)
        if (of_rank[i]) kept_processes.push_back(std::move(run.actions.processes[i]));
      run.actions.processes = std::move(kept_processes);
      (side_index ? wait_b : wait_a) += cpu_wait_in_steps(run.actions, run.stats);
      // The rank's op calls and samples only: pids are unique within a
      // file, not across the files of a job's nodes.
      std::set<std::uint32_t> kept;
      for (const auto& p : run.actions.processes) kept.insert(p.meta.pid);
      std::erase_if(run.ops.calls, [&](const OpCalls::Call& c) { return !kept.count(c.pid); });
      std::erase_if(run.ops.probed_ranges, [&](const auto& r) { return !kept.count(r.first); });
      std::erase_if(run.ops.measured, [&](const auto& r) { return !kept.count(r.first); });
      std::erase_if(run.lines.samples, [&](const LineSamples::Sample& x) { return !kept.count(x.pid); });
      std::erase_if(run.comm.processes, [&](const ProcessComm& c) { return !kept.count(c.pid); });
      std::erase_if(run.gpu.slices, [&](const GpuSlice& g) { return !kept.count(g.pid); });
      if (html) flame.add(side_index, run.actions, run.lines);  // before the merge: its stacks index its names
      if (out.empty()) {
        out.push_back(std::move(run));
      } else {
        // A job recorded per node: one run, its op calls together (pids
        // apart: the steps of each process take its own).
        for (auto& p : run.actions.processes) out.front().actions.processes.push_back(std::move(p));
        auto& ops = out.front().ops;
        append_rebased(ops.names, ops.calls, run.ops.names, run.ops.calls, &OpCalls::Call::op);
        ops.probed |= run.ops.probed;
        // By pid, as the steps take them (a pid of two nodes' files: both
        // files' ranges, a refusal at worst).
        for (const auto& [pid, ranges] : run.ops.probed_ranges)
          ops.probed_ranges[pid].insert(ops.probed_ranges[pid].end(), ranges.begin(), ranges.end());
        for (const auto& [pid, spans] : run.ops.measured)
          ops.measured[pid].insert(ops.measured[pid].end(), spans.begin(), spans.end());
        auto& lines = out.front().lines;
        const auto line_base = static_cast<std::uint32_t>(lines.lines.size());
        const auto stack_base = static_cast<std::uint32_t>(lines.stacks.size());
        append_rebased(lines.lines, lines.samples, run.lines.lines, run.lines.samples, &LineSamples::Sample::line);
        // Its stacks too: their frames index its names, its samples its stacks.
        for (auto st : run.lines.stacks) {
          for (auto& f : st) f += line_base;
          lines.stacks.push_back(std::move(st));
        }
        for (std::size_t i = lines.samples.size() - run.lines.samples.size(); i < lines.samples.size(); ++i)
          lines.samples[i].stack += stack_base;
        if (!lines.period_ns) lines.period_ns = run.lines.period_ns;
        for (auto& c : run.comm.processes) out.front().comm.processes.push_back(std::move(c));
        auto& gpu = out.front().gpu;
        append_rebased(gpu.names, gpu.slices, run.gpu.names, run.gpu.slices, &GpuSlice::name);
      }
    }
    if (rank >= 0 && (out.empty() || out.front().actions.processes.empty()))
      // The traces' content, not the command line: the sides cannot be
      // compared, as with a part that holds no action.
      throw Error(ExitCode::not_comparable,
                  std::string("diff: no process of rank ") + std::to_string(rank) + " in " + side + "'s traces");
    if (rank >= 0) {
      for (const auto& p : out.front().actions.processes) seen.intervals += p.intervals.size();
      keep(out.front());
    }
    if (!seen.intervals) {
      const std::string part = range.all() ? "" : " in its part (" + seen.matched + ")";
      throw Error(ExitCode::not_comparable, std::string("diff: ") + side + " (" + files.front() +
                                                (files.size() > 1 ? " ..." : "") + ") holds no Lightning action" +
                                                part + ": nothing to compare");
    }
    for (const auto& n : seen.notes) std::cerr << "ltrace-bpf: diff: " << n << "\n";
    return samples;
  };
  std::vector<DiffSamples> a = read_side(opts.diff_a, opts.export_range, opts.diff_rank, "A", side_a);
  std::vector<DiffSamples> b = read_side(opts.diff_b, range_b, rank_b, "B", side_b);
  if (!opts.diff_any_job) {
    if (const std::string why = different_jobs(side_a.job, side_b.job); !why.empty())
      throw Error(ExitCode::not_comparable,
                  "diff: A and B are recordings of different jobs (" + why + "); --any-job compares them anyway");
  }
  const StepDiff d = diff_samples(std::move(a), std::move(b));
  const DiffRow* step = d.step();
  const char* no_steps_in = step && step->n_a ? "B" : "A";
  // A gate that cannot judge says so, before any table: it neither passes
  // nor fails.
  if (opts.fail_if_slower_pct >= 0 && (!step || !step->n_a || !step->n_b))
    throw Error(ExitCode::not_comparable,
                std::string("diff: no train steps in ") + no_steps_in + ": --fail-if-slower has no step time to judge");
  const std::string label_a = label(opts.diff_a, opts.export_range, opts.diff_rank),
                    label_b = label(opts.diff_b, range_b, rank_b);
  std::cout << render_step_diff(d, label_a, label_b) << render_cpu_wait(wait_a, wait_b, d);
  if (html) {
    const DiffFlame f = flame.finish();
    write_output(opts.html_path, [&](std::ostream& out) { write_diff_html(d, f, label_a, label_b, out); });
    if (f.empty())
      std::cerr << "ltrace-bpf: diff: no stack samples in the train steps: the page has no flame graph (record "
                   "with --report advanced)\n";
  }
  if (!d.no_op_rows.empty()) std::cerr << "ltrace-bpf: diff: no op rows: " << d.no_op_rows << "\n";
  if (!d.no_line_rows.empty()) std::cerr << "ltrace-bpf: diff: no line rows: " << d.no_line_rows << "\n";
  if (!d.no_stack_rows.empty()) std::cerr << "ltrace-bpf: diff: no stack rows: " << d.no_stack_rows << "\n";
  if (!d.no_collective_rows.empty())
    std::cerr << "ltrace-bpf: diff: no collective rows: " << d.no_collective_rows << "\n";
  if (!d.no_kernel_rows.empty()) std::cerr << "ltrace-bpf: diff: no kernel rows: " << d.no_kernel_rows << "\n";
  if (!step || !step->n_a || !step->n_b)
    std::cerr << "ltrace-bpf: diff: no train steps in " << no_steps_in << ": only the actions are compared\n";
  // A cut-short or damaged side: the gate does not judge part of a
  // recording, slower or not (an audit: a truncated B, its 10 early steps
  // slower, failed as a regression).
  if (opts.fail_if_slower_pct >= 0 && damaged) {
    std::cerr << "ltrace-bpf: diff: --fail-if-slower not judged: a trace was cut short or damaged (said above)\n";
    return static_cast<int>(ExitCode::damaged_trace);
  }
  if (opts.fail_if_slower_pct >= 0 && step && step->verdict > 0 && step->median_a > 0) {
    const double pct = 100 * step->test.shift / step->median_a;
    if (pct >= opts.fail_if_slower_pct) {
      // The shift (the median of B - A per step; per run over runs) is what
      // the gate judges, not the table's change of the mean, which an
      // outlier step moves.
      char line[320];
      std::snprintf(line, sizeof line,
                    "ltrace-bpf: diff: B's train step is slower: its shift %+.2f ms is %.2f %% of A's median step "
                    "(adjusted p %.2g), at least --fail-if-slower %g %% (the table's change per step, %+.2f %%, is "
                    "of the mean)\n",
                    step->test.shift * 1e3, pct, step->p_holm, opts.fail_if_slower_pct, step_pct_of_mean(*step));
      std::cerr << line;
      // Failed all the same: the wait may be the job's own doing (more
      // DataLoader workers or torch threads than cores).
      if (const double in_wait = shift_in_cpu_wait_ms(wait_a, wait_b, d))
        std::fprintf(stderr,
                     "ltrace-bpf: diff: of that shift, an estimated %+.2f ms per step is B's training loop waiting "
                     "for a CPU (A %.2f ms, B %.2f ms per step): other processes', or the job's own threads' load, "
                     "not time on a CPU\n",
                     in_wait, wait_a.per_step_ms(), wait_b.per_step_ms());
      return static_cast<int>(ExitCode::regression);
    }
  }
  return damaged ? static_cast<int>(ExitCode::damaged_trace) : 0;
}

}  // namespace lt
