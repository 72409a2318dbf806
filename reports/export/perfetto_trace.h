// Perfetto's protobuf trace format (`--perfetto FILE`): the Chrome export's
// content (reports/export/chrome_trace.h) as a stream of TracePackets, for
// ui.perfetto.dev and trace_processor.  Smaller than the JSON (bytes per
// event: docs/benchmarks.md) and written as it is converted: one packet at a
// time (protobuf wire format by hand, proto_encoder.h; no libprotobuf).
//
// What goes where (field numbers: perfetto/protos/perfetto/trace/*.proto):
// * a process track (TrackDescriptor.process) per process of the document,
//   and a thread track (TrackDescriptor.thread) per thread with events;
// * Lightning actions (category "user_annotation"), aten ops ("cpu_op"),
//   CUDA API calls and NVTX ranges as SLICE_BEGIN/SLICE_END pairs on their
//   thread's track; GPU kernels, copies and memsets on a track per device
//   and stream ("GPU 0 stream 7") under their process, with a flow from the
//   launching API call (its CUPTI correlation id);
// * allocator events as a counter track per process and device (total bytes
//   allocated after each event), out-of-memory events as instants;
// * names and categories interned (InternedData) on one packet sequence.
// Perfetto's slices nest strictly: a slice that would end after the slice
// enclosing it (an op's end is an upper bound) is cut at that slice's end.
// Times are the Chrome export's (wall clock when the trace has a clock pair).
#pragma once
#include <cstdint>
#include <ostream>

#include "reports/export/chrome_trace.h"

namespace lt {

struct PerfettoStats {
  std::uint64_t packets = 0, slices = 0, counters = 0, instants = 0;
  std::uint64_t cut_slices = 0;  // ends moved to their parent's end to nest
};

PerfettoStats write_perfetto_document(const ChromeDocument& doc, std::ostream& out);

// One recording, as write_chrome_trace takes it.
PerfettoStats write_perfetto_trace(const ActionsReport& rep, std::ostream& out, const OpsReport* ops = nullptr,
                                   const GpuReport* gpu = nullptr, const MemoryReport* memory = nullptr,
                                   const RangeFilter* range = nullptr, const XlaReport* xla = nullptr);

}  // namespace lt
