#include "reports/export/perfetto_trace.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpf/events.h"
#include "reports/export/gpu_layout.h"
#include "reports/export/gpu_slice_kinds.h"
#include "reports/export/proto_encoder.h"
#include "user/text/utf8_text.h"

namespace lt {
namespace {

// Field numbers of perfetto/protos/perfetto/trace/perfetto_trace.proto.
namespace f {
constexpr std::uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr std::uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12, kSequenceFlags = 13,
                        kTrackDescriptor = 60;
// TrackDescriptor
constexpr std::uint32_t kUuid = 1, kName = 2, kProcess = 3, kThread = 4, kParentUuid = 5, kCounter = 8;
// ProcessDescriptor / ThreadDescriptor
constexpr std::uint32_t kPid = 1, kProcessName = 6, kProcessLabels = 8, kTid = 2, kThreadName = 5;
// TrackEvent
constexpr std::uint32_t kCategoryIids = 3, kType = 9, kNameIid = 10, kTrackUuid = 11, kCounterValue = 30, kFlowIds = 47,
                        kTerminatingFlowIds = 48;
// InternedData, EventCategory / EventName
constexpr std::uint32_t kEventCategories = 1, kEventNames = 2, kIid = 1, kInternedName = 2;
}  // namespace f

enum EventType : std::uint64_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
constexpr std::uint64_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;
constexpr std::uint64_t kSequence = 1;  // every packet: one writer, one sequence

// Which encloses which when two slices on a thread have the same times:
// actions, NVTX ranges, ops, then the CUDA calls ops make.
int category_rank(const char* category) {
  static const char* const order[] = {"user_annotation", "nvtx", "cpu_op", "cuda_runtime", "cuda_driver"};
  for (int i = 0; i < 5; ++i)
    if (std::strcmp(category, order[i]) == 0) return i;
  return 5;
}

// One slice to draw, on the document's clock.
struct Slice {
  std::int64_t begin = 0, end = 0;
  const std::string* name = nullptr;
  const char* category = nullptr;
  std::uint64_t flow = 0;  // 0: none
  bool terminating = false;
  std::uint32_t tid = 0;  // the thread's track (CPU slices)
};

class Writer {
 public:
  Writer(const ChromeDocument& doc, std::ostream& out) : doc_(doc), out_(out), gpu_(doc) {}

  PerfettoStats write() {
    ProtoMessage first;  // a fresh sequence: interned names start here
    first.varint(f::kSequenceId, kSequence);
    first.varint(f::kSequenceFlags, kIncrementalStateCleared);
    emit(first);
    for (std::size_t i = 0; i < doc_.sources.size(); ++i) {
      const ChromeSource& src = doc_.sources[i];
      // Each process's op calls and CUDA API slices, found once.
      ops_of_.clear();
      api_of_.clear();
      if (src.ops)
        for (const auto& iv : src.ops->intervals) ops_of_[iv.pid].push_back(&iv);
      if (src.gpu)
        for (const auto& s : src.gpu->slices)
          if (!on_device(s)) api_of_[s.pid].push_back(&s);
      for (const auto& cp : src.processes) cpu_process(i, cp);
      unlisted_api_slices(i);
      gpu_device_slices(i);
    }
    return stats_;
  }

 private:
  const ChromeDocument& doc_;
  std::ostream& out_;
  PerfettoStats stats_;
  std::uint64_t next_uuid_ = 1;
  // A merged document's ranks come from several hosts and containers whose
  // thread ids collide, and its pids are rank indexes (0 is the idle
  // process to trace_processor): there each (rank, thread) gets a tid of
  // its own, the real one in its name, and the pid is the rank index + 1.
  std::map<std::pair<std::size_t, std::uint32_t>, std::uint32_t> merged_tid_;
  bool merged() const { return doc_.gpu_pid_blocks; }
  std::unordered_map<std::string, std::uint64_t> names_, categories_;
  ProtoMessage interned_;  // InternedData for the packet being built
  const GpuLayout gpu_;    // which GPU slices go in, under whose rows, flow ids (as the Chrome writer's)
  std::map<std::pair<std::size_t, std::uint32_t>, std::uint64_t> process_uuid_;  // (source, OS pid)
  std::string buf_;

  void emit(const ProtoMessage& packet) {
    buf_.clear();
    append_varint(buf_, (std::uint64_t{f::kTracePacket} << 3) | 2);
    append_varint(buf_, packet.data().size());
    out_ << buf_ << packet.data();
    ++stats_.packets;
  }

  static std::int64_t time_ns(const ChromeSource& src, std::uint64_t mono_ns) {
    const HostMeta& h = src.actions->host;
    const std::uint64_t t = h.realtime_ns == 0 ? mono_ns : mono_ns - h.monotonic_ns + h.realtime_ns;
    return static_cast<std::int64_t>(t) + src.clock_offset_ns;
  }

