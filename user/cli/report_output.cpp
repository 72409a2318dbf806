#include "user/cli/report_output.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unordered_set>

#include "bpf/opobserver_shm.h"
#include "reports/advanced/advanced_report.h"
#include "reports/gpu/gpu_actions.h"
#include "reports/gpu/gpu_tables.h"
#include "reports/ops/op_table.h"
#include "reports/ops/records_table.h"
#include "reports/simple/simple_report.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/model/record_kinds.h"
#include "user/proc/container.h"
#include "user/text/numbers.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

std::string describe(const ProcessMeta& m) {
  std::string s = "pid " + std::to_string(m.pid);
  if (m.rank >= 0) s += " rank " + std::to_string(m.rank);
  if (m.local_rank >= 0) s += " local_rank " + std::to_string(m.local_rank);
  if (m.world_size >= 0) s += " world_size " + std::to_string(m.world_size);
  if (m.container_flags) s += " in container " + proc::describe_container(m.container_host, m.container_id, m.ns_pid);
  if (!m.cmdline.empty()) s += ": " + m.cmdline;
  return s;
}

const char* cause_name(std::uint16_t cause) {
  switch (cause) {
    case LT_LOSS_RINGBUF_FULL:
      return "ring buffer full";
    case LT_LOSS_READ_FAULT:
      return "sent with an unreadable name or stack";
    case LT_LOSS_UNREADABLE:
      return "target memory unreadable";
    default:
      return "unknown cause";
  }
}

// What one process lost, by kind and cause: "pid 7: lost 12 action start
// record(s) (ring buffer full), ...".  A process whose every action was
// lost is said to have lost them, never to have run none.
void loss_note(const ProcessActions& p) {
  const std::string who = "ltrace-bpf: pid " + std::to_string(p.meta.pid) + ": ";
  std::string lost, degraded;
  for (auto& l : p.losses) {
    std::string what = std::to_string(l.count) + " " + record_text_name(l.kind) + " record(s)";
    if (l.cause == LT_LOSS_READ_FAULT)
      degraded += (degraded.empty() ? "" : ", ") + what;
    else
      lost += (lost.empty() ? "" : ", ") + what + " (" + cause_name(l.cause) + ")";
  }
  if (!lost.empty())
    std::cerr << who << (p.actions.empty() && p.lost_action_records() ? "no action recorded, " : "") << "lost " << lost
              << "\n";
  if (!degraded.empty()) std::cerr << who << degraded << " sent with an unreadable name or stack\n";
}

void notes(const ProcessActions& p) {
  const std::string who = "ltrace-bpf: pid " + std::to_string(p.meta.pid);
  if (p.meta.flags & LT_PROC_NOT_PYTHON) {
    std::cerr << who << " is not a CPython process; nothing to report\n";
    return;
  }
  if (p.meta.container_flags)
    std::cerr << who << " runs in container "
              << proc::describe_container(p.meta.container_host, p.meta.container_id, p.meta.ns_pid) << "\n";
  if (p.actions.empty() && !p.lost_action_records())
    std::cerr << who
              << ": no Lightning actions seen in the window (is a Trainer running? actions are seen "
                 "from the moment of attach: try a longer --duration)\n";
  loss_note(p);
  if (p.open_at_end)
    std::cerr << who << ": " << p.open_at_end << " action(s) still open at detach, not counted (as Lightning)\n";
  if (p.unmatched_stops)
    std::cerr << who << ": " << p.unmatched_stops << " action(s) ended that began before attach, not counted\n";
  if (p.lost_to_damage)
    std::cerr << who << ": " << p.lost_to_damage
              << " action(s) whose start or stop was in a damaged part of the trace file, not counted\n";
  if (p.truncated_names)
    std::cerr << who << ": " << p.truncated_names
              << " action call(s) with a name not seen whole (longer than the ~4 KB we read, or pieces lost) "
                 "are shown with their start, length and end around a [...cut...] marker\n";
  if (p.estimated)
    std::cerr << who << ": " << p.estimated
              << " duration(s) of *_next fetches / manual optimizer_step are estimates (each ends at the next action; "
                 "see docs/design-actions.md)\n";
}

}  // namespace

