#include "torchbridge/cupti_records.h"

#include <cstring>
#include <unordered_set>
#include <vector>

namespace ltb {
namespace {

lt::u64 shift(uint64_t ts, int64_t offset) {
  if (ts == 0) return 0;
  int64_t v = static_cast<int64_t>(ts) + offset;
  return v < 0 ? 0 : static_cast<lt::u64>(v);
}

lt::u32 nonneg(int32_t v) {
  return v < 0 ? 0 : static_cast<lt::u32>(v);
}

void convert_kernel(const CUpti_ActivityKernel10* k, NameInterner& names, lt::lt_gpu_activity* out, int64_t off,
                    bool* new_name) {
  out->kind = LT_GPU_KERNEL;
  out->start_ns = shift(k->start, off);
  out->end_ns = shift(k->end, off);
  out->correlation = k->correlationId;
  NameInterner::Result n = names.intern(k->name);
  out->name_id = n.id;
  if (new_name) *new_name = n.fresh;
  out->stream = k->streamId;
  out->context = k->contextId;
  out->device = static_cast<lt::u16>(k->deviceId);
  out->grid[0] = nonneg(k->gridX);
  out->grid[1] = nonneg(k->gridY);
  out->grid[2] = nonneg(k->gridZ);
  out->block[0] = nonneg(k->blockX);
  out->block[1] = nonneg(k->blockY);
  out->block[2] = nonneg(k->blockZ);
  out->registers = k->registersPerThread;
  out->shared_mem = nonneg(k->staticSharedMemory) + nonneg(k->dynamicSharedMemory);
  out->graph_id = k->graphId;
}

// The fields copies and memsets share (CUpti_ActivityMemcpy6 and
// CUpti_ActivityMemset4 name them alike).
template <class Record>
void convert_memory_op(const Record* m, lt::u16 kind, int64_t off, lt::lt_gpu_activity* out) {
  out->kind = kind;
  out->start_ns = shift(m->start, off);
  out->end_ns = shift(m->end, off);
  out->bytes = m->bytes;
  out->correlation = m->correlationId;
  out->stream = m->streamId;
  out->context = m->contextId;
  out->device = static_cast<lt::u16>(m->deviceId);
  out->graph_id = m->graphId;
}

}  // namespace

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return sizeof(CUpti_ActivityOverhead3);
    default:
      return 0;
  }
}

bool to_lt_activity(const CUpti_Activity* rec, NameInterner& names, lt::lt_gpu_activity* out, int64_t off,
                    bool* new_name) {
  if (new_name) *new_name = false;
  if (rec == nullptr) return false;
  lt::lt_gpu_activity a;
  std::memset(&a, 0, sizeof a);
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      convert_kernel(reinterpret_cast<const CUpti_ActivityKernel10*>(rec), names, &a, off, new_name);
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      convert_memory_op(m, LT_GPU_MEMCPY, off, &a);
      a.copy_kind = m->copyKind;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      convert_memory_op(reinterpret_cast<const CUpti_ActivityMemset4*>(rec), LT_GPU_MEMSET, off, &a);
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      a.kind = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? LT_GPU_RUNTIME : LT_GPU_DRIVER;
      a.start_ns = shift(api->start, off);
      a.end_ns = shift(api->end, off);
      a.cbid = api->cbid;
      a.correlation = api->correlationId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
      a.kind = LT_GPU_SYNC;
      a.start_ns = shift(s->start, off);
      a.end_ns = shift(s->end, off);
      a.sync_type = static_cast<lt::u8>(s->type);
      a.correlation = s->correlationId;
      a.stream = s->streamId;
      a.context = s->contextId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(rec);
      a.kind = LT_GPU_OVERHEAD;
      a.start_ns = shift(o->start, off);
      a.end_ns = shift(o->end, off);
      a.cbid = static_cast<lt::u32>(o->overheadKind);
      a.correlation = o->correlationId;
      if (o->objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE || o->objectKind == CUPTI_ACTIVITY_OBJECT_CONTEXT ||
          o->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM) {
        a.device = static_cast<lt::u16>(o->objectId.dcs.deviceId);
        a.context = o->objectId.dcs.contextId;
        a.stream = o->objectId.dcs.streamId;
      }
      break;
    }
    default:
      return false;
  }
  *out = a;
  return true;
}

namespace {

// Sizes the size-based walk knows: the kinds converted, plus peer-to-peer
// copies (a kind the bridge skips; the tests use it).
size_t walk_size(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_MEMCPY2) return sizeof(CUpti_ActivityMemcpyPtoP4);
  return record_size(kind);
}

}  // namespace

