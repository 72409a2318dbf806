#include "reports/comm/comm_report.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "bpf/events.h"
#include "reports/comm/bandwidth.h"
#include "user/text/numbers.h"
#include "user/text/text_table.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// The bandwidth pattern of a c10d call (reports/comm/bandwidth.h): the
// gathers' input and the reduce-scatters' output are 1/n of S.
CommPattern pattern_of(std::uint8_t kind) {
  switch (kind) {
    case LT_COMM_ALLREDUCE:
      return CommPattern::all_reduce;
    case LT_COMM_BROADCAST:
    case LT_COMM_REDUCE:
      return CommPattern::rooted;
    case LT_COMM_ALLTOALL_SINGLE:
      return CommPattern::all_to_all_whole;
    case LT_COMM_ALLGATHER:
    case LT_COMM_ALLGATHER_INTO_TENSOR:
    case LT_COMM_REDUCE_SCATTER:
    case LT_COMM_REDUCE_SCATTER_TENSOR:
      return CommPattern::per_rank_share;
    default:
      return CommPattern::none;
  }
}

std::string ms_or_dash(std::uint64_t known, double ns) {
  return known ? ns_as_ms(ns, 3) : "-";
}

// The process group size, where the trace tells it: WORLD_SIZE from the
// process's environment, when every call went to one process group (the
// default group then; a subgroup's size is a member no symbol gives).
int group_size(const ProcessComm& p, const CommRenderOptions& opt) {
  if (!opt.actions || p.groups.size() != 1) return -1;
  for (const auto& q : opt.actions->processes)
    if (q.meta.pid == p.pid) return with_rank_labels(q.meta, *opt.actions).world_size;
  return -1;
}

}  // namespace

std::string render_comm_report(const CommReport& rep, const CommRenderOptions& opt) {
  std::ostringstream out;
  out << "Collectives (c10d process-group calls while attached, counted at their entry)\n";
  out << "Counts and bytes are exact; times are joined from entry probes (enqueue, completion, wait), '-' where "
         "not joined.\n";
  if (rep.processes.empty()) {
    out << "\nNo c10d calls (comm probes off, or no collective while attached).\n";
    return out.str();
  }
  for (const ProcessComm& p : rep.processes) {
    out << "\n" << process_title(p.pid, opt.actions) << ": " << p.calls << " calls, " << p.bytes << " bytes\n";
    const bool timing = p.marks > 0;
    const int n = group_size(p, opt);
    std::vector<std::string> head{"collective", "size (B)", "count", "type", "calls", "bytes"};
    if (timing)
      for (const char* c :
           {"in-flight (ms)", "avg (ms)", "blocked (ms)", "enqueue avg (us)", "algbw (GB/s)", "busbw (GB/s)"})
        head.push_back(c);
    std::vector<std::vector<std::string>> sizes{head};
    bool multi = false;
    std::uint64_t failed = 0;
    for (auto& r : p.sizes) {
      const bool tensor = !r.dtype.empty();
      std::vector<std::string> row{comm_kind_name(r.kind),
                                   tensor ? std::to_string(r.bytes) : "-",
                                   tensor ? std::to_string(r.count) : "-",
                                   tensor ? r.dtype : "-",
                                   std::to_string(r.calls),
                                   std::to_string(r.bytes * r.calls)};
      if (timing) {
        const double avg = r.completed ? static_cast<double>(r.in_flight_ns) / static_cast<double>(r.completed) : 0;
        row.push_back(ms_or_dash(r.completed, static_cast<double>(r.in_flight_ns)));
        row.push_back(ms_or_dash(r.completed, avg));
        row.push_back(ms_or_dash(r.waited, static_cast<double>(r.blocked_ns)));
        row.push_back(r.enqueued ? fixed(static_cast<double>(r.enqueue_ns) / static_cast<double>(r.enqueued) / 1e3, 1)
                                 : "-");
        const double s = tensor ? nccl_tests_size(pattern_of(r.kind), r.bytes, n) : 0.0;
        const double algbw = avg > 0 && s > 0 ? s / avg : 0.0;  // bytes per ns = GB/s
        row.push_back(algbw > 0 ? format_gbps(algbw) : "-");
        const double f = nccl_tests_bus_factor(pattern_of(r.kind), n);
        row.push_back(algbw > 0 && f > 0 ? format_gbps(algbw * f) : "-");
      }
      sizes.push_back(std::move(row));
      multi |= r.multi_tensor_calls > 0;
      failed += r.failed;
    }
    TextTable{sizes, "l"}.write(out);
    out << "  (size: bytes of this rank's tensor per call: the buffer of all_reduce, broadcast, reduce, send, recv; "
           "the input of the gathers and all_to_all; the output of the scatters)\n";
    if (multi) out << "  (some calls passed several tensors: only the first is counted)\n";
    if (p.rows_dropped) out << "  (" << p.rows_dropped << " calls of sizes or groups past the bounds: in no row)\n";
    if (p.unreadable)
      out << "  (" << p.unreadable << " calls with a tensor that could not be read or decoded: counted, size '-')\n";
    if (timing) {
      out << "  (in-flight: entry to completion on gloo's thread, summed over the calls whose completion was seen; "
             "blocked: time a thread waited in Work::wait or DDP's finalize for them; enqueue: entry to hand-off)\n";
      out << "  (algbw, busbw: nccl-tests' definitions from the average in-flight time; ";
      if (n > 0)
        out << "n = " << n << " = WORLD_SIZE, the one process group taken as the world)\n";
      else
        out << "busbw and the gathers' algbw need the group size: "
            << (p.groups.size() == 1 ? "WORLD_SIZE unknown" : "several process groups, sizes unknown") << ")\n";
      if (failed) out << "  (" << failed << " calls completed with an error)\n";
      if (p.incomplete)
        out << "  (" << p.incomplete
            << " collectives not seen complete (attached or detached mid-way, records lost): no in-flight time)\n";
      if (p.untimed) out << "  (" << p.untimed << " calls past the bound of timed calls: no times)\n";
    } else {
      out << "  (no timing records: a trace written before them; counts only)\n";
    }

    out << "\n  per Lightning action (innermost action open on the calling thread)\n";
    std::vector<std::vector<std::string>> acts{{"action", "collective", "calls", "bytes"}};
    if (timing) acts[0].insert(acts[0].end(), {"in-flight (ms)", "avg (ms)", "blocked (ms)"});
    for (auto& a : p.actions) {
      std::vector<std::string> row{utf8_text(a.action), comm_kind_name(a.kind), std::to_string(a.calls),
                                   std::to_string(a.bytes)};
      if (timing) {
        row.push_back(ms_or_dash(a.completed, static_cast<double>(a.in_flight_ns)));
        row.push_back(ms_or_dash(
            a.completed, a.completed ? static_cast<double>(a.in_flight_ns) / static_cast<double>(a.completed) : 0.0));
        row.push_back(ms_or_dash(a.waited, static_cast<double>(a.blocked_ns)));
      }
      acts.push_back(std::move(row));
    }
    TextTable{acts, "ll"}.write(out);
    if (timing)
      out << "  (calls, in-flight: the calls issued in the action; blocked: waits by a thread in the action)\n";

    out << "\n  process groups (backend objects in order of first use; seq: our count since the attach)\n";
    for (auto& g : p.groups) {
      out << "  pg " << g.index << ": " << g.calls << " calls, seq " << g.first_seq << "-" << g.last_seq;
      const std::uint64_t span = g.last_seq - g.first_seq + 1;
      if (span > g.calls) out << " (" << span - g.calls << " lost)";
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace lt