namespace {

// Prints one process's report, or appends it to Lightning's file name for it.
// `sole_trainer`: the one process of several that ran Lightning actions (the
// others are DataLoader workers, launchers): it keeps Lightning's name.
void deliver(const std::string& text, const ProcessMeta& meta, Stage stage, std::size_t shown, const OutputOptions& out,
             bool sole_trainer = false) {
  if (!out.dirpath.empty()) {
    const int local_rank = lightning_local_rank(meta.world_size, meta.local_rank);
    std::string name = lightning_report_filename(stage_name(stage), out.filename, local_rank);
    if (shown > 1 && meta.world_size <= 1 && !sole_trainer) {
      // Several unranked processes would share one file name: keep them apart.
      name = lightning_report_filename(stage_name(stage), out.filename + "-pid" + std::to_string(meta.pid), -1);
    }
    make_output_dirs(out.dirpath);
    auto path = std::filesystem::path(out.dirpath) / name;
    OutputFile f(path.string(), OutputMode::append);  // Lightning appends, too
    f.stream() << utf8_text(text);                    // as std::cout gets it (main.cpp)
    f.close();
    std::cerr << "ltrace-bpf: wrote " << path.string() << " (" << describe(meta) << ")\n";
  } else {
    if (shown > 1) std::cout << "==> " << describe(meta) << " <==\n";
    std::cout << text;
    if (shown > 1) std::cout << "\n";
    std::cout.flush();
  }
}

// Always stated, zero included: a reader must be able to tell "none lost"
// from "not counted".
void lost_events_note(const ActionsReport& rep) {
  if (!rep.complete)
    std::cerr << "ltrace-bpf: the recording ended abruptly (no detach record): drop counters are unknown and the "
                 "window ends at the last event\n";
  std::uint64_t open = 0, unmatched = 0, damaged = 0;
  for (auto& p : rep.processes) {
    open += p.open_at_end;
    unmatched += p.unmatched_stops;
    damaged += p.lost_to_damage;
  }
  if (rep.damaged_ranges)
    std::cerr << "ltrace-bpf: the trace file is damaged: " << rep.damaged_ranges
              << " range(s) of it were skipped (see the warnings above); every event in them is lost and " << damaged
              << " action(s) cut by them are not counted\n";
  std::cerr << "ltrace-bpf: lost events: " << rep.ringbuf_drops << " ring-buffer drops, " << rep.read_faults
            << " unreadable action names or stacks, " << rep.unreadable << " unreadable generator frames, " << open
            << " open at detach, " << unmatched << " ended before attach\n";
  std::uint64_t unattributed = 0;
  for (auto& l : rep.unattributed) unattributed += l.count;
  if (unattributed)
    std::cerr << "ltrace-bpf: " << unattributed
              << " of the lost or degraded records could not be attributed to a process (the per-process table "
                 "was full)\n";
}

}  // namespace

int write_simple_reports(const ActionsReport& rep, const OutputOptions& out) {
  // One report per process that ran Lightning actions; if none did, one
  // (empty) report per traced Python process, so the user sees the title
  // and the hint.  DataLoader workers and launchers do not clutter it.
  std::vector<const ProcessActions*> shown;
  for (auto& p : rep.processes)
    if (!p.actions.empty()) shown.push_back(&p);
  if (shown.empty())
    for (auto& p : rep.processes)
      if (p.meta.flags & LT_PROC_PYTHON) shown.push_back(&p);
  int written = 0;
  std::size_t quiet = 0;
  for (auto& p : rep.processes)
    quiet += p.actions.empty() && !p.lost_action_records() && (p.meta.flags & LT_PROC_PYTHON);
  const ProcessIndex index(rep);
  for (auto* p : shown) {
    ProcessMeta meta = index.with_rank_labels(p->meta);
    SimpleReportInput in;
    in.stage_title = stage_title(p->stage);
    in.actions = p->actions;
    in.total_seconds = p->window_seconds();
    in.extended = out.extended;
    deliver(render_simple_report(in), meta, p->stage, shown.size(), out);
    ++written;
  }
  for (auto* p : shown) notes(*p);
  // Processes without a report of their own still say what they lost
  // (a set: a trace may hold 100,000 processes).
  const std::unordered_set<const ProcessActions*> with_report(shown.begin(), shown.end());
  for (auto& p : rep.processes)
    if (!with_report.count(&p)) loss_note(p);
  if (quiet && shown.size() != quiet)
    std::cerr << "ltrace-bpf: " << quiet
              << " other Python process(es) (DataLoader workers, launchers) ran no "
                 "Lightning actions\n";
  lost_events_note(rep);
  return written;
}