  std::uint64_t intern(std::unordered_map<std::string, std::uint64_t>& table, std::uint32_t field,
                       const std::string& s) {
    auto [it, fresh] = table.try_emplace(s, table.size() + 1);
    if (fresh) {
      ProtoMessage entry;
      entry.varint(f::kIid, it->second);
      entry.bytes(f::kInternedName, utf8_text(s));  // protobuf strings are UTF-8; names may be any bytes
      interned_.message(field, entry);
    }
    return it->second;
  }

  void track(std::uint64_t uuid, const ProtoMessage& descriptor_fields) {
    ProtoMessage desc;
    desc.varint(f::kUuid, uuid);
    ProtoMessage packet;
    std::string all = desc.data() + descriptor_fields.data();
    packet.bytes(f::kTrackDescriptor, all);
    emit(packet);
  }

  void event(std::int64_t ts, const ProtoMessage& track_event) {
    ProtoMessage packet;
    packet.varint(f::kTimestamp, static_cast<std::uint64_t>(std::max<std::int64_t>(ts, 0)));
    packet.varint(f::kSequenceId, kSequence);
    packet.varint(f::kSequenceFlags, kNeedsIncrementalState);
    packet.message(f::kTrackEvent, track_event);
    if (!interned_.empty()) {
      packet.message(f::kInternedData, interned_);
      interned_.clear();
    }
    emit(packet);
  }

  void begin(std::uint64_t track_uuid, const Slice& s) {
    ProtoMessage e;
    e.varint(f::kCategoryIids, intern(categories_, f::kEventCategories, s.category));
    e.varint(f::kType, kSliceBegin);
    e.varint(f::kNameIid, intern(names_, f::kEventNames, *s.name));
    e.varint(f::kTrackUuid, track_uuid);
    if (s.flow) e.fixed64(s.terminating ? f::kTerminatingFlowIds : f::kFlowIds, s.flow);
    event(s.begin, e);
    ++stats_.slices;
  }

  void end(std::uint64_t track_uuid, std::int64_t ts) {
    ProtoMessage e;
    e.varint(f::kType, kSliceEnd);
    e.varint(f::kTrackUuid, track_uuid);
    event(ts, e);
  }

  // Per thread, then parents first (by begin, then longest, then
  // category_rank); the rest of the order by content, so the file is the
  // same on every run.  std::sort, not
  // stable_sort: no buffer the size of the slices.
  static bool track_order(const Slice& a, const Slice& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    if (a.category != b.category) return category_rank(a.category) < category_rank(b.category);
    if (const int c = a.name->compare(*b.name)) return c < 0;
    return a.flow < b.flow;
  }

  // One track's slices in time order, nested strictly: ends written when the
  // next slice begins after them.
  void slices(std::uint64_t track_uuid, std::span<Slice> v) {
    if (!std::is_sorted(v.begin(), v.end(), track_order)) std::sort(v.begin(), v.end(), track_order);
    std::vector<std::int64_t> open;  // ends of the open slices, innermost last
    for (Slice& s : v) {
      while (!open.empty() && open.back() <= s.begin) {
        end(track_uuid, open.back());
        open.pop_back();
      }
      if (!open.empty() && s.end > open.back()) {
        s.end = open.back();
        ++stats_.cut_slices;
      }
      begin(track_uuid, s);
      open.push_back(std::max(s.end, s.begin));
    }
    while (!open.empty()) {
      end(track_uuid, open.back());
      open.pop_back();
    }
  }

  std::uint64_t process_track(std::size_t source, std::uint32_t os_pid, std::uint64_t doc_pid, const std::string& name,
                              const std::string& labels) {
    auto [it, fresh] = process_uuid_.try_emplace({source, os_pid}, 0);
    if (!fresh) return it->second;
    it->second = next_uuid_++;
    ProtoMessage proc, fields;
    proc.varint(f::kPid, static_cast<std::uint32_t>(doc_pid + (merged() ? 1 : 0)));
    proc.bytes(f::kProcessName, utf8_text(name));
    if (!labels.empty()) proc.bytes(f::kProcessLabels, utf8_text(labels));
    fields.message(f::kProcess, proc);
    track(it->second, fields);
    return it->second;
  }

