// CUPTI activity records -> lt_gpu_activity, and which API calls the bridge
// reports at entry.  Pure code: uses the CUPTI headers' types, never a CUPTI
// function (the record walker takes cuptiActivityGetNextRecord as an
// argument), so it is linked into the unit tests as well.
//
// Record layouts are the ones the CUDA 13 headers (CUPTI_API_VERSION 130001)
// define as current: CUpti_ActivityKernel10, CUpti_ActivityMemcpy6,
// CUpti_ActivityMemset4, CUpti_ActivityAPI, CUpti_ActivitySynchronization2,
// CUpti_ActivityOverhead3.  Newer CUPTI versions append fields, so the
// prefix read here stays valid.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bpf/events.h"
#include "torchbridge/names.h"

namespace ltb {

// Converts one CUPTI record.  Returns false (and leaves *out untouched) for
// kinds the bridge does not report.  Timestamps get `ts_offset_ns` added
// (0 stays 0: CUPTI's "no timing").  A kernel's name is interned; when the
// name is new, *new_name (if given) is set so the caller announces it before
// the record.  tid is left 0: CUPTI's threadId is a pthread id, not a kernel
// tid; the bridge fills it from its own callback (see TidByCorrelation).
//
// Field use by kind (events.h has the struct):
//   KERNEL   grid, block, registers, shared_mem (static + dynamic), stream,
//            context, device, correlation, name_id, graph_id
//   MEMCPY   bytes, copy_kind, stream, context, device, correlation, graph_id
//   MEMSET   bytes, stream, context, device, correlation, graph_id
//   RUNTIME / DRIVER  cbid, correlation
//   SYNC     sync_type, stream, context, correlation
//   OVERHEAD cbid = CUpti_ActivityOverheadKind, device when the object is one
bool to_lt_activity(const CUpti_Activity* rec, NameInterner& names, lt::lt_gpu_activity* out, int64_t ts_offset_ns,
                    bool* new_name = nullptr);

// cuptiActivityGetNextRecord's signature.
using NextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t valid_size, CUpti_Activity** record);

// The same walk without libcupti, by the header structs' sizes, for the kinds
// above plus MEMCPY2 (peer copies, skipped by the conversion); it stops at any
// other kind.  For tests and as a fallback; the bridge uses CUPTI's own
// iterator.
CUptiResult next_record_by_size(uint8_t* buffer, size_t valid_size, CUpti_Activity** record);

// Size of the record struct the bridge reads for a kind (0 = not read).
size_t record_size(CUpti_ActivityKind kind);

// Where converted records go.  The walker calls, in this order per record:
// name() for a new kernel name, enrich() (fill tid, announce API names), and
// batches records into activity() calls of 1..LT_GPU_BATCH consecutive
// records.  DRIVER records whose correlation id belongs to a RUNTIME record
// of the same buffer (the driver call the runtime made) are dropped.
class ActivitySink {
 public:
  virtual ~ActivitySink() = default;
  virtual void name(lt::u32 id, std::string_view text) = 0;
  virtual void enrich(lt::lt_gpu_activity& rec) = 0;
  virtual void activity(const lt::lt_gpu_activity* recs, lt::u32 count) = 0;
};

struct WalkStats {
  size_t records = 0;    // records in the buffer
  size_t converted = 0;  // handed to the sink
  size_t skipped = 0;    // kinds not reported
  size_t nested_driver = 0;
  size_t batches = 0;
  CUptiResult end = CUPTI_SUCCESS;  // what ended the walk (MAX_LIMIT_REACHED = the normal end)
};

WalkStats walk_activity_buffer(uint8_t* buffer, size_t valid_size, NextRecordFn next, NameInterner& names,
                               int64_t ts_offset_ns, ActivitySink& sink);

// What a CUDA API call is, for ltrace:launch (LT_API_LAUNCH / SYNC / MEMCPY /
// MEMSET), from the name CUPTI gives its callback id; 0 = not reported.
// runtime: cudaLaunchKernel*, cudaLaunchCooperativeKernel*, cudaGraphLaunch,
//          cudaMemcpy*, cudaMemset*, cuda{Device,Stream,Event}Synchronize
// driver:  cuLaunchKernel(Ex), cuLaunchCooperativeKernel*, cuGraphLaunch,
//          cuMemcpy*, cuMemsetD*, cu{Ctx,Stream,Event}Synchronize
// (_ptsz / _ptds variants and version tags included).
lt::u16 classify_api(CUpti_CallbackDomain domain, std::string_view cupti_name);

// The api argument of ltrace:launch for a driver-domain call.
inline constexpr lt::u32 kApiDriverFlag = 0x100;

}  // namespace ltb
