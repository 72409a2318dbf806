#include "reports/export/chrome_trace.h"

#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "reports/export/gpu_layout.h"
#include "reports/export/gpu_slice_kinds.h"
#include "user/text/json_escape.h"

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

class Writer {
 public:
  Writer(const ChromeDocument& doc, std::ostream& out) : doc_(doc), out_(out), gpu_(doc) {}

  void write() {
    header();
    for (const auto& src : doc_.sources) {
      std::map<std::uint32_t, std::vector<const OpInterval*>> ops_of;  // op calls by process, in begin order
      if (src.ops)
        for (const auto& iv : src.ops->intervals)
          if (src.keeps(iv.pid, iv.begin_ns, iv.end_ns)) ops_of[iv.pid].push_back(&iv);
      std::unordered_map<std::uint32_t, const ProcessMemory*> memory_of;
      if (src.memory)
        for (const auto& pm : src.memory->processes) memory_of.emplace(pm.pid, &pm);
      for (const auto& p : src.processes) {
        auto m = memory_of.find(p.proc->meta.pid);
        process_events(src, p, ops_of[p.proc->meta.pid], m == memory_of.end() ? nullptr : m->second);
      }
    }
    for (std::size_t i = 0; i < doc_.sources.size(); ++i) gpu_events(i);
    for (const auto& [pid, stream] : streams_)
      next() << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << pid << ", \"tid\": " << stream
             << ", \"args\": {\"name\": " << json_string("stream " + std::to_string(stream)) << "}}";
    out_ << "\n],\n\"traceName\": \"ltrace-bpf\"\n}\n";
  }

 private:
  const ChromeDocument& doc_;
  std::ostream& out_;
  bool first_ = true;
  std::uint64_t external_id_ = 0;
  std::set<std::pair<std::uint64_t, std::uint32_t>> streams_;  // (GPU pid, stream) rows
  std::set<std::uint64_t> gpu_pids_;                           // named GPU rows
  const GpuLayout gpu_;                                        // which GPU slices go in, under whose rows, flow ids

  std::ostream& next() {
    out_ << (first_ ? "\n" : ",\n");
    first_ = false;
    return out_;
  }

  // Nanoseconds on the document's clock: the recording host's wall clock
  // when the trace has a clock pair (so traces of several hosts line up),
  // else its monotonic clock; plus the source's correction.
  static std::int64_t time_ns(const ChromeSource& src, std::uint64_t mono_ns) {
    const HostMeta& h = src.actions->host;
    const std::uint64_t t = h.realtime_ns == 0 ? mono_ns : mono_ns - h.monotonic_ns + h.realtime_ns;
    return static_cast<std::int64_t>(t) + src.clock_offset_ns;
  }

  void header() {
    const auto& d = doc_;
    out_ << "{\n\"distributedInfo\": {\"backend\": \"unknown\", \"rank\": " << d.rank
         << ", \"world_size\": " << d.world_size << "},\n";
    out_ << "\"schemaVersion\": 1,\n\"deviceProperties\": [],\n\"displayTimeUnit\": \"ms\",\n";
    if (d.absolute_time) out_ << "\"baseTimeNanoseconds\": 0,\n";
    if (!d.hostname.empty()) out_ << "\"hostname\": " << json_string(d.hostname) << ",\n";
    out_ << "\"ltrace_bpf\": {" << d.ltrace_members;
    if (d.losses) {
      const auto& l = *d.losses;
      out_ << (d.ltrace_members.empty() ? "" : ", ") << "\"ringbuf_drops\": " << l.ringbuf_drops
           << ", \"unreadable_names\": " << l.unreadable_names << ", \"open_at_detach\": " << l.open_at_detach
           << ", \"ended_before_attach\": " << l.ended_before_attach
           << ", \"estimated_durations\": " << l.estimated_durations
           << ", \"complete\": " << (l.complete ? "true" : "false");
    }
    out_ << "},\n\"traceEvents\": [";
  }

