// build/libltrace-bridge.so as a target process sees it: what it exports,
// its USDT notes and semaphores, what dlopen() alone does (the late path:
// a dormant poll thread, nothing else), the NVTX injection entry point, and
// a tracer attaching on a machine without a GPU.
//
// The library is found through $LTRACE_BRIDGE_SO or next to the test binary
// (build/unit-tests -> build/libltrace-bridge.so); `make bridge` builds it.
// Without it these tests are skipped.
#define NVTX_NO_IMPL
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <link.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string bridge_path() {
  if (const char* p = getenv("LTRACE_BRIDGE_SO"); p && *p) return p;
  char exe[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {};
  std::string dir(exe, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  return dir + "/libltrace-bridge.so";
}

bool have_bridge() {
  return access(bridge_path().c_str(), R_OK) == 0;
}

// The copy this process loads: a file of its own (a new inode), so that a
// tracer running beside the tests -- a `run` that probes the built bridge's
// USDT semaphores, which the kernel counts in every process mapping that
// file -- does not show here as a tracer attached to this process.
struct PrivateCopy {
  std::string dir, path;
  PrivateCopy() {
    char tmpl[] = "/tmp/lt-bridge-test.XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir = tmpl;
    std::error_code ec;
    std::filesystem::copy_file(bridge_path(), dir + "/libltrace-bridge.so", ec);
    if (!ec) path = dir + "/libltrace-bridge.so";
  }
  ~PrivateCopy() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const std::string& loaded_path() {
  static const PrivateCopy copy;
  return copy.path;
}

#define REQUIRE_BRIDGE() \
  if (!have_bridge()) GTEST_SKIP() << "no " << bridge_path() << " (make bridge)"

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

struct Probe {
  std::string name;
  unsigned long long semaphore = 0;
  std::vector<std::string> args;
};

// `readelf -n`: the stapsdt notes of provider ltrace.
std::map<std::string, Probe> ltrace_probes() {
  std::map<std::string, Probe> probes;
  std::istringstream in(run("readelf -nW '" + bridge_path() + "' 2>/dev/null"));
  std::string line, provider;
  Probe cur;
  auto flush = [&] {
    if (provider == "ltrace" && !cur.name.empty()) {
      EXPECT_EQ(probes.count(cur.name), 0u) << "two notes for ltrace:" << cur.name;
      probes[cur.name] = cur;
    }
    cur = Probe{};
    provider.clear();
  };
  while (std::getline(in, line)) {
    auto val = [&](const char* key) -> std::string {
      size_t p = line.find(key);
      if (p == std::string::npos) return {};
      std::string v = line.substr(p + strlen(key));
      while (!v.empty() && v[0] == ' ') v.erase(0, 1);
      return v;
    };
    if (line.find("NT_STAPSDT") != std::string::npos) flush();
    if (std::string v = val("Provider:"); !v.empty()) provider = v;
    if (std::string v = val("Name:"); !v.empty()) cur.name = v;
    if (std::string v = val("Semaphore:"); !v.empty()) cur.semaphore = std::stoull(v, nullptr, 16);
    if (line.find("Arguments:") != std::string::npos) {
      std::istringstream a(val("Arguments:"));
      std::string one;
      while (a >> one) cur.args.push_back(one);
    }
  }
  flush();
  return probes;
}

// Load bias of the bridge in this process.
uintptr_t bridge_base() {
  struct Ctx {
    std::string want;
    uintptr_t base = 0;
  } ctx;
  char real[PATH_MAX];
  if (!realpath(loaded_path().c_str(), real)) return 0;
  ctx.want = real;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Ctx*>(data);
        char r[PATH_MAX];
        if (info->dlpi_name && *info->dlpi_name && realpath(info->dlpi_name, r) && c->want == r) {
          c->base = info->dlpi_addr;
          return 1;
        }
        return 0;
      },
      &ctx);
  return ctx.base;
}

// What libbpf does when it attaches: find the semaphore through the note.
volatile unsigned short* semaphore(const std::string& probe) {
  static std::map<std::string, Probe> probes = ltrace_probes();
  auto it = probes.find(probe);
  if (it == probes.end() || it->second.semaphore == 0) return nullptr;
  uintptr_t base = bridge_base();
  if (base == 0) return nullptr;
  return reinterpret_cast<volatile unsigned short*>(base + it->second.semaphore);
}

// fd 2 into a file for a while.
class StderrCapture {
 public:
  StderrCapture() {
    fflush(stderr);
    char tmpl[] = "/tmp/bridge-test-XXXXXX";
    int fd = mkstemp(tmpl);
    path_ = tmpl;
    saved_ = dup(2);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrCapture() { finish(); }
  std::string finish() {
    if (saved_ >= 0) {
      fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
      std::ifstream f(path_);
      std::stringstream ss;
      ss << f.rdbuf();
      text_ = ss.str();
      unlink(path_.c_str());
    }
    return text_;
  }
  std::string text_so_far() const {
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  std::string text_;
  int saved_ = -1;
};

int count_in_maps(const char* what) {
  std::ifstream f("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(f, line))
    if (line.find(what) != std::string::npos) ++n;
  return n;
}

bool bridge_thread_running() {
  return run("cat /proc/" + std::to_string(getpid()) + "/task/*/comm 2>/dev/null").find("ltrace-bridge") !=
         std::string::npos;
}

template <class F>
bool wait_for(F&& cond, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

// Loaded once for the whole binary, like a ptrace injector would: plain
// dlopen(), no injection variables.  Diagnostics on (stderr only).
struct Loaded {
  void* handle = nullptr;
  std::string log;
  int cupti_maps_before = 0, cupti_maps_after = 0;
  bool thread_seen = false;
};

Loaded& loaded() {
  static Loaded l = [] {
    Loaded r;
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("NVTX_INJECTION64_PATH");
    setenv("LTRACE_BRIDGE_DEBUG", "1", 1);
    r.cupti_maps_before = count_in_maps("libcupti");
    StderrCapture cap;
    r.handle = dlopen(loaded_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    r.thread_seen = wait_for(bridge_thread_running, 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few dormant polls
    r.cupti_maps_after = count_in_maps("libcupti");
    r.log = cap.finish();
    return r;
  }();
  return l;
}

template <class F>
F sym(const char* name) {
  return reinterpret_cast<F>(dlsym(loaded().handle, name));
}

TEST(BridgeLibrary, ExportsOnlyTheEntryPoints) {
  REQUIRE_BRIDGE();
  std::istringstream in(run("nm -D --defined-only '" + bridge_path() + "'"));
  std::set<std::string> names;
  std::string addr, type, name;
  while (in >> addr >> type >> name) names.insert(name);
  EXPECT_EQ(names,
            (std::set<std::string>{"InitializeInjection", "InitializeInjectionNvtx2", "ltrace_bridge_late_init"}));
}

TEST(BridgeLibrary, UsdtProbesWithSemaphores) {
  REQUIRE_BRIDGE();
  std::map<std::string, Probe> probes = ltrace_probes();
  // name -> argument sizes
  std::map<std::string, std::vector<std::string>> want = {
      {"session", {}}, {"activity", {"8", "4"}}, {"name", {"8"}},  {"launch", {"4", "4", "4"}},
      {"nvtx", {"8"}}, {"status", {"8"}},        {"clock", {"8"}}, {"ops", {}},
  };
  ASSERT_EQ(probes.size(), want.size());
  // Semaphore symbols (local, in .probes) at the addresses the notes give.
  std::string syms = run("readelf -sW '" + bridge_path() + "'");
  std::string sections = run("readelf -SW '" + bridge_path() + "'");
  unsigned long long probes_addr = 0, probes_size = 0;
  {
    std::istringstream s(sections);
    std::string line;
    while (std::getline(s, line)) {
      size_t p = line.find(" .probes ");
      if (p == std::string::npos) continue;
      std::istringstream f(line.substr(p + 9));
      std::string type, addr, off, size;
      f >> type >> addr >> off >> size;
      probes_addr = std::stoull(addr, nullptr, 16);
      probes_size = std::stoull(size, nullptr, 16);
    }
  }
  ASSERT_NE(probes_addr, 0u) << "no .probes section";
  std::set<unsigned long long> semas;
  for (auto& [name, args] : want) {
    SCOPED_TRACE(name);
    ASSERT_EQ(probes.count(name), 1u);
    const Probe& p = probes[name];
    ASSERT_EQ(p.args.size(), args.size());
    for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(p.args[i].substr(0, p.args[i].find('@')), args[i]);
    EXPECT_NE(p.semaphore, 0u);
    EXPECT_GE(p.semaphore, probes_addr);
    EXPECT_LT(p.semaphore, probes_addr + probes_size);
    semas.insert(p.semaphore);
    std::string sym = "ltrace_" + name + "_semaphore";
    size_t at = syms.find(" " + sym + "\n");
    ASSERT_NE(at, std::string::npos) << sym;
    size_t line_start = syms.rfind('\n', at) + 1;
    std::istringstream f(syms.substr(line_start, at - line_start));
    std::string num, value, size;
    f >> num >> value >> size;
    EXPECT_EQ(std::stoull(value, nullptr, 16), p.semaphore);
    EXPECT_EQ(size, "2");
  }
  EXPECT_EQ(semas.size(), want.size());
}

TEST(BridgeLibrary, DlopenAloneIsTheDormantLatePath) {
  REQUIRE_BRIDGE();
  Loaded& l = loaded();
  ASSERT_NE(l.handle, nullptr) << dlerror();
  EXPECT_TRUE(l.thread_seen) << "no thread named ltrace-bridge";
  EXPECT_NE(l.log.find("late: dlopen"), std::string::npos) << l.log;
  EXPECT_NE(l.log.find("poll thread started"), std::string::npos) << l.log;
  // Dormant: nothing loaded, nothing said.
  EXPECT_EQ(l.cupti_maps_after, l.cupti_maps_before);
  EXPECT_EQ(l.log.find("status"), std::string::npos) << l.log;
  EXPECT_EQ(l.log.find("tracer attached"), std::string::npos) << l.log;
  for (const char* p : {"session", "activity", "name", "launch", "nvtx", "status", "clock"}) {
    volatile unsigned short* s = semaphore(p);
    ASSERT_NE(s, nullptr) << p;
    EXPECT_EQ(*s, 0) << p;
  }
  // Entry points resolve; internals do not.
  EXPECT_NE(sym<void*>("InitializeInjection"), nullptr);
  EXPECT_NE(sym<void*>("InitializeInjectionNvtx2"), nullptr);
  EXPECT_EQ(sym<void*>("ltrace_session_semaphore"), nullptr);
  auto late = sym<int (*)()>("ltrace_bridge_late_init");
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late(), 1);  // already running: same thread
  // dlclose never unmaps it (the thread and the callbacks live on).
  void* again = dlopen(loaded_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(again, nullptr);
  dlclose(again);
  EXPECT_NE(dlopen(loaded_path().c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_TRUE(bridge_thread_running());
}

// A module's NVTX tables, as nvtxImpl.h lays them out.
struct FakeNvtxModule {
  NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE] = {};
  NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE] = {};
  NvtxFunctionPointer* core_table[NVTX_CBID_CORE_SIZE + 1] = {};
  NvtxFunctionPointer* core2_table[NVTX_CBID_CORE2_SIZE + 1] = {};
  FakeNvtxModule() {
    for (int i = 1; i < NVTX_CBID_CORE_SIZE; ++i) core_table[i] = &core[i];
    for (int i = 1; i < NVTX_CBID_CORE2_SIZE; ++i) core2_table[i] = &core2[i];
  }
};

FakeNvtxModule* g_module = nullptr;
uint32_t g_version_set = 0;

int NVTX_API get_module_table(NvtxCallbackModule m, NvtxFunctionTable* out, unsigned int* size) {
  if (m == NVTX_CB_MODULE_CORE) {
    *out = g_module->core_table;
    *size = NVTX_CBID_CORE_SIZE;
    return 1;
  }
  if (m == NVTX_CB_MODULE_CORE2) {
    *out = g_module->core2_table;
    *size = NVTX_CBID_CORE2_SIZE;
    return 1;
  }
  return 0;
}
void NVTX_API set_version(uint32_t v) {
  g_version_set = v;
}

const NvtxExportTableCallbacks kCallbacks = {sizeof(NvtxExportTableCallbacks), get_module_table};
const NvtxExportTableVersionInfo kVersion = {sizeof(NvtxExportTableVersionInfo), NVTX_VERSION, 0, set_version};

const void* NVTX_API get_export_table(uint32_t id) {
  if (id == NVTX_ETID_CALLBACKS) return &kCallbacks;
  if (id == NVTX_ETID_VERSIONINFO) return &kVersion;
  return nullptr;
}

template <class F>
F slot(NvtxFunctionPointer p) {
  return reinterpret_cast<F>(p);
}

nvtxEventAttributes_t attrs_registered(nvtxStringHandle_t s) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff00ff00;
  a.category = 3;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = s;
  return a;
}

void exercise_nvtx(FakeNvtxModule& m) {
  auto push_a = slot<nvtxRangePushA_impl_fntype>(m.core[NVTX_CBID_CORE_RangePushA]);
  auto push_w = slot<nvtxRangePushW_impl_fntype>(m.core[NVTX_CBID_CORE_RangePushW]);
  auto push_ex = slot<nvtxRangePushEx_impl_fntype>(m.core[NVTX_CBID_CORE_RangePushEx]);
  auto pop = slot<nvtxRangePop_impl_fntype>(m.core[NVTX_CBID_CORE_RangePop]);
  auto start_a = slot<nvtxRangeStartA_impl_fntype>(m.core[NVTX_CBID_CORE_RangeStartA]);
  auto end = slot<nvtxRangeEnd_impl_fntype>(m.core[NVTX_CBID_CORE_RangeEnd]);
  auto mark_a = slot<nvtxMarkA_impl_fntype>(m.core[NVTX_CBID_CORE_MarkA]);
  auto create_a = slot<nvtxDomainCreateA_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainCreateA]);
  auto create_w = slot<nvtxDomainCreateW_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainCreateW]);
  auto reg_a = slot<nvtxDomainRegisterStringA_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainRegisterStringA]);
  auto dpush = slot<nvtxDomainRangePushEx_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainRangePushEx]);
  auto dpop = slot<nvtxDomainRangePop_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainRangePop]);
  auto dmark = slot<nvtxDomainMarkEx_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainMarkEx]);
  auto dstart = slot<nvtxDomainRangeStartEx_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainRangeStartEx]);
  auto dend = slot<nvtxDomainRangeEnd_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainRangeEnd]);
  auto destroy = slot<nvtxDomainDestroy_impl_fntype>(m.core2[NVTX_CBID_CORE2_DomainDestroy]);

  // Nesting levels, as NVTX returns them.
  EXPECT_EQ(push_a("forward"), 0);
  EXPECT_EQ(push_w(L"r\u00fcckw\u00e4rts \u2192 \U0001F600"), 1);
  nvtxEventAttributes_t plain{};
  plain.version = NVTX_VERSION;
  plain.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  plain.messageType = NVTX_MESSAGE_TYPE_ASCII;
  plain.message.ascii = "step";
  EXPECT_EQ(push_ex(&plain), 2);
  EXPECT_EQ(pop(), 2);
  EXPECT_EQ(pop(), 1);
  EXPECT_EQ(pop(), 0);
  EXPECT_EQ(pop(), -1);  // unbalanced pop: an error value
  // Unique range ids.
  nvtxRangeId_t r1 = start_a("load"), r2 = start_a("load");
  EXPECT_NE(r1, 0u);
  EXPECT_NE(r1, r2);
  end(r2);
  end(r1);
  mark_a("here");
  mark_a(std::string(1000, 'm').c_str());  // longer than lt_nvtx.msg
  // Domains and registered strings: library objects, one per name.
  nvtxDomainHandle_t d1 = create_a("NCCL");
  nvtxDomainHandle_t d1b = create_a("NCCL");
  nvtxDomainHandle_t d2 = create_w(L"cuDNN");
  ASSERT_NE(d1, nullptr);
  EXPECT_EQ(d1, d1b);
  EXPECT_NE(d1, d2);
  nvtxStringHandle_t s1 = reg_a(d1, "AllReduce");
  EXPECT_NE(s1, nullptr);
  EXPECT_EQ(reg_a(d1, "AllReduce"), s1);
  EXPECT_NE(reg_a(d2, "AllReduce"), s1);  // per domain
  nvtxEventAttributes_t ra = attrs_registered(s1);
  EXPECT_EQ(dpush(d1, &ra), 0);
  EXPECT_EQ(dpush(d2, &plain), 0);  // depth is per domain
  EXPECT_EQ(dpush(d1, &plain), 1);
  EXPECT_EQ(dpop(d1), 1);
  EXPECT_EQ(dpop(d1), 0);
  EXPECT_EQ(dpop(d2), 0);
  dmark(d1, &ra);
  nvtxRangeId_t r3 = dstart(d2, &plain);
  EXPECT_NE(r3, r2);
  dend(d2, r3);
  dmark(nullptr, nullptr);
  destroy(d2);
  EXPECT_EQ(create_w(L"cuDNN"), d2);
}

