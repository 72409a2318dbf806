#include "reports/export/dashboard.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>

#include "reports/export/export_range.h"
#include "user/text/json_escape.h"

namespace lt {

// The page's script and style: reports/export/js/dashboard.js and
// reports/export/css/dashboard.css, embedded at build time (tests/tools/embed_asset.py).
constexpr std::string_view kDashboardJs =
#include "reports/export/js/dashboard.js.inc"
    ;
constexpr std::string_view kDashboardCss =
#include "reports/export/css/dashboard.css.inc"
    ;

namespace {

constexpr int kW = 1100, kPlotH = 180, kPad = 40;

std::string f(double v, const char* fm = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, fm, v);
  return b;
}
std::string ms(std::uint64_t ns) {
  return f(static_cast<double>(ns) / 1e6);
}
std::string pct(double share) {
  return f(100.0 * share, "%.1f") + "%";
}

const char* kPartColor[kStepParts] = {"#e0a030", "#4a90d9", "#9b59b6", "#2eaa6e", "#c0c0c0", "#eeeeee"};
const char* kGpuColor[3] = {"#76b900", "#f08080", "#dddddd"};  // kernel, copy, idle

std::uint64_t total_ns(const std::vector<StepRecord>& v) {
  std::uint64_t t = 0;
  for (const auto& s : v) t += s.duration_ns();
  return t;
}

std::uint64_t part_total(const std::vector<StepRecord>& v, StepPart p) {
  std::uint64_t t = 0;
  for (const auto& s : v) t += s.part_ns[static_cast<std::size_t>(p)];
  return t;
}

// The span of bucket `i` (steps i*bucket ..) as `--window` takes it; "" unknown.
std::string bucket_window(const std::vector<StepRecord>& steps, std::size_t bucket, std::size_t i,
                          const ExportHint& hint) {
  const std::size_t first = i * bucket, last = std::min(steps.size(), first + bucket) - 1;
  return window_arg(steps[first].begin_ns, steps[last].end_ns, hint.origin_ns);
}

std::string window_attr(const std::string& w) {
  return w.empty() ? std::string() : " data-window=\"" + w + "\"";
}

// The command exporting step `i` of `stage`: `--steps` counts training steps;
// the others have their window.
std::string step_command(const std::vector<StepRecord>& steps, std::size_t i, const char* stage,
                         const ExportHint& hint) {
  const std::string n = std::to_string(steps[i].index);
  if (std::string_view(stage) == "train")
    return "ltrace-bpf report " + hint.trace + " --steps " + n + "-" + n + " --perfetto " + hint.prefix + "step-" + n +
           ".pftrace";
  return window_command(hint, window_arg(steps[i].begin_ns, steps[i].end_ns, hint.origin_ns),
                        hint.prefix + stage + "-step-" + n + ".pftrace");
}

void step_time_chart(const std::vector<StepRecord>& steps, const char* stage, const std::string& id, std::ostream& out,
                     const ExportHint& hint, const std::string& extra_attrs = "") {
  const StepStats st = step_stats(steps);
  const auto spikes = spike_indexes(steps, st);
  const StepBuckets b = bucket_steps(steps, kMaxStepPoints);
  const std::string cid = id + "-steptime-" + stage;
  out << "<h4 id=\"" << cid << "\">" << stage << " step time: " << steps.size() << " steps, median " << ms(st.p50)
      << " ms, p90 " << ms(st.p90) << " ms, p99 " << ms(st.p99) << " ms, max " << ms(st.max) << " ms</h4>\n";
  out << "<p class=\"note\">Each step from its fetch to its last on_*_batch_end hook. Spike: longer than median + "
         "max(3&times;MAD, 5% of the median) = "
      << ms(st.spike_above) << " ms (MAD " << ms(st.mad) << " ms); " << spikes.size() << " spike(s), in red.";
  if (b.bucket > 1)
    out << " Downsampled: each point is the mean of " << b.bucket << " consecutive steps, the faint line their max.";
  out << "</p>\n";
  const double top = std::max<double>(1.0, static_cast<double>(st.max));
  const double n = static_cast<double>(std::max<std::size_t>(1, b.rows.size()));
  auto x_of = [&](std::size_t i) { return kPad + (static_cast<double>(i) + 0.5) / n * (kW - kPad - 4); };
  auto y_of = [&](double v) { return 4 + (kPlotH - 8) * (1 - v / top); };
  out << "<svg class=\"chart steptime\" id=\"" << cid << "-svg\" data-stage=\"" << stage << "\" data-steps=\""
      << steps.size() << "\" data-bucket=\"" << b.bucket << "\" data-p50-ns=\"" << st.p50 << "\" data-p90-ns=\""
      << st.p90 << "\" data-p99-ns=\"" << st.p99 << "\" data-spike-above-ns=\"" << st.spike_above << "\" data-spikes=\""
      << spikes.size() << "\"" << extra_attrs << " width=\"" << kW << "\" height=\"" << kPlotH + 20
      << "\" role=\"img\">\n";
  for (double q : {0.0, 0.5, 1.0}) {
    out << "<line class=\"grid\" x1=\"" << kPad << "\" x2=\"" << kW << "\" y1=\"" << f(y_of(top * q), "%.1f")
        << "\" y2=\"" << f(y_of(top * q), "%.1f") << "\"/><text x=\"2\" y=\"" << f(y_of(top * q) + 4, "%.1f") << "\">"
        << f(top * q / 1e6, "%.1f") << "</text>";
  }
  out << "<line class=\"median\" x1=\"" << kPad << "\" x2=\"" << kW << "\" y1=\"" << f(y_of(st.p50), "%.1f")
      << "\" y2=\"" << f(y_of(st.p50), "%.1f") << "\"/>\n";
  std::string line, maxline;
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    line += f(x_of(i), "%.1f") + "," + f(y_of(b.rows[i].duration_ns()), "%.1f") + " ";
    maxline += f(x_of(i), "%.1f") + "," + f(y_of(b.max_ns[i]), "%.1f") + " ";
  }
  if (b.bucket > 1) out << "<polyline class=\"maxline\" points=\"" << maxline << "\"/>\n";
  out << "<polyline class=\"line\" points=\"" << line << "\"/>\n";
  std::set<std::size_t> spike_set(spikes.begin(), spikes.end());
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    const auto& r = b.rows[i];
    bool spike = false;
    for (std::size_t j = i * b.bucket; j < std::min(steps.size(), (i + 1) * b.bucket); ++j) spike |= spike_set.count(j);
    out << "<circle class=\"pt" << (spike ? " spike" : "") << "\" cx=\"" << f(x_of(i), "%.1f") << "\" cy=\""
        << f(y_of(b.bucket > 1 && spike ? b.max_ns[i] : r.duration_ns()), "%.1f") << "\" r=\"" << (spike ? 3.5 : 2)
        << "\" data-i=\"" << r.index << "\" data-ns=\"" << r.duration_ns() << "\""
        << (b.bucket > 1 ? " data-max-ns=\"" + std::to_string(b.max_ns[i]) + "\"" : std::string())
        << window_attr(bucket_window(steps, b.bucket, i, hint)) << "><title>" << stage << " step " << r.index
        << (b.bucket > 1 ? "+" : "") << ": " << ms(r.duration_ns()) << " ms"
        << "</title></circle>\n";
  }
  out << "</svg>\n";
  if (!spikes.empty()) {
    const std::size_t bar_bucket = bucket_steps(steps, kMaxStepBars).bucket;
    out << "<p class=\"spikes\">Spikes:";
    std::size_t shown = 0, worst = spikes.front();
    for (auto i : spikes)
      if (steps[i].duration_ns() > steps[worst].duration_ns()) worst = i;
    for (auto i : spikes) {
      if (++shown > 50) {
        out << " &hellip; " << spikes.size() - 50 << " more";
        break;
      }
      const std::string cmd = step_command(steps, i, stage, hint);
      out << " <a href=\"#" << id << "-parts-" << stage << "-" << i / bar_bucket << "\" data-i=\"" << i << "\""
          << window_attr(window_arg(steps[i].begin_ns, steps[i].end_ns, hint.origin_ns));
      if (!cmd.empty()) out << " data-cmd=\"" << html_escape(cmd) << "\" title=\"export: " << html_escape(cmd) << "\"";
      out << ">#" << i << " (" << ms(steps[i].duration_ns()) << " ms)</a>";
    }
    out << "</p>\n";
    const std::string cmd = step_command(steps, worst, stage, hint);
    if (!cmd.empty())
      out << "<p class=\"note spike-cmd\">A spike as a Perfetto/Chrome file (each spike's command is its link's "
             "title): the longest, <code>"
          << html_escape(cmd) << "</code></p>\n";
  }
}