int write_advanced_reports(const ActionsReport& rep, const StacksReport& stacks, const OutputOptions& out,
                           const LineRestriction& restriction) {
  int written = 0;
  const ProcessIndex index(rep);
  // Sampled DataLoader workers have stacks but no actions: with one trainer,
  // its file keeps Lightning's name and theirs get a -pidN.
  std::size_t trainers = 0;
  for (const auto& ps : stacks.processes)
    if (const ProcessActions* pa = index.find(ps.pid); pa && !pa->actions.empty()) ++trainers;
  for (const auto& ps : stacks.processes) {
    const ProcessActions* pa = index.find(ps.pid);
    ProcessMeta meta = pa ? index.with_rank_labels(pa->meta) : ProcessMeta{};
    meta.pid = ps.pid;
    AdvancedReportInput in;
    Stage stage = pa ? pa->stage : Stage::none;
    in.stage_title = stage_title(stage);
    in.rank_suffix = lightning_rank_suffix(meta.world_size, meta.local_rank);
    in.stacks = &ps;
    in.period_ns = stacks.period_ns;
    in.restriction = restriction;
    if (pa)
      for (auto& a : pa->actions) in.action_time[a.name] = {a.calls, a.running_total_s};
    deliver(render_advanced_report(in), meta, stage, stacks.processes.size(), out,
            trainers == 1 && pa && !pa->actions.empty());
    ++written;
    const std::string who = "ltrace-bpf: pid " + std::to_string(ps.pid);
    if (ps.samples_without_python)
      std::cerr << who << ": " << ps.samples_without_python << " of " << ps.samples
                << " samples were of threads with no Python thread state (native threads)\n";
    if (ps.in_probe)
      std::cerr << who << ": " << ps.in_probe << " of " << ps.samples
                << " samples were in ltrace-bpf's own probes: our overhead, in no stack\n";
    if (ps.truncated)
      std::cerr << who << ": " << ps.truncated << " stack(s) deeper than " << LT_STACK_MAX
                << " frames were cut at the root side ([truncated])\n";
    if (ps.unknown_frames)
      std::cerr << who << ": " << ps.unknown_frames
                << " frame(s) named <unknown>: their code objects were gone before they could be read\n";
    if (ps.freed_at_exit_frames)
      std::cerr << who << ": " << ps.freed_at_exit_frames << " frame(s) named " << kFreedAtExit
                << ": sampled as the interpreter shut down (atexit handlers, threading._shutdown), whose code "
                   "objects it freed before its exit could be read\n";
    if (ps.uncut)
      std::cerr << who << ": " << ps.uncut
                << " stack(s) did not run the frame that opened their action: kept whole, not cut at the action\n";
    if (ps.no_origin)
      std::cerr << who << ": " << ps.no_origin
                << " stack(s) in actions whose opening frame is not known (no probe opened them, or not through "
                   "contextlib's __enter__): kept whole, not cut at the action\n";
    if (ps.offcpu_open_at_end)
      std::cerr << who << ": " << ps.offcpu_open_at_end << " thread(s) still blocked at detach, not counted\n";
  }
  if (stacks.processes.empty())
    std::cerr << "ltrace-bpf: no stack samples of any Python thread in the window"
              << (stacks.period_ns ? "" : " (the trace was recorded without --rate)") << "\n";
  else if (stacks.period_ns)
    std::cerr << "ltrace-bpf: on-CPU seconds (tottime~, cumtime~) are estimates: samples x " << stacks.period_ns / 1e6
              << " ms (" << stacks.rate_hz << " Hz)\n";
  lost_events_note(rep);
  return written;
}

namespace {

// "Op times (pid N): ..." - which path timed this process's ops.
std::string op_times_line(const ProcessOps& po, const OpsReport& ops, std::uint64_t probe_tables) {
  std::string line = "Op times (pid " + std::to_string(po.pid) + "): ";
  const std::string sampled =
      ops.period_ns ? "sampled estimates (~): stack samples x " + std::to_string(ops.period_ns / 1000) + " us (" +
                          std::to_string(ops.rate_hz) + " Hz)"
                    : "no sampled times (recorded without stack samples: only measured ones, [pl] records and CUDA "
                      "runtime calls)";
  if (po.measured && !probe_tables)
    return line +
           "measured: each call timed on its thread by the op observer in the job (RecordFunction "
           "callbacks, as torch.profiler's); # of Calls exact";
  if (po.measured)
    return line +
           "measured by the op observer, except in tables marked ~, whose calls the op probes counted: " + sampled +
           "; # of Calls exact";
  return line + sampled + "; # of Calls exact (op probes" +
         (po.observer_not_used.empty() ? std::string() : "; op observer not used: " + po.observer_not_used) + ")";
}

}  // namespace

