#include "reports/export/chrome_trace.h"

#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "reports/format/json_escape.h"

namespace lt {

namespace {

// Exact microseconds with 3 decimals from integer nanoseconds: wall-clock
// microseconds (~1.8e15) leave a double only ~0.25 us of resolution, which
// would make back-to-back op slices appear to overlap.
std::string us_exact(std::int64_t ns) {
  char b[48];
  const char* sign = ns < 0 ? "-" : "";
  const unsigned long long a = ns < 0 ? static_cast<unsigned long long>(-ns) : static_cast<unsigned long long>(ns);
  std::snprintf(b, sizeof b, "%s%llu.%03llu", sign, a / 1000, a % 1000);
  return b;
}

// Nanoseconds on the wall clock when the trace has a clock pair (so traces
// of several hosts line up), else on the recording host's monotonic clock.
std::int64_t wall_ns(const ActionsReport& rep, std::uint64_t mono_ns) {
  if (rep.host.realtime_ns == 0) return static_cast<std::int64_t>(mono_ns);
  return static_cast<std::int64_t>(mono_ns - rep.host.monotonic_ns + rep.host.realtime_ns);
}

const ProcessActions* first_ranked(const ActionsReport& rep) {
  for (auto& p : rep.processes)
    if (p.meta.rank >= 0) return &p;
  return nullptr;
}

// GPU rows: kineto puts a device's streams under pid = device index.  With
// several processes on one machine (ranks) those collide, so each process's
// devices get their own pid block.
std::uint64_t gpu_pid(const GpuSlice& s, bool several) {
  return several ? 1'000'000'000ull + static_cast<std::uint64_t>(s.pid) * 64 + s.device : s.device;
}

const char* gpu_category(std::uint16_t kind) {
  switch (kind) {
    case LT_GPU_KERNEL:
      return "kernel";
    case LT_GPU_MEMCPY:
      return "gpu_memcpy";
    case LT_GPU_MEMSET:
      return "gpu_memset";
    case LT_GPU_RUNTIME:
      return "cuda_runtime";
    case LT_GPU_DRIVER:
      return "cuda_driver";
    default:
      return "nvtx";
  }
}

void write_gpu_events(const ActionsReport& rep, const GpuReport& gpu, const std::function<std::ostream&()>& sep) {
  const bool several = gpu.processes.size() > 1;
  std::set<std::pair<std::uint64_t, std::uint32_t>> rows;  // (pid, stream) of GPU rows
  std::set<std::uint64_t> gpu_pids;
  for (const auto& s : gpu.slices) {
    const std::string& name = s.name < gpu.names.size() ? gpu.names[s.name] : "?";
    const bool device = s.kind == LT_GPU_KERNEL || s.kind == LT_GPU_MEMCPY || s.kind == LT_GPU_MEMSET;
    const std::uint64_t pid = device ? gpu_pid(s, several) : s.pid;
    const std::uint64_t tid = device ? s.stream : s.tid;
    if (device) {
      rows.insert({pid, s.stream});
      if (gpu_pids.insert(pid).second)
        sep() << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid << ", \"tid\": 0, \"args\": {\"name\": "
              << json_string("GPU " + std::to_string(s.device) +
                             (several ? " (pid " + std::to_string(s.pid) + ")" : ""))
              << "}}";
    }
    auto& o = sep() << "{\"ph\": \"X\", \"cat\": \"" << gpu_category(s.kind) << "\", \"name\": " << json_string(name)
                    << ", \"pid\": " << pid << ", \"tid\": " << tid
                    << ", \"ts\": " << us_exact(wall_ns(rep, s.begin_ns))
                    << ", \"dur\": " << us_exact(static_cast<std::int64_t>(s.end_ns - s.begin_ns)) << ", \"args\": {";
    if (s.kind == LT_GPU_KERNEL) {
      o << "\"device\": " << s.device << ", \"stream\": " << s.stream << ", \"correlation\": " << s.correlation
        << ", \"registers per thread\": " << s.registers << ", \"shared memory\": " << s.shared_mem << ", \"grid\": ["
        << s.grid[0] << ", " << s.grid[1] << ", " << s.grid[2] << "], \"block\": [" << s.block[0] << ", " << s.block[1]
        << ", " << s.block[2] << "]";
    } else if (device) {
      const double gbps =
          s.end_ns > s.begin_ns ? static_cast<double>(s.bytes) / static_cast<double>(s.end_ns - s.begin_ns) : 0;
      char bw[32];
      std::snprintf(bw, sizeof bw, "%.3f", gbps);
      o << "\"device\": " << s.device << ", \"stream\": " << s.stream << ", \"correlation\": " << s.correlation
        << ", \"bytes\": " << s.bytes << ", \"memory bandwidth (GB/s)\": " << bw;
    } else if (s.kind == LT_GPU_RUNTIME || s.kind == LT_GPU_DRIVER) {
      o << "\"correlation\": " << s.correlation;
    } else {
      o << "\"pid\": " << s.pid;
    }
    o << "}}";
    // kineto's launch -> kernel arrow, from the launching call on its thread.
    if (device && s.correlation && s.launch_ns && s.tid) {
      sep() << "{\"ph\": \"s\", \"id\": " << s.correlation << ", \"pid\": " << s.pid << ", \"tid\": " << s.tid
            << ", \"ts\": " << us_exact(wall_ns(rep, s.launch_ns)) << ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}";
      sep() << "{\"ph\": \"f\", \"id\": " << s.correlation << ", \"pid\": " << pid << ", \"tid\": " << tid
            << ", \"ts\": " << us_exact(wall_ns(rep, s.begin_ns))
            << ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}";
    }
  }
  for (const auto& [pid, stream] : rows)
    sep() << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << pid << ", \"tid\": " << stream
          << ", \"args\": {\"name\": " << json_string("stream " + std::to_string(stream)) << "}}";
}

}  // namespace

