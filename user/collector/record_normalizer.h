// What the collector does to a record from BPF before it keeps it: a pure
// function of the record's bytes, no BPF and no state besides a buffer.
//  - A record whose size disagrees with its header, or with the fixed size
//    of a kind the collector reads, is dropped: never trusted.
//  - BPF reuses one buffer per CPU and fills only what it knows, so the
//    slots past a count (stack frames past nframes, running ops past nops)
//    and the argument registers that held no tensor carry an earlier
//    record's bytes: they are zeroed (deterministic files, better zstd).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bpf/events.h"

namespace lt {

class RecordNormalizer {
 public:
  // The record to keep; empty: drop it.  Points into `data` when nothing
  // needed fixing, else into this normalizer's buffer (valid until the next
  // call).
  std::span<const std::byte> normalize(const void* data, std::size_t size);

 private:
  template <typename R>
  std::span<const std::byte> copy(const void* data, R*& out);
  union {
    lt_py_sample_event sample;
    lt_gpu_launch_event launch;
    lt_op_shapes_event shapes;
  } buf_;
};

// The aten op indexes a normalized record names (a sample's or a launch's
// running ops, an op entry's op), outermost first: the op tracer announces
// their names ahead of the record.
struct RecordOps {
  std::array<std::uint32_t, LT_OPS_DEPTH> ids{};
  unsigned count = 0;
  const std::uint32_t* begin() const { return ids.data(); }
  const std::uint32_t* end() const { return ids.data() + count; }
};
RecordOps ops_named(std::span<const std::byte> record);

}  // namespace lt
