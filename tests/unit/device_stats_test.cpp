// Device statistics: the /proc readers against known files and against
// psutil (what Lightning's DeviceStatsMonitor calls), NVML over a fake
// function table (no driver here), the sampler's timing and records, and the
// per-action aggregation and report on synthetic streams.
#include "reports/aggregate/device_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/gpu/device_stats_report.h"
#include "tests/unit/child_process.h"
#include "user/collector/stats_sampler.h"
#include "user/gpu/nvml.h"
#include "user/model/record_dispatch.h"
#include "user/proc/proc_stats.h"

using namespace lt;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t ms = 1'000'000;

// A directory laid out as /proc, with files of known content.
struct FakeProc {
  fs::path root;
  FakeProc() {
    root = fs::temp_directory_path() / ("lt-proc-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    fs::create_directories(root);
  }
  ~FakeProc() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  void meminfo(std::uint64_t total_kb, std::uint64_t avail_kb, std::uint64_t swap_total_kb,
               std::uint64_t swap_free_kb) {
    std::ostringstream s;
    s << "MemTotal:       " << total_kb << " kB\n"
      << "MemFree:         1000000 kB\n"
      << "MemAvailable:   " << avail_kb << " kB\n"
      << "Buffers:          200000 kB\n"
      << "Cached:          3000000 kB\n"
      << "SwapTotal:      " << swap_total_kb << " kB\n"
      << "SwapFree:       " << swap_free_kb << " kB\n";
    write("meminfo", s.str());
  }
  // user nice system idle iowait irq softirq steal guest guest_nice
  void stat(const std::array<std::uint64_t, 10>& f) {
    std::ostringstream s;
    s << "cpu ";
    for (auto v : f) s << " " << v;
    s << "\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345 0 0\n";
    write("stat", s.str());
  }
  void pid(int pid, std::uint64_t utime, std::uint64_t stime, std::uint64_t rss_pages,
           const std::string& comm = "python") {
    std::ostringstream s;
    s << pid << " (" << comm << ") S 1 " << pid << " " << pid << " 0 -1 4194304 100 0 0 0 " << utime << " " << stime
      << " 0 0 20 0 3 0 12345 1000000 " << rss_pages
      << " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
    write(std::to_string(pid) + "/stat", s.str());
    write(std::to_string(pid) + "/statm", "250000 " + std::to_string(rss_pages) + " 5000 100 0 90000 0\n");
  }
};

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

bool have_psutil() {
  return fs::exists(".venv/bin/python") && run(".venv/bin/python -c 'import psutil; print(1)' 2>/dev/null") == "1\n";
}

// ---- synthetic streams ----
struct Stream {
  ActionAggregator actions;
  DeviceStatsAggregator stats{actions};
  template <typename R>
  void feed(const R& r) {
    actions.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
    stats.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
  }
  void info(std::uint32_t pid, int rank, const char* comm = "python") {
    lt_proc_info_event e{};
    e.hdr = {LT_EV_PROC_INFO, sizeof e, pid, pid, 0, 1};
    e.rank = rank;
    e.local_rank = rank;
    e.world_size = rank >= 0 ? 2 : -1;
    e.flags = LT_PROC_PYTHON;
    std::strncpy(e.comm, comm, sizeof e.comm - 1);
    feed(e);
  }
  void action(lt_event_kind kind, std::uint32_t pid, std::uint64_t ts, std::uint64_t key, const char* name = "",
              std::uint32_t tid = 0) {
    lt_action_event e{};
    e.hdr = {static_cast<u16>(kind), sizeof e, pid, tid ? tid : pid, 0, ts};
    e.key = key;
    e.name_len = static_cast<u32>(std::strlen(name));
    std::strncpy(e.name, name, sizeof e.name - 1);
    feed(e);
  }
  void proc(std::uint32_t pid, std::uint64_t ts, double vm, double cpu, double swap, std::uint64_t cpu_ns,
            std::uint64_t rss_mib, std::uint32_t flags = 0) {
    lt_proc_stats_event e{};
    e.flags = flags;
    e.hdr = {LT_EV_PROC_STATS, sizeof e, pid, pid, 0, ts};
    e.vm_percent_x100 = static_cast<u32>(std::llround(vm * 100));
    e.cpu_percent_x100 = static_cast<u32>(std::llround(cpu * 100));
    e.swap_percent_x100 = static_cast<u32>(std::llround(swap * 100));
    e.cpu_ns = cpu_ns;
    e.rss_bytes = rss_mib << 20;
    feed(e);
  }
  // One GPU sample; `users`: (pid, MiB) of targets on it.
  void gpu(std::uint64_t ts, std::uint32_t dev, std::uint32_t util, std::uint64_t used_mib,
           std::vector<std::pair<std::uint32_t, std::uint64_t>> users = {}) {
    lt_device_stats_event e{};
    e.hdr = {LT_EV_DEVICE_STATS, sizeof e, 0, 0, 0, ts};
    e.device = dev;
    e.gpu_util_pct = util;
    e.mem_util_pct = util / 2;
    e.temperature_c = 50;
    e.mem_used_bytes = used_mib << 20;
    e.mem_total_bytes = 1000ull << 20;
    e.power_mw = 250'500;
    e.sm_clock_mhz = ~0u;  // unsupported: skipped
    for (auto& m : e.proc_mem_bytes) m = ~0ull;
    for (std::size_t i = 0; i < users.size() && i < 4; ++i) {
      e.proc_pid[i] = users[i].first;
      e.proc_mem_bytes[i] = users[i].second << 20;
    }
    feed(e);
  }
};

const ActionDeviceStats* block(const ProcessDeviceStats& p, const std::string& action) {
  for (auto& a : p.actions)
    if (a.action == action) return &a;
  return nullptr;
}
const StatSummary* stat(const ActionDeviceStats& a, DeviceStatKey k, int device = -1) {
  for (auto& r : a.rows)
    if (r.key == k && r.device == device) return &r.stat;
  return nullptr;
}

}  // namespace

// ====================== /proc ======================