  std::uint64_t thread_track(std::size_t source, std::uint64_t doc_pid, std::uint32_t os_pid, std::uint32_t tid) {
    const std::uint64_t uuid = next_uuid_++;
    ProtoMessage thread, fields;
    std::string name = tid == os_pid ? "main thread" : "thread " + std::to_string(tid);
    std::uint32_t out_tid = tid;
    if (merged()) {
      out_tid =
          merged_tid_.try_emplace({source, tid}, static_cast<std::uint32_t>(merged_tid_.size() + 1)).first->second;
      if (tid == os_pid) name += " (tid " + std::to_string(tid) + ")";
    }
    thread.varint(f::kPid, static_cast<std::uint32_t>(doc_pid + (merged() ? 1 : 0)));
    thread.varint(f::kTid, out_tid);
    thread.bytes(f::kThreadName, name);
    fields.message(f::kThread, thread);
    track(uuid, fields);
    return uuid;
  }

  // A CUDA API call or NVTX range on its thread, with the flow to its kernel.
  Slice api_slice(std::size_t source, const GpuSlice& s) const {
    const ChromeSource& src = doc_.sources[source];
    const std::string& name = s.name < src.gpu->names.size() ? src.gpu->names[s.name] : unknown_;
    Slice out{time_ns(src, s.begin_ns), time_ns(src, s.end_ns), &name, gpu_category(s.kind)};
    if ((s.kind == LT_GPU_RUNTIME || s.kind == LT_GPU_DRIVER) && s.correlation &&
        gpu_.launched(source, s.pid, s.correlation))
      out.flow = gpu_.flow_id(source, s.pid, s.correlation);
    return out;
  }

  void cpu_process(std::size_t source, const ChromeProcess& cp) {
    const ChromeSource& src = doc_.sources[source];
    const ProcessActions& p = *cp.proc;
    const std::uint32_t os_pid = p.meta.pid;
    process_track(source, os_pid, cp.pid, cp.name, cp.labels);
    // One vector for the process (48 bytes a slice, sized once), grouped by
    // thread below: the only per-slice memory the writer holds.
    std::vector<Slice> all;
    all.reserve(p.intervals.size() + ops_of_[os_pid].size() + api_of_[os_pid].size() + cp.slices.size());
    auto add = [&](std::uint32_t tid, Slice s) {
      s.tid = tid;
      all.push_back(s);
    };
    for (const auto& iv : p.intervals)
      if (src.keeps(os_pid, iv.begin_ns, iv.end_ns))
        add(iv.tid,
            {time_ns(src, iv.begin_ns), time_ns(src, iv.end_ns), &p.actions[iv.action].name, "user_annotation"});
    for (const OpInterval* op : ops_of_[os_pid]) {
      const OpInterval& iv = *op;
      if (!src.keeps(os_pid, iv.begin_ns, iv.end_ns)) continue;
      const auto& names = src.ops->names;
      const std::string* name = &unknown_;
      if (iv.op < names.size() && !names[iv.op].empty()) {
        name = &names[iv.op];
      } else {
        name = &op_names_.try_emplace(iv.op, "op#" + std::to_string(iv.op)).first->second;
      }
      add(iv.tid,
          {time_ns(src, iv.begin_ns), time_ns(src, iv.end_ns), name, iv.user_scope ? "user_annotation" : "cpu_op"});
    }
    for (const GpuSlice* s : api_of_[os_pid])
      if (gpu_.included(source, *s)) add(s->tid, api_slice(source, *s));
    for (const ChromeSlice& sl : cp.slices)
      if (src.keeps(os_pid, sl.begin_ns, sl.end_ns))
        add(sl.tid, {time_ns(src, sl.begin_ns), time_ns(src, sl.end_ns), &sl.name, sl.category.c_str()});
    std::sort(all.begin(), all.end(), track_order);
    const ProcessMemory* memory = nullptr;
    if (src.memory)
      for (const auto& pm : src.memory->processes)
        if (pm.pid == os_pid) memory = &pm;
    std::map<std::uint32_t, std::vector<const MemEvent*>> ooms;
    if (memory)
      for (const auto& e : memory->events)
        if (e.oom && src.keeps(os_pid, e.ts_ns, e.ts_ns)) ooms[e.tid].push_back(&e);
    std::set<std::uint32_t> tids;
    for (const Slice& sl : all) tids.insert(sl.tid);
    for (const auto& [tid, v] : ooms) tids.insert(tid);
    auto from = all.begin();
    for (auto tid : tids) {
      const std::uint64_t uuid = thread_track(source, cp.pid, os_pid, tid);
      auto to = std::find_if(from, all.end(), [&](const Slice& sl) { return sl.tid != tid; });
      slices(uuid, std::span<Slice>(from, to));
      from = to;
      for (const MemEvent* e : ooms[tid]) {
        ProtoMessage ev;
        ev.varint(f::kCategoryIids, intern(categories_, f::kEventCategories, "cpu_instant_event"));
        ev.varint(f::kType, kInstant);
        ev.varint(f::kNameIid, intern(names_, f::kEventNames, "[OutOfMemory]"));
        ev.varint(f::kTrackUuid, uuid);
        event(time_ns(src, e->ts_ns), ev);
        ++stats_.instants;
      }
    }
    if (memory) memory_counters(source, cp, *memory);
  }