int write_ops_reports(const ActionsReport& rep, const OpsReport& ops, const OutputOptions& out,
                      const OpsOutputOptions& table) {
  int written = 0;
  OpTableOptions topt;
  topt.sort_by = table.sort_by;
  topt.row_limit = table.row_limit;
  topt.estimated = true;
  topt.with_input_shapes = table.input_shapes;
  std::size_t shown = 0, measured = 0;
  for (const auto& po : ops.processes) shown += !po.tables.empty();
  const ProcessIndex index(rep);
  for (const auto& po : ops.processes) {
    if (po.tables.empty()) continue;
    const ProcessActions* pa = index.find(po.pid);
    ProcessMeta meta = pa ? index.with_rank_labels(pa->meta) : ProcessMeta{};
    meta.pid = po.pid;
    const Stage stage = pa ? pa->stage : Stage::none;
    // Lightning's _stats_to_str: "{STAGE} Profiler Report", then per key
    // "Profile stats for: {key}[ rank: N]" and the table, joined by "\n".
    std::string title = stage_title(stage);
    // One line before Lightning's title names the path that produced the
    // times, so a saved report says it without the stderr beside it.
    std::uint64_t probe_tables = 0;
    for (const auto& t : po.tables) probe_tables += t.probe_calls > 0;
    std::string text =
        op_times_line(po, ops, probe_tables) + "\n" + (title.empty() ? "" : title + " ") + "Profiler Report";
    const std::string rank = lightning_rank_suffix(meta.world_size, meta.local_rank);
    // --ops-layout records: Lightning 2.x's one table over every step.
    std::vector<OpTableData> records;
    std::uint64_t left_out = 0;
    if (table.records) {
      RecordsTable r = records_table(po.tables);
      left_out = r.left_out_calls;
      records.push_back(std::move(r.table));
    }
    for (const auto& t : table.records ? records : po.tables) {
      std::vector<OpRow> rows;
      rows.reserve(t.rows.size());
      for (const auto& r : t.rows) {
        // Runtime rows (cudaLaunchKernel) carry CUPTI's measured CPU time;
        // the op observer's times are measured (samples carry no ops then).
        OpRow row{r.name, r.input_shapes, op_self_ns(r, ops.period_ns) / 1e3, op_total_ns(r, ops.period_ns) / 1e3,
                  r.calls};
        row.self_cuda_us = r.self_cuda_ns / 1e3;
        row.cuda_total_us = r.cuda_total_ns / 1e3;
        row.device_event = r.device_row;
        row.cpu_mem = r.cpu_mem;
        row.self_cpu_mem = r.self_cpu_mem;
        row.cuda_mem = r.cuda_mem;
        row.self_cuda_mem = r.self_cuda_mem;
        rows.push_back(std::move(row));
      }
      OpTableOptions o = topt;
      o.estimated = op_table_estimated(po, t);
      if (t.has_cuda || t.has_cuda_memory) o.device = "cuda";
      o.profile_memory = table.profile_memory || t.has_memory;
      o.memory_bytes = table.memory_bytes;
      text += "\nProfile stats for: " + t.title + rank + "\n" + render_op_table(std::move(rows), o);
    }
    deliver(text + "\n", meta, stage, shown, out);
    ++written;
    const std::string who = "ltrace-bpf: pid " + std::to_string(po.pid);
    if (po.measured) {
      ++measured;
      std::uint64_t probe_calls = 0;
      for (const auto& t : po.tables) probe_calls += t.probe_calls;
      if (probe_calls)
        std::cerr << who << ": " << probe_calls
                  << " op call(s) counted by the op probes, not the op observer (before it began: torch loaded after "
                     "the attach; or after torch.compile began): their tables' times are sampled estimates (~)\n";
      if (po.observer_dropped)
        std::cerr << who << ": " << po.observer_dropped
                  << " op call(s) the op observer could not record (its buffer was full): missing from the table\n";
      if (po.observer_too_deep)
        std::cerr << who << ": " << po.observer_too_deep << " op call(s) nested deeper than " << LT_OBS_DEPTH
                  << " calls: not recorded, their time is in the calls around them\n";
    } else if (!po.observer_not_used.empty()) {
      std::cerr << who << ": op observer not used (" << po.observer_not_used << ")\n";
    }
    if (po.too_deep)
      std::cerr << who << ": " << po.too_deep << " op call(s) nested deeper than " << LT_OPS_DEPTH
                << " ops: counted, their time goes to the op above them\n";
    std::uint64_t samples = 0, in_probe = 0;
    for (const auto& t : po.tables) {
      samples += t.samples;
      in_probe += t.in_probe;
    }
    if (in_probe) {
      std::cerr << who << ": " << in_probe << " of " << samples << " samples ("
                << percent(100.0 * in_probe / samples, 1)
                << ") were in ltrace-bpf's own probes: our overhead, not charged to any op\n";
    }
    if (po.frees_unknown)
      std::cerr << who << ": " << po.frees_unknown
                << " CPU free(s) of memory allocated before the attach: size unknown, charged to no op\n";
    if (po.mem_without_ops)
      std::cerr << who << ": " << po.mem_without_ops
                << " allocator event(s) recorded without op probes: charged to no op\n";
    if (po.ooms) std::cerr << who << ": " << po.ooms << " out-of-memory event(s) (allocations that failed)\n";
    if (left_out)
      std::cerr << who << ": --ops-layout records: " << left_out
                << " op call(s) outside step functions (epoch ends, checkpoints, set-up) are not in the records table "
                   "(--ops-layout steps shows them)\n";
    if (po.skipped_steps)
      std::cerr << who << ": --schedule left out " << po.skipped_steps << " step(s) (wait 1, warmup 1, active 3)\n";
  }
  for (auto& n : ops.notes) std::cerr << "ltrace-bpf: " << n << "\n";
  if (ops.processes.empty())
    std::cerr << "ltrace-bpf: no aten op calls in the window (torch not loaded, or the trace was recorded without "
                 "--report ops)\n";
  if (measured)
    std::cerr << "ltrace-bpf: # of Calls and CPU times are exact"
              << (measured < ops.processes.size() ? " in tables without ~" : "")
              << ": each call timed on its thread by the op observer in the job (a RecordFunction callback, as "
                 "torch.profiler's)\n";
  if (!ops.processes.empty() && measured < ops.processes.size() && ops.period_ns)
    std::cerr << "ltrace-bpf: # of Calls is exact; CPU times (~) are sampled estimates: samples x "
              << ops.period_ns / 1000 << " us (" << ops.rate_hz << " Hz), "
              << "self = the innermost op running, total = every op running\n";
  lost_events_note(rep);
  return written;
}

}  // namespace lt

