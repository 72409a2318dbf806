#include "reports/export/html_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "reports/export/dashboard.h"
#include "reports/export/export_range.h"
#include "reports/export/step_timeline.h"
#include "reports/export/xla_section.h"
#include "reports/flame/html_flame.h"
#include "reports/flame/named_profile.h"
#include "reports/simple/simple_report.h"
#include "reports/verdict/findings.h"
#include "user/text/json_escape.h"

namespace lt {

namespace {

// The pages' shared style and this page's own: reports/export/css/page.css
// and report.css, embedded at build time (tests/tools/embed_asset.py).
constexpr std::string_view kPageCss =
#include "reports/export/css/page.css.inc"
    ;
constexpr std::string_view kReportCss =
#include "reports/export/css/report.css.inc"
    ;

constexpr int kWidth = 1100;  // timeline px

std::string fmt(double v, const char* f = "%.1f") {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Sampled stacks of one process: a flame graph with one profile per action.
void flame_sections(const ProcessStacks& ps, const StacksReport& stacks, std::ostream& out) {
  // Heaviest first: the profile shown when the page opens is where most
  // of the time went.
  auto named = [](const std::vector<StackProfile>& profiles) {
    std::vector<NamedProfile> v;
    for (auto& prof : profiles) v.push_back({prof.name, &prof});
    std::stable_sort(v.begin(), v.end(), [](const NamedProfile& a, const NamedProfile& b) {
      return a.profile->total_weight() > b.profile->total_weight();
    });
    return v;
  };
  const std::string pid = std::to_string(ps.pid);
  if (!ps.on_cpu.empty()) {
    out << "<h3>On-CPU Python stacks per action</h3>\n<p class=\"note\">" << ps.samples << " samples at "
        << stacks.rate_hz << " Hz; seconds are estimates (samples &times; " << stacks.period_ns / 1e6
        << " ms). Each sample is charged to the innermost action open on its thread.</p>\n"
        << html_flame_section(named(ps.on_cpu), "on" + pid);
  }
  if (!ps.off_cpu.empty()) {
    out << "<h3>Off-CPU (blocked) Python stacks per action</h3>\n<p class=\"note\">" << ps.offcpu_periods
        << " blocking periods, measured at sched_switch (weights in nanoseconds).</p>\n"
        << html_flame_section(named(ps.off_cpu), "off" + pid);
  }
}

}  // namespace

namespace {
// PyTorchProfiler's operator tables of one process, as HTML tables (sorted
// by CPU total, every row).
void op_sections(const ProcessOps& po, const OpsReport& ops, std::ostream& out) {
  for (const auto& t : po.tables) {
    struct Row {
      const OpRowData* r;
      double self_ns, total_ns;
    };
    std::vector<Row> rows;
    double self_total = 0;
    for (auto& r : t.rows) {
      rows.push_back({&r, op_self_ns(r, ops.period_ns), op_total_ns(r, ops.period_ns)});
      if (!r.device_row) self_total += rows.back().self_ns;
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total_ns > b.total_ns; });
    const bool est = op_table_estimated(po, t);
    const char* mark = est ? "~" : "";
    out << "<h3>Operators: " << html_escape(t.title) << "</h3>\n<p class=\"note\">";
    if (t.steps) out << t.steps << " step(s); ";
    if (est && ops.rate_hz)
      out << "# of calls exact, CPU times (~) sampled estimates at " << ops.rate_hz << " Hz</p>\n";
    else if (est)
      out << "# of calls exact; no sampled CPU times (recorded without stack samples)</p>\n";
    else
      out << "# of calls and CPU times exact: each call timed by the op observer in the job</p>\n";
    out << "<table class=\"ops\"><tr><th>Name</th><th>Self CPU %" << mark << "</th><th>Self CPU" << mark
        << " (ms)</th><th>CPU total" << mark << " (ms)</th><th>CPU time avg" << mark << " (us)</th>"
        << (t.has_cuda ? "<th>Self CUDA (ms)</th><th>CUDA total (ms)</th>" : "") << "<th># of Calls</th></tr>\n";
    char b[240];
    for (const auto& [r, self_ns, total_ns] : rows) {
      std::snprintf(b, sizeof b, "<td>%.2f%%</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>",
                    self_total ? 100.0 * self_ns / self_total : 0.0, self_ns / 1e6, total_ns / 1e6,
                    r->calls ? total_ns / 1e3 / r->calls : 0.0);
      out << "<tr><td>" << html_escape(r->name) << "</td>" << b;
      if (t.has_cuda) {
        std::snprintf(b, sizeof b, "<td>%.3f</td><td>%.3f</td>", r->self_cuda_ns / 1e6, r->cuda_total_ns / 1e6);
        out << b;
      }
      out << "<td>" << r->calls << "</td></tr>\n";
    }
    out << "</table>\n";
  }
}
// GPU work of one process: kernels, copies, NVTX ranges, per action.
void gpu_sections(const GpuProcess& g, std::ostream& out) {
  out << "<h3>GPU</h3>\n<p class=\"note\">"
      << (g.source == "CUPTI" ? "CUPTI: measured GPU times" : "uprobes on libcudart/libcuda: calls only") << "</p>\n";
  auto table = [&](const char* title, const std::vector<DurationStat>& rows, const char* count_head) {
    if (rows.empty()) return;
    out << "<h4>" << title << "</h4>\n<table class=\"gpu\"><tr><th>Name</th><th>" << count_head
        << "</th><th>Total (ms)</th><th>Avg (us)</th></tr>\n";
    char b[160];
    for (const auto& r : rows) {
      std::uint64_t total = 0;
      for (auto d : r.durations_ns) total += d;
      std::snprintf(b, sizeof b, "<td>%zu</td><td>%.3f</td><td>%.3f</td>", r.durations_ns.size(), total / 1e6,
                    r.durations_ns.empty() ? 0.0 : total / 1e3 / static_cast<double>(r.durations_ns.size()));
      const std::string name = r.domain.empty() ? r.name : r.domain + ":" + r.name;
      out << "<tr><td>" << html_escape(name) << "</td>" << b << "</tr>\n";
    }
    out << "</table>\n";
  };
  table("Kernels", g.kernels, "Instances");
  table("Copies and sets", g.memops, "Count");
  table("CUDA API", g.apis, "Calls");
  table("NVTX ranges", g.nvtx, "Instances");
  if (g.actions.empty()) return;
  out << "<h4>GPU work per action</h4>\n<table class=\"gpu\"><tr><th>Action</th><th>Kernels</th><th>Kernel time "
         "(ms)</th><th>Copies</th><th>Copy time (ms)</th><th>Launches</th><th>Syncs</th><th>Sync wait (ms)</th></tr>\n";
  char b[200];
  for (const auto& a : g.actions) {
    std::snprintf(
        b, sizeof b, "<td>%llu</td><td>%.3f</td><td>%llu</td><td>%.3f</td><td>%llu</td><td>%llu</td><td>%.3f</td>",
        static_cast<unsigned long long>(a.kernels), a.kernel_ns / 1e6, static_cast<unsigned long long>(a.copies),
        a.copy_ns / 1e6, static_cast<unsigned long long>(a.launches), static_cast<unsigned long long>(a.syncs),
        a.sync_ns / 1e6);
    out << "<tr><td>" << html_escape(a.action.empty() ? "(outside any action)" : a.action) << "</td>" << b << "</tr>\n";
  }
  out << "</table>\n";
}

// Live bytes over time per device: a polyline of the downsampled timeline
// (reserved bytes dashed, CUDA), and the device's totals.
void memory_sections(const ProcessMemory& pm, std::ostream& out) {
  out << "<h3>Memory</h3>\n<p class=\"note\">torch's allocators while attached: live bytes (allocations made "
         "before the attach are not known; CUDA: the caching allocator's own totals), each point the maximum of "
         "its stretch of time</p>\n";
  out << "<table class=\"memory\"><tr><th>Device</th><th>Allocs</th><th>Allocated (bytes)</th><th>Freed "
         "(bytes)</th><th>Peak live (bytes)</th><th>Still alive (bytes)</th><th>OOMs</th></tr>\n";
  for (const auto& d : pm.devices)
    out << "<tr><td>" << mem_device_name(d.device) << "</td><td>" << d.allocs << "</td><td>" << d.alloc_bytes
        << "</td><td>" << d.freed_bytes << "</td><td>" << d.peak_live << "</td><td>" << d.live << "</td><td>" << d.ooms
        << "</td></tr>\n";
  out << "</table>\n";
  constexpr int kHeight = 120;
  for (const auto& tl : pm.timelines) {
    if (tl.points.empty()) continue;
    const std::uint64_t t0 = tl.points.front().ts_ns, t1 = tl.points.back().ts_ns;
    const double span = std::max<double>(1.0, static_cast<double>(t1 - t0));
    double top = 1;
    for (const auto& p : tl.points) top = std::max({top, static_cast<double>(p.live), static_cast<double>(p.reserved)});
    auto line = [&](bool reserved) {
      std::string pts;
      for (const auto& p : tl.points) {
        const double v =
            reserved ? static_cast<double>(p.reserved) : static_cast<double>(std::max<std::int64_t>(p.live, 0));
        pts += fmt(static_cast<double>(p.ts_ns - t0) / span * (kWidth - 2) + 1) + "," +
               fmt(kHeight - 1 - v / top * (kHeight - 2)) + " ";
      }
      return pts;
    };
    out << "<h4>" << mem_device_name(tl.device) << ": live bytes, peak " << fmt(top / 1048576.0, "%.3f") << " MiB over "
        << fmt(span / 1e9, "%.3f") << " s</h4>\n<svg class=\"timeline memory\" width=\"" << kWidth << "\" height=\""
        << kHeight << "\">";
    out << "<polyline fill=\"none\" stroke=\"#3070c0\" stroke-width=\"1\" points=\"" << line(false) << "\"/>";
    if (tl.device.cuda())
      out << "<polyline fill=\"none\" stroke=\"#c07030\" stroke-dasharray=\"4 2\" points=\"" << line(true) << "\"/>";
    out << "</svg>\n";
  }
}

}  // namespace

std::string_view page_style() {
  return kPageCss;
}

void write_html_report(const ActionsReport& rep, bool extended, std::ostream& out, const StacksReport* stacks,
                       const OpsReport* ops, const GpuReport* gpu, const MemoryReport* memory, const CommReport* comm,
                       const XlaReport* xla, const std::vector<Finding>* findings) {
  out << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ltrace-bpf report</title>\n"
      << "<style>" << kPageCss << kReportCss << "</style>\n";
  write_dashboard_head(out);
  write_step_timeline_head(out);
  out << "</head><body>\n<h1>ltrace-bpf report</h1>\n";
  // The dashboard first: overview, findings, step charts; the tables below.
  std::vector<ProcessSteps> steps;
  for (auto& p : rep.processes) steps.push_back(numbered_as_the_job(step_records(p, gpu)));
  // The ranked findings of --report verdict (reports/verdict) head the
  // list, each linked to its process's step charts; the charts' own
  // findings follow.
  std::vector<Verdict> ranked;
  const std::vector<Finding> found =
      findings ? *findings : find_issues(rep, nullptr, comm, nullptr, nullptr, nullptr, gpu);
  for (const Finding& f : found) {
    std::string id;
    for (const auto& p : rep.processes)
      if (p.meta.pid == f.pid) id = process_chart_id(p.meta);
    std::string kind = f.kind;
    std::replace(kind.begin(), kind.end(), ' ', '-');
    const std::string at_stake = finding_at_stake(f);
    ranked.push_back({"ranked-" + kind,
                      "#" + std::to_string(ranked.size() + 1) + " " + f.kind + " (pid " + std::to_string(f.pid) +
                          "): " + at_stake + ". " + f.evidence + ". Try: " + f.try_this,
                      "#" + id + "-steps", f.share});
  }
  write_overview(rep, steps, ranked, out);
  std::size_t with_steps = 0;
  for (const auto& s : steps) with_steps += s.any();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& m = rep.processes[i].meta;
    write_step_charts(
        steps[i], process_chart_id(m),
        "Steps of pid " + std::to_string(m.pid) + (m.rank >= 0 ? " (rank " + std::to_string(m.rank) + ")" : ""), out,
        ExportHint{"TRACE", attach_begin_ns(rep), with_steps > 1 ? "pid" + std::to_string(m.pid) + "-" : ""});
    const ProcessComm* calls = nullptr;
    if (comm)
      for (const auto& pc : comm->processes)
        if (pc.pid == m.pid) calls = &pc;
    write_step_timeline(rep.processes[i], steps[i], process_chart_id(m), out, gpu, ops, memory, calls, {},
                        kTimelineBudgetBytes, attach_begin_ns(rep));
  }
  if (xla) write_xla_section(*xla, out);
  if (!rep.host.hostname.empty()) out << "<p>host " << html_escape(rep.host.hostname) << "</p>\n";
  std::uint64_t open = 0, unmatched = 0, estimated = 0;
  for (auto& p : rep.processes) {
    open += p.open_at_end;
    unmatched += p.unmatched_stops;
    estimated += p.estimated;
  }
  out << "<p class=\"lost\" id=\"lost\">Lost events: " << rep.ringbuf_drops << " ring-buffer drops, " << rep.read_faults
      << " unreadable action names, " << open << " actions open at detach, " << unmatched
      << " ended before attach (not counted); " << estimated << " estimated durations"
      << (rep.complete ? "" : "; recording ended abruptly") << ".</p>\n";
  for (auto& p : rep.processes) {
    const ProcessStacks* ps = nullptr;
    if (stacks)
      for (auto& s : stacks->processes)
        if (s.pid == p.meta.pid) ps = &s;
    const ProcessOps* po = nullptr;
    if (ops)
      for (auto& o : ops->processes)
        if (o.pid == p.meta.pid && !o.tables.empty()) po = &o;
    const GpuProcess* pg = nullptr;
    if (gpu)
      for (auto& g : gpu->processes)
        if (g.pid == p.meta.pid) pg = &g;
    const ProcessMemory* pm = nullptr;
    if (memory)
      for (auto& mp : memory->processes)
        if (mp.pid == p.meta.pid && !mp.timelines.empty()) pm = &mp;
    if (p.actions.empty() && !ps && !po && !pg && !pm) continue;
    const auto& m = p.meta;
    out << "<section class=\"process\"><h2>pid " << m.pid;
    if (m.rank >= 0) out << " — rank " << m.rank << " / " << m.world_size;
    out << "</h2>\n<p class=\"note\">" << html_escape(m.cmdline);
    if (m.py_major) out << " — CPython " << m.py_major << "." << m.py_minor;
    if (!m.torch_version.empty()) out << ", torch " << html_escape(m.torch_version);
    out << "</p>\n";
    SimpleReportInput in;
    in.stage_title = stage_title(p.stage);
    in.actions = p.actions;
    in.total_seconds = p.window_seconds();
    in.extended = extended;
    out << "<h3>" << html_escape(in.stage_title.empty() ? "Profiler Report" : in.stage_title + " Profiler Report")
        << "</h3>\n<table class=\"simple\"><tr><th>Action</th><th>Mean duration (s)</th>"
        << (extended ? "<th>Num calls</th>" : "") << "<th>Total time (s)</th>"
        << (extended ? "<th>Percentage %</th>" : "") << "</tr>\n";
    for (auto& r : simple_rows(in)) {
      out << "<tr><td>" << html_escape(r.name) << "</td><td>" << r.mean << "</td>";
      if (extended) out << "<td>" << r.calls << "</td>";
      out << "<td>" << r.total << "</td>";
      if (extended) out << "<td>" << r.pct << "</td>";
      out << "</tr>\n";
    }
    out << "</table>\n";
    if (po) op_sections(*po, *ops, out);
    if (pg) gpu_sections(*pg, out);
    if (pm) memory_sections(*pm, out);
    if (ps) flame_sections(*ps, *stacks, out);
    out << "</section>\n";
  }
  out << "</body></html>\n";
}

}  // namespace lt
