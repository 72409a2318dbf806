#include "reports/cluster/merged_trace.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "reports/aggregate/comm.h"
#include "reports/cluster/arrivals.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/perfetto_trace.h"
#include "user/text/json_escape.h"

namespace lt {

namespace {

int world_of(const MergePlan& plan) {
  return plan.world_size > 0 ? plan.world_size : static_cast<int>(plan.ranks.size());
}

std::string process_title(const RankRun& r) {
  const std::string pid = std::to_string(r.proc->meta.pid);
  if (r.rank >= 0) return "rank " + std::to_string(r.rank) + " (" + r.host + ", pid " + pid + ")";
  return r.label;
}

std::string process_labels(const MergePlan& plan, const RankRun& r) {
  const auto& h = plan.hosts[r.host_index];
  char off[48];
  std::snprintf(off, sizeof off, "%+.3f ms", r.clock_offset_ns / 1e6);
  std::string s = "host " + r.host + (r.host != h.host ? " (recorded on " + h.host + ")" : "") + ", pid " +
                  std::to_string(r.proc->meta.pid) + ", clock " + off + " (" +
                  (r.host_index == plan.reference_host ? "reference" : clock_source_name(h.source)) + ")";
  if (r.ended_early) s += r.exited ? ", exited early" : ", recording ended early";
  if (r.file_cut) s += ", recording ended abruptly";
  return s;
}

// The merge's own members of "ltrace_bpf": the common clock and what is missing.
std::string merge_members(const MergePlan& plan, bool merged) {
  std::ostringstream out;
  out << "\"merged\": " << (merged ? "true" : "false") << ", \"common_clock\": {\"reference_host\": "
      << json_string(plan.ranks.empty() ? std::string() : plan.hosts[plan.reference_host].host) << ", \"hosts\": [";
  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    const auto& hc = plan.hosts[h];
    out << (h ? ", " : "") << "{\"host\": " << json_string(hc.host) << ", \"clock_offset_ns\": " << hc.clock_offset_ns
        << ", \"source\": \"" << (h == plan.reference_host ? "reference" : clock_source_name(hc.source)) << "\""
        << ", \"residual_ns\": " << hc.residual_ns << ", \"stderr_ns\": " << hc.stderr_ns
        << ", \"clock_pair\": " << (hc.clock_pair ? "true" : "false") << "}";
  }
  out << "]}, \"missing_ranks\": [";
  for (std::size_t i = 0; i < plan.missing_ranks.size(); ++i) out << (i ? ", " : "") << plan.missing_ranks[i];
  out << "], \"ended_early\": [";
  bool f = true;
  for (auto& r : plan.ranks)
    if (r.ended_early) {
      out << (f ? "" : ", ") << json_string(r.label);
      f = false;
    }
  out << "]";
  return out.str();
}

ChromeDocument document(const MergePlan& plan, int rank, bool merged) {
  ChromeDocument doc;
  doc.rank = rank;
  doc.world_size = world_of(plan);
  doc.absolute_time = true;
  doc.ltrace_members = merge_members(plan, merged);
  return doc;
}

// --steps/--window resolved once per recording (several ranks may share one).
class RangeFilters {
 public:
  explicit RangeFilters(const ExportRange& range) : range_(range) {}
  const RangeFilter* of(const ActionsReport* rep) {
    if (range_.all()) return nullptr;
    return &filters_.try_emplace(rep, range_, *rep).first->second;
  }

 private:
  ExportRange range_;
  std::map<const ActionsReport*, RangeFilter> filters_;
};

// One rank: its own process of its recording, on the common clock.
ChromeSource rank_source(const MergePlan& plan, const RankRun& r, std::uint64_t pid, RangeFilters& ranges) {
  ChromeSource src;
  src.range = ranges.of(r.report);
  src.actions = r.report;
  src.ops = r.ops;
  src.gpu = r.gpu;
  src.clock_offset_ns = r.clock_offset_ns;
  src.processes.push_back({r.proc, pid, process_title(r), process_labels(plan, r), r.index, r.label});
  return src;
}

// Every aligned collective on every rank's row, named alike on all of them
// ("all_reduce #N (pg P)", reports/cluster/arrivals.h) so that trace
// viewers line them up; args: its arrival order and its wait.
void add_collective_markers(const MergePlan& plan, ChromeDocument& doc) {
  const ArrivalInput in = arrival_input(plan);
  if (in.empty()) return;
  const ArrivalReport rep = analyze_arrivals(in, plan.ranks.size(), arrival_clocks(plan));
  for (const auto& x : rep.instances)
    for (std::size_t r = 0; r < plan.ranks.size() && r < doc.sources.size(); ++r) {
      if (x.arrival_ns[r] == CollectiveInstance::kMissing) continue;
      std::string args = "\"bytes\": " + std::to_string(x.bytes);
      if (x.last >= 0) {
        args += ", \"last_to_arrive\": " + json_string(plan.ranks[x.last].label) +
                ", \"wait_ns\": " + std::to_string(x.arrival_ns[x.last] - x.arrival_ns[r]);
      }
      doc.sources[r].processes.front().markers.push_back(
          {x.tid[r], x.mono_ns[r], instance_name(comm_kind_name(x.kind), x.number, x.group), "collective", args});
    }
}

ChromeDocument merged_document(const MergePlan& plan, RangeFilters& ranges) {
  ChromeDocument doc = document(plan, 0, true);
  doc.gpu_pid_blocks = true;  // pids are rank indexes: GPU 0 would be rank 0
  for (auto& r : plan.ranks) doc.sources.push_back(rank_source(plan, r, static_cast<std::uint64_t>(r.index), ranges));
  add_collective_markers(plan, doc);
  return doc;
}

}  // namespace

void write_merged_trace(const MergePlan& plan, std::ostream& out, const ExportRange& range) {
  RangeFilters ranges(range);
  write_chrome_document(merged_document(plan, ranges), out);
}

void write_merged_perfetto(const MergePlan& plan, std::ostream& out, const ExportRange& range) {
  RangeFilters ranges(range);
  write_perfetto_document(merged_document(plan, ranges), out);
}

void write_rank_trace(const MergePlan& plan, std::size_t i, std::ostream& out, const ExportRange& range) {
  RangeFilters ranges(range);
  const RankRun& r = plan.ranks.at(i);
  ChromeDocument doc = document(plan, r.index, false);
  doc.hostname = r.host;
  doc.losses = chrome_losses(*r.report, *r.proc);
  doc.sources.push_back(rank_source(plan, r, r.proc->meta.pid, ranges));
  write_chrome_document(doc, out);
}

std::string rank_trace_filename(const RankRun& r) {
  return "rank-" + std::to_string(r.index) + ".json";
}

}  // namespace lt