void parts_chart(const std::vector<StepRecord>& steps, const char* stage, const std::string& id, bool gpu,
                 std::ostream& out, const ExportHint& hint) {
  const StepBuckets b = bucket_steps(steps, kMaxStepBars);
  const std::string cid = id + (gpu ? "-gpu-" : "-parts-") + stage;
  std::uint64_t top = 1;
  for (const auto& r : b.rows) top = std::max(top, r.duration_ns());
  const double bw = static_cast<double>(kW - kPad - 4) / static_cast<double>(std::max<std::size_t>(1, b.rows.size()));
  out << "<h4 id=\"" << cid << "\">" << stage
      << (gpu ? " steps on the GPU: kernel, copy and idle time" : " steps: what each is made of") << "</h4>\n";
  out << "<p class=\"legend\">";
  if (gpu) {
    const char* names[3] = {"kernels (union over streams)", "memcpy/memset not under a kernel", "GPU idle"};
    for (int k = 0; k < 3; ++k)
      out << "<span><i style=\"background:" << kGpuColor[k] << "\"></i>" << names[k] << "</span> ";
  } else {
    for (std::size_t k = 0; k < kStepParts; ++k) {
      const double share =
          total_ns(steps) ? static_cast<double>(part_total(steps, static_cast<StepPart>(k))) / total_ns(steps) : 0;
      out << "<span><i style=\"background:" << kPartColor[k] << "\"></i>" << step_part_label(static_cast<StepPart>(k))
          << " " << pct(share) << "</span> ";
    }
  }
  out << "</p>\n";
  if (b.bucket > 1) out << "<p class=\"note\">Each bar: the mean of " << b.bucket << " consecutive steps.</p>\n";
  out << "<svg class=\"chart parts" << (gpu ? " gpu" : "") << "\" data-stage=\"" << stage << "\" data-steps=\""
      << steps.size() << "\" data-bucket=\"" << b.bucket << "\" width=\"" << kW << "\" height=\"" << kPlotH + 4
      << "\" role=\"img\">\n";
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    const auto& r = b.rows[i];
    out << "<g class=\"bar\" id=\"" << cid << "-" << i << "\" data-i=\"" << r.index << "\" data-ns=\""
        << r.duration_ns() << "\"" << window_attr(bucket_window(steps, b.bucket, i, hint));
    std::vector<std::pair<std::uint64_t, const char*>> segs;
    if (gpu) {
      out << " data-kernel-ns=\"" << r.kernel_ns << "\" data-copy-ns=\"" << r.copy_ns << "\" data-idle-ns=\""
          << r.gpu_idle_ns << "\"";
      segs = {{r.kernel_ns, kGpuColor[0]}, {r.copy_ns, kGpuColor[1]}, {r.gpu_idle_ns, kGpuColor[2]}};
    } else {
      for (std::size_t k = 0; k < kStepParts; ++k) {
        out << " data-" << step_part_name(static_cast<StepPart>(k)) << "-ns=\"" << r.part_ns[k] << "\"";
        segs.emplace_back(r.part_ns[k], kPartColor[k]);
      }
    }
    out << "><title>" << stage << " step " << r.index << (b.bucket > 1 ? "+ (mean)" : "") << ": " << ms(r.duration_ns())
        << " ms";
    if (gpu) {
      out << "; kernels " << ms(r.kernel_ns) << ", copies " << ms(r.copy_ns) << ", idle " << ms(r.gpu_idle_ns);
    } else {
      for (std::size_t k = 0; k < kStepParts; ++k)
        if (r.part_ns[k]) out << "; " << step_part_name(static_cast<StepPart>(k)) << " " << ms(r.part_ns[k]);
    }
    out << " ms</title>";
    double y = kPlotH;
    for (auto [v, color] : segs) {
      if (!v) continue;
      const double h = static_cast<double>(v) / top * (kPlotH - 4);
      y -= h;
      out << "<rect x=\"" << f(kPad + i * bw, "%.2f") << "\" y=\"" << f(y, "%.2f") << "\" width=\""
          << f(std::max(0.5, bw * 0.85), "%.2f") << "\" height=\"" << f(h, "%.2f") << "\" fill=\"" << color << "\"/>";
    }
    out << "</g>\n";
  }
  out << "<text x=\"2\" y=\"12\">" << f(top / 1e6, "%.1f") << " ms</text></svg>\n";
}

