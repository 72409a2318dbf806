#include "reports/comm/nccl_section.h"

#include <sstream>
#include <vector>

#include "bpf/events.h"
#include "reports/comm/bandwidth.h"
#include "user/text/numbers.h"
#include "user/text/text_table.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

CommPattern pattern_of(std::uint8_t fn) {
  switch (fn) {
    case LT_NCCL_ALLREDUCE:
      return CommPattern::all_reduce;
    case LT_NCCL_BROADCAST:
    case LT_NCCL_BCAST:
    case LT_NCCL_REDUCE:
      return CommPattern::rooted;
    case LT_NCCL_ALLGATHER:
    case LT_NCCL_REDUCESCATTER:
    case LT_NCCL_ALLTOALL:
    case LT_NCCL_GATHER:
    case LT_NCCL_SCATTER:
      return CommPattern::per_rank_share;
    case LT_NCCL_SEND:
    case LT_NCCL_RECV:
      return CommPattern::point_to_point;
    default:
      return CommPattern::none;
  }
}

std::string ms_or_dash(std::uint64_t known, std::uint64_t ns) {
  return known ? ns_as_ms(static_cast<double>(ns), 3) : "-";
}

}  // namespace

std::string render_nccl_section(const NcclReport& rep, const CommRenderOptions& opt) {
  if (rep.processes.empty()) return "";
  std::ostringstream out;
  out << "NCCL calls (libnccl API entries while attached, counted at their entry; GPU times of their NCCL kernels "
         "from CUPTI)\n";
  for (const ProcessNccl& p : rep.processes) {
    out << "\n" << process_title(p.pid, opt.actions) << ": " << p.calls << " calls, " << p.bytes << " bytes\n";
    std::vector<std::vector<std::string>> rows{{"function", "size (B)", "count", "type", "calls", "grouped", "timed",
                                                "GPU (ms)", "avg (us)", "algbw (GB/s)", "busbw (GB/s)"}};
    bool unknown_n = false;
    for (const NcclSizeRow& r : p.sizes) {
      const double avg = r.timed ? static_cast<double>(r.gpu_ns) / static_cast<double>(r.timed) : 0.0;
      const double s = nccl_tests_size(pattern_of(r.fn), r.bytes, r.nranks);
      const double algbw = avg > 0 && s > 0 ? s / avg : 0.0;  // bytes per ns = GB/s
      const double f = nccl_tests_bus_factor(pattern_of(r.fn), r.nranks);
      unknown_n |= r.timed && r.nranks <= 0;
      rows.push_back({nccl_fn_name(r.fn), std::to_string(r.bytes), std::to_string(r.count), nccl_dtype_name(r.dtype),
                      std::to_string(r.calls), std::to_string(r.grouped), std::to_string(r.timed),
                      ms_or_dash(r.timed, r.gpu_ns), r.timed ? fixed(avg / 1e3, 1) : "-",
                      algbw > 0 ? format_gbps(algbw) : "-", algbw > 0 && f > 0 ? format_gbps(algbw * f) : "-"});
    }
    TextTable{rows, "l"}.write(out);
    out << "  (size: count x element size, NCCL's count argument: per rank for all-gather and gather, the "
           "result for reduce-scatter and scatter, per peer for all-to-all)\n";
    if (!p.cupti)
      out << "  (no CUPTI launch records: GPU times need the bridge's CUPTI (injected into a process using CUDA, or "
             "`ltrace-bpf run`; not with --no-inject or --no-gpu))\n";
    out << "  (GPU: first NCCL kernel start to last end, of the kernels launched in the call; timed: ungrouped calls "
           "with their kernels joined; grouped calls share their group's kernels: see the groups below)\n";
    if (unknown_n)
      out << "  (busbw and the gathers' algbw need the communicator's size: its ncclCommInitRank was not seen "
             "(created before the attach): '-')\n";
    if (p.unbounded) out << "  (" << p.unbounded << " calls past the bounds kept for the join: not in the tables)\n";
    if (p.simulated)
      out << "  (" << p.simulated
          << " calls in groups closed by ncclGroupSimulateEnd (never run: torch's time estimator): not counted)\n";
    if (p.launches_dropped)
      out << "  (" << p.launches_dropped << " launches past the bound of those awaiting their kernel record: "
          << "their calls may be untimed)\n";
    if (p.rows_dropped) out << "  (" << p.rows_dropped << " calls of sizes or actions past the bounds: in no row)\n";

    out << "\n  per Lightning action (innermost action open on the calling thread)\n";
    std::vector<std::vector<std::string>> acts{{"action", "function", "calls", "bytes", "timed", "GPU (ms)"}};
    for (const NcclActionRow& a : p.actions)
      acts.push_back({utf8_text(a.action), nccl_fn_name(a.fn), std::to_string(a.calls), std::to_string(a.bytes),
                      std::to_string(a.timed), ms_or_dash(a.timed, a.gpu_ns)});
    TextTable{acts, "ll"}.write(out);

    if (!p.groups.empty()) {
      out << "\n  groups (ncclGroupStart ... ncclGroupEnd, by the calls in them; GPU: the kernels launched at the "
             "group's end)\n";
      std::vector<std::vector<std::string>> gs{{"calls in the group", "groups", "timed", "GPU (ms)", "avg (us)"}};
      for (const NcclGroupRow& g : p.groups)
        gs.push_back({g.calls, std::to_string(g.groups), std::to_string(g.timed), ms_or_dash(g.timed, g.gpu_ns),
                      g.timed ? fixed(static_cast<double>(g.gpu_ns) / static_cast<double>(g.timed) / 1e3, 1) : "-"});
      TextTable{gs, "l"}.write(out);
    }

    out << "\n  communicators (in order of first use)\n";
    for (std::size_t i = 0; i < p.comms.size(); ++i) {
      const NcclComm& c = p.comms[i];
      out << "  comm " << i << ": " << c.calls << " calls";
      if (!c.handle)
        out << ", no communicator (a NULL handle: NCCL refused these calls)";
      else if (c.handle == ~0ull)
        out << ", other communicators (past the bound)";
      else if (c.nranks > 0)
        out << ", " << c.nranks << (c.nranks == 1 ? " rank" : " ranks") << ", this one rank " << c.rank;
      else
        out << ", size unknown (created before the attach)";
      if (c.destroyed) out << ", destroyed";
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace lt
