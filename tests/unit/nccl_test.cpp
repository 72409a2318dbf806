// The NCCL aggregator (reports/aggregate/nccl.h) and its section of
// `--report comm` on synthetic records shaped as the probes and the bridge
// send them: an ungrouped all-reduce whose NCCL kernel is joined through the
// launch's correlation id (a torch kernel launched after it is not NCCL's),
// a group of two calls sharing the group end's kernel, a communicator whose
// creation was seen (its size gives busbw), ncclBcast's inner
// ncclBroadcast, a kernel record that never came, and the names of the
// real libnccl's functions.
#include "reports/aggregate/nccl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "bpf/events.h"
#include "reports/aggregate/actions.h"
#include "reports/comm/nccl_section.h"
#include "user/torch/comm_sites.h"
#include "user/torch/nccl_sites.h"

using namespace lt;

namespace {

constexpr std::uint64_t us = 1000, ms = 1000 * us;
constexpr std::uint32_t kPid = 50, kMain = 50, kSide = 51;
constexpr std::uint64_t kComm = 0xC0;

struct Feed {
  ActionAggregator actions;
  NcclAggregator nccl{actions};
  template <typename R>
  void put(R& r, std::uint16_t kind, std::uint32_t tid, std::uint64_t ts) {
    r.hdr = {kind, sizeof r, kPid, tid, 0, ts};
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    nccl.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void call(std::uint64_t ts, std::uint8_t fn, std::uint64_t count = 0, std::uint8_t dtype = 7,
            std::uint32_t tid = kMain, std::uint64_t comm = kComm, int nranks = -1, int rank = -1) {
    lt_nccl_event e{};
    e.fn = fn;
    e.count = count;
    e.dtype = dtype;
    e.comm = comm;
    e.peer = -1;
    e.nranks = nranks;
    e.rank = rank;
    put(e, LT_EV_NCCL, tid, ts);
  }
  void name(std::uint32_t id, const char* text) {
    lt_gpu_name_event n{};
    n.n.id = id;
    n.n.kind = LT_NAME_KERNEL;
    n.n.len = static_cast<std::uint16_t>(std::strlen(text));
    n.n.total_len = n.n.len;
    std::memcpy(n.n.text, text, n.n.len);
    put(n, LT_EV_GPU_NAME, kMain, 0);
  }
  // NCCL launches through the driver directly: the bridge marks those
  void launch(std::uint64_t ts, std::uint32_t corr, std::uint32_t tid = kMain,
              std::uint16_t api = LT_API_LAUNCH | LT_API_DRIVER) {
    lt_gpu_launch_event l{};
    l.correlation = corr;
    l.source = LT_LAUNCH_CUPTI;
    l.api = api;
    put(l, LT_EV_GPU_LAUNCH, tid, ts);
  }
  void kernel(std::uint32_t corr, std::uint32_t name_id, std::uint64_t start, std::uint64_t end) {
    lt_gpu_activity_event a{};
    a.a.kind = LT_GPU_KERNEL;
    a.a.correlation = corr;
    a.a.name_id = name_id;
    a.a.start_ns = start;
    a.a.end_ns = end;
    put(a, LT_EV_GPU_ACTIVITY, 0, end + 100 * ms);  // CUPTI buffers arrive late
  }
};

const NcclSizeRow* row(const ProcessNccl& p, std::uint8_t fn) {
  for (const auto& r : p.sizes)
    if (r.fn == fn) return &r;
  return nullptr;
}

TEST(Nccl, KernelsJoinedThroughTheLaunchOnTheCallingThread) {
  Feed f;
  f.name(1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  f.name(2, "void at::native::vectorized_elementwise_kernel<4>");
  // the communicator: 4 ranks, this one rank 2 (COMM_READY follows the init)
  f.call(1 * ms, LT_NCCL_COMM_INIT, 0, 0, kMain, 0x7f00, 4, 2);
  f.call(2 * ms, LT_NCCL_COMM_READY, 0, 0, kMain, kComm, 4, 2);
  // ungrouped all-reduce of 1000 float32: its kernel, then torch's own
  f.call(2 * ms, LT_NCCL_ALLREDUCE, 1000);
  f.launch(2 * ms + 5 * us, 100);
  f.launch(2 * ms + 40 * us, 101);        // after the call, same window: not NCCL's kernel
  f.launch(2 * ms + 6 * us, 300, kSide);  // another thread's launch
  // a group: two all-reduces, their kernel launched at the group's end
  f.call(3 * ms, LT_NCCL_GROUP_START);
  f.call(3 * ms + 1 * us, LT_NCCL_ALLREDUCE, 1000);
  f.call(3 * ms + 2 * us, LT_NCCL_ALLREDUCE, 1000);
  f.call(3 * ms + 3 * us, LT_NCCL_GROUP_END);
  f.launch(3 * ms + 8 * us, 102);
  // an all-reduce whose kernel record never came (detached first)
  f.call(4 * ms, LT_NCCL_ALLREDUCE, 1000);
  f.launch(4 * ms + 5 * us, 103);
  // ncclBcast and the ncclBroadcast it makes inside NCCL: one call
  f.call(5 * ms, LT_NCCL_BCAST, 10);
  f.call(5 * ms + 1 * us, LT_NCCL_BROADCAST, 10);
  // kernels: 10 us for the single all-reduce, 20 us for the group
  f.kernel(100, 1, 2 * ms + 10 * us, 2 * ms + 20 * us);
  f.kernel(101, 2, 2 * ms + 50 * us, 2 * ms + 90 * us);
  f.kernel(300, 1, 2 * ms + 7 * us, 2 * ms + 9 * us);
  f.kernel(102, 1, 3 * ms + 10 * us, 3 * ms + 30 * us);

  const NcclReport rep = f.nccl.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessNccl& p = rep.processes[0];
  EXPECT_EQ(p.calls, 5u);  // 4 all-reduces, 1 bcast
  EXPECT_EQ(p.bytes, 4 * 4000u + 40u);
  EXPECT_EQ(p.kernels, 2u);  // the single all-reduce's and the group's
  EXPECT_TRUE(p.cupti);
  const NcclSizeRow* ar = row(p, LT_NCCL_ALLREDUCE);
  ASSERT_TRUE(ar);
  EXPECT_EQ(ar->calls, 4u);
  EXPECT_EQ(ar->grouped, 2u);
  EXPECT_EQ(ar->timed, 1u);
  EXPECT_EQ(ar->gpu_ns, 10 * us);
  EXPECT_EQ(ar->bytes, 4000u);
  EXPECT_EQ(ar->nranks, 4);
  const NcclSizeRow* bc = row(p, LT_NCCL_BCAST);
  ASSERT_TRUE(bc);
  EXPECT_EQ(bc->calls, 1u);
  EXPECT_FALSE(row(p, LT_NCCL_BROADCAST)) << "ncclBcast's inner ncclBroadcast counted as a call";
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].calls, "ncclAllReduce x2");
  EXPECT_EQ(p.groups[0].groups, 1u);
  EXPECT_EQ(p.groups[0].timed, 1u);
  EXPECT_EQ(p.groups[0].gpu_ns, 20 * us);
  ASSERT_EQ(p.comms.size(), 1u);
  EXPECT_EQ(p.comms[0].nranks, 4);
  EXPECT_EQ(p.comms[0].rank, 2);
  EXPECT_EQ(p.comms[0].calls, 5u);

