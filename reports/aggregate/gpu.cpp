#include "reports/aggregate/gpu.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

#include "reports/aggregate/gpu_names.h"
#include "reports/aggregate/kernel_names.h"
#include "user/model/cuda_sites.h"
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

constexpr std::size_t kMaxLaunches = 1'000'000;  // correlation ids remembered per process
constexpr std::size_t kMaxSlices = 4'000'000;    // ~400 MB of timeline at most
// A libcuda launch this soon after a libcudart one on the same thread is
// the runtime calling the driver: one launch, not two.
constexpr std::uint64_t kNestedLaunchNs = 200'000;

std::string memop_name(const lt_gpu_activity& a) {
  return a.kind == LT_GPU_MEMSET ? memset_operation_name() : memcpy_operation_name(a.copy_kind);
}

}  // namespace

struct GpuAggregator::State {
  const ActionAggregator& actions;
  bool keep;
  State(const ActionAggregator& a, bool k) : actions(a), keep(k) {}

  using NameKey = std::tuple<std::uint32_t, std::uint16_t, std::uint32_t>;  // pid, LT_NAME_*, id
  GpuNameTable names;
  std::map<std::uint32_t, std::string> literals;  // slice names that are not GPU_NAMEs

  struct Launch {
    std::uint32_t tid = 0;
    std::uint64_t ts = 0;
    std::uint32_t action = 0;  // row index
  };
  struct Open {
    std::string name, domain;
    std::uint64_t ts;
  };
  struct Proc {
    GpuProcess out;
    std::unordered_map<std::uint32_t, Launch> launches;  // correlation -> launch
    std::deque<std::uint32_t> launch_order;
    std::unordered_map<std::uint32_t, std::pair<std::uint16_t, std::uint64_t>> last_uprobe;  // tid -> source, ts
    std::map<std::uint32_t, std::vector<std::uint64_t>> kernels;                             // name id -> durations
    std::map<std::string, DurationStat> memops;
    std::map<std::pair<std::uint16_t, std::uint32_t>, std::vector<std::uint64_t>> apis;  // (kind, cbid)
    std::map<std::string, DurationStat> nvtx;
    std::unordered_map<std::uint32_t, std::vector<Open>> pushed;  // tid -> open push ranges
    std::unordered_map<std::uint64_t, Open> started;              // range id -> open start/end range
    std::map<std::string, std::uint64_t> probed;
    std::map<std::string, std::uint32_t> action_row;
    std::uint32_t row(const std::string& action) {
      auto [it, fresh] = action_row.try_emplace(action, static_cast<std::uint32_t>(out.actions.size()));
      if (fresh) out.actions.push_back({action});
      return it->second;
    }
  };
  std::map<std::uint32_t, Proc> procs;
  std::vector<std::uint32_t> order;
  GpuReport rep;
  std::vector<NameKey> slice_name_keys;  // slice name index -> key, resolved at finish
  std::map<NameKey, std::uint32_t> slice_name_of;
  std::map<std::string, std::uint32_t> literal_names;

  Proc& proc(std::uint32_t pid) {
    auto [it, fresh] = procs.try_emplace(pid);
    if (fresh) {
      order.push_back(pid);
      it->second.out.pid = pid;
    }
    return it->second;
  }
  std::string action_at(std::uint32_t pid, std::uint32_t tid) const {
    std::string a = actions.innermost_action(pid, tid);
    return a.empty() && tid != pid ? actions.innermost_action(pid, pid) : a;
  }
  std::uint32_t slice_name(const NameKey& k) {
    auto [it, fresh] = slice_name_of.try_emplace(k, static_cast<std::uint32_t>(slice_name_keys.size()));
    if (fresh) slice_name_keys.push_back(k);
    return it->second;
  }
  std::uint32_t slice_literal(const std::string& s) {
    // Literal names live under pid UINT32_MAX, kind 0, id = their index.
    auto [it, fresh] = literal_names.try_emplace(s, static_cast<std::uint32_t>(literal_names.size()));
    if (fresh) literals[it->second] = s;
    return slice_name({UINT32_MAX, 0, it->second});
  }
  const std::string* name_of(std::uint32_t pid, std::uint16_t kind, std::uint32_t id) const {
    return names.find(pid, kind, id);
  }

