// The memory aggregator and report on synthetic MEM / MEM_STACK streams:
// per-action sums and peaks, frees whose size comes from the allocation,
// frees of allocations made before the attach, leak grouping by op and
// stack, CUDA allocator totals, OOMs, bounded state, and the text report.
#include "reports/memory/memory_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/memory.h"
#include "reports/aggregate/stacks.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"

using namespace lt;

namespace {

constexpr std::uint32_t kPid = 20;
constexpr const char* kTrain = "[LightningModule]M.training_step";
constexpr const char* kVal = "[LightningModule]M.validation_step";

struct Frame {
  std::uint64_t code;
  std::int32_t lasti;
};

struct Stream {
  ActionAggregator actions;
  MemoryAggregator memory;
  std::uint64_t next_key = 0x1000;
  std::uint64_t ts = 1'000'000;

  explicit Stream(MemoryOptions opts = {}) : memory(actions, opts) {}

  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    memory.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void action(lt_event_kind kind, std::uint64_t key, const char* n = "", std::uint32_t tid = kPid) {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, kPid, tid, 0, ++ts};
    e.key = key;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  std::uint64_t begin(const char* n, std::uint32_t tid = kPid) {
    const std::uint64_t key = next_key++;
    action(LT_EV_ACTION_BEGIN, key, n, tid);
    return key;
  }
  void end(std::uint64_t key, std::uint32_t tid = kPid) { action(LT_EV_ACTION_END, key, "", tid); }
  void op_name(std::uint32_t op, const char* n) {
    lt_op_name_event e{};
    e.hdr = {LT_EV_OP_NAME, sizeof e, 0, 0, 0, ++ts};
    e.op = op;
    std::strncpy(e.name, n, sizeof e.name - 1);
    feed(e);
  }
  void op(std::uint32_t op, std::uint16_t depth, std::uint32_t tid = kPid) {
    lt_op_event e{};
    e.hdr = {LT_EV_OP, sizeof e, kPid, tid, 0, ++ts};
    e.op = op;
    e.depth = depth;
    feed(e);
  }
  void code(std::uint64_t code, const char* name, const char* file, std::initializer_list<std::pair<int, int>> lines) {
    lt_py_code_event c{};
    c.hdr = {LT_EV_PY_CODE, sizeof c, kPid, kPid, 0, ++ts};
    c.code = code;
    c.checksum = 7;
    c.first_line = 1;
    std::strncpy(c.name, name, sizeof c.name - 1);
    std::strncpy(c.file, file, sizeof c.file - 1);
    feed(c);
    for (auto [lasti, line] : lines) {
      lt_py_line_event l{};
      l.hdr = {LT_EV_PY_LINE, sizeof l, kPid, kPid, 0, ++ts};
      l.code = code;
      l.checksum = 7;
      l.lasti = lasti;
      l.line = line;
      feed(l);
    }
  }
  struct Mem {
    std::uint8_t what = LT_MEM_ALLOC;
    std::uint64_t ptr = 0;
    std::int64_t bytes = 0;
    std::uint8_t type = 0;
    std::int8_t index = -1;
    std::uint16_t flags = 0;
    std::uint16_t depth = 0;
    std::uint64_t total_allocated = 0, total_reserved = 0;
    std::uint32_t tid = kPid;
  };
  void mem(const Mem& m) {
    lt_mem_event e{};
    e.hdr = {LT_EV_MEM, sizeof e, kPid, m.tid, 0, ++ts};
    e.ptr = m.ptr;
    e.bytes = m.bytes;
    e.what = m.what;
    e.device_type = m.type;
    e.device_index = m.index;
    e.flags = m.flags;
    e.depth = m.depth;
    e.total_allocated = m.total_allocated;
    e.total_reserved = m.total_reserved;
    feed(e);
  }
  void alloc(std::uint64_t ptr, std::int64_t bytes, std::uint32_t tid = kPid) {
    mem({.ptr = ptr, .bytes = bytes, .tid = tid});
  }
  void free_cpu(std::uint64_t ptr, std::uint32_t tid = kPid) { mem({.what = LT_MEM_FREE, .ptr = ptr, .tid = tid}); }
  // leaf first, as BPF walks
  void stack(std::initializer_list<Frame> leaf_first, std::initializer_list<std::uint32_t> ops = {},
             std::uint32_t tid = kPid) {
    lt_py_sample_event e{};
    e.hdr = {LT_EV_MEM_STACK, sizeof e, kPid, tid, 0, ++ts};
    for (auto f : leaf_first) {
      e.frames[e.nframes].code = f.code;
      e.frames[e.nframes].checksum = 7;
      e.frames[e.nframes].lasti = f.lasti;
      ++e.nframes;
    }
    for (auto o : ops) e.ops[e.nops++] = o;
    feed(e);
  }
  // An op call as the op observer measured it (written when it ended).
  void span(std::uint32_t op, std::uint16_t depth, std::uint64_t begin, std::uint64_t end, std::uint16_t flags = 0,
            std::uint32_t tid = kPid) {
    lt_op_span_event e{};
    e.hdr = {LT_EV_OP_SPAN, sizeof e, kPid, tid, 0, begin};
    e.end_ns = end;
    e.op = op;
    e.depth = depth;
    e.flags = flags;
    feed(e);
  }
  MemoryReport finish() {
    actions.finish();
    return memory.finish();
  }
};

const MemActionRow* row(const ProcessMemory& p, const std::string& action, MemDevice d = {}) {
  for (auto& r : p.actions)
    if (r.action == action && r.device == d) return &r;
  return nullptr;
}

}  // namespace

