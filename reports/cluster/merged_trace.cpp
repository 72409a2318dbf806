#include "reports/cluster/merged_trace.h"

#include <cstdio>
#include <set>

#include "reports/format/json_escape.h"

namespace lt {

namespace {

// Exact microseconds, 3 decimals, from integer nanoseconds (a double of
// wall-clock microseconds keeps only ~0.25 us).
std::string us(std::int64_t ns) {
  char b[48];
  const unsigned long long a = ns < 0 ? static_cast<unsigned long long>(-ns) : static_cast<unsigned long long>(ns);
  std::snprintf(b, sizeof b, "%s%llu.%03llu", ns < 0 ? "-" : "", a / 1000, a % 1000);
  return b;
}

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

struct Writer {
  std::ostream& out;
  bool first = true;
  std::uint64_t external_id = 0;
  std::ostream& next() {
    out << (first ? "\n" : ",\n");
    first = false;
    return out;
  }
};

void header(std::ostream& out, const MergePlan& plan, int rank, bool merged, const RankRun* one) {
  // distributedInfo first: HTA reads the rank from the first line naming one.
  out << "{\n\"distributedInfo\": {\"backend\": \"unknown\", \"rank\": " << rank
      << ", \"world_size\": " << world_of(plan) << "},\n";
  out << "\"schemaVersion\": 1,\n\"deviceProperties\": [],\n\"displayTimeUnit\": \"ms\",\n";
  out << "\"baseTimeNanoseconds\": 0,\n";
  if (one) out << "\"hostname\": " << json_string(one->host) << ",\n";
  out << "\"ltrace_bpf\": {\"merged\": " << (merged ? "true" : "false") << ", \"common_clock\": {\"reference_host\": "
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
  if (one) {
    std::uint64_t open = 0, unmatched = 0, estimated = 0;
    open = one->proc->open_at_end;
    unmatched = one->proc->unmatched_stops;
    estimated = one->proc->estimated;
    out << ", \"ringbuf_drops\": " << one->report->ringbuf_drops
        << ", \"unreadable_names\": " << one->report->read_faults << ", \"open_at_detach\": " << open
        << ", \"ended_before_attach\": " << unmatched << ", \"estimated_durations\": " << estimated
        << ", \"complete\": " << (one->report->complete ? "true" : "false");
  }
  out << "},\n\"traceEvents\": [";
}

void rank_events(Writer& w, const MergePlan& plan, const RankRun& r, std::uint64_t pid) {
  const auto& m = r.proc->meta;
  w.next() << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid
           << ", \"tid\": 0, \"args\": {\"name\": " << json_string(process_title(r)) << "}}";
  w.next() << "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " << pid
           << ", \"tid\": 0, \"args\": {\"sort_index\": " << r.index << "}}";
  w.next() << "{\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": " << pid
           << ", \"tid\": 0, \"args\": {\"labels\": " << json_string(process_labels(plan, r)) << "}}";
  std::vector<const OpInterval*> ops;
  if (r.ops)
    for (auto& iv : r.ops->intervals)
      if (iv.pid == m.pid) ops.push_back(&iv);
  std::set<std::uint32_t> tids;
  for (auto& iv : r.proc->intervals) tids.insert(iv.tid);
  for (auto* iv : ops) tids.insert(iv->tid);
  for (auto tid : tids)
    w.next() << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << pid << ", \"tid\": " << tid
             << ", \"args\": {\"name\": " << json_string(tid == m.pid ? "main thread" : "thread " + std::to_string(tid))
             << "}}";
  for (auto& iv : r.proc->intervals)
    w.next() << "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
             << json_string(r.proc->actions[iv.action].name) << ", \"pid\": " << pid << ", \"tid\": " << iv.tid
             << ", \"ts\": " << us(r.common_ns(iv.begin_ns))
             << ", \"dur\": " << us(static_cast<std::int64_t>(iv.end_ns - iv.begin_ns))
             << ", \"args\": {\"External id\": 0" << (iv.estimated ? ", \"estimated\": true" : "") << "}}";
  for (auto* iv : ops) {
    const std::string name = iv->op < r.ops->names.size() && !r.ops->names[iv->op].empty()
                                 ? r.ops->names[iv->op]
                                 : "op#" + std::to_string(iv->op);
    ++w.external_id;
    w.next() << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": " << json_string(name) << ", \"pid\": " << pid
             << ", \"tid\": " << iv->tid << ", \"ts\": " << us(r.common_ns(iv->begin_ns))
             << ", \"dur\": " << us(static_cast<std::int64_t>(iv->end_ns - iv->begin_ns))
             << ", \"args\": {\"External id\": " << w.external_id << ", \"Ev Idx\": " << w.external_id - 1
             << ", \"end\": \"upper bound\"}}";
  }
}

void footer(std::ostream& out) {
  out << "\n],\n\"traceName\": \"ltrace-bpf\"\n}\n";
}

}  // namespace

void write_merged_trace(const MergePlan& plan, std::ostream& out) {
  header(out, plan, 0, true, nullptr);
  Writer w{out};
  for (auto& r : plan.ranks) rank_events(w, plan, r, static_cast<std::uint64_t>(r.index));
  footer(out);
}

void write_rank_trace(const MergePlan& plan, std::size_t i, std::ostream& out) {
  const RankRun& r = plan.ranks.at(i);
  header(out, plan, r.index, false, &r);
  Writer w{out};
  rank_events(w, plan, r, r.proc->meta.pid);
  footer(out);
}

std::string rank_trace_filename(const RankRun& r) {
  return "rank-" + std::to_string(r.index) + ".json";
}

}  // namespace lt