TEST(BridgeLibrary, NvtxInjectionInstallsCallbacks) {
  REQUIRE_BRIDGE();
  ASSERT_NE(loaded().handle, nullptr);
  auto init = sym<int (*)(NvtxGetExportTableFunc_t)>("InitializeInjectionNvtx2");
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(init(nullptr), 0);
  static FakeNvtxModule m;
  g_module = &m;
  StderrCapture init_log;
  EXPECT_EQ(init(get_export_table), 1);
  EXPECT_NE(init_log.finish().find("status NVTX"), std::string::npos);
  EXPECT_EQ(g_version_set, static_cast<uint32_t>(NVTX_VERSION));
  for (int cbid : {NVTX_CBID_CORE_MarkEx, NVTX_CBID_CORE_MarkA, NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartA,
                   NVTX_CBID_CORE_RangeEnd, NVTX_CBID_CORE_RangePushEx, NVTX_CBID_CORE_RangePushA,
                   NVTX_CBID_CORE_RangePushW, NVTX_CBID_CORE_RangePop})
    EXPECT_NE(m.core[cbid], nullptr) << "CORE " << cbid;
  for (int cbid : {NVTX_CBID_CORE2_DomainMarkEx, NVTX_CBID_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeEnd,
                   NVTX_CBID_CORE2_DomainRangePushEx, NVTX_CBID_CORE2_DomainRangePop,
                   NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainRegisterStringW,
                   NVTX_CBID_CORE2_DomainCreateA, NVTX_CBID_CORE2_DomainCreateW, NVTX_CBID_CORE2_DomainDestroy})
    EXPECT_NE(m.core2[cbid], nullptr) << "CORE2 " << cbid;
  EXPECT_EQ(m.core[NVTX_CBID_CORE_NameCategoryA], nullptr);  // left to NVTX's no-op

  // No tracer: the callbacks keep NVTX's semantics and fire nothing.
  exercise_nvtx(m);
  // A tracer on ltrace:nvtx / name / session: the same calls go through the
  // event path (the probe sites are nops without a real uprobe).
  volatile unsigned short* nvtx = semaphore("nvtx");
  volatile unsigned short* name = semaphore("name");
  volatile unsigned short* session = semaphore("session");
  ASSERT_TRUE(nvtx && name && session);
  StderrCapture cap;  // the poll thread may notice the session
  *nvtx = 1;
  *name = 1;
  *session = 1;
  exercise_nvtx(m);
  *session = 0;
  *name = 0;
  *nvtx = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  cap.finish();
}