TEST(MemoryAggregate, PerActionSumsPeaksAndFreesOfUnknownSize) {
  Stream s;
  s.free_cpu(0xdead);  // allocated before the attach: size unknown
  auto k = s.begin(kTrain);
  s.alloc(0x100, 1000);
  s.alloc(0x200, 500);  // live 1500: the peak
  s.free_cpu(0x100);    // 1000, from the allocation
  s.alloc(0x300, 200);  // live 700
  s.end(k);
  k = s.begin(kTrain);
  s.free_cpu(0x300);
  s.alloc(0x400, 100);  // live 600
  s.end(k);
  k = s.begin(kVal);
  s.alloc(0x500, 4000);  // live 4600
  s.free_cpu(0x500);
  s.end(k);
  auto rep = s.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessMemory& p = rep.processes[0];
  ASSERT_EQ(p.actions.size(), 3u);
  EXPECT_EQ(p.actions[0].action, kTrain);
  EXPECT_EQ(p.actions[1].action, kVal);
  EXPECT_EQ(p.actions[2].action, kNoAction);
  const MemActionRow* t = row(p, kTrain);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->allocs, 4u);
  EXPECT_EQ(t->alloc_bytes, 1800u);
  EXPECT_EQ(t->frees, 2u);
  EXPECT_EQ(t->freed_bytes, 1200u);
  EXPECT_EQ(t->frees_unknown, 0u);
  EXPECT_EQ(t->peak_live, 1500u);
  const MemActionRow* v = row(p, kVal);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->alloc_bytes, 4000u);
  EXPECT_EQ(v->freed_bytes, 4000u);
  EXPECT_EQ(v->peak_live, 4600u);
  const MemActionRow* none = row(p, kNoAction);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->frees_unknown, 1u);
  EXPECT_EQ(none->freed_bytes, 0u);
  ASSERT_EQ(p.devices.size(), 1u);
  const MemDeviceSummary& d = p.devices[0];
  EXPECT_EQ(d.allocs, 5u);
  EXPECT_EQ(d.alloc_bytes, 5800u);
  EXPECT_EQ(d.freed_bytes, 5200u);
  EXPECT_EQ(d.frees_unknown, 1u);
  EXPECT_EQ(d.live, 600);
  EXPECT_EQ(d.peak_live, 4600u);
  EXPECT_FALSE(d.totals_known);
  // Still alive: 0x200 (500) and 0x400 (100), no stacks: one group (no op).
  EXPECT_EQ(p.leak_bytes, 600u);
  EXPECT_EQ(p.leak_count, 2u);
  ASSERT_EQ(p.leaks.size(), 1u);
  EXPECT_EQ(p.leaks[0].op, "[op unknown]");  // ops not traced
}

TEST(MemoryAggregate, ThreadOutsideActionsChargesTheMainThreadsAction) {
  Stream s;
  auto k = s.begin(kTrain);
  s.alloc(0x10, 64, kPid + 1);  // autograd's thread: no action of its own
  s.end(k);
  auto rep = s.finish();
  const MemActionRow* t = row(rep.processes.at(0), kTrain);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->alloc_bytes, 64u);
}