  void on_launch(const lt_event_header& h, const lt_gpu_launch_event& e) {
    auto& p = proc(h.pid);
    if (e.source != LT_LAUNCH_CUPTI) {
      // The runtime's own call into the driver is one call, not two.
      auto& last = p.last_uprobe[h.tid];
      const bool nested =
          e.source == LT_LAUNCH_LIBCUDA && last.first == LT_LAUNCH_CUDART && h.ts_ns - last.second < kNestedLaunchNs;
      last = {e.source, h.ts_ns};
      if (nested) return;
      const char* fn = cuda_site_name(e.source, e.cbid);
      p.probed[fn ? fn : "?"]++;
      if (p.out.source.empty()) p.out.source = "uprobes";
    }
    ++p.out.launches;
    auto r = p.row(action_at(h.pid, h.tid));
    auto& row = p.out.actions[r];
    const unsigned api = LT_API_OF(e.api);  // a direct driver call carries LT_API_DRIVER
    if (api == LT_API_LAUNCH || api == LT_API_GRAPH_LAUNCH) row.launches++;
    if (api == LT_API_SYNC && e.source != LT_LAUNCH_CUPTI) row.syncs++;  // CUPTI: counted with its duration
    if (e.source != LT_LAUNCH_CUPTI || !e.correlation) return;
    if (p.launches.size() >= kMaxLaunches) {
      p.launches.erase(p.launch_order.front());
      p.launch_order.pop_front();
    }
    if (p.launches.insert_or_assign(e.correlation, Launch{h.tid, h.ts_ns, r}).second)
      p.launch_order.push_back(e.correlation);
  }

  void on_activity(const lt_event_header& h, const lt_gpu_activity& a) {
    auto& p = proc(h.pid);
    if (p.out.source.empty() || p.out.source == "uprobes") p.out.source = "CUPTI";
    const std::uint64_t dur = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
    const Launch* l = nullptr;
    if (a.correlation)
      if (auto it = p.launches.find(a.correlation); it != p.launches.end()) l = &it->second;
    switch (a.kind) {
      case LT_GPU_KERNEL:
      case LT_GPU_MEMCPY:
      case LT_GPU_MEMSET: {
        if (a.kind == LT_GPU_KERNEL) {
          p.kernels[a.name_id].push_back(dur);
        } else {
          auto& m = p.memops[memop_name(a)];
          if (m.name.empty()) m.name = memop_name(a);
          m.durations_ns.push_back(dur);
          m.bytes.push_back(a.bytes);
        }
        if (!l) {
          ++p.out.unmatched_records;
        } else {
          auto& row = p.out.actions[l->action];
          if (a.kind == LT_GPU_KERNEL) {
            row.kernels++;
            row.kernel_ns += dur;
          } else {
            row.copies++;
            row.copy_ns += dur;
            row.copy_bytes += a.bytes;
          }
        }
        if (keep && rep.slices.size() < kMaxSlices) {
          GpuSlice s;
          s.pid = h.pid;
          s.kind = a.kind;
          s.device = a.device;
          s.stream = a.stream;
          s.tid = l ? l->tid : 0;
          s.begin_ns = a.start_ns;
          s.end_ns = std::max(a.end_ns, a.start_ns);
          s.correlation = a.correlation;
          s.name =
              a.kind == LT_GPU_KERNEL ? slice_name({h.pid, LT_NAME_KERNEL, a.name_id}) : slice_literal(memop_name(a));
          s.launch_ns = l ? l->ts : 0;
          s.bytes = a.bytes;
          std::memcpy(s.grid, a.grid, sizeof s.grid);
          std::memcpy(s.block, a.block, sizeof s.block);
          s.registers = a.registers;
          s.shared_mem = a.shared_mem;
          rep.slices.push_back(s);
        }
        return;
      }
      case LT_GPU_RUNTIME:
      case LT_GPU_DRIVER: {
        p.apis[{a.kind, a.cbid}].push_back(dur);
        const std::uint16_t nk = a.kind == LT_GPU_RUNTIME ? LT_NAME_RUNTIME_API : LT_NAME_DRIVER_API;
        if (l) {
          const std::string* n = name_of(h.pid, nk, a.cbid);
          if (n && n->find("Synchronize") != std::string::npos) {
            auto& row = p.out.actions[l->action];
            row.syncs++;
            row.sync_ns += dur;
          }
        }
        if (keep && rep.slices.size() < kMaxSlices) {
          GpuSlice s;
          s.pid = h.pid;
          s.kind = a.kind;
          s.tid = l ? l->tid : a.tid;
          s.begin_ns = a.start_ns;
          s.end_ns = std::max(a.end_ns, a.start_ns);
          s.correlation = a.correlation;
          s.name = slice_name({h.pid, nk, a.cbid});
          rep.slices.push_back(s);
        }
        return;
      }
      default:
        return;  // SYNC (the API record already has it), OVERHEAD
    }
  }