  void process_events(const ChromeSource& src, const ChromeProcess& cp, const std::vector<const OpInterval*>& ops,
                      const ProcessMemory* memory) {
    const ProcessActions& p = *cp.proc;
    const auto& m = p.meta;
    next() << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << cp.pid
           << ", \"tid\": 0, \"args\": {\"name\": " << json_string(cp.name) << "}}";
    if (cp.sort_index >= 0)
      next() << "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " << cp.pid
             << ", \"tid\": 0, \"args\": {\"sort_index\": " << cp.sort_index << "}}";
    next() << "{\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": " << cp.pid
           << ", \"tid\": 0, \"args\": {\"labels\": " << json_string(cp.labels) << "}}";
    std::set<std::uint32_t> tids;
    for (const auto& iv : p.intervals) tids.insert(iv.tid);
    for (const auto* iv : ops) tids.insert(iv->tid);
    for (const auto& mk : cp.markers) tids.insert(mk.tid);
    for (const auto& sl : cp.slices) tids.insert(sl.tid);
    if (memory)
      for (const auto& e : memory->events) tids.insert(e.tid);
    for (auto tid : tids)
      next() << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << cp.pid << ", \"tid\": " << tid
             << ", \"args\": {\"name\": " << json_string(tid == m.pid ? "main thread" : "thread " + std::to_string(tid))
             << "}}";
    for (const auto& iv : p.intervals) {
      if (!src.keeps(m.pid, iv.begin_ns, iv.end_ns)) continue;
      next() << "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": " << json_string(p.actions[iv.action].name)
             << ", \"pid\": " << cp.pid << ", \"tid\": " << iv.tid
             << ", \"ts\": " << us_exact(time_ns(src, iv.begin_ns))
             << ", \"dur\": " << us_exact(static_cast<std::int64_t>(iv.end_ns - iv.begin_ns))
             << ", \"args\": {\"External id\": 0" << (iv.estimated ? ", \"estimated\": true" : "") << "}}";
    }
    for (const auto* iv : ops) {
      const auto& names = src.ops->names;
      const std::string name =
          iv->op < names.size() && !names[iv->op].empty() ? names[iv->op] : "op#" + std::to_string(iv->op);
      ++external_id_;
      next() << "{\"ph\": \"X\", \"cat\": \"" << (iv->user_scope ? "user_annotation" : "cpu_op")
             << "\", \"name\": " << json_string(name) << ", \"pid\": " << cp.pid << ", \"tid\": " << iv->tid
             << ", \"ts\": " << us_exact(time_ns(src, iv->begin_ns))
             << ", \"dur\": " << us_exact(static_cast<std::int64_t>(iv->end_ns - iv->begin_ns))
             << ", \"args\": {\"External id\": " << external_id_ << ", \"Ev Idx\": " << external_id_ - 1
             << (iv->measured ? "" : ", \"end\": \"upper bound\"") << "}}";
    }
    for (const auto& mk : cp.markers) {
      if (!src.keeps(m.pid, mk.ts_ns, mk.ts_ns)) continue;
      next() << "{\"ph\": \"i\", \"s\": \"t\", \"cat\": " << json_string(mk.category)
             << ", \"name\": " << json_string(mk.name) << ", \"pid\": " << cp.pid << ", \"tid\": " << mk.tid
             << ", \"ts\": " << us_exact(time_ns(src, mk.ts_ns)) << ", \"args\": {" << mk.args << "}}";
    }
    for (const auto& sl : cp.slices) {
      if (!src.keeps(m.pid, sl.begin_ns, sl.end_ns)) continue;
      next() << "{\"ph\": \"X\", \"cat\": " << json_string(sl.category) << ", \"name\": " << json_string(sl.name)
             << ", \"pid\": " << cp.pid << ", \"tid\": " << sl.tid
             << ", \"ts\": " << us_exact(time_ns(src, sl.begin_ns))
             << ", \"dur\": " << us_exact(static_cast<std::int64_t>(sl.end_ns - sl.begin_ns)) << ", \"args\": {"
             << sl.args << "}}";
    }
    if (memory) memory_events(src, cp, *memory);
  }

