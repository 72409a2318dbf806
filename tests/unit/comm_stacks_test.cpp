// c10d calls by Python stack (--launch-stacks) on synthetic COMM /
// COMM_STACK streams: each stack joins the COMM just before it on its
// thread, rows per (kind, stack) with exact calls and bytes, a COMM whose
// stack never came (lost, or a gap) is counted without one, a stray stack
// joins nothing, and the text section.
#include "reports/aggregate/comm_stacks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>

#include "reports/comm/comm_stacks_section.h"

using namespace lt;

namespace {

constexpr std::uint32_t kPid = 40;

struct Stream {
  CommStackAggregator agg;
  std::uint64_t ts = 1'000;
  template <typename R>
  void feed(const R& r) {
    agg.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void code(std::uint64_t code, const char* name, const char* file, int lasti, int line) {
    lt_py_code_event c{};
    c.hdr = {LT_EV_PY_CODE, sizeof c, kPid, kPid, 0, ++ts};
    c.code = code;
    c.checksum = 7;
    c.first_line = 1;
    std::strncpy(c.name, name, sizeof c.name - 1);
    std::strncpy(c.file, file, sizeof c.file - 1);
    feed(c);
    lt_py_line_event l{};
    l.hdr = {LT_EV_PY_LINE, sizeof l, kPid, kPid, 0, ++ts};
    l.code = code;
    l.checksum = 7;
    l.lasti = lasti;
    l.line = line;
    feed(l);
  }
  // A 0-dim-free float32 tensor of `n` elements at word 2 (SizesAndStrides).
  void comm(std::uint8_t kind, std::uint32_t tid, bool with_stack, std::uint64_t n = 0) {
    lt_comm_event e{};
    e.hdr = {LT_EV_COMM, sizeof e, kPid, tid, 0, ++ts};
    e.kind = kind;
    e.backend = LT_COMM_GLOO;
    e.peer = -1;
    e.flags = with_stack ? LT_COMM_HAS_STACK : 0;
    if (n) {
      e.flags |= LT_COMM_HAS_TENSOR;
      e.impl[0] = 0x7f0000001000ull;
      e.impl[1] = 0x7f0000002000ull;
      e.impl[2] = 1;                     // ndim
      e.impl[3] = n;                     // size
      e.impl[8] = 1;                     // stride
      e.impl[14] = n;                    // numel
      e.impl[15] = 6 | (0xffull << 16);  // float32
    }
    feed(e);
  }
  // leaf first, as BPF walks
  void stack(std::uint32_t tid, std::initializer_list<std::pair<std::uint64_t, int>> leaf_first) {
    lt_py_sample_event e{};
    e.hdr = {LT_EV_COMM_STACK, sizeof e, kPid, tid, 0, ++ts};
    for (auto [code, lasti] : leaf_first) {
      e.frames[e.nframes].code = code;
      e.frames[e.nframes].checksum = 7;
      e.frames[e.nframes].lasti = lasti;
      ++e.nframes;
    }
    feed(e);
  }
};

}  // namespace

TEST(CommStacks, EachStackJoinsTheCallBeforeItOnItsThread) {
  Stream s;
  s.code(0x100, "all_reduce", "/t/distributed_c10d.py", 10, 2501);
  s.code(0x200, "sync_grads", "/job/train.py", 4, 12);
  s.code(0x300, "log_metrics", "/job/train.py", 6, 30);
  s.code(0x400, "main", "/job/train.py", 8, 50);
  // Two call sites of all_reduce, interleaved over two threads.
  for (int i = 0; i < 5; ++i) {
    s.comm(LT_COMM_ALLREDUCE, kPid, true, 1000);
    s.comm(LT_COMM_ALLREDUCE, kPid + 1, true, 1);
    s.stack(kPid + 1, {{0x100, 10}, {0x300, 6}, {0x400, 8}});
    s.stack(kPid, {{0x100, 10}, {0x200, 4}, {0x400, 8}});
  }
  // A call whose stack was lost: the next call on the thread comes first.
  s.comm(LT_COMM_BARRIER, kPid, true);
  s.comm(LT_COMM_BARRIER, kPid, true);
  s.stack(kPid, {{0x200, 4}, {0x400, 8}});
  // A call taken without a stack, and a stack with no call before it.
  s.comm(LT_COMM_BROADCAST, kPid, false, 4);
  s.stack(kPid, {{0x300, 6}});
  const CommStacksReport rep = s.agg.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_EQ(p.calls, 11u);
  EXPECT_EQ(p.calls_without, 2u);  // the lost barrier stack, the broadcast without one
  ASSERT_EQ(p.rows.size(), 3u);
  // Most calls first; ties in order of first sight.
  EXPECT_EQ(p.rows[0].kind, LT_COMM_ALLREDUCE);
  EXPECT_EQ(p.rows[0].calls, 5u);
  EXPECT_EQ(p.rows[0].bytes, 5u * 4u);  // the 1-element tensor, on thread kPid + 1
  ASSERT_EQ(p.rows[0].stack.size(), 3u);
  EXPECT_EQ(p.rows[0].stack[1].function, "log_metrics");  // root first
  EXPECT_EQ(p.rows[0].stack[1].line, 30);
  EXPECT_EQ(p.rows[1].calls, 5u);
  EXPECT_EQ(p.rows[1].bytes, 5u * 4000u);
  EXPECT_EQ(p.rows[1].stack[1].function, "sync_grads");
  EXPECT_EQ(p.rows[2].kind, LT_COMM_BARRIER);
  EXPECT_EQ(p.rows[2].calls, 1u);

  const std::string text = render_comm_stacks(rep);
  EXPECT_NE(text.find("Collectives by Python stack"), std::string::npos) << text;
  EXPECT_NE(text.find("11 calls with a stack, 2 without"), std::string::npos) << text;
  EXPECT_NE(text.find("  all_reduce: 5 calls, 20000 bytes\n    all_reduce (/t/distributed_c10d.py:2501)\n"
                      "    sync_grads (/job/train.py:12)\n    main (/job/train.py:50)\n"),
            std::string::npos)
      << text;
}

TEST(CommStacks, AGapDropsTheStackAwaitedAndNoProcessMeansNoSection) {
  Stream s;
  s.comm(LT_COMM_ALLREDUCE, kPid, true, 8);
  s.agg.gap();
  s.stack(kPid, {{0x100, 10}});  // after the gap: joins nothing
  const auto rep = s.agg.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].calls, 0u);
  EXPECT_EQ(rep.processes[0].calls_without, 1u);
  EXPECT_TRUE(rep.processes[0].rows.empty());

  Stream none;
  none.comm(LT_COMM_ALLREDUCE, kPid, false, 8);
  EXPECT_TRUE(none.agg.finish().processes.empty());
  EXPECT_EQ(render_comm_stacks(CommStacksReport{}), "");
}
