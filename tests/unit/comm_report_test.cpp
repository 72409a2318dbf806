// The comm aggregator and report on synthetic COMM streams: TensorImpl words
// decoded into dtype and element count (layouts at several words, 0-dim
// tensors once the layout is known), rows per (kind, dtype, size), calls per
// Lightning action, sequence gaps per process group, and the text report.
#include "reports/comm/comm_report.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"

using namespace lt;

namespace {

constexpr std::uint32_t kPid = 30;
constexpr const char* kTrain = "[LightningModule]M.training_step";

// TensorImpl words from LT_COMM_FIRST_WORD with SizesAndStrides at `at`.
std::vector<std::uint64_t> impl_words(std::initializer_list<std::uint64_t> sizes, int dtype, int at = 2) {
  std::vector<std::uint64_t> w(LT_COMM_WORDS, 0);
  for (int i = 0; i < at; ++i) w[i] = 0x7f0000001000ull + 8 * i;  // pointers: storage, autograd meta, ...
  w[at] = sizes.size();
  std::uint64_t numel = 1, i = 0;
  for (std::uint64_t s : sizes) {
    w[at + 1 + i++] = s;
    numel *= s;
  }
  std::uint64_t stride = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    w[at + 6 + d] = stride;
    stride *= w[at + 1 + d];
  }
  w[at + 12] = numel;
  w[at + 13] = static_cast<std::uint64_t>(dtype) | (0xffull << 16);  // device_opt_ after data_type_
  return w;
}

struct Stream {
  ActionAggregator actions;
  CommAggregator comm{actions, {.keep_calls = true}};
  std::uint64_t ts = 1'000'000;
  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    comm.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void action(lt_event_kind kind, std::uint64_t key, const char* n = "") {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, kPid, 0, ++ts};
    e.key = key;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  void call(std::uint8_t kind, std::uint64_t pg, std::uint64_t seq, const std::vector<std::uint64_t>& words = {},
            std::uint16_t ntensors = 1) {
    lt_comm_event e{};
    e.hdr = {LT_EV_COMM, sizeof e, kPid, kPid, 0, ++ts};
    e.pg = pg;
    e.seq = seq;
    e.kind = kind;
    e.backend = LT_COMM_GLOO;
    e.peer = -1;
    if (!words.empty()) {
      e.flags = LT_COMM_HAS_TENSOR;
      e.ntensors = ntensors;
      std::memcpy(e.impl, words.data(), sizeof e.impl);
    }
    feed(e);
  }
};

TEST(CommTensor, DecodesAtAnyWord) {
  for (int at : {0, 2, 5, 10}) {
    auto t = decode_comm_tensor(impl_words({4, 250}, 6, at).data(), -1);
    ASSERT_TRUE(t) << at;
    EXPECT_EQ(t->layout, at);
    EXPECT_EQ(t->ndim, 2u);
    EXPECT_EQ(t->numel, 1000u);
    EXPECT_EQ(comm_dtype_name(t->dtype), "float32");
  }
}