TEST(MemoryAggregate, LeaksGroupedByOpAndStackBiggestFirst) {
  Stream s;
  s.op_name(3, "aten::empty");
  s.op_name(4, "aten::cat");
  s.code(0xA, "keep", "/w/leak.py", {{10, 12}, {20, 13}});
  s.code(0xB, "<module>", "/w/leak.py", {{30, 40}});
  const std::uint16_t stacked = LT_MEM_HAS_STACK | LT_MEM_OPS_KNOWN;
  for (std::uint64_t i = 0; i < 3; ++i) {  // leak.py:12, aten::empty, 3 x 1000
    s.op(3, 1);
    s.mem({.ptr = 0x1000 + i, .bytes = 1000, .flags = stacked, .depth = 1});
    s.stack({{0xA, 10}, {0xB, 30}});
  }
  // leak.py:13, aten::cat inside aten::empty's slot: op from the stack's ops
  s.mem({.ptr = 0x2000, .bytes = 5000, .flags = stacked, .depth = 0});
  s.stack({{0xA, 20}, {0xB, 30}}, {4});
  // freed again: not a leak
  s.mem({.ptr = 0x3000, .bytes = 9999, .flags = stacked, .depth = 0});
  s.stack({{0xA, 20}, {0xB, 30}});
  s.free_cpu(0x3000);
  auto rep = s.finish();
  const ProcessMemory& p = rep.processes.at(0);
  EXPECT_TRUE(p.stacks);
  ASSERT_EQ(p.leaks.size(), 2u);
  EXPECT_EQ(p.leaks[0].bytes, 5000u);
  EXPECT_EQ(p.leaks[0].count, 1u);
  EXPECT_EQ(p.leaks[0].op, "aten::cat");
  EXPECT_EQ(allocating_line(p.leaks[0].stack), "/w/leak.py:13 (keep)");
  EXPECT_EQ(p.leaks[1].bytes, 3000u);
  EXPECT_EQ(p.leaks[1].count, 3u);
  EXPECT_EQ(p.leaks[1].op, "aten::empty");
  ASSERT_EQ(p.leaks[1].stack.size(), 2u);
  EXPECT_EQ(p.leaks[1].stack[0].function, "<module>");  // root first
  EXPECT_EQ(p.leaks[1].stack[0].line, 40);
  EXPECT_EQ(allocating_line(p.leaks[1].stack), "/w/leak.py:12 (keep)");
  EXPECT_EQ(p.leak_bytes, 8000u);
}

// The op observer's process (no op stack in BPF: no LT_MEM_OPS_KNOWN):
// each allocation and OOM is named by the innermost op call around it on
// its thread, whichever of its calls' records comes first; one outside
// every call stays "[op unknown]"; another thread's calls name nothing.
TEST(MemoryAggregate, TheObserversCallsNameAllocationsByTime) {
  Stream s;
  s.op_name(3, "aten::empty");
  s.op_name(5, "aten::ones");
  s.op_name(6, "aten::cat");
  s.code(0xA, "keep", "/w/leak.py", {{10, 12}, {20, 13}});
  const std::uint64_t t0 = s.ts;
  s.mem({.ptr = 0x1, .bytes = 4000, .flags = LT_MEM_HAS_STACK});  // in aten::ones > aten::empty
  s.stack({{0xA, 10}});
  const std::uint64_t t1 = s.ts;
  s.mem({.ptr = 0x2, .bytes = 100, .flags = LT_MEM_HAS_STACK});  // in no call
  s.stack({{0xA, 20}});
  s.mem({.ptr = 0x3, .bytes = 7, .flags = LT_MEM_HAS_STACK, .tid = kPid + 1});  // another thread
  s.stack({{0xA, 10}}, {}, kPid + 1);
  const std::uint64_t t3 = s.ts + 1;
  s.mem({.ptr = 0x4, .bytes = 50});  // freed before its call ends
  s.free_cpu(0x4);
  s.mem({.what = LT_MEM_OOM, .bytes = 1LL << 40, .flags = LT_MEM_HAS_STACK});
  s.stack({{0xA, 20}});
  const std::uint64_t t5 = s.ts;
  s.span(3, 2, t0 - 1, t0 + 1);                   // the inner call first
  s.span(5, 1, t0 - 2, t0 + 2);                   // then its caller: no override
  s.span(6, 1, t3 - 1, t5 + 1);                   // the free's and the OOM's call, outer first ...
  s.span(3, 2, t5 - 1, t5 + 1);                   // ... then the inner one: deeper wins
  s.span(5, 1, t1 - 1, t1 - 1);                   // ends before 0x2
  s.span(5, 1, t0 - 5, t0 + 5, LT_OP_SPAN_USER);  // a user scope: not an op
  s.span(6, 1, t1, t1 + 10, 0, kPid + 2);         // another thread's
  auto rep = s.finish();
  const ProcessMemory& p = rep.processes.at(0);
  ASSERT_EQ(p.leaks.size(), 3u);
  EXPECT_EQ(p.leaks[0].bytes, 4000u);
  EXPECT_EQ(p.leaks[0].op, "aten::empty");
  EXPECT_EQ(allocating_line(p.leaks[0].stack), "/w/leak.py:12 (keep)");
  EXPECT_EQ(p.leaks[1].bytes, 100u);
  EXPECT_EQ(p.leaks[1].op, "[op unknown]");
  EXPECT_EQ(p.leaks[2].bytes, 7u);
  EXPECT_EQ(p.leaks[2].op, "[op unknown]");
  ASSERT_EQ(p.ooms.size(), 1u);
  EXPECT_EQ(p.ooms[0].op, "aten::empty");
  EXPECT_EQ(allocating_line(p.ooms[0].stack), "/w/leak.py:13 (keep)");
}