  void on_nvtx(const lt_event_header& h, const lt_nvtx& n) {
    auto& p = proc(h.pid);
    std::string name;
    if (n.string_id) {
      const std::string* s = name_of(h.pid, LT_NAME_NVTX_STRING, n.string_id);
      name = s ? *s : "string#" + std::to_string(n.string_id);
    } else {
      name.assign(n.msg, strnlen(n.msg, sizeof n.msg));
    }
    std::string domain;
    if (n.domain) {
      const std::string* d = name_of(h.pid, LT_NAME_NVTX_DOMAIN, n.domain);
      domain = d ? *d : "domain#" + std::to_string(n.domain);
    }
    const std::uint32_t tid = n.tid ? n.tid : h.tid;
    auto close = [&](const Open& o, const char* style, std::uint64_t end) {
      auto& d = p.nvtx[o.domain + '\t' + o.name + '\t' + style];
      if (d.name.empty()) {
        d.name = o.name;
        d.domain = o.domain;
        d.style = style;
      }
      d.durations_ns.push_back(end > o.ts ? end - o.ts : 0);
      if (keep && rep.slices.size() < kMaxSlices) {
        GpuSlice s;
        s.pid = h.pid;
        s.kind = 0;  // NVTX range
        s.tid = tid;
        s.begin_ns = o.ts;
        s.end_ns = std::max(end, o.ts);
        s.name = slice_literal(o.domain.empty() ? o.name : o.domain + ":" + o.name);
        rep.slices.push_back(s);
      }
    };
    switch (n.type) {
      case LT_NVTX_PUSH:
        p.pushed[tid].push_back({name, domain, n.ts_ns});
        return;
      case LT_NVTX_POP: {
        auto& st = p.pushed[tid];
        if (st.empty()) return;  // pushed before we attached
        close(st.back(), "PushPop", n.ts_ns);
        st.pop_back();
        return;
      }
      case LT_NVTX_START:
        p.started[n.range_id] = {name, domain, n.ts_ns};
        return;
      case LT_NVTX_END: {
        auto it = p.started.find(n.range_id);
        if (it == p.started.end()) return;
        close(it->second, "StartEnd", n.ts_ns);
        p.started.erase(it);
        return;
      }
      default:
        return;  // marks: no duration
    }
  }

  void on_status(const lt_event_header& h, const lt_gpu_status& s) {
    auto& p = proc(h.pid);
    if (s.flags & LT_BRIDGE_F_LATE) p.out.late = true;
    if (s.state == LT_BRIDGE_DROPPED) {
      p.out.dropped = std::max(p.out.dropped, s.dropped);
      return;
    }
    std::string line(s.detail, strnlen(s.detail, sizeof s.detail));
    if (line.empty()) return;
    if (p.out.status.empty() || p.out.status.back() != line) p.out.status.push_back(line);
  }
};

GpuAggregator::GpuAggregator(const ActionAggregator& actions, bool keep_slices)
    : s_(std::make_unique<State>(actions, keep_slices)) {}
GpuAggregator::~GpuAggregator() = default;

void GpuAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  visit_record(h, record,
               overloaded{[&](const lt_event_header& h, const lt_gpu_name_event& e) { s.names.add(h.pid, e.n); },
                          [&](const lt_event_header& h, const lt_gpu_launch_event& e) { s.on_launch(h, e); },
                          [&](const lt_event_header& h, const lt_gpu_activity_event& e) { s.on_activity(h, e.a); },
                          [&](const lt_event_header& h, const lt_nvtx_event& e) { s.on_nvtx(h, e.n); },
                          [&](const lt_event_header& h, const lt_gpu_status_event& e) { s.on_status(h, e.s); }});
}

GpuReport GpuAggregator::finish() {
  auto& s = *s_;
  auto sort_desc = [](std::vector<DurationStat>& v) {
    auto total = [](const DurationStat& d) {
      std::uint64_t t = 0;
      for (auto x : d.durations_ns) t += x;
      return t;
    };
    std::stable_sort(v.begin(), v.end(), [&](const auto& a, const auto& b) { return total(a) > total(b); });
  };
  for (auto pid : s.order) {
    auto& p = s.procs[pid];
    for (auto& [id, ns] : p.kernels) {
      const std::string* n = s.name_of(pid, LT_NAME_KERNEL, id);
      p.out.kernels.push_back({n ? demangle_kernel(*n) : "kernel#" + std::to_string(id), std::move(ns), {}, "", ""});
    }
    for (auto& [k, m] : p.memops) p.out.memops.push_back(std::move(m));
    for (auto& [key, ns] : p.apis) {
      const std::string* n =
          s.name_of(pid, key.first == LT_GPU_RUNTIME ? LT_NAME_RUNTIME_API : LT_NAME_DRIVER_API, key.second);
      p.out.apis.push_back(
          {n ? *n : (key.first == LT_GPU_RUNTIME ? "runtime#" : "driver#") + std::to_string(key.second),
           std::move(ns),
           {},
           "",
           ""});
    }
    for (auto& [k, d] : p.nvtx) p.out.nvtx.push_back(std::move(d));
    for (auto& [fn, n] : p.probed) p.out.probed_calls.push_back({fn, n});
    sort_desc(p.out.kernels);
    sort_desc(p.out.memops);
    sort_desc(p.out.apis);
    sort_desc(p.out.nvtx);
    s.rep.processes.push_back(std::move(p.out));
  }
  s.rep.names.reserve(s.slice_name_keys.size());
  for (auto& [pid, kind, id] : s.slice_name_keys) {
    if (pid == UINT32_MAX) {
      s.rep.names.push_back(s.literals[id]);
      continue;
    }
    const std::string* n = s.names.find(pid, kind, id);
    s.rep.names.push_back(!n ? "#" + std::to_string(id) : kind == LT_NAME_KERNEL ? demangle_kernel(*n) : *n);
  }
  return std::move(s.rep);
}

}  // namespace lt