// Words 6..29 of real TensorImpls (read with ctypes from Tensor._cdata):
// float32 [1000], a 0-dim float32 (its stride slot keeps a stale 1), int64 [4, 5].
constexpr std::uint64_t kTorch215[3][LT_COMM_WORDS] = {
    {0x7f97216c44b0,
     0x1,
     0x3e8,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x3e8,
     0x14101ff000006,
     0x9400010001,
     0x4661e6503640565,
     0xb1,
     0x0,
     0x3d800f50,
     0x3d800fd0,
     0x3d801010,
     0x0,
     0x3d801070},
    {0x7f9721518960,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x14101ff000006,
     0x9400010001,
     0x981400,
     0x41,
     0x7f972194ecf0,
     0x7f972194ecf0,
     0x7f9721510ed0,
     0x7f9721518530,
     0x7f972150fd30,
     0x7f972151ca70},
    {0x7f9668278910,
     0x2,
     0x4,
     0x5,
     0x0,
     0x0,
     0x0,
     0x5,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x14,
     0x14101ff000004,
     0x9400010001,
     0x7f97214e9630,
     0x421,
     0x7f972194ecc0,
     0x7f972194ecc0,
     0x0,
     0x0,
     0x7f97214fbd30,
     0x7f9721656830},
};
constexpr std::uint64_t kTorch113[3][LT_COMM_WORDS] = {
    {0x56110dc46d50,
     0x56110cf92e20,
     0x7f26990fba10,
     0x1,
     0x3e8,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x3e8,
     0x141ff00010006,
     0x12800004001,
     0x206465786f626e75,
     0x61,
     0x7f267a594c58,
     0x1,
     0x1,
     0x561109e38080},
    {0x56110e329970,
     0x56110cf92e20,
     0x7f269914af70,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x0,
     0x1,
     0x141ff00010006,
     0x12800004001,
     0x0,
     0xd1,
     0x7f268f5ca388,
     0x1,
     0x1,
     0x56110e32a180},
    {0x56110e32afa0,
     0x56110cf92e20,
     0x7f269914a980,
     0x2,
     0x4,
     0x5,
     0x0,
     0x0,
     0x0,
     0x5,
     0x1,
     0x0,
     0x0,
     0x0,
     0x0,
     0x14,
     0x141ff00010004,
     0x12800004001,
     0x0,
     0xd1,
     0x56110e32a,
     0x257331100934ad28,
     0xffffffff,
     0x795328736f72657a},
};

TEST(CommTensor, RealTensorImpls) {
  for (auto* words : {kTorch215, kTorch113}) {
    const int at = words == kTorch215 ? 1 : 3;
    for (int hint : {-1, at}) {
      auto a = decode_comm_tensor(words[0], hint);
      ASSERT_TRUE(a);
      EXPECT_EQ(a->layout, at);
      EXPECT_EQ(a->numel, 1000u);
      EXPECT_EQ(comm_dtype_name(a->dtype), "float32");
      auto s = decode_comm_tensor(words[1], hint);
      ASSERT_TRUE(s);
      EXPECT_EQ(s->layout, at);
      EXPECT_EQ(s->ndim, 0u);
      EXPECT_EQ(s->numel, 1u);
      EXPECT_EQ(comm_dtype_name(s->dtype), "float32");
      auto m = decode_comm_tensor(words[2], hint);
      ASSERT_TRUE(m);
      EXPECT_EQ(m->numel, 20u);
      EXPECT_EQ(comm_dtype_name(m->dtype), "int64");
    }
  }
}

TEST(CommTensor, ScalarAtTheKnownLayoutAndNumelMustAgree) {
  auto scalar = impl_words({}, 7, 2);
  auto t = decode_comm_tensor(scalar.data(), 2);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ndim, 0u);
  EXPECT_EQ(t->numel, 1u);
  EXPECT_EQ(comm_dtype_name(t->dtype), "float64");
  auto wrong = impl_words({16}, 4, 2);
  wrong[2 + 12] = 17;  // numel_ is not the product of the sizes: not a tensor
  EXPECT_FALSE(decode_comm_tensor(wrong.data(), -1));
}