void write_chrome_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops, const GpuReport* gpu) {
  const ProcessActions* ranked = first_ranked(rep);
  int rank = ranked ? ranked->meta.rank : 0;
  int world = ranked && ranked->meta.world_size > 0 ? ranked->meta.world_size : 1;
  std::uint64_t drops = rep.ringbuf_drops, faults = rep.read_faults, open = 0, unmatched = 0, estimated = 0;
  for (auto& p : rep.processes) {
    open += p.open_at_end;
    unmatched += p.unmatched_stops;
    estimated += p.estimated;
  }
  out << "{\n\"schemaVersion\": 1,\n";
  out << "\"distributedInfo\": {\"backend\": \"unknown\", \"rank\": " << rank << ", \"world_size\": " << world
      << "},\n";
  out << "\"deviceProperties\": [],\n";
  out << "\"displayTimeUnit\": \"ms\",\n";
  if (!rep.host.hostname.empty()) out << "\"hostname\": " << json_string(rep.host.hostname) << ",\n";
  out << "\"ltrace_bpf\": {\"ringbuf_drops\": " << drops << ", \"unreadable_names\": " << faults
      << ", \"open_at_detach\": " << open << ", \"ended_before_attach\": " << unmatched
      << ", \"estimated_durations\": " << estimated << ", \"complete\": " << (rep.complete ? "true" : "false")
      << "},\n";
  out << "\"traceEvents\": [";
  bool first = true;
  auto sep = [&]() -> std::ostream& {
    out << (first ? "\n" : ",\n");
    first = false;
    return out;
  };
  // op calls by process, in begin order per process
  std::map<std::uint32_t, std::vector<const OpInterval*>> ops_of;
  if (ops)
    for (auto& iv : ops->intervals) ops_of[iv.pid].push_back(&iv);
  std::uint64_t external_id = 0;
  for (auto& p : rep.processes) {
    auto my_ops = ops_of.find(p.meta.pid);
    if (p.actions.empty() && my_ops == ops_of.end()) continue;
    const auto& m = p.meta;
    std::string pname = m.cmdline.empty() ? m.comm : m.cmdline;
    if (m.rank >= 0) pname += " (rank " + std::to_string(m.rank) + ")";
    if (!m.torch_version.empty()) pname += " [torch " + m.torch_version + "]";
    sep() << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << m.pid
          << ", \"tid\": 0, \"args\": {\"name\": " << json_string(pname) << "}}";
    sep() << "{\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": " << m.pid
          << ", \"tid\": 0, \"args\": {\"labels\": " << json_string("pid " + std::to_string(m.pid)) << "}}";
    std::set<std::uint32_t> tids;
    for (auto& iv : p.intervals) tids.insert(iv.tid);
    if (my_ops != ops_of.end())
      for (auto* iv : my_ops->second) tids.insert(iv->tid);
    for (auto tid : tids)
      sep() << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << m.pid << ", \"tid\": " << tid
            << ", \"args\": {\"name\": " << json_string(tid == m.pid ? "main thread" : "thread " + std::to_string(tid))
            << "}}";
    for (auto& iv : p.intervals) {
      sep() << "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": " << json_string(p.actions[iv.action].name)
            << ", \"pid\": " << m.pid << ", \"tid\": " << iv.tid << ", \"ts\": " << us_exact(wall_ns(rep, iv.begin_ns))
            << ", \"dur\": " << us_exact(static_cast<std::int64_t>(iv.end_ns - iv.begin_ns))
            << ", \"args\": {\"External id\": 0" << (iv.estimated ? ", \"estimated\": true" : "") << "}}";
    }
    if (my_ops == ops_of.end()) continue;
    for (auto* iv : my_ops->second) {
      const std::string& name = iv->op < ops->names.size() && !ops->names[iv->op].empty()
                                    ? ops->names[iv->op]
                                    : "op#" + std::to_string(iv->op);
      ++external_id;
      sep() << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": " << json_string(name) << ", \"pid\": " << m.pid
            << ", \"tid\": " << iv->tid << ", \"ts\": " << us_exact(wall_ns(rep, iv->begin_ns))
            << ", \"dur\": " << us_exact(static_cast<std::int64_t>(iv->end_ns - iv->begin_ns))
            << ", \"args\": {\"External id\": " << external_id << ", \"Ev Idx\": " << external_id - 1
            << ", \"end\": \"upper bound\"}}";
    }
  }
  if (gpu && !gpu->slices.empty()) write_gpu_events(rep, *gpu, sep);
  out << "\n],\n\"traceName\": \"ltrace-bpf\"\n}\n";
}

}  // namespace lt