TEST(BridgeLibrary, TracerAttachWithoutGpuReportsStatusAndStaysAlive) {
  REQUIRE_BRIDGE();
  ASSERT_NE(loaded().handle, nullptr);
  volatile unsigned short* session = semaphore("session");
  volatile unsigned short* status = semaphore("status");
  ASSERT_TRUE(session && status);
  StderrCapture cap;
  // As the CUDA driver would: the process has CUDA, subscribe on attach.
  auto inject = sym<int (*)()>("InitializeInjection");
  ASSERT_NE(inject, nullptr);
  EXPECT_EQ(inject(), 1);
  *status = 1;
  *session = 1;
  bool said = wait_for([&] { return cap.text_so_far().find("status ") != std::string::npos; }, 3000);
  *session = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  *status = 0;
  std::string log = cap.finish();
  EXPECT_TRUE(said) << log;
  EXPECT_NE(log.find("tracer attached"), std::string::npos) << log;
  // No GPU and no driver here: libcupti loads (it is in the toolkit) and
  // cuptiSubscribe fails; on a GPU machine this would be ACTIVE, or BUSY.
  EXPECT_NE(log.find("status DORMANT"), std::string::npos) << log;  // the answer to the tracer's detach
  bool known = log.find("status CUPTI_ERROR") != std::string::npos ||
               log.find("status NO_CUPTI") != std::string::npos || log.find("status ACTIVE") != std::string::npos ||
               log.find("status CUPTI_BUSY") != std::string::npos;
  EXPECT_TRUE(known) << log;
  std::printf("[ bridge   ] %s", log.c_str());
  EXPECT_TRUE(bridge_thread_running());
}