  // kineto's memory instants (torch's profile_memory=True export).
  void memory_events(const ChromeSource& src, const ChromeProcess& cp, const ProcessMemory& pm) {
    for (const MemEvent& e : pm.events) {
      if (!src.keeps(pm.pid, e.ts_ns, e.ts_ns)) continue;
      auto& o = next() << "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \""
                       << (e.oom ? "[OutOfMemory]" : "[memory]") << "\", \"pid\": " << cp.pid << ", \"tid\": " << e.tid
                       << ", \"ts\": " << us_exact(time_ns(src, e.ts_ns))
                       << ", \"args\": {\"Device Type\": " << int{e.device.type}
                       << ", \"Device Id\": " << int{e.device.index};
      if (!e.oom) o << ", \"Addr\": " << e.ptr;
      o << ", \"Bytes\": " << e.bytes << ", \"Total Allocated\": " << e.total_allocated
        << ", \"Total Reserved\": " << e.total_reserved << "}}";
    }
  }

  void gpu_events(std::size_t source) {
    const ChromeSource& src = doc_.sources[source];
    if (!src.gpu) return;
    const GpuReport& gpu = *src.gpu;
    // kineto puts a device's streams under pid = device index.  With several
    // processes (ranks) those collide, as they do with documents whose pids
    // are small numbers: then each process's devices get their own pid block.
    const bool blocks = gpu_.several() || doc_.gpu_pid_blocks;
    for (const auto& s : gpu.slices) {
      if (!gpu_.included(source, s)) continue;
      const GpuOwner who = gpu_.owner(source, s.pid);
      const std::string& name = s.name < gpu.names.size() ? gpu.names[s.name] : "?";
      const bool device = on_device(s);
      const std::uint64_t pid = !device ? who.pid : blocks ? 1'000'000'000ull + who.pid * 64 + s.device : s.device;
      const std::uint64_t tid = device ? s.stream : s.tid;
      if (device) {
        streams_.insert({pid, s.stream});
        if (gpu_pids_.insert(pid).second) {
          next() << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid
                 << ", \"tid\": 0, \"args\": {\"name\": "
                 << json_string("GPU " + std::to_string(s.device) + (blocks ? " (" + who.label + ")" : "")) << "}}";
          if (who.sort_index >= 0)
            next() << "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " << pid
                   << ", \"tid\": 0, \"args\": {\"sort_index\": " << who.sort_index << "}}";
        }
      }
      auto& o =
          next() << "{\"ph\": \"X\", \"cat\": \"" << gpu_category(s.kind) << "\", \"name\": " << json_string(name)
                 << ", \"pid\": " << pid << ", \"tid\": " << tid << ", \"ts\": " << us_exact(time_ns(src, s.begin_ns))
                 << ", \"dur\": " << us_exact(static_cast<std::int64_t>(s.end_ns - s.begin_ns)) << ", \"args\": {";
      if (s.kind == LT_GPU_KERNEL) {
        o << "\"device\": " << s.device << ", \"stream\": " << s.stream << ", \"correlation\": " << s.correlation
          << ", \"registers per thread\": " << s.registers << ", \"shared memory\": " << s.shared_mem << ", \"grid\": ["
          << s.grid[0] << ", " << s.grid[1] << ", " << s.grid[2] << "], \"block\": [" << s.block[0] << ", "
          << s.block[1] << ", " << s.block[2] << "]";
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
        const std::uint64_t id = gpu_.flow_id(source, s.pid, s.correlation);
        next() << "{\"ph\": \"s\", \"id\": " << id << ", \"pid\": " << who.pid << ", \"tid\": " << s.tid
               << ", \"ts\": " << us_exact(time_ns(src, s.launch_ns)) << ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}";
        next() << "{\"ph\": \"f\", \"id\": " << id << ", \"pid\": " << pid << ", \"tid\": " << tid
               << ", \"ts\": " << us_exact(time_ns(src, s.begin_ns))
               << ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}";
      }
    }
  }
};

}  // namespace

