// The record normalizer (user/collector/record_normalizer.h) on crafted
// records: what BPF leaves stale is zeroed, what it wrote is kept, records
// whose size disagrees are dropped, and the input is never written.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "user/collector/record_normalizer.h"

using namespace lt;

namespace {

template <typename R>
R junk(std::uint16_t kind) {
  R r;
  std::memset(static_cast<void*>(&r), 0xAB, sizeof r);  // an earlier record's bytes
  r.hdr = {kind, sizeof(R), 42, 43, 0, 1000};
  return r;
}

template <typename R>
R as(std::span<const std::byte> s) {
  EXPECT_EQ(s.size(), sizeof(R));
  R r;
  std::memcpy(static_cast<void*>(&r), s.data(), sizeof r);
  return r;
}

bool all_zero(const void* p, std::size_t n) {
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

bool all_junk(const void* p, std::size_t n) {
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != 0xAB) return false;
  return true;
}

}  // namespace

TEST(CollectorRecordNormalizer, SampleSlotsPastTheCountsAreZeroed) {
  for (auto kind : {LT_EV_PY_SAMPLE, LT_EV_OFFCPU_BEGIN, LT_EV_GPU_LAUNCH_STACK}) {
    auto in = junk<lt_py_sample_event>(kind);
    in.nframes = 3;
    in.nops = 2;
    in.ops[0] = 11;
    in.ops[1] = 12;
    const auto before = in;
    RecordNormalizer n;
    const auto out = as<lt_py_sample_event>(n.normalize(&in, sizeof in));
    EXPECT_EQ(std::memcmp(&in, &before, sizeof in), 0) << "the input is read-only";
    EXPECT_TRUE(all_junk(out.frames, sizeof(lt_py_frame) * 3)) << "frames BPF wrote are kept";
    EXPECT_TRUE(all_zero(out.frames + 3, sizeof(lt_py_frame) * (LT_STACK_MAX - 3)));
    EXPECT_EQ(out.ops[0], 11u);
    EXPECT_EQ(out.ops[1], 12u);
    EXPECT_TRUE(all_zero(out.ops + 2, sizeof(std::uint32_t) * (LT_OPS_DEPTH - 2)));
    EXPECT_EQ(out.user_ip, before.user_ip);
    EXPECT_EQ(std::memcmp(&out.hdr, &before.hdr, sizeof out.hdr), 0);

    const auto named = ops_named(n.normalize(&in, sizeof in));
    EXPECT_EQ(std::vector<std::uint32_t>(named.begin(), named.end()), (std::vector<std::uint32_t>{11, 12}));
  }
}

TEST(CollectorRecordNormalizer, CountsBeyondTheArraysAreClamped) {
  auto in = junk<lt_py_sample_event>(LT_EV_PY_SAMPLE);
  in.nframes = LT_STACK_MAX + 50;
  in.nops = LT_OPS_DEPTH + 3;
  RecordNormalizer n;
  const auto out = as<lt_py_sample_event>(n.normalize(&in, sizeof in));
  EXPECT_TRUE(all_junk(out.frames, sizeof out.frames));
  EXPECT_TRUE(all_junk(out.ops, sizeof out.ops));
  EXPECT_EQ(ops_named(n.normalize(&in, sizeof in)).count, unsigned{LT_OPS_DEPTH});
}

TEST(CollectorRecordNormalizer, LaunchOpsPastTheCountAreZeroed) {
  auto in = junk<lt_gpu_launch_event>(LT_EV_GPU_LAUNCH);
  in.nops = 1;
  in.ops[0] = 5;
  RecordNormalizer n;
  const auto out = as<lt_gpu_launch_event>(n.normalize(&in, sizeof in));
  EXPECT_EQ(out.ops[0], 5u);
  EXPECT_TRUE(all_zero(out.ops + 1, sizeof(std::uint32_t) * (LT_OPS_DEPTH - 1)));
  EXPECT_EQ(out.func, in.func);
  const auto named = ops_named(n.normalize(&in, sizeof in));
  EXPECT_EQ(std::vector<std::uint32_t>(named.begin(), named.end()), std::vector<std::uint32_t>{5});
}

TEST(CollectorRecordNormalizer, ShapesOfRegistersWithoutATensorAreZeroed) {
  auto in = junk<lt_op_shapes_event>(LT_EV_OP_SHAPES);
  in.op = 77;
  in.tensors = 0b000101;  // rdi and rdx held tensors
  RecordNormalizer n;
  const auto out = as<lt_op_shapes_event>(n.normalize(&in, sizeof in));
  for (unsigned i = 0; i < LT_SHAPE_REGS; ++i) {
    if (i == 0 || i == 2)
      EXPECT_TRUE(all_junk(out.impl[i], sizeof out.impl[i])) << i;
    else
      EXPECT_TRUE(all_zero(out.impl[i], sizeof out.impl[i])) << i;
  }
  const auto named = ops_named(n.normalize(&in, sizeof in));
  EXPECT_EQ(std::vector<std::uint32_t>(named.begin(), named.end()), std::vector<std::uint32_t>{77});
}

TEST(CollectorRecordNormalizer, OtherRecordsPassThroughUncopied) {
  auto in = junk<lt_action_event>(LT_EV_ACTION_BEGIN);
  RecordNormalizer n;
  const auto out = n.normalize(&in, sizeof in);
  EXPECT_EQ(out.data(), reinterpret_cast<const std::byte*>(&in));
  EXPECT_EQ(out.size(), sizeof in);
  EXPECT_EQ(ops_named(out).count, 0u);

  auto op = junk<lt_op_event>(LT_EV_OP);
  op.op = 9;
  const auto o = n.normalize(&op, sizeof op);
  EXPECT_EQ(o.data(), reinterpret_cast<const std::byte*>(&op));
  const auto named = ops_named(o);
  EXPECT_EQ(std::vector<std::uint32_t>(named.begin(), named.end()), std::vector<std::uint32_t>{9});
}

TEST(CollectorRecordNormalizer, RecordsWhoseSizeDisagreesAreDropped) {
  RecordNormalizer n;
  auto s = junk<lt_py_sample_event>(LT_EV_PY_SAMPLE);
  EXPECT_TRUE(n.normalize(&s, sizeof s - 8).empty()) << "shorter than its header says";
  s.hdr.size = sizeof s - 8;
  EXPECT_TRUE(n.normalize(&s, sizeof s - 8).empty()) << "header and buffer agree, but not the kind's size";
  EXPECT_TRUE(n.normalize(&s, 4).empty()) << "not even a header";
  auto p = junk<lt_proc_event>(LT_EV_PROC_FORK);
  p.hdr.size = sizeof p + 8;
  std::vector<std::byte> longer(sizeof p + 8);
  std::memcpy(longer.data(), &p, sizeof p);
  EXPECT_TRUE(n.normalize(longer.data(), longer.size()).empty());
  // A kind we pass through unread may have any size its header says.
  auto a = junk<lt_action_event>(LT_EV_ACTION_BEGIN);
  a.hdr.size = 24;
  EXPECT_EQ(n.normalize(&a, 24).size(), 24u);
}

TEST(CollectorRecordNormalizer, CommMarksOfTheirSizeOnly) {
  RecordNormalizer n;
  auto m = junk<lt_comm_mark_event>(LT_EV_COMM_MARK);
  EXPECT_EQ(n.normalize(&m, sizeof m).size(), sizeof m);
  m.hdr.size = sizeof m - 8;
  EXPECT_TRUE(n.normalize(&m, sizeof m - 8).empty()) << "a COMM_MARK shorter than lt_comm_mark_event";
}
