// The records the collector makes itself (user/collector/synthesized_records.h):
// their headers and fields, and what it says about a real process, read
// from /proc (a child started here with a distributed job's environment).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "user/cluster/clock_exchange.h"
#include "user/collector/synthesized_records.h"

using namespace lt;

namespace {

template <typename R>
void expect_header(const R& r, lt_event_kind kind, pid_t pid, std::uint64_t ts) {
  EXPECT_EQ(r.hdr.kind, kind);
  EXPECT_EQ(r.hdr.size, sizeof(R));
  EXPECT_EQ(r.hdr.pid, static_cast<std::uint32_t>(pid));
  EXPECT_EQ(r.hdr.tid, static_cast<std::uint32_t>(pid));
  EXPECT_EQ(r.hdr.ts_ns, ts);
}

struct Emitted {
  std::vector<std::vector<std::byte>> records;
  EmitFn fn() {
    return [this](const void* r, std::size_t n) {
      auto* b = static_cast<const std::byte*>(r);
      records.emplace_back(b, b + n);
    };
  }
  std::uint16_t kind(std::size_t i) const {
    lt_event_header h;
    std::memcpy(&h, records.at(i).data(), sizeof h);
    return h.kind;
  }
  template <typename R>
  R as(std::size_t i) const {
    EXPECT_EQ(records.at(i).size(), sizeof(R));
    R r;
    std::memcpy(static_cast<void*>(&r), records.at(i).data(), sizeof r);
    return r;
  }
};

}  // namespace

TEST(CollectorSynthesizedRecords, WindowDropsExitSampler) {
  const auto w = window_record(true, 5);
  expect_header(w, LT_EV_WINDOW, 0, 5);
  EXPECT_EQ(w.begin, 1u);
  EXPECT_EQ(window_record(false, 6).begin, 0u);

  lt_drop_counters c{};
  c.ringbuf_full = 3;
  c.read_faults = 4;
  const auto d = drops_record(c, 7);
  expect_header(d, LT_EV_DROPS, 0, 7);
  EXPECT_EQ(d.ringbuf_full, 3u);
  EXPECT_EQ(d.read_faults, 4u);

  const auto e = polled_exit_record(1234, 8);
  expect_header(e, LT_EV_PROC_EXIT, 1234, 8);
  EXPECT_EQ(e.child_pid, 1234u);
  EXPECT_EQ(e.parent_pid, 0u);

  const auto on = sampler_info_record(10'000'000, 100, false, 9);
  expect_header(on, LT_EV_SAMPLER_INFO, 0, 9);
  EXPECT_EQ(on.period_ns, 10'000'000u);
  EXPECT_EQ(on.rate_hz, 100u);
  EXPECT_EQ(on.flags, LT_SAMPLER_ON_CPU);
  EXPECT_EQ(sampler_info_record(0, 0, true, 9).flags, LT_SAMPLER_OFF_CPU);
}

TEST(CollectorSynthesizedRecords, ClockSyncTruncatesTheReference) {
  cluster::ClockMeasurement m;
  m.ok = true;
  m.offset_ns = -1500;
  m.delay_ns = 800;
  m.samples = 31;
  m.reference = std::string(500, 'h');
  const auto e = clock_sync_record(m, 1, 11);
  expect_header(e, LT_EV_CLOCK_SYNC, 0, 11);
  EXPECT_EQ(e.offset_ns, -1500);
  EXPECT_EQ(e.delay_ns, 800u);
  EXPECT_EQ(e.samples, 31u);
  EXPECT_EQ(e.phase, 1u);
  EXPECT_EQ(std::string(e.reference), std::string(sizeof e.reference - 1, 'h'));
}

TEST(CollectorSynthesizedRecords, HostInfoIsThisHost) {
  const auto before = monotonic_ns();
  const auto e = host_info_record();
  EXPECT_EQ(e.hdr.kind, LT_EV_HOST_INFO);
  EXPECT_GE(e.hdr.ts_ns, before);
  EXPECT_GE(e.monotonic_ns, e.hdr.ts_ns);
  EXPECT_LE(e.monotonic_ns, monotonic_ns());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(std::string(e.hostname), std::string(host).substr(0, sizeof e.hostname - 1));
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(std::string(e.kernel), std::string(u.release).substr(0, sizeof e.kernel - 1));
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  EXPECT_EQ(std::string(e.host_id), id.substr(0, sizeof e.host_id - 1));
  EXPECT_STREQ(e.tool, "ltrace-bpf 0.1.0");
}