std::string wall_time(const HostMeta& h, std::uint64_t mono_ns) {
  if (!h.realtime_ns || !h.monotonic_ns || !mono_ns) return "";
  const std::int64_t real = static_cast<std::int64_t>(h.realtime_ns) +
                            (static_cast<std::int64_t>(mono_ns) - static_cast<std::int64_t>(h.monotonic_ns));
  const std::time_t secs = static_cast<std::time_t>(real / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char b[40];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return b;
}

}  // namespace

std::string process_chart_id(const ProcessMeta& m) {
  return "p" + std::to_string(m.pid);
}

ValidationRuns validation_runs(const ProcessSteps& s) {
  ValidationRuns r;
  const auto& t = s.train;
  const auto& v = s.validation;
  if (t.empty() || v.empty()) return r;
  r.span_ns = std::max(t.back().end_ns, v.back().end_ns) - std::min(t.front().begin_ns, v.front().begin_ns);
  // A training step beginning between two validation steps ends a run.
  auto train_between = [&](std::uint64_t from, std::uint64_t to) {
    auto it = std::lower_bound(t.begin(), t.end(), from,
                               [](const StepRecord& x, std::uint64_t at) { return x.begin_ns < at; });
    return it != t.end() && it->begin_ns < to;
  };
  std::size_t first = 0;
  auto close = [&](std::size_t last) {
    const std::size_t n = last - first + 1;
    r.min_steps = r.runs ? std::min(r.min_steps, n) : n;
    r.max_steps = std::max(r.max_steps, n);
    r.run_ns += v[last].end_ns - v[first].begin_ns;
    ++r.runs;
  };
  for (std::size_t i = 1; i < v.size(); ++i)
    if (train_between(v[i - 1].end_ns, v[i].begin_ns)) {
      close(i - 1);
      first = i;
    }
  close(v.size() - 1);
  return r;
}