// fork(): the child has no poll thread, stays dormant, and its NVTX
// callbacks still work (no lock held by a parent thread).
TEST(BridgeLibrary, ForkChildStaysDormant) {
  REQUIRE_BRIDGE();
  ASSERT_NE(loaded().handle, nullptr);
  ASSERT_TRUE(bridge_thread_running());
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // a poll period or two
    // Threads of this process, by name (no popen in a fork child).
    if (DIR* d = opendir("/proc/self/task")) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string comm;
        if (std::getline(f, comm) && comm == "ltrace-bridge") code = 1;
      }
      closedir(d);
    }
    if (g_module != nullptr) {
      auto push_a = slot<nvtxRangePushA_impl_fntype>(g_module->core[NVTX_CBID_CORE_RangePushA]);
      auto pop = slot<nvtxRangePop_impl_fntype>(g_module->core[NVTX_CBID_CORE_RangePop]);
      auto create_a = slot<nvtxDomainCreateA_impl_fntype>(g_module->core2[NVTX_CBID_CORE2_DomainCreateA]);
      if (push_a("child") != 0 || pop() != 0) code = 2;
      if (create_a("child-domain") == nullptr) code = 3;
    }
    _exit(code);
  }
  int st = -1;
  bool done = wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 5000);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  ASSERT_TRUE(done) << "fork child hung";
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: poll thread in the child, 2/3: NVTX callbacks";
  EXPECT_TRUE(bridge_thread_running());  // the parent's thread is untouched
}

}  // namespace