namespace lt {

int write_gpu_reports(const ActionsReport& rep, const GpuReport& gpu) {
  int written = 0;
  const ProcessIndex index(rep);
  for (const auto& p : gpu.processes) {
    const ProcessActions* pa = index.find(p.pid);
    std::string who = "pid " + std::to_string(p.pid);
    if (pa && pa->meta.rank >= 0) who += ", rank " + std::to_string(pa->meta.rank);
    const bool timed = p.source == "CUPTI";
    const char* how = timed                   ? "CUPTI: measured GPU times"
                      : p.source == "uprobes" ? "uprobes on libcudart/libcuda: calls only, no GPU times"
                                              : "no GPU activity recorded";
    std::string text = "GPU Report (" + who + "; " + how + ")\n";
    auto section = [&](const char* title, const std::string& table) {
      if (!table.empty()) text += std::string("\n") + title + "\n\n" + table;
    };
    section("CUDA GPU Kernel Summary (cuda_gpu_kern_sum):", render_gpu_kern_sum(p.kernels));
    section("CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum):", render_gpu_mem_time_sum(p.memops));
    section("CUDA GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum):", render_gpu_mem_size_sum(p.memops));
    section("CUDA API Summary (cuda_api_sum):", render_api_sum(p.apis));
    section("NVTX Range Summary (nvtx_sum):", render_nvtx_sum(p.nvtx));
    if (!p.probed_calls.empty()) {
      std::string t;
      for (const auto& [fn, n] : p.probed_calls) t += " " + std::to_string(n) + "  " + fn + "\n";
      section("CUDA calls seen by entry uprobes (calls, function):", t);
    }
    section("GPU work per action:", render_gpu_actions(p.actions, timed));
    std::cout << text << "\n";
    ++written;
    const std::string w = "ltrace-bpf: pid " + std::to_string(p.pid) + ": GPU: ";
    for (const auto& st : p.status) std::cerr << w << st << "\n";
    if (p.unmatched_records)
      std::cerr << w << p.unmatched_records
                << " kernel/copy record(s) without their launch (issued before the attach): in the summaries, not "
                   "in the per-action table\n";
    if (p.dropped) std::cerr << w << "CUPTI dropped " << p.dropped << " record(s) (its buffers were full)\n";
    if (p.late && p.nvtx.empty())
      std::cerr << w
                << "attached late: NVTX ranges cannot be captured (each library initialises NVTX once, at its first "
                   "call); launch with `ltrace-bpf run -- ...` for them\n";
  }
  return written;
}

}  // namespace lt
