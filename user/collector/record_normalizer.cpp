#include "user/collector/record_normalizer.h"

#include <algorithm>
#include <cstring>

#include "user/model/record_kinds.h"

namespace lt {

template <typename R>
std::span<const std::byte> RecordNormalizer::copy(const void* data, R*& out) {
  out = reinterpret_cast<R*>(&buf_);
  std::memcpy(static_cast<void*>(out), data, sizeof(R));
  return {reinterpret_cast<const std::byte*>(out), sizeof(R)};
}

std::span<const std::byte> RecordNormalizer::normalize(const void* data, std::size_t size) {
  if (size < sizeof(lt_event_header)) return {};
  lt_event_header h;
  std::memcpy(&h, data, sizeof h);
  if (h.size != size) return {};
  if (const std::size_t fixed = exact_record_size(h.kind); fixed && size != fixed) return {};
  if (carries_stack(h.kind)) {
    lt_py_sample_event* e;
    auto out = copy(data, e);
    const unsigned n = std::min<unsigned>(e->nframes, LT_STACK_MAX);
    std::memset(static_cast<void*>(e->frames + n), 0, sizeof(lt_py_frame) * (LT_STACK_MAX - n));
    const unsigned nops = std::min<unsigned>(e->nops, LT_OPS_DEPTH);
    std::memset(static_cast<void*>(e->ops + nops), 0, sizeof(std::uint32_t) * (LT_OPS_DEPTH - nops));
    return out;
  }
  if (h.kind == LT_EV_GPU_LAUNCH) {
    lt_gpu_launch_event* e;
    auto out = copy(data, e);
    const unsigned nops = std::min<unsigned>(e->nops, LT_OPS_DEPTH);
    std::memset(static_cast<void*>(e->ops + nops), 0, sizeof(std::uint32_t) * (LT_OPS_DEPTH - nops));
    return out;
  }
  if (h.kind == LT_EV_OP_SHAPES) {
    lt_op_shapes_event* e;
    auto out = copy(data, e);
    for (unsigned i = 0; i < LT_SHAPE_REGS; ++i)
      if (!(e->tensors & (1u << i))) std::memset(e->impl[i], 0, sizeof e->impl[i]);
    return out;
  }
  if (h.kind == LT_EV_COMM) {
    lt_comm_event* e;
    auto out = copy(data, e);
    if (!(e->flags & LT_COMM_HAS_TENSOR)) std::memset(e->impl, 0, sizeof e->impl);
    return out;
  }
  return {static_cast<const std::byte*>(data), size};
}

namespace {

template <typename R>
R read_as(std::span<const std::byte> record) {
  R r;
  std::memcpy(&r, record.data(), sizeof r);
  return r;
}

template <typename R>
RecordOps running_ops(std::span<const std::byte> record) {
  // Only ids and nops are needed; the record may be large (a whole stack).
  RecordOps out;
  std::uint16_t nops;
  std::memcpy(&nops, record.data() + offsetof(R, nops), sizeof nops);
  out.count = std::min<unsigned>(nops, LT_OPS_DEPTH);
  std::memcpy(out.ids.data(), record.data() + offsetof(R, ops), sizeof(std::uint32_t) * out.count);
  return out;
}

}  // namespace

RecordOps ops_named(std::span<const std::byte> record) {
  RecordOps out;
  if (record.size() < sizeof(lt_event_header)) return out;
  const auto h = read_as<lt_event_header>(record);
  if (exact_record_size(h.kind) != record.size()) return out;
  if (carries_stack(h.kind)) return running_ops<lt_py_sample_event>(record);
  if (h.kind == LT_EV_GPU_LAUNCH) return running_ops<lt_gpu_launch_event>(record);
  if (h.kind == LT_EV_OP) {
    out.ids[out.count++] = read_as<lt_op_event>(record).op;
  } else if (h.kind == LT_EV_OP_SHAPES) {
    out.ids[out.count++] = read_as<lt_op_shapes_event>(record).op;
  }
  return out;
}

}  // namespace lt