TEST(CollectorSynthesizedRecords, ProcessRecordsOfThisProcess) {
  Emitted out;
  python::Interpreter interp;
  interp.major = 3;
  interp.minor = 12;
  emit_process_records(getpid(), &interp, LT_PROC_PYTHON, 123, out.fn());
  ASSERT_GE(out.records.size(), 1u);
  const auto info = out.as<lt_proc_info_event>(0);
  expect_header(info, LT_EV_PROC_INFO, getpid(), 123);
  EXPECT_EQ(info.ppid, static_cast<std::uint32_t>(getppid()));
  EXPECT_EQ(info.py_major, 3u);
  EXPECT_EQ(info.py_minor, 12u);
  EXPECT_EQ(info.flags, LT_PROC_PYTHON);
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(std::string(info.comm), name);
  std::ifstream cmdline("/proc/self/cmdline");
  std::string arg, joined;
  while (std::getline(cmdline, arg, '\0')) joined += (joined.empty() ? "" : " ") + arg;
  EXPECT_EQ(std::string(info.cmdline), joined.substr(0, sizeof info.cmdline - 1));
  // Our own namespaces: no PROC_CONTAINER.  PROC_ENV only if this test
  // itself runs as a rank of a distributed job.
  for (std::size_t i = 1; i < out.records.size(); ++i) EXPECT_EQ(out.kind(i), LT_EV_PROC_ENV);
}

TEST(CollectorSynthesizedRecords, ProcessRecordsOfARankNameItsJob) {
  // A real process with a torchrun rank's environment.
  std::vector<std::string> env = {
      "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=8", "MASTER_ADDR=node7", "MASTER_PORT=29500", "PATH=/usr/bin:/bin"};
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  char sleep_arg0[] = "sleep", sleep_arg1[] = "30";
  char* argv[] = {sleep_arg0, sleep_arg1, nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawnp(&child, "sleep", nullptr, nullptr, argv, envp.data()), 0);
  // Its environment is readable once the exec has set up its new stack
  // (the comm changes earlier than that).
  for (int i = 0; i < 500; ++i) {
    std::ifstream e("/proc/" + std::to_string(child) + "/environ");
    std::string all((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    if (all.find("RANK=3") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Emitted out;
  emit_process_records(child, nullptr, LT_PROC_NOT_PYTHON, 456, out.fn());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  ASSERT_EQ(out.records.size(), 2u);  // PROC_INFO, PROC_ENV (no container: our namespaces)
  const auto info = out.as<lt_proc_info_event>(0);
  expect_header(info, LT_EV_PROC_INFO, child, 456);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.flags, LT_PROC_NOT_PYTHON);
  EXPECT_EQ(info.py_major, 0u);  // no interpreter
  EXPECT_STREQ(info.comm, "sleep");
  EXPECT_STREQ(info.cmdline, "sleep 30");
  EXPECT_STREQ(info.torch_version, "");
  const auto penv = out.as<lt_proc_env_event>(1);
  EXPECT_EQ(penv.hdr.kind, LT_EV_PROC_ENV);
  EXPECT_EQ(penv.hdr.ts_ns, 456u);  // at the same time as its PROC_INFO
  EXPECT_EQ(penv.rank, 3);
  EXPECT_EQ(penv.master_port, 29500u);
  EXPECT_STREQ(penv.master_addr, "node7");
}

TEST(CollectorSynthesizedRecords, RecordedReportsKeepWholeNames) {
  auto e = recorded_reports_record("simple,advanced,ops", 7);
  EXPECT_EQ(e.hdr.kind, LT_EV_RECORDED_REPORTS);
  EXPECT_EQ(e.hdr.size, sizeof e);
  EXPECT_EQ(e.hdr.ts_ns, 7u);
  EXPECT_STREQ(e.reports, "simple,advanced,ops");
  // Longer than the record holds: cut at a comma, NUL-terminated.
  std::string many;
  for (int i = 0; i < 12; ++i) many += std::string(many.empty() ? "" : ",") + "advanced";
  e = recorded_reports_record(many, 7);
  const std::string kept(e.reports);
  EXPECT_LT(kept.size(), sizeof e.reports);
  EXPECT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), 'd');
  EXPECT_EQ(many.rfind(kept, 0), 0u);
  EXPECT_EQ(many[kept.size()], ',');
}