  // Total bytes allocated on each device after every allocator event: the
  // line Perfetto draws for a counter track.
  void memory_counters(std::size_t source, const ChromeProcess& cp, const ProcessMemory& pm) {
    const ChromeSource& src = doc_.sources[source];
    std::map<MemDevice, std::vector<const MemEvent*>> by_device;
    for (const auto& e : pm.events)
      if (!e.oom && src.keeps(pm.pid, e.ts_ns, e.ts_ns)) by_device[e.device].push_back(&e);
    const std::uint64_t parent = process_uuid_.at({source, pm.pid});
    for (auto& [device, events] : by_device) {
      std::stable_sort(events.begin(), events.end(),
                       [](const MemEvent* a, const MemEvent* b) { return a->ts_ns < b->ts_ns; });
      const std::uint64_t uuid = next_uuid_++;
      ProtoMessage fields, counter;
      fields.bytes(f::kName, utf8_text("[memory] " + mem_device_name(device) + " allocated (" + cp.labels + ")"));
      fields.varint(f::kParentUuid, parent);
      fields.message(f::kCounter, counter);
      track(uuid, fields);
      for (const MemEvent* e : events) {
        ProtoMessage ev;
        ev.varint(f::kType, kCounter);
        ev.varint(f::kTrackUuid, uuid);
        ev.int64(f::kCounterValue, e->total_allocated);
        event(time_ns(src, e->ts_ns), ev);
        ++stats_.counters;
      }
    }
  }

  // API slices of processes the document does not list (unlisted_gpu): under their OS pid.
  void unlisted_api_slices(std::size_t source) {
    const ChromeSource& src = doc_.sources[source];
    if (!src.gpu || !src.unlisted_gpu) return;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<Slice>> by_thread;
    for (const auto& s : src.gpu->slices)
      if (!on_device(s) && !gpu_.listed(source, s.pid) && gpu_.included(source, s))
        by_thread[{s.pid, s.tid}].push_back(api_slice(source, s));
    for (auto& [key, v] : by_thread) {
      const auto [pid, tid] = key;
      process_track(source, pid, pid, "pid " + std::to_string(pid), "pid " + std::to_string(pid));
      slices(thread_track(source, pid, pid, tid), v);
    }
  }

  // Kernels, copies and memsets on a track per (process, device, stream).
  void gpu_device_slices(std::size_t source) {
    const ChromeSource& src = doc_.sources[source];
    if (!src.gpu) return;
    std::map<std::tuple<std::uint32_t, std::uint16_t, std::uint32_t>, std::vector<Slice>> by_stream;
    for (const auto& s : src.gpu->slices) {
      if (!on_device(s) || !gpu_.included(source, s)) continue;
      const std::string& name = s.name < src.gpu->names.size() ? src.gpu->names[s.name] : unknown_;
      Slice sl{time_ns(src, s.begin_ns), time_ns(src, s.end_ns), &name, gpu_category(s.kind)};
      if (s.correlation && s.tid) {
        sl.flow = gpu_.flow_id(source, s.pid, s.correlation);
        sl.terminating = true;
      }
      by_stream[{s.pid, s.device, s.stream}].push_back(sl);
    }
    for (auto& [key, v] : by_stream) {
      const auto [pid, device, stream] = key;
      const ChromeProcess* cp = gpu_.listed(source, pid);
      const std::uint64_t parent =
          cp ? process_track(source, pid, cp->pid, cp->name, cp->labels)
             : process_track(source, pid, pid, "pid " + std::to_string(pid), "pid " + std::to_string(pid));
      const std::uint64_t uuid = next_uuid_++;
      ProtoMessage fields;
      fields.bytes(f::kName, "GPU " + std::to_string(device) + " stream " + std::to_string(stream));
      fields.varint(f::kParentUuid, parent);
      track(uuid, fields);
      slices(uuid, v);
    }
  }

  const std::string unknown_ = "?";
  std::unordered_map<std::uint32_t, std::string> op_names_;                   // "op#N" for ops with no name
  std::unordered_map<std::uint32_t, std::vector<const OpInterval*>> ops_of_;  // this source's, by OS pid
  std::unordered_map<std::uint32_t, std::vector<const GpuSlice*>> api_of_;
};

}  // namespace

PerfettoStats write_perfetto_document(const ChromeDocument& doc, std::ostream& out) {
  return Writer(doc, out).write();
}

PerfettoStats write_perfetto_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops,
                                   const GpuReport* gpu, const MemoryReport* memory, const RangeFilter* range,
                                   const XlaReport* xla) {
  return write_perfetto_document(recording_document(rep, ops, gpu, memory, range, xla), out);
}

}  // namespace lt