  // nccl-tests: algbw = 4000 B / 10 us = 0.4 GB/s; busbw = 0.4 * 2 * 3 / 4 = 0.6
  const std::string text = render_nccl_section(rep);
  EXPECT_NE(text.find("0.400"), std::string::npos) << text;
  EXPECT_NE(text.find("0.600"), std::string::npos) << text;
  EXPECT_NE(text.find("ncclAllReduce x2"), std::string::npos) << text;
  EXPECT_NE(text.find("4 ranks, this one rank 2"), std::string::npos) << text;
}

TEST(Nccl, SimulatedGroupsAndDestroyedCommunicators) {
  Feed f;
  f.name(1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  f.call(1 * ms, LT_NCCL_COMM_READY, 0, 0, kMain, kComm, 8, 0);
  // torch's time estimator: a group closed by ncclGroupSimulateEnd never runs
  f.call(2 * ms, LT_NCCL_GROUP_START);
  f.call(2 * ms + 1 * us, LT_NCCL_ALLREDUCE, 1000);
  f.call(2 * ms + 2 * us, LT_NCCL_GROUP_SIMULATE_END);
  // a real one after it is ungrouped and timed
  f.call(3 * ms, LT_NCCL_ALLREDUCE, 1000);
  f.launch(3 * ms + 5 * us, 7);
  f.kernel(7, 1, 3 * ms + 10 * us, 3 * ms + 30 * us);
  // the communicator destroyed: a later call on the same address has no size
  f.call(4 * ms, LT_NCCL_COMM_DESTROY);
  f.call(5 * ms, LT_NCCL_ALLREDUCE, 1000);
  // a signal call bounds the window: its kernel is not the call's before it
  f.call(6 * ms, LT_NCCL_ALLREDUCE, 1000);
  f.call(6 * ms + 10 * us, LT_NCCL_SIGNAL);
  f.launch(6 * ms + 15 * us, 8);
  f.kernel(8, 1, 6 * ms + 20 * us, 6 * ms + 90 * us);
  const NcclReport rep = f.nccl.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessNccl& p = rep.processes[0];
  EXPECT_EQ(p.simulated, 1u);
  EXPECT_EQ(p.calls, 3u);
  EXPECT_TRUE(p.groups.empty());
  std::uint64_t sized = 0, unsized = 0;
  for (const auto& r : p.sizes) {
    EXPECT_EQ(r.grouped, 0u) << "a call after a simulated group counted as grouped";
    if (r.nranks == 8) {
      sized += r.calls;
      EXPECT_EQ(r.timed, 1u);
      EXPECT_EQ(r.gpu_ns, 20 * us);
    } else {
      unsized += r.calls;
      EXPECT_EQ(r.nranks, -1);
      EXPECT_EQ(r.timed, 0u) << "the signal's kernel was charged to the call before it";
    }
  }
  EXPECT_EQ(sized, 1u);
  EXPECT_EQ(unsized, 2u);
  // The destroyed communicator keeps its row and its size (found on an
  // H200: destroy_process_group() at the job's end turned a known size into
  // "unknown"); the one after it at the same address has a row of its own.
  ASSERT_EQ(p.comms.size(), 2u);
  EXPECT_EQ(p.comms[0].nranks, 8);
  EXPECT_EQ(p.comms[0].calls, 2u);
  EXPECT_EQ(p.comms[1].nranks, -1);
  EXPECT_EQ(p.comms[1].calls, 2u);
  EXPECT_EQ(p.comms[0].handle, p.comms[1].handle);
  EXPECT_TRUE(p.comms[0].destroyed);
  EXPECT_FALSE(p.comms[1].destroyed);
  const std::string text = render_nccl_section(rep);
  EXPECT_NE(text.find("ncclGroupSimulateEnd"), std::string::npos);
  EXPECT_NE(text.find("comm 0: 2 calls, 8 ranks, this one rank 0, destroyed\n"), std::string::npos) << text;
}

TEST(Nccl, WithoutCuptiCountsOnlyAndSaysWhy) {
  Feed f;
  f.call(1 * ms, LT_NCCL_ALLGATHER, 256, 9);
  f.call(2 * ms, LT_NCCL_SEND, 64, 0);
  const NcclReport rep = f.nccl.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const ProcessNccl& p = rep.processes[0];
  EXPECT_EQ(p.bytes, 512u + 64u);
  EXPECT_FALSE(p.cupti);
  const std::string text = render_nccl_section(rep);
  EXPECT_NE(text.find("no CUPTI launch records"), std::string::npos) << text;
  EXPECT_NE(text.find("size unknown"), std::string::npos) << text;
  EXPECT_EQ(render_nccl_section(NcclReport{}), "");
}

TEST(Nccl, NamesAndSizes) {
  EXPECT_EQ(nccl_fn_name(LT_NCCL_REDUCESCATTER), "ncclReduceScatter");
  EXPECT_EQ(nccl_dtype_name(9), "bfloat16");
  EXPECT_EQ(nccl_dtype_size(9), 2u);
  EXPECT_EQ(nccl_dtype_size(4), 8u);
  EXPECT_EQ(nccl_dtype_size(42), 0u);
  EXPECT_EQ(nccl_site_fn("ncclAllReduce"), std::uint32_t{LT_NCCL_ALLREDUCE});
  EXPECT_EQ(nccl_site_fn("ncclCommInitRankConfig"), std::uint32_t{LT_NCCL_COMM_INIT});
  EXPECT_EQ(nccl_site_fn("pncclAllReduce"), 0u);
  EXPECT_EQ(nccl_site_fn("ncclAllReduceX"), 0u);
}

std::string venv_path(const char* rel) {
  const char* root = std::getenv("LT_SRCDIR");
  return (root && *root ? std::string(root) + "/" : std::string()) + rel;
}

// The real libnccl of PyPI's nvidia-nccl wheel (what torch's CUDA build
// loads): every function of the table is exported there.
TEST(NcclSites, RealLibnccl) {
  const std::string dir = venv_path(".venv/lib/python3.11/site-packages/nvidia/nccl/lib");
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir << " is not installed: run `make deps`";
  std::string lib;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with("libnccl.so")) lib = e.path();
  ASSERT_FALSE(lib.empty());
  std::set<std::uint64_t> fns;
  for (const auto& s : find_nccl_sites(lib)) {
    EXPECT_GT(s.file_offset, 0u) << s.symbol;
    fns.insert(s.cookie);
  }
  for (std::uint32_t fn = LT_NCCL_ALLREDUCE; fn < LT_NCCL_FN_MAX; ++fn) {
    if (fn == LT_NCCL_COMM_READY) continue;  // sent by BPF, no function
    EXPECT_TRUE(fns.count(fn)) << nccl_fn_name(static_cast<std::uint8_t>(fn)) << " missing in " << lib;
  }
}

// ProcessGroupNCCL's methods in the real libtorch_cuda of torch 2.15.
TEST(NcclSites, RealProcessGroupNccl) {
  const std::string lib = venv_path(".venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so");
  ASSERT_TRUE(std::filesystem::exists(lib)) << lib << " is not installed: run `make deps`";
  std::set<std::uint32_t> kinds;
  for (const auto& s : find_comm_sites(lib)) {
    EXPECT_FALSE(s.mark) << s.symbol;
    EXPECT_EQ((s.cookie >> 8) & 0xff, std::uint64_t{LT_COMM_NCCL}) << s.symbol;
    EXPECT_TRUE(s.symbol.starts_with("_ZN4c10d16ProcessGroupNCCL")) << s.symbol;
    kinds.insert(static_cast<std::uint32_t>(s.cookie & 0xff));
  }
  for (std::uint32_t k :
       {LT_COMM_ALLREDUCE, LT_COMM_ALLREDUCE_COALESCED, LT_COMM_BROADCAST, LT_COMM_REDUCE, LT_COMM_ALLGATHER,
        LT_COMM_ALLGATHER_INTO_TENSOR, LT_COMM_GATHER, LT_COMM_SCATTER, LT_COMM_REDUCE_SCATTER,
        LT_COMM_REDUCE_SCATTER_TENSOR, LT_COMM_ALLTOALL_SINGLE, LT_COMM_BARRIER, LT_COMM_SEND, LT_COMM_RECV})
    EXPECT_TRUE(kinds.count(k)) << "kind " << k << " missing in " << lib;
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupNCCL9allreduceERSt6vectorIN2at6TensorESaIS3_EERKNS_"
                             "16AllreduceOptionsE"),
            LT_COMM_COOKIE(std::uint64_t{LT_COMM_ALLREDUCE}, LT_COMM_NCCL, 2, LT_COMM_FORM_VECTOR));
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupNCCL14allreduce_implERN2at6TensorEPKcRKNS_16AllreduceOptionsE"),
            0u);  // the internal step allreduce calls: one call, not two
}

}  // namespace