std::vector<Verdict> step_verdicts(const ProcessSteps& s, const std::string& id,
                                   const std::function<std::string(std::uint32_t)>& step_name) {
  std::vector<Verdict> v;
  const auto& t = s.train;
  if (t.empty()) return v;
  const double total = static_cast<double>(total_ns(t));
  if (total <= 0) return v;
  const double dl = part_total(t, StepPart::dataloader) / total;
  if (dl >= kDataloaderVerdict)
    v.push_back({"dataloader",
                 "Dataloader fetch + transfer is " + pct(dl) + " of training step time (" + std::to_string(t.size()) +
                     " steps; shown when >= " + pct(kDataloaderVerdict) + ")",
                 "#" + id + "-parts-train", dl});
  const StepStats st = step_stats(t);
  // Steps over twice the median and past the run's own spread (median + 6
  // robust sigmas, 1.4826 MAD: the verdict's outlier bound), the first
  // (the fit's warm-up) apart, with the slowest named (its bar is in the
  // step-time chart the line links to). Spikes (median + max(3 MAD, 5 %))
  // are marked on the chart only: as a finding they named a fifth of a
  // real Transformer fit's steps on machine noise.
  const double slow_above = std::max(kSlowStepFactor * static_cast<double>(st.p50),
                                     static_cast<double>(st.p50) + 6 * 1.4826 * static_cast<double>(st.mad));
  std::size_t slow = 0, slowest = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i > 0 && static_cast<double>(t[i].duration_ns()) > slow_above) ++slow;
    if (t[i].duration_ns() > t[slowest].duration_ns()) slowest = i;
  }
  if (slow)
    v.push_back({"slow_steps",
                 std::to_string(slow) + " training step" + (slow == 1 ? "" : "s") + " of " + std::to_string(t.size()) +
                     " took over " + f(kSlowStepFactor, "%.0f") + "x the median (" + ms(st.p50) + " ms; slowest: " +
                     (step_name ? step_name(t[slowest].index) : "step " + std::to_string(t[slowest].index)) + ", " +
                     ms(t[slowest].duration_ns()) + " ms)",
                 "#" + id + "-steptime-train", static_cast<double>(slow)});
  const ValidationRuns vr = validation_runs(s);
  if (vr.runs && vr.span_ns) {
    const double share = static_cast<double>(vr.run_ns) / static_cast<double>(vr.span_ns);
    const std::string per_run = vr.min_steps == vr.max_steps
                                    ? std::to_string(vr.min_steps)
                                    : std::to_string(vr.min_steps) + "-" + std::to_string(vr.max_steps);
    if (share >= kValidationVerdict)
      v.push_back({"validation",
                   "Validation takes " + pct(share) + " of the fit's time from its first step to its last (" +
                       std::to_string(vr.runs) + " run" + (vr.runs == 1 ? "" : "s") + " of " + per_run +
                       " steps, each from its first fetch to its last batch's end; shown when >= " +
                       pct(kValidationVerdict) + ")",
                   "#" + id + "-steptime-validation", share});
  }
  if (s.has_gpu) {
    std::uint64_t idle = 0;
    for (const auto& x : t) idle += x.gpu_idle_ns;
    const double share = idle / total;
    std::array<std::uint64_t, kStepParts> where{};
    for (const auto& x : t)
      for (std::size_t k = 0; k < kStepParts; ++k) where[k] += x.gpu_idle_part_ns[k];
    const std::size_t most = static_cast<std::size_t>(std::max_element(where.begin(), where.end()) - where.begin());
    if (share >= kGpuIdleVerdict)
      v.push_back({"gpu_idle",
                   "GPU idle " + pct(share) + " of training step time, most of it (" +
                       pct(idle ? static_cast<double>(where[most]) / idle : 0) + ") during " +
                       step_part_label(static_cast<StepPart>(most)) +
                       " (no kernel, copy or set running; shown when >= " + pct(kGpuIdleVerdict) + ")",
                   "#" + id + "-gpu-train", share});
  }
  return v;
}