CUptiResult next_record_by_size(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t pos = 0;
  if (*record != nullptr) {
    auto* cur = reinterpret_cast<uint8_t*>(*record);
    if (cur < buffer || cur >= buffer + valid_size) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t sz = walk_size((*record)->kind);
    if (sz == 0) return CUPTI_ERROR_INVALID_KIND;
    pos = static_cast<size_t>(cur - buffer) + sz;
  }
  if (pos + sizeof(CUpti_Activity) > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + pos);
  size_t sz = walk_size(next->kind);
  if (sz == 0 || pos + sz > valid_size) return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

namespace {

// Up to LT_GPU_BATCH records in a fixed array, handed over when full.
class Batcher {
 public:
  explicit Batcher(ActivitySink& sink, WalkStats& stats) : sink_(sink), stats_(stats) {}
  void add(const lt::lt_gpu_activity& a) {
    batch_[n_++] = a;
    if (n_ == LT_GPU_BATCH) flush();
  }
  void flush() {
    if (n_ == 0) return;
    sink_.activity(batch_, n_);
    stats_.batches++;
    n_ = 0;
  }

 private:
  ActivitySink& sink_;
  WalkStats& stats_;
  lt::lt_gpu_activity batch_[LT_GPU_BATCH];
  lt::u32 n_ = 0;
};

}  // namespace

WalkStats walk_activity_buffer(uint8_t* buffer, size_t valid_size, NextRecordFn next, NameInterner& names,
                               int64_t ts_offset_ns, ActivitySink& sink) {
  WalkStats stats;
  if (buffer == nullptr || valid_size == 0 || next == nullptr) {
    stats.end = CUPTI_ERROR_MAX_LIMIT_REACHED;
    return stats;
  }
  Batcher batch(sink, stats);
  // A runtime call's nested driver calls share its correlation id; the driver
  // record ends (and is written) first, so driver records wait for the end of
  // the buffer.
  std::vector<lt::lt_gpu_activity> drivers;
  std::unordered_set<lt::u32> runtime_corr;
  CUpti_Activity* rec = nullptr;
  for (;;) {
    CUptiResult r = next(buffer, valid_size, &rec);
    if (r != CUPTI_SUCCESS) {
      stats.end = r;
      break;
    }
    stats.records++;
    lt::lt_gpu_activity a;
    bool fresh = false;
    if (!to_lt_activity(rec, names, &a, ts_offset_ns, &fresh)) {
      stats.skipped++;
      continue;
    }
    if (fresh) sink.name(a.name_id, names.text(a.name_id));
    if (a.kind == LT_GPU_DRIVER) {
      drivers.push_back(a);
      continue;
    }
    if (a.kind == LT_GPU_RUNTIME && a.correlation != 0) runtime_corr.insert(a.correlation);
    sink.enrich(a);
    batch.add(a);
    stats.converted++;
  }
  for (lt::lt_gpu_activity& a : drivers) {
    if (a.correlation != 0 && runtime_corr.count(a.correlation)) {
      stats.nested_driver++;
      continue;
    }
    sink.enrich(a);
    batch.add(a);
    stats.converted++;
  }
  batch.flush();
  return stats;
}

namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

}  // namespace

lt::u16 classify_api(CUpti_CallbackDomain domain, std::string_view cupti_name) {
  std::string base = api_base_name(cupti_name);
  std::string_view b = base;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (b == "cudaGraphLaunch") return LT_API_GRAPH_LAUNCH;
    if (starts_with(b, "cudaLaunchKernel") || starts_with(b, "cudaLaunchCooperativeKernel")) return LT_API_LAUNCH;
    if (starts_with(b, "cudaMemcpy")) return LT_API_MEMCPY;
    if (starts_with(b, "cudaMemset")) return LT_API_MEMSET;
    if (b == "cudaDeviceSynchronize" || b == "cudaStreamSynchronize" || b == "cudaEventSynchronize") return LT_API_SYNC;
    return 0;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (b == "cuGraphLaunch") return LT_API_GRAPH_LAUNCH;
    if (b == "cuLaunchKernel" || b == "cuLaunchKernelEx" || starts_with(b, "cuLaunchCooperativeKernel"))
      return LT_API_LAUNCH;
    if (starts_with(b, "cuMemcpy")) return LT_API_MEMCPY;
    if (starts_with(b, "cuMemsetD")) return LT_API_MEMSET;
    if (b == "cuCtxSynchronize" || b == "cuStreamSynchronize" || b == "cuEventSynchronize") return LT_API_SYNC;
    return 0;
  }
  return 0;
}

}  // namespace ltb
