#include "user/cli/merge_output.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "reports/cluster/merged_html.h"
#include "reports/cluster/merged_trace.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/tracefile/trace_reader.h"

namespace lt {

namespace fs = std::filesystem;

namespace {

// A host name as a directory name: no separators, no dot-only names.
std::string dir_name(const std::string& host) {
  std::string s;
  for (char c : host) s += (c == '/' || c == '\0') ? '_' : c;
  if (s.empty() || s == "." || s == "..") s = "host-" + s;
  return s;
}

}  // namespace

std::vector<std::string> write_rank_traces(const MergePlan& plan, const std::string& dir, const ExportRange& range) {
  make_output_dirs(dir);
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    const std::string path = (fs::path(dir) / rank_trace_filename(plan.ranks[i])).string();
    write_output(path, [&](std::ostream& f) { write_rank_trace(plan, i, f, range); });
    paths.push_back(path);
  }
  return paths;
}

std::vector<std::string> trace_files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw Error(ExitCode::io, "cannot read " + dir + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw Error(ExitCode::io, "cannot read " + dir + ": " + ec.message());
    if (!it->is_regular_file(ec)) continue;
    std::ifstream f(it->path(), std::ios::binary);
    char magic[8] = {};
    if (f.read(magic, sizeof magic) && std::memcmp(magic, "LTRACEBF", 8) == 0) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<MergeInput> read_merge_inputs(const std::string& path, bool ops, OpAggregatorOptions op_options,
                                          bool gpu_slices) {
  std::error_code ec;
  const std::vector<std::string> files =
      fs::is_directory(path, ec) ? trace_files_in(path) : std::vector<std::string>{path};
  if (files.empty()) throw Error(ExitCode::io, "no trace files in " + path);
  op_options.keep_intervals = true;
  std::vector<MergeInput> out;
  out.reserve(files.size());
  for (const auto& file : files) {
    ActionAggregator actions(true);
    OpAggregator op_agg(actions, op_options);
    GpuAggregator gpu(actions, true);
    CommAggregator comm(actions, CommAggregatorOptions{true});
    auto r = tracefile::read_trace_file(
        file,
        [&](const lt_event_header& h, const std::byte* p) {
          actions.add(h, p);
          if (ops) op_agg.add(h, p);
          if (gpu_slices) gpu.add(h, p);
          comm.add(h, p);
        },
        [&](const tracefile::DamagedRange&) { actions.gap(); });
    for (auto& w : r.warnings) std::cerr << "ltrace-bpf: warning: " << file << ": " << w << "\n";
    MergeInput in{file, actions.finish(), std::nullopt};
    in.damaged = r.data_lost();
    if (ops) in.ops = op_agg.finish();
    if (gpu_slices) in.gpu = gpu.finish();
    in.comm = comm.finish();
    out.push_back(std::move(in));
  }
  return out;
}

int write_merged_reports(const std::vector<MergeInput>& files, const MergeOptions& opt) {
  MergePlan plan = plan_merge(files, opt.measured_offsets_ns);
  plan.notes.insert(plan.notes.end(), opt.notes.begin(), opt.notes.end());
  ClockEstimate clock = estimate_offsets_from_collectives(plan);
  if (opt.estimate_clock) apply_clock_estimate(plan, clock, true);

  // Per-rank reports, file by file (pids are only unique within a file),
  // and each file's findings for the page.
  std::vector<std::vector<Finding>> findings(files.size());
  if (opt.rank_reports) {
    for (std::size_t i = 0; i < files.size(); ++i) {
      const auto& in = files[i];
      std::size_t host = 0;
      while (host < plan.hosts.size() &&
             std::find(plan.hosts[host].files.begin(), plan.hosts[host].files.end(), i) == plan.hosts[host].files.end())
        ++host;
      OutputOptions out = opt.reports;
      if (!out.dirpath.empty() && plan.hosts.size() > 1 && host < plan.hosts.size())
        out.dirpath = (fs::path(out.dirpath) / dir_name(plan.hosts[host].host)).string();
      if (out.dirpath.empty() && files.size() > 1)
        std::cout << "==> " << in.file << (host < plan.hosts.size() ? " (" + plan.hosts[host].host + ")" : "")
                  << " <==\n";
      std::cerr << "ltrace-bpf: " << in.file << ":\n";
      findings[i] = opt.rank_reports(in.file, out);
    }
  }

  const std::string summary = render_cluster_summary(plan, &clock, opt.summary);
  std::cout << (files.size() > 1 || opt.rank_reports ? "\n" : "") << summary;
  std::cout.flush();
  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    const auto& e = h < clock.hosts.size() ? clock.hosts[h] : HostOffsetEstimate{};
    if (h != plan.reference_host && !e.estimated && plan.hosts[h].source != ClockSource::measured &&
        plan.hosts.size() > 1)
      std::cerr << "ltrace-bpf: " << plan.hosts[h].host
                << ": clock not refined (its recorded wall clock is used as is): " << e.why_not << "\n";
  }
  if (!opt.chrome_path.empty())
    write_output(opt.chrome_path, [&](std::ostream& f) { write_merged_trace(plan, f, opt.range); });
  if (!opt.perfetto_path.empty())
    write_output(opt.perfetto_path, [&](std::ostream& f) { write_merged_perfetto(plan, f, opt.range); });
  if (!opt.chrome_dir.empty()) write_rank_traces(plan, opt.chrome_dir, opt.range);
  if (!opt.html_path.empty())
    write_output(opt.html_path,
                 [&](std::ostream& f) { write_merged_html(plan, summary, f, opt.rank_reports ? &findings : nullptr); });
  return static_cast<int>(plan.ranks.size());
}

}  // namespace lt