TEST(CommReport, RowsActionsGroupsAndText) {
  Stream s;
  s.call(LT_COMM_BROADCAST, 0xa000, 1, impl_words({16}, 4));  // outside every action
  s.action(LT_EV_ACTION_BEGIN, 1, kTrain);
  s.call(LT_COMM_ALLREDUCE, 0xa000, 2, impl_words({1000}, 6));
  s.call(LT_COMM_ALLREDUCE, 0xa000, 3, impl_words({}, 6));      // 0-dim: the layout learnt above
  s.call(LT_COMM_ALLREDUCE, 0xa000, 5, impl_words({1000}, 6));  // seq 4 lost
  s.call(LT_COMM_ALLGATHER, 0xb000, 1, impl_words({2, 128}, 7), 1);
  s.call(LT_COMM_BARRIER, 0xa000, 6);
  s.action(LT_EV_ACTION_END, 1);
  s.call(LT_COMM_ALLREDUCE_COALESCED, 0xb000, 2, impl_words({8}, 15), 3);

  CommReport rep = s.comm.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessComm& p = rep.processes[0];
  EXPECT_EQ(p.calls, 7u);
  EXPECT_EQ(p.bytes, 128u + 4000 + 4 + 4000 + 2048 + 16);
  EXPECT_EQ(p.unreadable, 0u);
  ASSERT_EQ(p.calls_kept.size(), 7u);
  EXPECT_EQ(p.calls_kept[2].count, 1u);
  EXPECT_EQ(p.calls_kept[2].action, kTrain);
  EXPECT_EQ(p.calls_kept[4].pg, 1u);

  const std::string text = render_comm_report(rep);
  EXPECT_EQ(text,
            "Collectives (c10d process-group calls while attached, counted at their entry)\n"
            "Counts and bytes are exact; times are joined from entry probes (enqueue, completion, wait), '-' "
            "where not joined.\n"
            "\n"
            "pid 30: 7 calls, 10196 bytes\n"
            "  collective            size (B)  count      type  calls  bytes\n"
            "  all_reduce                   4      1   float32      1      4\n"
            "  all_reduce                4000   1000   float32      2   8000\n"
            "  all_reduce_coalesced        16      8  bfloat16      1     16\n"
            "  broadcast                  128     16     int64      1    128\n"
            "  all_gather                2048    256   float64      1   2048\n"
            "  barrier                      -      -         -      1      0\n"
            "  (size: bytes of this rank's tensor per call: the buffer of all_reduce, broadcast, reduce, send, "
            "recv; the input of the gathers and all_to_all; the output of the scatters)\n"
            "  (some calls passed several tensors: only the first is counted)\n"
            "  (no timing records: a trace written before them; counts only)\n"
            "\n"
            "  per Lightning action (innermost action open on the calling thread)\n"
            "  action                            collective            calls  bytes\n"
            "  [LightningModule]M.training_step  all_reduce                3   8004\n"
            "  [LightningModule]M.training_step  all_gather                1   2048\n"
            "  [LightningModule]M.training_step  barrier                   1      0\n"
            "  [no Lightning action]             all_reduce_coalesced      1     16\n"
            "  [no Lightning action]             broadcast                 1    128\n"
            "\n"
            "  process groups (backend objects in order of first use; seq: our count since the attach)\n"
            "  pg 0: 5 calls, seq 1-6 (1 lost)\n"
            "  pg 1: 2 calls, seq 1-2\n");
}

// A call whose tensor could not be read (a page not present as the probe
// ran) is counted in a '-' row and said, not taken for a call without one.
TEST(CommReport, UnreadTensorIsCountedAndSaid) {
  Stream s;
  s.call(LT_COMM_BROADCAST, 0xa000, 1, impl_words({16}, 4));
  lt_comm_event e{};
  e.hdr = {LT_EV_COMM, sizeof e, kPid, kPid, 0, ++s.ts};
  e.pg = 0xa000;
  e.seq = 2;
  e.kind = LT_COMM_BROADCAST;
  e.backend = LT_COMM_GLOO;
  e.peer = -1;
  e.ntensors = 1;
  e.flags = LT_COMM_TENSOR_UNREAD;
  s.feed(e);
  s.call(LT_COMM_BARRIER, 0xa000, 3);  // no tensor: not unreadable
  CommReport rep = s.comm.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].calls, 3u);
  EXPECT_EQ(rep.processes[0].unreadable, 1u);
  const std::string text = render_comm_report(rep);
  EXPECT_NE(text.find("  broadcast          -      -      -      1      0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(1 calls with a tensor that could not be read or decoded: counted, size '-')"),
            std::string::npos)
      << text;
}

TEST(CommReport, Empty) {
  EXPECT_NE(render_comm_report({}).find("No c10d calls"), std::string::npos);
}

}  // namespace