ChromeLosses chrome_losses(const ActionsReport& rep) {
  ChromeLosses l;
  l.ringbuf_drops = rep.ringbuf_drops;
  l.unreadable_names = rep.read_faults;
  l.complete = rep.complete;
  for (const auto& p : rep.processes) {
    l.open_at_detach += p.open_at_end;
    l.ended_before_attach += p.unmatched_stops;
    l.estimated_durations += p.estimated;
  }
  return l;
}

ChromeLosses chrome_losses(const ActionsReport& rep, const ProcessActions& proc) {
  ChromeLosses l;
  l.ringbuf_drops = rep.ringbuf_drops;
  l.unreadable_names = rep.read_faults;
  l.complete = rep.complete;
  l.open_at_detach = proc.open_at_end;
  l.ended_before_attach = proc.unmatched_stops;
  l.estimated_durations = proc.estimated;
  return l;
}

void write_chrome_document(const ChromeDocument& doc, std::ostream& out) {
  Writer(doc, out).write();
}

ChromeDocument recording_document(const ActionsReport& rep, const OpsReport* ops, const GpuReport* gpu,
                                  const MemoryReport* memory, const RangeFilter* range, const XlaReport* xla) {
  ChromeDocument doc;
  for (const auto& p : rep.processes)
    if (p.meta.rank >= 0) {
      doc.rank = p.meta.rank;
      doc.world_size = p.meta.world_size > 0 ? p.meta.world_size : 1;
      break;
    }
  doc.hostname = rep.host.hostname;
  doc.losses = chrome_losses(rep);
  // The attach on the document's clock: where --window's seconds count from.
  if (const std::uint64_t t0 = attach_begin_ns(rep)) {
    const HostMeta& h = rep.host;
    const std::uint64_t t = h.realtime_ns == 0 ? t0 : t0 - h.monotonic_ns + h.realtime_ns;
    doc.ltrace_members = "\"attach_ns\": " + std::to_string(t);
  }
  ChromeSource src;
  src.actions = &rep;
  src.ops = ops;
  src.gpu = gpu;
  src.memory = memory;
  src.unlisted_gpu = true;
  src.range = range;
  std::set<std::uint32_t> with_ops;  // and with memory events
  if (ops)
    for (const auto& iv : ops->intervals) with_ops.insert(iv.pid);
  if (memory)
    for (const auto& pm : memory->processes)
      if (!pm.events.empty()) with_ops.insert(pm.pid);
  for (const auto& p : rep.processes) {
    const auto& m = p.meta;
    if (p.actions.empty() && !with_ops.count(m.pid)) continue;
    std::string name = m.cmdline.empty() ? m.comm : m.cmdline;
    if (m.rank >= 0) name += " (rank " + std::to_string(m.rank) + ")";
    if (!m.torch_version.empty()) name += " [torch " + m.torch_version + "]";
    const std::string pid = "pid " + std::to_string(m.pid);
    src.processes.push_back({&p, m.pid, name, pid, -1, pid});
    if (xla)
      if (auto x = xla->procs.find(m.pid); x != xla->procs.end())
        for (const auto& sl : x->second.slices)
          src.processes.back().slices.push_back({sl.tid, sl.begin_ns, sl.end_ns, xla_site_name(sl.site), "xla", ""});
  }
  doc.sources.push_back(std::move(src));
  return doc;
}

void write_chrome_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops, const GpuReport* gpu,
                        const MemoryReport* memory, const RangeFilter* range, const XlaReport* xla) {
  write_chrome_document(recording_document(rep, ops, gpu, memory, range, xla), out);
}

}  // namespace lt