TEST(MemoryAggregate, CudaTotalsFromTheAllocator) {
  Stream s;
  const std::uint16_t totals = LT_MEM_TOTALS_KNOWN;
  auto k = s.begin(kTrain);
  // 1 MiB held before the attach; the allocator says so in its totals.
  s.mem({.ptr = 0xc0,
         .bytes = 512,
         .type = 1,
         .index = 0,
         .flags = totals,
         .total_allocated = (1 << 20) + 512,
         .total_reserved = 2 << 20});
  s.mem({.ptr = 0xc1,
         .bytes = 4 << 20,
         .type = 1,
         .index = 0,
         .flags = totals,
         .total_allocated = (5 << 20) + 512,
         .total_reserved = 6 << 20});
  s.mem({.what = LT_MEM_FREE,
         .ptr = 0xc1,
         .bytes = -(4 << 20),
         .type = 1,
         .index = 0,
         .flags = totals,
         .total_allocated = (1 << 20) + 512,
         .total_reserved = 6 << 20});
  s.end(k);
  // a free of an allocation made before the attach: its size is in the record
  s.mem({.what = LT_MEM_FREE,
         .ptr = 0xbb,
         .bytes = -(1 << 20),
         .type = 1,
         .index = 0,
         .flags = totals,
         .total_allocated = 512,
         .total_reserved = 6 << 20});
  s.alloc(0x1, 8);  // a CPU allocation too
  auto rep = s.finish();
  const ProcessMemory& p = rep.processes.at(0);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(mem_device_name(p.devices[0].device), "CPU");
  const MemDeviceSummary& c = p.devices[1];
  EXPECT_EQ(mem_device_name(c.device), "CUDA 0");
  EXPECT_TRUE(c.totals_known);
  EXPECT_EQ(c.live, 512);
  EXPECT_EQ(c.peak_live, (5u << 20) + 512);
  EXPECT_EQ(c.reserved, 6u << 20);
  EXPECT_EQ(c.peak_reserved, 6u << 20);
  EXPECT_EQ(c.alloc_bytes, (4u << 20) + 512);
  EXPECT_EQ(c.freed_bytes, 5u << 20);
  EXPECT_EQ(c.frees, 2u);
  const MemActionRow* t = row(p, kTrain, {1, 0});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->peak_live, (5u << 20) + 512);
  EXPECT_EQ(t->peak_reserved, 6u << 20);
  EXPECT_EQ(t->freed_bytes, 4u << 20);
  std::string keys = render_cuda_memory_stats(rep);
  EXPECT_NE(keys.find("  allocated_bytes.all.current        512\n"), std::string::npos) << keys;
  EXPECT_NE(keys.find("  allocated_bytes.all.peak       5243392  (since the attach)\n"), std::string::npos) << keys;
  EXPECT_NE(keys.find("  reserved_bytes.all.current     6291456\n"), std::string::npos) << keys;
  EXPECT_NE(keys.find("  allocation.all.allocated             2  (since the attach)\n"), std::string::npos) << keys;
  EXPECT_NE(keys.find("Not derivable"), std::string::npos);
  // A CPU-only report has no CUDA keys.
  Stream cpu;
  cpu.alloc(0x1, 8);
  EXPECT_EQ(render_cuda_memory_stats(cpu.finish()), "");
}