TEST(ProcStatsParse, PidStatCommandWithSpacesAndParentheses) {
  EXPECT_EQ(proc::parse_pid_stat_ticks("7 (a) b) (c) S 1 7 7 0 -1 0 1 0 0 0 120 34 0 0 20 0 1 0 5 6 7\n"), 154u);
  EXPECT_FALSE(proc::parse_pid_stat_ticks("7 (python) S 1 2"));
  EXPECT_FALSE(proc::parse_pid_stat_ticks(""));
  EXPECT_EQ(proc::parse_statm_resident("250000 1234 5000 1 0 9 0\n"), 1234u);
  EXPECT_FALSE(proc::parse_statm_resident("250000\n"));
}

TEST(ProcStatsParse, CpuPercentIsPsutilsFormula) {
  proc::CpuTimes a{100, 10, 50, 1000, 40, 5, 5, 0, 20, 0};
  proc::CpuTimes b = a;
  // +60 user (+20 of it guest), +0 nice, +20 system, +100 idle, +20 iowait
  b[0] += 60;
  b[8] += 20;
  b[2] += 20;
  b[3] += 100;
  b[4] += 20;
  // total = 60+20+100+20 + 20 guest - 20 guest = 200; busy = 200-100-20 = 80
  EXPECT_DOUBLE_EQ(proc::cpu_percent_between(a, b), 40.0);
  // A field going backwards counts 0, as psutil (and top) do.
  proc::CpuTimes c = b;
  c[5] -= 5;
  c[3] += 30;
  c[0] += 10;
  EXPECT_DOUBLE_EQ(proc::cpu_percent_between(b, c), 25.0);
  EXPECT_DOUBLE_EQ(proc::cpu_percent_between(a, a), 0.0);  // no time passed
  // Rounded to 0.1 as psutil: 1/3 -> 33.3
  proc::CpuTimes d = a;
  d[0] += 1;
  d[3] += 2;
  EXPECT_DOUBLE_EQ(proc::cpu_percent_between(a, d), 33.3);
  EXPECT_DOUBLE_EQ(proc::round1(0.25), 0.2);  // Python: round(0.25, 1) == 0.2
  EXPECT_DOUBLE_EQ(proc::round1(0.35), 0.3);  // 0.35 is 0.34999... in binary
  EXPECT_DOUBLE_EQ(proc::round1(2.675), 2.7);
}

TEST(ProcStatsParse, MemoryPercentsAndTheirFallbacks) {
  const std::string mi =
      "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 250 kB\nCached: 300 kB\nActive(file): 200 kB\n"
      "Inactive(file): 100 kB\nSReclaimable: 40 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n";
  EXPECT_DOUBLE_EQ(*proc::vm_percent(mi, "", 4096), 75.0);
  EXPECT_DOUBLE_EQ(*proc::swap_percent(mi), 0.0);  // no swap: 0, as psutil
  EXPECT_DOUBLE_EQ(*proc::swap_percent("SwapTotal: 400 kB\nSwapFree: 300 kB\n"), 25.0);
  EXPECT_FALSE(proc::swap_percent("MemTotal: 1 kB\n"));
  EXPECT_FALSE(proc::vm_percent("MemFree: 1 kB\n", "", 4096));
  // MemAvailable 0 (a kernel bug psutil works around): psutil's estimate
  // from the "low" watermarks of /proc/zoneinfo.
  std::string zero = mi;
  zero.replace(zero.find("MemAvailable: 250"), 17, "MemAvailable: 0");
  const std::string zoneinfo =
      "Node 0, zone   Normal\n  pages free 5\n        min      2\n        low      4\n"
      "        high     6\nNode 0, zone DMA\n        low      1\n";
  // low = 5 pages * 1024 B = 5 KiB; free 100 - 5 = 95; pagecache 300 - min(150, 5) = 295;
  // slab 40 - min(20, 5) = 35 -> 425 KiB available -> 57.5 %
  EXPECT_DOUBLE_EQ(*proc::vm_percent(zero, zoneinfo, 1024), 57.5);
  // Without zoneinfo: free + cached
  EXPECT_DOUBLE_EQ(*proc::vm_percent(zero, "", 1024), 60.0);
}

