// The record catalogue (bpf/record_kinds.h): one entry per kind, names for
// every kind (a lost MEM record was once reported as a "GPU record"), the
// size rule the collector's normaliser applies.
#include "user/model/record_kinds.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "user/collector/record_normalizer.h"

using namespace lt;

TEST(RecordKinds, EveryKindOnceWithItsNames) {
  std::set<std::uint16_t> numbers;
  std::set<std::string> dumps;
  for (const RecordKind& k : record_kinds()) {
    EXPECT_TRUE(numbers.insert(k.kind).second) << k.enum_name;
    EXPECT_TRUE(dumps.insert(k.dump).second) << k.enum_name << ": dump name used twice";
    EXPECT_FALSE(std::string(k.text).empty()) << k.enum_name;
    EXPECT_EQ(record_kind(k.kind), &k);
    EXPECT_GE(k.size, sizeof(lt_event_header)) << k.enum_name;
  }
  EXPECT_EQ(numbers.size(), 61u);  // a kind added or removed: this count, docs/trace-format.md
}

TEST(RecordKinds, LossNotesNameEachKind) {
  EXPECT_EQ(record_text_name(LT_EV_ACTION_BEGIN), "action start");
  EXPECT_EQ(record_text_name(LT_EV_MEM), "memory");
  EXPECT_EQ(record_text_name(LT_EV_COMM), "collective");
  EXPECT_EQ(record_text_name(LT_EV_COMM_MARK), "collective mark");
  EXPECT_EQ(record_text_name(LT_EV_NCCL), "NCCL call");
  EXPECT_EQ(record_text_name(LT_EV_NONE), "generator resume");
  EXPECT_EQ(record_text_name(200), "kind 200");
  // Only GPU kinds say GPU.
  for (const RecordKind& k : record_kinds()) {
    if (std::string(k.text).find("GPU") != std::string::npos) {
      EXPECT_EQ(std::string(k.enum_name).rfind("GPU", 0), 0u) << k.enum_name;
    }
  }
}

TEST(RecordKinds, DumpNames) {
  EXPECT_STREQ(record_dump_name(LT_EV_ACTION_BEGIN), "action_begin");
  EXPECT_STREQ(record_dump_name(LT_EV_FETCH_BEGIN), "fetch");
  EXPECT_STREQ(record_dump_name(LT_EV_NCCL), "nccl");
  EXPECT_STREQ(record_dump_name(LT_EV_NONE), "unknown");
  EXPECT_STREQ(record_dump_name(999), "unknown");
}

TEST(RecordKinds, ExactSizesAreEnforcedByTheNormaliser) {
  EXPECT_EQ(exact_record_size(LT_EV_PY_SAMPLE), sizeof(lt_py_sample_event));
  EXPECT_EQ(exact_record_size(LT_EV_MEM_STACK), sizeof(lt_py_sample_event));
  EXPECT_EQ(exact_record_size(LT_EV_PROC_INFO), 0u);
  EXPECT_EQ(exact_record_size(999), 0u);
  RecordNormalizer norm;
  for (const RecordKind& k : record_kinds()) {
    if (!k.exact) continue;
    alignas(8) static unsigned char buf[8192];
    ASSERT_LE(k.size + 8, sizeof buf) << k.enum_name;
    lt_event_header h{};
    h.kind = k.kind;
    h.size = static_cast<std::uint16_t>(k.size + 8);
    std::memcpy(buf, &h, sizeof h);
    EXPECT_TRUE(norm.normalize(buf, k.size + 8).empty()) << k.enum_name << ": a grown record passed";
    h.size = static_cast<std::uint16_t>(k.size);
    std::memcpy(buf, &h, sizeof h);
    EXPECT_EQ(norm.normalize(buf, k.size).size(), k.size) << k.enum_name;
  }
}

namespace lt {
namespace {

// A window of the stream (watch's captures) keeps every name from before
// it: the records later ones refer to are names; the window is its own.
TEST(RecordKinds, WhatAWindowKeeps) {
  for (auto k : {LT_EV_PY_CODE, LT_EV_OP_NAME, LT_EV_PROC_INFO, LT_EV_HOST_INFO, LT_EV_NATIVE_SYM, LT_EV_NATIVE_FUNC,
                 LT_EV_MODULE_NAME, LT_EV_GPU_NAME, LT_EV_SAMPLER_INFO, LT_EV_RECORDED_REPORTS})
    EXPECT_EQ(keep_in_window(k), KeepInWindow::name) << record_dump_name(k);
  for (auto k : {LT_EV_ACTION_BEGIN, LT_EV_ACTION_END, LT_EV_PY_SAMPLE, LT_EV_OP, LT_EV_PROC_EXIT, LT_EV_COMM})
    EXPECT_EQ(keep_in_window(k), KeepInWindow::event) << record_dump_name(k);
  EXPECT_EQ(keep_in_window(LT_EV_WINDOW), KeepInWindow::frame);
  // A line per sampled instruction: named again in each ring segment.
  EXPECT_EQ(keep_in_window(LT_EV_PY_LINE), KeepInWindow::segment);
  EXPECT_EQ(keep_in_window(250), KeepInWindow::event);  // unknown: kept by its time
}

// The kinds whose records carry a Python stack come from the catalogue's
// struct column (they were a hand list the catalogue did not feed).
TEST(RecordKinds, StackCarryingKindsAreThoseOfTheSampleStruct) {
  std::set<std::uint16_t> carry;
  for (const RecordKind& k : record_kinds())
    if (carries_stack(k.kind)) carry.insert(k.kind);
  EXPECT_EQ(carry, (std::set<std::uint16_t>{LT_EV_PY_SAMPLE, LT_EV_OFFCPU_BEGIN, LT_EV_GPU_LAUNCH_STACK,
                                            LT_EV_MEM_STACK, LT_EV_COMM_STACK}));
  EXPECT_FALSE(carries_stack(LT_EV_OFFCPU_END));
  EXPECT_FALSE(carries_stack(250));  // unknown
}

}  // namespace
}  // namespace lt