TEST(MemoryAggregate, OutOfMemoryWithActionOpAndStack) {
  Stream s;
  s.op_name(3, "aten::empty");
  s.code(0xA, "grow", "/w/oom.py", {{10, 7}});
  auto k = s.begin(kTrain);
  s.op(3, 1);
  s.mem({.what = LT_MEM_OOM, .bytes = 1LL << 62, .flags = LT_MEM_HAS_STACK | LT_MEM_OPS_KNOWN, .depth = 1});
  s.stack({{0xA, 10}});
  s.end(k);
  auto rep = s.finish();
  const ProcessMemory& p = rep.processes.at(0);
  ASSERT_EQ(p.ooms.size(), 1u);
  EXPECT_EQ(p.ooms_total, 1u);
  EXPECT_EQ(p.ooms[0].bytes, 1ull << 62);
  EXPECT_EQ(p.ooms[0].action, kTrain);
  EXPECT_EQ(p.ooms[0].op, "aten::empty");
  EXPECT_EQ(allocating_line(p.ooms[0].stack), "/w/oom.py:7 (grow)");
  EXPECT_EQ(p.devices.at(0).ooms, 1u);
  EXPECT_EQ(p.leak_count, 0u);  // an OOM allocates nothing
}

TEST(MemoryAggregate, StateStaysBounded) {
  Stream s({.keep_events = true, .max_events = 1000, .timeline_points = 50, .max_live = 100});
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    s.alloc(0x10000 + i, 10);
    if (i >= 50) s.free_cpu(0x10000 + i - 50);  // 50 alive at a time
  }
  for (std::uint64_t i = 0; i < 200; ++i) s.alloc(0x900000 + i, 1);  // 250 alive: 150 past the cap
  auto rep = s.finish();
  const ProcessMemory& p = rep.processes.at(0);
  EXPECT_EQ(p.untracked, 150u);
  EXPECT_EQ(p.leak_count, 100u);
  EXPECT_EQ(p.events.size(), 1000u);
  EXPECT_EQ(p.events_dropped, 10'000u + 9'950u + 200u - 1000u);
  ASSERT_EQ(p.timelines.size(), 1u);
  EXPECT_LE(p.timelines[0].points.size(), 50u);
  EXPECT_GE(p.timelines[0].points.size(), 12u);
  std::int64_t top = 0;
  for (auto& pt : p.timelines[0].points) top = std::max(top, pt.live);
  EXPECT_EQ(top, 500 + 200);  // the maximum survives downsampling
  EXPECT_EQ(p.devices.at(0).peak_live, 700u);
}

TEST(MemoryAggregate, EventsCarryTheFreedSize) {
  Stream s({.keep_events = true});
  s.alloc(0x10, 300);
  s.free_cpu(0x10);
  s.free_cpu(0x99);
  auto rep = s.finish();
  const auto& ev = rep.processes.at(0).events;
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].bytes, 300);
  EXPECT_EQ(ev[0].total_allocated, 300);
  EXPECT_EQ(ev[1].bytes, -300);
  EXPECT_EQ(ev[1].total_allocated, 0);
  EXPECT_EQ(ev[2].bytes, 0);  // size unknown
}

TEST(MemoryReportText, Golden) {
  Stream s;
  s.op_name(3, "aten::empty");
  s.code(0xA, "keep", "/w/leak.py", {{10, 12}});
  auto k = s.begin(kTrain);
  s.op(3, 1);
  s.mem({.ptr = 0x10, .bytes = 4096, .flags = LT_MEM_HAS_STACK | LT_MEM_OPS_KNOWN, .depth = 1});
  s.stack({{0xA, 10}});
  s.alloc(0x20, 100);
  s.free_cpu(0x20);
  s.end(k);
  s.free_cpu(0x30);
  auto rep = s.finish();
  const std::string want =
      "Memory (torch's CPU allocator and CUDA caching allocator, every allocation while attached; in a watch "
      "capture, while its process was escalated)\n"
      "Allocations made before the attach are unknown: their frees are counted without a size (\"frees of unknown "
      "size\"), CPU live bytes count from the attach, and only allocations made while attached can be listed as "
      "still alive.\n"
      "\n"
      "pid 20\n"
      "  device  allocs  allocated  frees  freed  frees of unknown size  live at end  peak live  reserved  peak "
      "reserved  OOMs\n"
      "  CPU          2       4196      1    100                      1         4096       4196         -              "
      "-     0\n"
      "  (bytes; live: the CUDA caching allocator's own total where its records carry it, else allocated minus freed "
      "since the attach)\n"
      "\n"
      "  per Lightning action (innermost action open on the allocating thread)\n"
      "  action                            device  allocs  allocated  frees  freed  frees of unknown size  peak live  "
      "peak reserved\n"
      "  [LightningModule]M.training_step  CPU          2       4196      1    100                      0       4196  "
      "            -\n"
      "  [no Lightning action]             CPU          0          0      0      0                      1          0  "
      "            -\n"
      "\n"
      "  still alive at the end: 1 allocations, 4096 bytes, by op and allocating stack (biggest first)\n"
      "  bytes  count  device  op           allocated at\n"
      "   4096      1  CPU     aten::empty  /w/leak.py:12 (keep)\n"
      "        keep (/w/leak.py:12)\n";
  EXPECT_EQ(render_memory_report(rep), want);
}