TEST(ProcStatsFakeRoot, ReadsKnownFiles) {
  FakeProc fp;
  fp.meminfo(16'000'000, 12'000'000, 2'000'000, 1'500'000);
  fp.stat({1000, 0, 500, 8000, 100, 0, 0, 0, 0, 0});
  fp.pid(4242, 250, 50, 3000, "pt_main (x) thread");
  proc::ProcStats ps(fp.root.string());
  auto s1 = ps.system();
  EXPECT_TRUE(s1.vm_ok && s1.swap_ok && s1.cpu_ok);
  EXPECT_DOUBLE_EQ(s1.vm_percent, 25.0);
  EXPECT_DOUBLE_EQ(s1.swap_percent, 25.0);
  EXPECT_DOUBLE_EQ(s1.cpu_percent, 0.0);  // psutil's first call
  fp.stat({1300, 0, 600, 8500, 100, 0, 0, 0, 0, 0});
  auto s2 = ps.system();
  EXPECT_DOUBLE_EQ(s2.cpu_percent, 44.4);  // 400 busy of 900
  auto p = ps.process(4242);
  ASSERT_TRUE(p);
  const auto tck = static_cast<std::uint64_t>(ps.clock_ticks());
  EXPECT_EQ(p->cpu_ns, 300 * 1'000'000'000ull / tck);
  EXPECT_EQ(p->rss_bytes, 3000ull * static_cast<std::uint64_t>(ps.page_size()));
  EXPECT_FALSE(ps.process(999999));

  auto e = proc::ProcStats::record(4242, s2, p);
  EXPECT_EQ(e.hdr.kind, LT_EV_PROC_STATS);
  EXPECT_EQ(e.hdr.size, sizeof e);
  EXPECT_EQ(e.hdr.pid, 4242u);
  EXPECT_EQ(e.hdr.tid, 4242u);
  EXPECT_EQ(e.hdr.cpu, 0u);
  EXPECT_EQ(e.vm_percent_x100, 2500u);
  EXPECT_EQ(e.swap_percent_x100, 2500u);
  EXPECT_EQ(e.cpu_percent_x100, 4440u);
  EXPECT_EQ(e.cpu_ns, p->cpu_ns);
  auto gone = proc::ProcStats::record(7, proc::SystemStats{}, std::nullopt);
  EXPECT_EQ(gone.cpu_ns, ~0ull);
  EXPECT_EQ(gone.rss_bytes, ~0ull);
  EXPECT_EQ(gone.vm_percent_x100, ~0u);
  EXPECT_EQ(gone.cpu_percent_x100, ~0u);
}

// psutil reading the same fake procfs (psutil.PROCFS_PATH) must give the
// same numbers to the digit: it is what DeviceStatsMonitor logs.
TEST(ProcStatsPsutil, SameNumbersAsPsutilOnTheSameFiles) {
  if (!have_psutil()) GTEST_SKIP() << "no psutil in .venv";
  FakeProc fp;
  fp.meminfo(16'384'000, 7'123'457, 4'000'000, 3'333'333);
  fp.stat({123456, 789, 45678, 9876543, 1234, 56, 78, 9, 1000, 10});
  const std::string stat2 = "cpu  124456 789 45978 9877043 1334 56 80 9 1200 10\n";
  proc::ProcStats ps(fp.root.string());
  auto first = ps.system();
  std::string script =
      "import psutil, sys\n"
      "psutil.PROCFS_PATH = sys.argv[1]\n"
      "import psutil._pslinux as L\n"
      "print(psutil.virtual_memory().percent, psutil.swap_memory().percent)\n"
      "psutil.cpu_percent()\n"
      "open(sys.argv[1] + '/stat', 'w').write(sys.argv[2])\n"
      "print(psutil.cpu_percent())\n";
  std::ofstream(fp.root / "check.py") << script;
  std::string out = run(".venv/bin/python -W ignore " + (fp.root / "check.py").string() + " " + fp.root.string() +
                        " '" + stat2 + "' 2>&1");
  double vm = 0, swap = 0, cpu = 0;
  std::istringstream in(out);
  ASSERT_TRUE(in >> vm >> swap >> cpu) << out;
  auto second = ps.system();  // the file now holds stat2
  EXPECT_DOUBLE_EQ(first.vm_percent, vm);
  EXPECT_DOUBLE_EQ(first.swap_percent, swap);
  EXPECT_DOUBLE_EQ(second.cpu_percent, cpu);
  EXPECT_GT(vm, 0);
  EXPECT_GT(swap, 0);
  EXPECT_GT(cpu, 0);

  // MemAvailable 0: psutil's estimate from /proc/zoneinfo.
  fp.write("meminfo",
           "MemTotal: 16384000 kB\nMemFree: 2000000 kB\nMemAvailable: 0 kB\nBuffers: 100 kB\nCached: 5000000 kB\n"
           "Active(file): 3000000 kB\nInactive(file): 1500001 kB\nSReclaimable: 700003 kB\n"
           "SwapTotal: 0 kB\nSwapFree: 0 kB\n");
  fp.write("zoneinfo",
           "Node 0, zone   Normal\n  pages free 5\n        min      20000\n        low      25013\n"
           "        high     30000\nNode 0, zone DMA32\n        low      777\n");
  out =
      run(".venv/bin/python -W ignore -c 'import psutil, sys; psutil.PROCFS_PATH = sys.argv[1]; "
          "print(psutil.virtual_memory().percent, psutil.swap_memory().percent)' " +
          fp.root.string() + " 2>&1");
  std::istringstream in2(out);
  ASSERT_TRUE(in2 >> vm >> swap) << out;
  auto third = ps.system();
  EXPECT_DOUBLE_EQ(third.vm_percent, vm);
  EXPECT_DOUBLE_EQ(third.swap_percent, swap);
}

// The live system, read at nearly the same moment by both: close, not equal.
TEST(ProcStatsPsutil, LiveSystemAndProcessAgreeWithPsutil) {
  if (!have_psutil()) GTEST_SKIP() << "no psutil in .venv";
  proc::ProcStats ps;
  auto sys = ps.system();
  auto me = ps.process(getpid());
  std::string out = run(".venv/bin/python -c 'import psutil; p = psutil.Process(" + std::to_string(getpid()) +
                        "); t = p.cpu_times(); print(psutil.virtual_memory().percent, "
                        "psutil.swap_memory().percent, p.memory_info().rss, t.user + t.system)' 2>&1");
  auto me2 = ps.process(getpid());
  double vm = 0, swap = 0, rss = 0, cpu_s = 0;
  std::istringstream in(out);
  ASSERT_TRUE(in >> vm >> swap >> rss >> cpu_s) << out;
  ASSERT_TRUE(me && me2);
  EXPECT_NEAR(sys.vm_percent, vm, 2.0);
  EXPECT_NEAR(sys.swap_percent, swap, 1.0);
  EXPECT_NEAR(static_cast<double>(me->rss_bytes), rss, 8.0 * (1 << 20));
  EXPECT_GE(cpu_s + 1e-6, me->cpu_ns / 1e9);
  EXPECT_LE(cpu_s, me2->cpu_ns / 1e9 + 1e-6);
}

// ====================== NVML ======================

TEST(NvmlOpen, FailsCleanlyWithoutADriver) {
  EXPECT_TRUE(gpu::dynamically_linked());  // this test program is
  std::string why;
  auto nvml = gpu::Nvml::open(&why);
  if (nvml) GTEST_SKIP() << "an NVIDIA driver is here: " << nvml->device_count() << " GPU(s)";
  EXPECT_FALSE(why.empty());
  if (!fs::exists("/dev/nvidiactl")) {
    EXPECT_EQ(why, "libnvidia-ml.so.1 not found: no NVIDIA driver");
  }
}

namespace {
// A fake NVML: two GPUs; GPU 1 supports nothing but its count and memory.
struct FakeNvml {
  static inline int init_rc = 0, inits = 0, shutdowns = 0, process_calls = 0;
  static inline std::vector<gpu::NvmlApi::ProcessInfo> procs;
  static int init() {
    ++inits;
    return init_rc;
  }
  static int shutdown() {
    ++shutdowns;
    return 0;
  }
  static int count(unsigned* n) {
    *n = 2;
    return 0;
  }
  static int handle(unsigned i, gpu::NvmlApi::Device* d) {
    *d = reinterpret_cast<void*>(static_cast<std::uintptr_t>(0x1000 + i));
    return 0;
  }
  static bool first(gpu::NvmlApi::Device d) { return d == reinterpret_cast<void*>(0x1000); }
  static int name(gpu::NvmlApi::Device d, char* buf, unsigned len) {
    std::snprintf(buf, len, "%s", first(d) ? "NVIDIA H200" : "NVIDIA A10");
    return 0;
  }
  static int util(gpu::NvmlApi::Device d, gpu::NvmlApi::Utilization* u) {
    if (!first(d)) return 3;  // NVML_ERROR_NOT_SUPPORTED
    *u = {87, 41};
    return 0;
  }
  static int memory(gpu::NvmlApi::Device d, gpu::NvmlApi::Memory* m) {
    *m = {144ull << 30, 100ull << 30, first(d) ? 44ull << 30 : 1ull << 30};
    return 0;
  }
  static int temp(gpu::NvmlApi::Device d, int sensor, unsigned* t) {
    if (!first(d) || sensor != 0) return 3;
    *t = 61;
    return 0;
  }
  static int power(gpu::NvmlApi::Device d, unsigned* mw) {
    if (!first(d)) return 3;
    *mw = 612'345;
    return 0;
  }
  static int clock(gpu::NvmlApi::Device d, int type, unsigned* mhz) {
    if (!first(d) || type != 1) return 3;
    *mhz = 1980;
    return 0;
  }
  // NVML's contract: room for *count entries; too few -> INSUFFICIENT_SIZE with the count needed.
  static int processes(gpu::NvmlApi::Device d, unsigned* count, gpu::NvmlApi::ProcessInfo* out) {
    ++process_calls;
    if (!first(d)) return 3;
    if (*count < procs.size()) {
      *count = static_cast<unsigned>(procs.size());
      return 7;
    }
    for (std::size_t i = 0; i < procs.size(); ++i) out[i] = procs[i];
    *count = static_cast<unsigned>(procs.size());
    return 0;
  }
  static gpu::NvmlApi api() {
    gpu::NvmlApi a;
    a.init = init;
    a.shutdown = shutdown;
    a.device_count = count;
    a.handle_by_index = handle;
    a.name = name;
    a.utilization = util;
    a.memory = memory;
    a.temperature = temp;
    a.power = power;
    a.clock = clock;
    a.processes = processes;
    return a;
  }
};
}  // namespace

TEST(NvmlFake, SamplesEveryFieldAndMarksTheUnsupported) {
  FakeNvml::init_rc = 0;
  FakeNvml::inits = FakeNvml::shutdowns = 0;
  FakeNvml::procs = {{4242, 3ull << 30, ~0u, ~0u}, {999, 1ull << 30, ~0u, ~0u}, {4242, 1ull << 30, ~0u, ~0u}};
  std::string why;
  {
    auto nvml = gpu::Nvml::from_api(FakeNvml::api(), &why);
    ASSERT_TRUE(nvml) << why;
    EXPECT_EQ(FakeNvml::inits, 1);
    EXPECT_EQ(nvml->device_count(), 2);
    EXPECT_EQ(nvml->name(0), "NVIDIA H200");
    EXPECT_EQ(nvml->name(5), "");
    const std::uint32_t pids[] = {17, 4242};
    lt_device_stats_event e;
    ASSERT_TRUE(nvml->sample(0, pids, e));
    EXPECT_EQ(e.hdr.kind, LT_EV_DEVICE_STATS);
    EXPECT_EQ(e.hdr.size, sizeof e);
    EXPECT_EQ(e.hdr.pid, 0u);
    EXPECT_EQ(e.hdr.tid, 0u);
    EXPECT_GT(e.hdr.ts_ns, 0u);
    EXPECT_EQ(e.device, 0u);
    EXPECT_EQ(e.gpu_util_pct, 87u);
    EXPECT_EQ(e.mem_util_pct, 41u);
    EXPECT_EQ(e.temperature_c, 61u);
    EXPECT_EQ(e.mem_used_bytes, 44ull << 30);
    EXPECT_EQ(e.mem_total_bytes, 144ull << 30);
    EXPECT_EQ(e.power_mw, 612'345u);
    EXPECT_EQ(e.sm_clock_mhz, 1980u);
    // The target on the GPU first (its two contexts added up), then the
    // other target with 0 bytes; 999 is not a target; unused slots ~0.
    EXPECT_EQ(e.proc_pid[0], 4242u);
    EXPECT_EQ(e.proc_mem_bytes[0], 4ull << 30);
    EXPECT_EQ(e.proc_pid[1], 17u);
    EXPECT_EQ(e.proc_mem_bytes[1], 0u);
    EXPECT_EQ(e.proc_pid[2], 0u);
    EXPECT_EQ(e.proc_mem_bytes[2], ~0ull);

    // More processes than the buffer holds: grown once, and still right.
    FakeNvml::procs.clear();
    for (unsigned i = 0; i < 100; ++i) FakeNvml::procs.push_back({1000 + i, 1ull << 20, ~0u, ~0u});
    FakeNvml::procs.push_back({4242, ~0ull, ~0u, ~0u});  // NVML_VALUE_NOT_AVAILABLE
    FakeNvml::process_calls = 0;
    ASSERT_TRUE(nvml->sample(0, pids, e));
    EXPECT_EQ(FakeNvml::process_calls, 2);
    EXPECT_EQ(e.proc_pid[0], 4242u);
    EXPECT_EQ(e.proc_mem_bytes[0], ~0ull);

    ASSERT_TRUE(nvml->sample(1, pids, e));
    EXPECT_EQ(e.device, 1u);
    EXPECT_EQ(e.gpu_util_pct, ~0u);
    EXPECT_EQ(e.mem_util_pct, ~0u);
    EXPECT_EQ(e.temperature_c, ~0u);
    EXPECT_EQ(e.power_mw, ~0u);
    EXPECT_EQ(e.sm_clock_mhz, ~0u);
    EXPECT_EQ(e.mem_used_bytes, 1ull << 30);
    EXPECT_EQ(e.proc_pid[0], 0u);  // cannot list: all unknown
    EXPECT_EQ(e.proc_mem_bytes[0], ~0ull);
    EXPECT_FALSE(nvml->sample(2, pids, e));

    auto moved = std::move(*nvml);
    EXPECT_EQ(moved.device_count(), 2);
  }
  EXPECT_EQ(FakeNvml::shutdowns, 1);  // once, by the object that owned it last

  FakeNvml::init_rc = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  EXPECT_FALSE(gpu::Nvml::from_api(FakeNvml::api(), &why));
  EXPECT_NE(why.find("nvmlInit_v2 failed (NVML error 9)"), std::string::npos) << why;
  FakeNvml::init_rc = 0;
  gpu::NvmlApi partial;
  EXPECT_FALSE(gpu::Nvml::from_api(partial, &why));
}

// ====================== sampler ======================

TEST(DeviceStatsSampler, SamplesEveryPeriodOnAGridAndNeverThrows) {
  FakeProc fp;
  fp.meminfo(1000, 500, 0, 0);
  fp.stat({100, 0, 0, 100, 0, 0, 0, 0, 0, 0});
  fp.pid(11, 5, 5, 10);
  fp.pid(12, 1, 1, 20);
  std::vector<lt_proc_stats_event> got;
  auto sink = [&](const lt_event_header& h, const std::byte* p) {
    ASSERT_EQ(h.kind, LT_EV_PROC_STATS);
    lt_proc_stats_event e;
    ASSERT_TRUE(decode_record(h, p, /*exact=*/true, e));
    got.push_back(e);
  };
  StatsSampler s({11, 12, 13}, std::chrono::milliseconds(100), sink, {false, fp.root.string()});
  EXPECT_EQ(s.gpu_count(), 0);
  EXPECT_EQ(s.gpu_note(), "GPU statistics off");
  fp.stat({200, 0, 0, 200, 0, 0, 0, 0, 0, 0});
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::uint64_t now = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
  EXPECT_FALSE(s.poll(now));  // the first is due a period after construction
  EXPECT_TRUE(got.empty());
  const std::uint64_t t0 = now + 100 * ms;
  EXPECT_TRUE(s.poll(t0));
  ASSERT_EQ(got.size(), 2u);  // pid 13 has no /proc entry: skipped
  EXPECT_EQ(got[0].hdr.pid, 11u);
  EXPECT_EQ(got[1].hdr.pid, 12u);
  EXPECT_EQ(got[0].cpu_percent_x100, 5000u);  // primed at construction: not psutil's first 0.0
  EXPECT_EQ(got[1].rss_bytes, 20ull * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_FALSE(s.poll(t0 + 50 * ms));
  EXPECT_TRUE(s.poll(t0 + 120 * ms));   // late by 20 ms...
  EXPECT_FALSE(s.poll(t0 + 190 * ms));  // ...the next is still due at 200
  EXPECT_TRUE(s.poll(t0 + 200 * ms));
  EXPECT_TRUE(s.poll(t0 + 900 * ms));  // a stall: restart from now
  EXPECT_FALSE(s.poll(t0 + 950 * ms));
  EXPECT_TRUE(s.poll(t0 + 1000 * ms));
  EXPECT_EQ(got.size(), 10u);
  // A slower period (watch's cheap tier) counts from the last sample; a
  // faster one again (escalated) likewise.
  s.set_period(std::chrono::milliseconds(1000));
  EXPECT_EQ(s.next_due_ns(false), t0 + 2000 * ms);
  EXPECT_FALSE(s.poll(t0 + 1900 * ms));
  EXPECT_TRUE(s.poll(t0 + 2000 * ms));
  s.set_period(std::chrono::milliseconds(100));
  EXPECT_EQ(s.next_due_ns(false), t0 + 2100 * ms);
  EXPECT_TRUE(s.poll(t0 + 2100 * ms));
  EXPECT_EQ(got.size(), 14u);
  s.set_pids({12});
  got.clear();
  s.sample_now();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.pid, 12u);

  StatsSampler throwing({11}, std::chrono::milliseconds(100),
                        [](const lt_event_header&, const std::byte*) { throw std::runtime_error("disk full"); },
                        {false, fp.root.string()});
  EXPECT_NO_THROW(throwing.poll(t0 + 10'000 * ms));
  EXPECT_EQ(throwing.error(), "disk full");
}

TEST(DeviceStatsSampler, LiveProcessWithoutGpu) {
  std::vector<lt_proc_stats_event> got;
  StatsSampler s({getpid()}, std::chrono::milliseconds(100), [&](const lt_event_header& h, const std::byte* p) {
    lt_proc_stats_event e;
    if (h.kind == LT_EV_PROC_STATS && decode_record(h, p, /*exact=*/true, e)) got.push_back(e);
  });
  if (s.gpu_count() == 0) {
    EXPECT_FALSE(s.gpu_note().empty());
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::uint64_t before = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
  EXPECT_FALSE(s.poll());  // not due yet
  s.sample_now();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.pid, static_cast<std::uint32_t>(getpid()));
  EXPECT_GE(got[0].hdr.ts_ns, before);
  EXPECT_LT(got[0].hdr.ts_ns, before + 1'000 * ms);
  EXPECT_NE(got[0].cpu_ns, ~0ull);
  EXPECT_GT(got[0].rss_bytes, 0u);
  EXPECT_LE(got[0].vm_percent_x100, 10000u);
  EXPECT_LE(got[0].cpu_percent_x100, 10000u);
}

// Untraced forks (--pid without --children): a FORK_STATS per fork of the
// target beside its PROC_STATS, which says the forks were looked for; the
// aggregate keeps each fork's CPU series for the verdict.
TEST(DeviceStatsSampler, TheTargetsUntracedForksBesideItsSamples) {
  const lt::testing::PausedFork fork_of_us;
  const pid_t forked = fork_of_us.pid();
  ASSERT_GE(forked, 0);
  std::vector<std::pair<lt_event_header, std::vector<std::byte>>> got;
  StatsSampler::Config config;
  config.gpu = false;
  config.for_verdict = true;
  config.untraced_forks = true;
  StatsSampler s(
      {getpid()}, std::chrono::milliseconds(100),
      [&](const lt_event_header& h, const std::byte* p) { got.emplace_back(h, std::vector<std::byte>(p, p + h.size)); },
      config);
  s.sample_now();
  s.sample_now();
  std::size_t procs = 0, forks = 0;
  ActionAggregator actions;
  DeviceStatsAggregator agg(actions);
  for (auto& [h, bytes] : got) {
    actions.add(h, bytes.data());
    agg.add(h, bytes.data());
    lt_proc_stats_event ps;
    lt_fork_stats_event fs;
    if (h.kind == LT_EV_PROC_STATS && decode_record(h, bytes.data(), /*exact=*/true, ps)) {
      ++procs;
      EXPECT_EQ(ps.flags, LT_PROC_STATS_FOR_VERDICT | LT_PROC_STATS_FORKS_SCANNED);
    }
    if (h.kind == LT_EV_FORK_STATS && decode_record(h, bytes.data(), /*exact=*/true, fs) &&
        h.pid == static_cast<std::uint32_t>(forked)) {
      ++forks;
      EXPECT_EQ(fs.target, static_cast<std::uint32_t>(getpid()));
      EXPECT_EQ(fs.flags, 0u);
      EXPECT_NE(fs.cpu_ns, ~0ull);
      EXPECT_GT(fs.rss_bytes, 0u);
    }
  }
  EXPECT_EQ(procs, 2u);
  EXPECT_EQ(forks, 2u);
  const auto rep = agg.finish();
  ASSERT_EQ(rep.processes.size(), 1u);  // the fork is no process of the report
  EXPECT_TRUE(rep.processes[0].forks_scanned);
  const auto it = std::find_if(rep.untraced_forks.begin(), rep.untraced_forks.end(),
                               [&](const UntracedFork& u) { return u.pid == static_cast<std::uint32_t>(forked); });
  ASSERT_NE(it, rep.untraced_forks.end());
  EXPECT_EQ(it->target, static_cast<std::uint32_t>(getpid()));
  EXPECT_EQ(it->sched.size(), 2u);
}

// ====================== aggregation and report ======================

TEST(DeviceStatsAggregate, CpuOnlySamplesPerInnermostActionOfTheMainThread) {
  Stream s;
  s.info(10, -1);
  s.proc(10, 100 * ms, 40.0, 10.0, 0.0, 1000 * ms, 500);  // before any action
  s.action(LT_EV_ACTION_BEGIN, 10, 150 * ms, 0xa, "run_training_epoch");
  s.action(LT_EV_ACTION_BEGIN, 10, 160 * ms, 0xb, "[LightningModule]M.training_step");
  s.action(LT_EV_ACTION_BEGIN, 10, 170 * ms, 0xc, "[Callback]X.on_idle", 11);  // another thread: ignored
  s.proc(10, 200 * ms, 42.0, 90.0, 1.0, 1080 * ms, 600);                       // 80 ms CPU in 100 ms: 80 %
  s.proc(10, 300 * ms, 44.0, 70.0, 1.0, 1230 * ms, 700);                       // 150 %: two threads busy
  s.action(LT_EV_ACTION_END, 10, 350 * ms, 0xb);
  s.proc(10, 400 * ms, 46.0, 20.0, 1.0, 1240 * ms, 600);  // back in the epoch
  s.action(LT_EV_ACTION_END, 10, 450 * ms, 0xa);
  s.proc(10, 500 * ms, 48.0, 5.0, 1.0, ~0ull, 600);  // cpu unknown: no process.cpu_percent
  auto arep = s.actions.finish();
  auto rep = s.stats.finish();
  EXPECT_FALSE(rep.gpu);
  EXPECT_EQ(rep.period_ns, 100 * ms);
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& p = rep.processes[0];
  EXPECT_TRUE(p.has_actions);
  EXPECT_TRUE(p.devices.empty());
  ASSERT_EQ(p.actions.size(), 3u);
  EXPECT_EQ(p.actions[0].action, "run_training_epoch");
  EXPECT_EQ(p.actions[1].action, "[LightningModule]M.training_step");
  EXPECT_EQ(p.actions[2].action, kNoAction);
  const auto* step = block(p, "[LightningModule]M.training_step");
  ASSERT_TRUE(step);
  auto* cpu = stat(*step, DeviceStatKey::cpu_percent);
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->count, 2u);
  EXPECT_DOUBLE_EQ(cpu->mean(), 80.0);
  EXPECT_DOUBLE_EQ(cpu->min, 70.0);
  EXPECT_DOUBLE_EQ(cpu->max, 90.0);
  auto* pcpu = stat(*step, DeviceStatKey::process_cpu_percent);
  ASSERT_TRUE(pcpu);
  EXPECT_DOUBLE_EQ(pcpu->min, 80.0);
  EXPECT_DOUBLE_EQ(pcpu->max, 150.0);
  EXPECT_DOUBLE_EQ(stat(*step, DeviceStatKey::process_rss_mb)->max, 700.0);
  // Outside every action: the first and the last sample.
  const auto* none = block(p, kNoAction);
  EXPECT_EQ(stat(*none, DeviceStatKey::cpu_vm_percent)->count, 2u);
  EXPECT_EQ(stat(*none, DeviceStatKey::process_cpu_percent), nullptr);  // first has no previous, last unknown
  // The whole window has them all.
  EXPECT_EQ(stat(p.window, DeviceStatKey::cpu_vm_percent)->count, 5u);
  EXPECT_DOUBLE_EQ(stat(p.window, DeviceStatKey::cpu_vm_percent)->mean(), 44.0);
  EXPECT_EQ(stat(p.window, DeviceStatKey::process_cpu_percent)->count, 3u);
  EXPECT_EQ(stat(p.window, DeviceStatKey::gpu_utilization, 0), nullptr);
  // Row order: Lightning's get_cpu_stats order, then ours.
  ASSERT_EQ(p.window.rows.size(), 5u);
  EXPECT_EQ(p.window.rows[0].key, DeviceStatKey::cpu_vm_percent);
  EXPECT_EQ(p.window.rows[1].key, DeviceStatKey::cpu_percent);
  EXPECT_EQ(p.window.rows[2].key, DeviceStatKey::cpu_swap_percent);

  const std::string text = render_device_stats(rep, {&arep});
  const std::string expected =
      "Device stats (DeviceStatsMonitor keys; sampled every 100 ms from outside the process)\n"
      "No GPU samples in this recording: CPU keys only.\n"
      "\n"
      "pid 10 (python)\n"
      "\n"
      "[whole window]  (0.4 s)\n"
      "  key                        mean         min         max   samples\n"
      "  cpu_vm_percent             44.0        40.0        48.0         5\n"
      "  cpu_percent                39.0         5.0        90.0         5\n"
      "  cpu_swap_percent            0.8         0.0         1.0         5\n"
      "  process.cpu_percent        80.0        10.0       150.0         3\n"
      "  process.rss (MB)          600.0       500.0       700.0         5\n"
      "run_training_epoch  (0.300 s in 1 call)\n"
      "  key                        mean         min         max   samples\n"
      "  cpu_vm_percent             46.0        46.0        46.0         1\n"
      "  cpu_percent                20.0        20.0        20.0         1\n"
      "  cpu_swap_percent            1.0         1.0         1.0         1\n"
      "  process.cpu_percent        10.0        10.0        10.0         1\n"
      "  process.rss (MB)          600.0       600.0       600.0         1\n"
      "[LightningModule]M.training_step  (0.190 s in 1 call)\n"
      "  key                        mean         min         max   samples\n"
      "  cpu_vm_percent             43.0        42.0        44.0         2\n"
      "  cpu_percent                80.0        70.0        90.0         2\n"
      "  cpu_swap_percent            1.0         1.0         1.0         2\n"
      "  process.cpu_percent       115.0        80.0       150.0         2\n"
      "  process.rss (MB)          650.0       600.0       700.0         2\n"
      "[no Lightning action]\n"
      "  key                        mean         min         max   samples\n"
      "  cpu_vm_percent             44.0        40.0        48.0         2\n"
      "  cpu_percent                 7.5         5.0        10.0         2\n"
      "  cpu_swap_percent            0.5         0.0         1.0         2\n"
      "  process.rss (MB)          550.0       500.0       600.0         2\n";
  EXPECT_EQ(text, expected) << text;
}

TEST(DeviceStatsAggregate, GpuSamplesGoToTheProcessesOnThatGpu) {
  Stream s;
  s.info(10, 0);
  s.info(20, 1);
  s.info(30, -1, "pt_data_worker");  // a DataLoader worker: no actions, no GPU
  s.action(LT_EV_ACTION_BEGIN, 10, 10 * ms, 0xa, "[LightningModule]M.training_step");
  s.action(LT_EV_ACTION_BEGIN, 20, 10 * ms, 0xa, "[LightningModule]M.validation_step");
  // Before any CUDA context: nobody known on the GPUs -> every Lightning process.
  s.gpu(100 * ms, 0, 10, 100);
  s.proc(10, 100 * ms, 40, 50, 0, 0, 100);
  s.proc(20, 100 * ms, 40, 50, 0, 0, 100);
  s.proc(30, 100 * ms, 40, 50, 0, 0, 100);
  // Now 10 on GPU 0, 20 on GPU 1.
  s.gpu(200 * ms, 0, 90, 500, {{10, 400}, {20, 0}});
  s.gpu(200 * ms, 1, 60, 300, {{20, 250}, {10, 0}});
  s.proc(10, 200 * ms, 40, 50, 0, 0, 100);
  s.action(LT_EV_ACTION_END, 10, 250 * ms, 0xa);
  s.gpu(300 * ms, 0, 30, 500, {{10, 400}, {20, 0}});  // 10 outside its actions now
  s.gpu(300 * ms, 1, 70, 300, {{20, 250}, {10, 0}});
  lt_proc_event exit{};
  exit.hdr = {LT_EV_PROC_EXIT, sizeof exit, 20, 20, 0, 350 * ms};
  s.feed(exit);
  s.gpu(400 * ms, 1, 0, 0, {{10, 0}});  // 20 gone: nobody on GPU 1, 10 has its own: dropped
  auto arep = s.actions.finish();
  auto rep = s.stats.finish();
  EXPECT_TRUE(rep.gpu);
  ASSERT_EQ(rep.processes.size(), 3u);
  const auto& p10 = rep.processes[0];
  const auto& p20 = rep.processes[1];
  EXPECT_EQ(p10.pid, 10u);
  EXPECT_EQ(p10.rank, 0);
  EXPECT_EQ(p20.rank, 1);
  EXPECT_EQ(p10.devices, (std::vector<int>{0}));
  EXPECT_EQ(p20.devices, (std::vector<int>{0, 1}));  // GPU 0 from the first sample, before contexts
  EXPECT_FALSE(rep.processes[2].has_actions);
  EXPECT_TRUE(rep.processes[2].devices.empty());  // the worker got no GPU samples

  auto* util0 = stat(p10.window, DeviceStatKey::gpu_utilization, 0);
  ASSERT_TRUE(util0);
  EXPECT_EQ(util0->count, 3u);  // 10, 90, 30
  EXPECT_EQ(stat(p10.window, DeviceStatKey::gpu_utilization, 1), nullptr);
  EXPECT_EQ(stat(p20.window, DeviceStatKey::gpu_utilization, 1)->count, 2u);  // 60, 70; not the one after its exit
  EXPECT_EQ(stat(p20.window, DeviceStatKey::gpu_utilization, 0)->count, 1u);  // the first, before contexts
  const auto* step = block(p10, "[LightningModule]M.training_step");
  EXPECT_DOUBLE_EQ(stat(*step, DeviceStatKey::gpu_utilization, 0)->mean(), 50.0);  // 10, 90
  EXPECT_DOUBLE_EQ(stat(*step, DeviceStatKey::gpu_process_memory_mb, 0)->mean(), 400.0);
  EXPECT_DOUBLE_EQ(stat(*step, DeviceStatKey::gpu_memory_free_mb, 0)->max, 900.0);
  EXPECT_DOUBLE_EQ(stat(*step, DeviceStatKey::gpu_power_w, 0)->mean(), 250.5);
  EXPECT_EQ(stat(*step, DeviceStatKey::gpu_sm_clock_mhz, 0), nullptr);  // unsupported: no row
  EXPECT_DOUBLE_EQ(stat(*block(p10, kNoAction), DeviceStatKey::gpu_utilization, 0)->mean(), 30.0);

  // The report leaves out the worker (it ran no Lightning action), labels
  // ranks, names GPUs, and prefixes GPU keys when a process got several.
  const std::string text = render_device_stats(rep, {&arep, {"NVIDIA H200", "NVIDIA H200"}, 0});
  EXPECT_EQ(text.find("pid 30"), std::string::npos);
  EXPECT_NE(text.find("\npid 10 rank 0 (python), GPU 0 (NVIDIA H200)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\npid 20 rank 1 (python), GPUs 0 (NVIDIA H200), 1 (NVIDIA H200)\n"), std::string::npos);
  // Plain keys for 10 (one GPU), "gpu_id: N/" for 20 (two).
  const std::string t10 = text.substr(0, text.find("\npid 20")), t20 = text.substr(text.find("\npid 20"));
  EXPECT_NE(t10.find("\n  temperature.gpu (\u00b0C)"), std::string::npos);
  EXPECT_EQ(t10.find("gpu_id:"), std::string::npos);
  EXPECT_NE(t20.find("\n  gpu_id: 1/temperature.gpu (\u00b0C)"), std::string::npos);
  EXPECT_NE(t20.find("\n  gpu_id: 0/utilization.gpu (%)"), std::string::npos);
  EXPECT_EQ(text.find("No GPU samples"), std::string::npos);
  // Every key row of a process is as wide as the others ("\u00b0C" is two
  // bytes but one column), and within 120 columns.
  for (const std::string* t : {&t10, &t20}) {
    std::istringstream lines(*t);
    std::string line;
    std::size_t width = 0;
    while (std::getline(lines, line)) {
      if (line.rfind("  ", 0) != 0) continue;
      std::size_t cols = 0;
      for (unsigned char c : line) cols += (c & 0xC0) != 0x80;
      if (!width) width = cols;
      EXPECT_EQ(cols, width) << line;
      EXPECT_LE(cols, 120u) << line;
    }
  }
}

TEST(DeviceStatsAggregate, OneGpuProcessHasPlainKeysAndActionsByTotalTime) {
  Stream s;
  s.info(10, -1);
  // "b" runs longer in total than "a" although "a" began first.
  s.action(LT_EV_ACTION_BEGIN, 10, 0 * ms, 1, "a");
  s.gpu(5 * ms, 0, 10, 100, {{10, 50}});
  s.action(LT_EV_ACTION_END, 10, 10 * ms, 1);
  s.action(LT_EV_ACTION_BEGIN, 10, 20 * ms, 2, "b");
  s.gpu(25 * ms, 0, 20, 100, {{10, 60}});
  s.action(LT_EV_ACTION_END, 10, 120 * ms, 2);
  auto arep = s.actions.finish();
  auto rep = s.stats.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  EXPECT_EQ(rep.processes[0].devices, std::vector<int>{0});
  EXPECT_EQ(rep.period_ns, 20 * ms);  // no PROC_STATS: from the GPU's samples
  const std::string text = render_device_stats(rep, {&arep, {}, 100});
  EXPECT_NE(text.find("sampled every 100 ms"), std::string::npos);
  EXPECT_NE(text.find("\npid 10 (python), GPU 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  utilization.gpu (%)"), std::string::npos);
  EXPECT_EQ(text.find("gpu_id:"), std::string::npos);
  EXPECT_LT(text.find("\nb  (0.100 s in 1 call)"), text.find("\na  (0.010 s in 1 call)")) << text;
  // Without the ActionsReport: by name.
  const std::string bare = render_device_stats(rep);
  EXPECT_LT(bare.find("\na\n"), bare.find("\nb\n")) << bare;
}

TEST(DeviceStatsAggregate, EmptyAndMalformed) {
  Stream s;
  lt_proc_stats_event bad{};
  bad.hdr = {LT_EV_PROC_STATS, sizeof bad - 8, 10, 10, 0, 1};  // wrong size: ignored
  s.stats.add(bad.hdr, reinterpret_cast<const std::byte*>(&bad));
  auto rep = s.stats.finish();
  EXPECT_TRUE(rep.processes.empty());
  EXPECT_EQ(rep.period_ns, 0u);
  EXPECT_EQ(render_device_stats(rep),
            "Device stats (DeviceStatsMonitor keys; sampled from outside the process)\n"
            "No GPU samples in this recording: CPU keys only.\n"
            "\nNo samples.\n");
}

namespace {

// The resident-memory series the verdict reads: every sample while it
// fits, then thinned evenly, never past its bound, whole run kept.
TEST(DeviceStats, ResidentMemorySeriesIsBoundedAndSpansTheRun) {
  Stream s;
  s.info(7, -1);
  const std::uint64_t n = 3 * ProcessDeviceStats::kRssSeriesMax + 5;
  for (std::uint64_t i = 0; i < n; ++i) s.proc(7, 1000 + i * 100, 10, 10, 0, i, 700 + i / 1000);
  s.actions.finish();
  const auto rep = s.stats.finish();
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& v = rep.processes[0].rss_mb;
  EXPECT_LE(v.size(), ProcessDeviceStats::kRssSeriesMax);
  EXPECT_GE(v.size(), ProcessDeviceStats::kRssSeriesMax / 2);
  EXPECT_EQ(v.front().first, 1000u);
  EXPECT_GE(v.back().first, 1000 + (n - 5) * 100);  // to the end (within one stride of 4)
  for (std::size_t i = 1; i < v.size(); ++i) EXPECT_EQ(v[i].first - v[i - 1].first, 400u) << i;  // evenly
  EXPECT_DOUBLE_EQ(v.back().second, 700.0 + static_cast<double>((v.back().first - 1000) / 100 / 1000));
}

}  // namespace

// /proc samples taken for --report verdict alone (no --device-stats) say
// so on every record: the aggregate says it, and no device-stats report is
// printed of them (report_registry.cpp); one sample of --device-stats, or
// a GPU's, and they are a device-stats recording.
TEST(DeviceStatsVerdictOnly, EverySampleTheVerdictsOrNot) {
  auto report = [](bool second_for_verdict, bool with_gpu) {
    Stream s;
    s.info(7, -1);
    s.proc(7, 1'000'000'000, 10, 20, 0, 1'000'000, 100, LT_PROC_STATS_FOR_VERDICT);
    s.proc(7, 1'100'000'000, 10, 20, 0, 2'000'000, 100, second_for_verdict ? LT_PROC_STATS_FOR_VERDICT : 0);
    if (with_gpu) s.gpu(1'100'000'000, 0, 50, 100);
    return s.stats.finish();
  };
  const auto verdict = report(true, false);
  EXPECT_TRUE(verdict.for_verdict);
  ASSERT_EQ(verdict.processes.size(), 1u);  // judged all the same
  EXPECT_FALSE(report(false, false).for_verdict);
  EXPECT_FALSE(report(true, true).for_verdict);
}