void write_dashboard_head(std::ostream& out) {
  out << "<style>" << kDashboardCss << "</style>\n"
      << "<script>" << kDashboardJs << "</script>\n";
}

void write_overview(const ActionsReport& rep, const std::vector<ProcessSteps>& steps, const std::vector<Verdict>& extra,
                    std::ostream& out) {
  out << "<section id=\"overview\"><h2>Overview</h2>\n<table class=\"overview\">\n";
  std::set<std::string> hosts, jobs, pythons, torches;
  std::vector<std::string> ranks;
  std::uint64_t begin = UINT64_MAX, end = 0;
  for (const auto& p : rep.processes) {
    if (p.actions.empty()) continue;
    const auto& m = p.meta;
    if (!m.hostname.empty()) hosts.insert(m.hostname);
    if (!m.slurm_job_id.empty()) jobs.insert("Slurm job " + m.slurm_job_id);
    if (m.py_major) pythons.insert(std::to_string(m.py_major) + "." + std::to_string(m.py_minor));
    if (!m.torch_version.empty()) torches.insert(m.torch_version);
    if (m.rank >= 0) ranks.push_back(std::to_string(m.rank) + "/" + std::to_string(m.world_size));
    if (p.window_end_ns > p.window_begin_ns) {
      begin = std::min(begin, p.window_begin_ns);
      end = std::max(end, p.window_end_ns);
    }
    if (jobs.empty() && !m.cmdline.empty()) jobs.insert(m.cmdline);
  }
  if (!rep.host.hostname.empty()) hosts.insert(rep.host.hostname);
  auto row = [&](const char* k, const std::set<std::string>& vals) {
    if (vals.empty()) return;
    std::string s;
    for (const auto& v : vals) s += (s.empty() ? "" : ", ") + v;
    out << "<tr><th>" << k << "</th><td>" << html_escape(s) << "</td></tr>\n";
  };
  row("Job", jobs);
  row("Host(s)", hosts);
  if (!ranks.empty()) {
    std::string s;
    for (const auto& r : ranks) s += (s.empty() ? "" : ", ") + r;
    out << "<tr><th>Ranks (rank/world)</th><td>" << s << "</td></tr>\n";
  }
  row("Python", pythons);
  row("torch", torches);
  if (end > begin) {
    const std::string w = wall_time(rep.host, begin);
    out << "<tr><th>Attach window</th><td>" << f((end - begin) / 1e9) << " s" << (w.empty() ? "" : " from " + w)
        << "</td></tr>\n";
  }
  std::uint64_t lost = rep.ringbuf_drops + rep.read_faults;
  for (const auto& p : rep.processes) lost += p.lost_action_records();
  out << "<tr><th>Lost events</th><td><a href=\"#lost\">" << lost << "</a></td></tr>\n</table>\n";
  std::vector<Verdict> all = extra;
  std::size_t with_steps = 0;
  for (const auto& s : steps) with_steps += s.any();
  for (const auto& s : steps)
    for (auto& v : step_verdicts(s, "p" + std::to_string(s.pid))) {
      if (with_steps > 1) v.text = "pid " + std::to_string(s.pid) + ": " + v.text;
      all.push_back(v);
    }
  if (lost)
    all.push_back({"lost", std::to_string(lost) + " records lost: counts and times undercount", "#lost",
                   static_cast<double>(lost)});
  out << "<h3>Findings</h3>\n<ul class=\"verdicts\">\n";
  if (all.empty()) out << "<li class=\"none\">No finding passed its threshold.</li>\n";
  for (const auto& v : all)
    out << "<li class=\"verdict\" data-verdict=\"" << v.kind << "\" data-value=\"" << f(v.value, "%.6f")
        << "\"><a href=\"" << v.href << "\">" << html_escape(v.text) << "</a></li>\n";
  out << "</ul></section>\n";
}