TEST(MemoryExport, ChromeMemoryInstantsAsKinetoWritesThem) {
  Stream s({.keep_events = true});
  auto k = s.begin(kTrain);
  s.alloc(0x1000, 256);
  s.free_cpu(0x1000);
  s.mem({.ptr = 0x7f00,
         .bytes = 512,
         .type = 1,
         .index = 0,
         .flags = LT_MEM_TOTALS_KNOWN,
         .total_allocated = 1536,
         .total_reserved = 2 << 20});
  s.mem({.what = LT_MEM_OOM,
         .bytes = 1 << 30,
         .type = 1,
         .index = 0,
         .flags = LT_MEM_TOTALS_KNOWN,
         .total_allocated = 1536,
         .total_reserved = 2 << 20});
  s.end(k);
  ActionsReport actions = s.actions.finish();
  MemoryReport mem = s.memory.finish();
  std::ostringstream out;
  write_chrome_trace(actions, out, nullptr, nullptr, &mem);
  const std::string j = out.str();
  // ts: 1,000,003 ns since boot (the third record of this stream) = 1000.003 us.
  EXPECT_NE(j.find("{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 20, "
                   "\"tid\": 20, \"ts\": 1000.002, \"args\": {\"Device Type\": 0, \"Device Id\": -1, \"Addr\": 4096, "
                   "\"Bytes\": 256, \"Total Allocated\": 256, \"Total Reserved\": 0}}"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"Addr\": 4096, \"Bytes\": -256, \"Total Allocated\": 0, \"Total Reserved\": 0}}"),
            std::string::npos);
  EXPECT_NE(j.find("\"name\": \"[memory]\", \"pid\": 20, \"tid\": 20, \"ts\": 1000.004, \"args\": {\"Device Type\": 1, "
                   "\"Device Id\": 0, \"Addr\": 32512, \"Bytes\": 512, \"Total Allocated\": 1536, \"Total Reserved\": "
                   "2097152}}"),
            std::string::npos);
  EXPECT_NE(j.find("\"name\": \"[OutOfMemory]\", \"pid\": 20, \"tid\": 20, \"ts\": 1000.005, \"args\": {\"Device "
                   "Type\": 1, \"Device Id\": 0, \"Bytes\": 1073741824, \"Total Allocated\": 1536"),
            std::string::npos);
  // Without the memory report, no instants.
  std::ostringstream none;
  write_chrome_trace(actions, none);
  EXPECT_EQ(none.str().find("[memory]"), std::string::npos);
}

TEST(MemoryExport, HtmlTimelinePerDevice) {
  Stream s({.keep_events = true});
  auto k = s.begin(kTrain);
  for (std::uint64_t i = 0; i < 5000; ++i) {
    s.ts += 10'000;  // 10 us apart: 50 ms in all
    s.alloc(0x1000 + i, 1 << 10);
  }
  s.end(k);
  ActionsReport actions = s.actions.finish();
  MemoryReport mem = s.memory.finish();
  std::ostringstream out;
  write_html_report(actions, true, out, nullptr, nullptr, nullptr, &mem);
  const std::string h = out.str();
  EXPECT_NE(h.find("<h3>Memory</h3>"), std::string::npos);
  EXPECT_NE(h.find("<h4>CPU: live bytes, peak 4.883 MiB"), std::string::npos) << h.substr(h.find("<h3>Memory"), 600);
  const auto poly = h.find("<polyline");
  ASSERT_NE(poly, std::string::npos);
  const auto pts = h.substr(poly, h.find("/>", poly) - poly);
  const auto points = std::count(pts.begin(), pts.end(), ',');
  EXPECT_GT(points, 100);
  EXPECT_LE(points, 2000);
}