std::string window_command(const ExportHint& hint, const std::string& window, const std::string& out_name) {
  if (window.empty()) return "";
  return "ltrace-bpf report " + hint.trace + " --window " + window + " --perfetto " + out_name;
}

void write_step_charts(const ProcessSteps& s, const std::string& id, const std::string& title, std::ostream& out,
                       const ExportHint& hint) {
  if (!s.any()) return;
  out << "<section class=\"steps\" id=\"" << id << "-steps\" data-pid=\"" << s.pid << "\" data-tid=\"" << s.tid
      << "\"><h2>" << html_escape(title) << "</h2>\n";
  for (auto [stage, v] : stages_of(s)) {
    if (v->empty()) continue;
    std::string extra;
    if (v == &s.validation) {
      // The validation finding's numbers (whether or not it is shown).
      const ValidationRuns vr = validation_runs(s);
      extra = " data-runs=\"" + std::to_string(vr.runs) + "\" data-run-ns=\"" + std::to_string(vr.run_ns) +
              "\" data-span-ns=\"" + std::to_string(vr.span_ns) + "\"";
    }
    step_time_chart(*v, stage, id, out, hint, extra);
    parts_chart(*v, stage, id, false, out, hint);
    if (s.has_gpu) parts_chart(*v, stage, id, true, out, hint);
  }
  out << "</section>\n";
}

}  // namespace lt
