// Late injection into real processes: /usr/bin/python3 targets, a real
// library (tests/workloads/inject_marker.c, built here), real ptrace.
// Needs root (or CAP_SYS_PTRACE) and a C compiler; skipped otherwise.
#include "user/inject/inject_library.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "user/core/errors.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using lt::inject::inject_library;

const char* kPython = "/usr/bin/python3";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string marker_path(pid_t pid) {
  return "/tmp/inject_marker." + std::to_string(pid);
}

// A python3 -c SCRIPT child with pipes on stdin and stdout.
class Target {
 public:
  explicit Target(const std::string& script, const std::vector<std::string>& args = {}) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<std::string> argv{kPython, "-u", "-c", script};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> av;
      for (auto& a : argv) av.push_back(a.data());
      av.push_back(nullptr);
      execv(kPython, av.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_ = in[1];
    out_ = out[0];
    fs::remove(marker_path(pid_));
  }
  ~Target() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
    close(in_);
    close(out_);
    fs::remove(marker_path(pid_));
  }
  pid_t pid() const { return pid_; }

  // Next line of stdout ("" on EOF or timeout).
  std::string line(std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[4096];
      ssize_t n = read(out_, b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<std::size_t>(n));
    }
  }
  void write(const std::string& s) { ASSERT_EQ(::write(in_, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  int wait_exit() {
    int st = 0;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
  bool reaped_ = false;
};

// Waits until thread `tid` of `pid` sleeps in system call `nr`.
bool wait_blocked(pid_t pid, pid_t tid, long nr, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string f = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/syscall";
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream s(slurp(f));
    std::string first;
    s >> first;
    if (!first.empty() && first != "running" && std::strtol(first.c_str(), nullptr, 10) == nr) return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

// The checksum loop of the busy targets, redone here.
struct Checksum {
  std::uint64_t s = 0;
  double f = 0.0;
  void run(std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i < to; ++i) {
      s = (s * 31 + i) & 0xffffffffu;
      volatile double prod = f * 0.999999;  // two roundings, as in CPython
      f = prod + static_cast<double>(i) * 1e-3;
    }
  }
  std::uint64_t fbits() const {
    std::uint64_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  }
};

const char* kBusyScript = R"(
import os, struct, sys
stop = sys.argv[1]
s = 0; f = 0.0; n = 0
print("READY")
while not os.path.exists(stop):
    for i in range(n, n + 50000):
        s = (s * 31 + i) & 0xffffffff
        f = f * 0.999999 + i * 1e-3
    n += 50000
print(n, s, struct.unpack("<Q", struct.pack("<d", f))[0])
)";

class InjectLibrary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    char tmpl[] = "/tmp/lt-inject-test.XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    std::string src = std::string(__FILE__);
    src = src.substr(0, src.rfind("tests/unit/")) + "tests/workloads/inject_marker.c";
    auto cc = [&](const std::string& flags, const std::string& out) {
      std::string cmd = "cc -shared -fPIC -O2 " + flags + " -o " + out + " " + src + " 2>&1";
      return std::system(cmd.c_str()) == 0;
    };
    built_ = cc("", lib()) && cc("-DINJECT_UNRESOLVED", broken_lib()) && cc("-DINJECT_SLOW_MS=400", slow_lib()) &&
             cc("-DINJECT_SET_ERRNO=77", errno_lib());
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace)";
    if (!fs::exists(kPython)) GTEST_SKIP() << "no " << kPython;
    ASSERT_TRUE(built_) << "cannot build tests/workloads/inject_marker.c with cc";
  }
  static std::string lib() { return dir_ + "/libinject_marker.so"; }
  static std::string broken_lib() { return dir_ + "/libinject_broken.so"; }
  static std::string slow_lib() { return dir_ + "/libinject_slow.so"; }
  static std::string errno_lib() { return dir_ + "/libinject_errno.so"; }
  static std::string dir_;
  static bool built_;
};
std::string InjectLibrary::dir_;
bool InjectLibrary::built_ = false;

std::string loaded_line(pid_t pid) {
  return "loaded " + std::to_string(pid) + "\n";
}

TEST_F(InjectLibrary, BusyLoopResultUnchanged) {
  std::string stop = dir_ + "/stop.busy";
  Target t(kBusyScript, {stop});
  ASSERT_EQ(t.line(), "READY");
  std::this_thread::sleep_for(150ms);
  auto r = inject_library(t.pid(), lib());
  EXPECT_NE(r.handle, 0u);
  EXPECT_EQ(r.tid, t.pid());
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  std::this_thread::sleep_for(50ms);
  std::ofstream(stop).put('x');
  std::istringstream out(t.line());
  std::uint64_t n = 0, s = 0, fbits = 0;
  out >> n >> s >> fbits;
  ASSERT_GT(n, 0u);
  Checksum c;
  c.run(0, n);
  EXPECT_EQ(s, c.s);
  EXPECT_EQ(fbits, c.fbits());
  EXPECT_EQ(t.wait_exit(), 0);
  std::printf("      busy target: %s\n", r.detail.c_str());
}

TEST_F(InjectLibrary, SleepKeepsItsDuration) {
  Target t(R"(
import time
print("READY")
t0 = time.monotonic(); time.sleep(1.0); print("%.4f" % (time.monotonic() - t0))
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_clock_nanosleep));
  std::this_thread::sleep_for(200ms);
  auto r = inject_library(t.pid(), lib());
  EXPECT_NE(r.detail.find("blocked in clock_nanosleep"), std::string::npos) << r.detail;
  double slept = std::stod(t.line());
  EXPECT_NEAR(slept, 1.0, 0.05);
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  EXPECT_EQ(t.wait_exit(), 0);
}

// CPython retries EINTR itself (PEP 475); libc's nanosleep called through
// ctypes shows whether the kernel really restarted the interrupted call.
TEST_F(InjectLibrary, RawNanosleepIsRestartedNotInterrupted) {
  Target t(R"(
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
print("READY")
t0 = time.monotonic()
rc = libc.nanosleep(ctypes.byref(TS(1, 0)), None)
print(rc, ctypes.get_errno(), "%.4f" % (time.monotonic() - t0))
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_clock_nanosleep));  // glibc: relative clock_nanosleep
  std::this_thread::sleep_for(200ms);
  auto r = inject_library(t.pid(), lib());
  EXPECT_NE(r.detail.find("blocked in clock_nanosleep"), std::string::npos) << r.detail;
  std::istringstream out(t.line());
  int rc = -2, err = -1;
  double slept = 0;
  out >> rc >> err >> slept;
  EXPECT_EQ(rc, 0);
  EXPECT_NEAR(slept, 1.0, 0.05);
  EXPECT_EQ(t.wait_exit(), 0);
}

TEST_F(InjectLibrary, PipeReadGetsLaterData) {
  Target t(R"(
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("READY")
print(os.read(0, 100))
buf = ctypes.create_string_buffer(100)
n = libc.read(0, buf, 100)
print(n, ctypes.get_errno(), buf.raw[:max(n, 0)])
)");
  ASSERT_EQ(t.line(), "READY");
  // os.read
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  auto r = inject_library(t.pid(), lib());
  EXPECT_NE(r.detail.find("blocked in read"), std::string::npos) << r.detail;
  t.write("hello\n");
  EXPECT_EQ(t.line(), "b'hello\\n'");
  // libc read through ctypes: an EINTR would show as -1 4
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  auto r2 = inject_library(t.pid(), lib());
  EXPECT_EQ(r2.handle, r.handle);
  t.write("world");
  EXPECT_EQ(t.line(), "5 0 b'world'");
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  EXPECT_EQ(t.wait_exit(), 0);
}

TEST_F(InjectLibrary, FiveThreads) {
  std::string stop = dir_ + "/stop.threads";
  Target t(R"(
import os, sys, threading, time
stop = sys.argv[1]
def cs(n):
    s = 0
    for i in range(n):
        s = (s * 31 + i) & 0xffffffff
    return s
res = {}
r, w = os.pipe()
ev = threading.Event()
def busy(k):
    res[k] = cs(400000)
def sleeper():
    t0 = time.monotonic(); time.sleep(1.0); res["slept"] = time.monotonic() - t0
def reader():
    res["read"] = os.read(r, 100)
def waiter():
    res["event"] = ev.wait(30)
ths = [threading.Thread(target=busy, args=(1,)), threading.Thread(target=busy, args=(2,)),
       threading.Thread(target=sleeper), threading.Thread(target=reader), threading.Thread(target=waiter)]
for th in ths: th.start()
print("READY")
n = 0
while not os.path.exists(stop):
    n = cs(20000)
os.write(w, b"data")
ev.set()
for th in ths: th.join()
print(res[1], res[2], "%.3f" % res["slept"], res["read"], res["event"])
)",
           {stop});
  ASSERT_EQ(t.line(), "READY");
  std::this_thread::sleep_for(100ms);
  auto r = inject_library(t.pid(), lib());
  EXPECT_NE(r.tid, t.pid()) << "a blocked worker is preferred over the running main thread: " << r.detail;
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  // Main stops competing for the GIL, so the sleeper's timing is its own.
  std::ofstream(stop).put('x');
  Checksum c;
  c.run(0, 400000);
  std::istringstream out(t.line());
  std::uint64_t a = 0, b = 0;
  double slept = 0;
  std::string read, event;
  out >> a >> b >> slept >> read >> event;
  EXPECT_EQ(a, c.s);
  EXPECT_EQ(b, c.s);
  EXPECT_NEAR(slept, 1.0, 0.05);
  EXPECT_EQ(read, "b'data'");
  EXPECT_EQ(event, "True");
  EXPECT_EQ(t.wait_exit(), 0);
  std::printf("      threaded target: %s\n", r.detail.c_str());
}

TEST_F(InjectLibrary, TwiceSameHandleConstructorOnce) {
  Target t(R"(
import os
print("READY")
print(os.read(0, 10))
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  auto a = inject_library(t.pid(), lib());
  auto b = inject_library(t.pid(), lib());
  EXPECT_NE(a.handle, 0u);
  EXPECT_EQ(a.handle, b.handle);
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  t.write("x");
  EXPECT_EQ(t.line(), "b'x'");
  EXPECT_EQ(t.wait_exit(), 0);
}

TEST_F(InjectLibrary, DeadPidIsNoSuchProcess) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  int st;
  waitpid(p, &st, 0);
  try {
    inject_library(p, lib());
    FAIL() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), lt::ExitCode::no_such_process);
    EXPECT_NE(std::string(e.what()).find(std::to_string(p)), std::string::npos) << e.what();
  }
}

// dlopen fails inside the target: we get dlerror's text, the target goes on.
TEST_F(InjectLibrary, DlopenFailureCarriesDlerrorText) {
  std::string stop = dir_ + "/stop.fail";
  Target t(kBusyScript, {stop});
  ASSERT_EQ(t.line(), "READY");
  std::this_thread::sleep_for(100ms);
  struct Case {
    std::string path, text;
  };
  for (const Case& c : {Case{dir_ + "/no/such/libnope.so", "cannot open shared object file: No such file or directory"},
                        Case{broken_lib(), "undefined symbol: lt_inject_no_such_symbol"}}) {
    try {
      inject_library(t.pid(), c.path);
      ADD_FAILURE() << "no error for " << c.path;
    } catch (const lt::Error& e) {
      std::string m = e.what();
      EXPECT_EQ(e.code(), lt::ExitCode::io) << m;
      EXPECT_NE(m.find(c.text), std::string::npos) << m;
      EXPECT_NE(m.find(c.path), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  EXPECT_FALSE(fs::exists(marker_path(t.pid())));
  // A directory is refused before we touch the target.
  try {
    inject_library(t.pid(), dir_);
    ADD_FAILURE() << "no error for a directory";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), lt::ExitCode::io) << e.what();
  }
  // ... and the target is fine: a good library still loads, the loop's result is right.
  EXPECT_NE(inject_library(t.pid(), lib()).handle, 0u);
  std::ofstream(stop).put('x');
  std::istringstream out(t.line());
  std::uint64_t n = 0, s = 0, fbits = 0;
  out >> n >> s >> fbits;
  Checksum c;
  c.run(0, n);
  EXPECT_EQ(s, c.s);
  EXPECT_EQ(fbits, c.fbits());
  EXPECT_EQ(t.wait_exit(), 0);
}

// Unprivileged: ptrace is refused, we say what is missing.
TEST_F(InjectLibrary, UnprivilegedCallerGetsPermissionError) {
  Target t("import os\nprint('READY')\nos.read(0, 1)\n");
  ASSERT_EQ(t.line(), "READY");
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork();
  if (child == 0) {
    close(p[0]);
    std::string out = "none";
    if (setgid(65534) == 0 && setuid(65534) == 0) {
      try {
        inject_library(t.pid(), lib());
        out = "0 ok";
      } catch (const lt::Error& e) {
        out = std::to_string(static_cast<int>(e.code())) + " " + e.what();
      }
    }
    ssize_t n = ::write(p[1], out.data(), out.size());
    _exit(n > 0 ? 0 : 1);
  }
  close(p[1]);
  std::string got;
  char b[512];
  ssize_t n;
  while ((n = read(p[0], b, sizeof b)) > 0) got.append(b, static_cast<std::size_t>(n));
  close(p[0]);
  int st;
  waitpid(child, &st, 0);
  EXPECT_EQ(got.substr(0, 2), std::to_string(static_cast<int>(lt::ExitCode::permission)) + " ") << got;
  EXPECT_NE(got.find("CAP_SYS_PTRACE"), std::string::npos) << got;
  t.write("x");
  EXPECT_EQ(t.wait_exit(), 0);
}

TEST_F(InjectLibrary, RefusesTargetTracedByAnother) {
  Target t("import os\nprint('READY')\nos.read(0, 1)\n");
  ASSERT_EQ(t.line(), "READY");
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t tracer = fork();
  if (tracer == 0) {
    close(p[0]);
    char ok = ptrace(PTRACE_SEIZE, t.pid(), nullptr, nullptr) == 0 ? '1' : '0';
    if (::write(p[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(p[1]);
  char ok = 0;
  ASSERT_EQ(read(p[0], &ok, 1), 1);
  close(p[0]);
  ASSERT_EQ(ok, '1');
  try {
    inject_library(t.pid(), lib());
    ADD_FAILURE() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), lt::ExitCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("already traced by pid " + std::to_string(tracer)), std::string::npos)
        << e.what();
  }
  kill(tracer, SIGKILL);
  int st;
  waitpid(tracer, &st, 0);
  t.write("x");
  EXPECT_EQ(t.wait_exit(), 0);
}

// A signal that arrives while dlopen runs is held back and delivered once,
// after the thread is restored.
TEST_F(InjectLibrary, SignalDuringTheCallIsDeliveredAfterwards) {
  Target t(R"(
import os, signal
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
print("READY")
data = os.read(0, 10)
print(len(got), data)
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  auto fut = std::async(std::launch::async, [&] { return inject_library(t.pid(), slow_lib()); });
  // The slow constructor writes its line first, then sleeps 400 ms.
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!fs::exists(marker_path(t.pid())) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(syscall(SYS_tgkill, t.pid(), t.pid(), SIGUSR1), 0);
  auto r = fut.get();
  EXPECT_NE(r.handle, 0u);
  t.write("after");
  EXPECT_EQ(t.line(), "1 b'after'");
  EXPECT_EQ(t.wait_exit(), 0);
}

// A C target whose loops keep their state in SSE and AVX registers: our call
// clobbers them (dlopen's string functions use AVX2 and vzeroupper), so the
// results are right only if the whole vector state is put back.
const char* kVectorTarget = R"(
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((target("avx"), noinline)) static void avx_loop(long n, double out[4]) {
  __m256d a = _mm256_set_pd(1.0, 2.0, 3.0, 4.0), b = _mm256_set1_pd(1e-9), m = _mm256_set1_pd(1.0000001);
  __m256d acc = _mm256_setzero_pd();
  for (long i = 0; i < n; i++) {
    a = _mm256_add_pd(_mm256_mul_pd(a, m), b);
    acc = _mm256_add_pd(acc, a);
  }
  _mm256_storeu_pd(out, acc);
}
__attribute__((noinline)) static void sse_loop(long n, double out[2]) {
  double a = 1, b = 0;
  for (long i = 0; i < n; i++) {
    a = a * 1.0000001 + 1e-9;
    b += a;
  }
  out[0] = a;
  out[1] = b;
}
int main(int argc, char** argv) {
  long n = atol(argv[1]);
  printf("READY\n");
  fflush(stdout);
  double s[2], v[4] = {0, 0, 0, 0};
  sse_loop(n, s);
  if (__builtin_cpu_supports("avx")) avx_loop(n, v);
  printf("%a %a %a %a %a %a\n", s[0], s[1], v[0], v[1], v[2], v[3]);
  return 0;
}
)";

TEST_F(InjectLibrary, VectorRegistersSurvive) {
  std::string src = dir_ + "/vector_target.c", exe = dir_ + "/vector_target";
  std::ofstream(src) << kVectorTarget;
  ASSERT_EQ(std::system(("cc -O2 -o " + exe + " " + src).c_str()), 0);
  auto run = [&](bool inject) {
    std::string cmd = exe + " 150000000";
    FILE* p = popen(cmd.c_str(), "r");
    char line[512] = {};
    EXPECT_TRUE(std::fgets(line, sizeof line, p));  // READY
    pid_t pid = 0;
    if (inject) {
      // popen's child is sh -c; the target is its only child (or sh itself after exec).
      for (int i = 0; i < 200 && pid == 0; ++i) {
        for (auto& e : fs::directory_iterator("/proc")) {
          std::string n = e.path().filename();
          if (n.find_first_not_of("0123456789") != std::string::npos) continue;
          if (slurp(e.path().string() + "/cmdline").rfind(exe, 0) == 0) pid = std::stoi(n);
        }
        if (!pid) std::this_thread::sleep_for(5ms);
      }
      EXPECT_NE(pid, 0);
      int ok = 0;
      // Until it exits: both loops get interrupted.
      for (int i = 0; i < 400 && pid; ++i) {
        std::this_thread::sleep_for(30ms);
        try {
          if (inject_library(pid, lib()).handle) ++ok;
        } catch (const lt::Error& e) {
          // Under a loaded machine no thread may reach a safe point within
          // the timeout: that is a refusal, not a fault; try again.
          if (e.code() == lt::ExitCode::unsupported) continue;
          if (e.code() != lt::ExitCode::no_such_process) ADD_FAILURE() << e.what();
          break;
        }
      }
      EXPECT_GE(ok, 3);
      fs::remove(marker_path(pid));
    }
    std::string out = std::fgets(line, sizeof line, p) ? line : "";
    EXPECT_EQ(pclose(p), 0);
    return out;
  };
  std::string want = run(false), got = run(true);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

// A call that outlives the timeout is left to finish: the thread then
// restores itself (its read restarts and gets the data), and we say why.
TEST_F(InjectLibrary, TimeoutAbandonsTheCallAndRestoresTheThread) {
  Target t(R"(
import os
print("READY")
print(os.read(0, 10))
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  lt::inject::InjectOptions opts;
  opts.timeout = 200ms;  // the slow constructor sleeps 400 ms
  try {
    inject_library(t.pid(), slow_lib(), opts);
    ADD_FAILURE() << "no timeout";
  } catch (const lt::Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), lt::ExitCode::internal) << m;
    EXPECT_NE(m.find("did not return in time (blocked in clock_nanosleep"), std::string::npos) << m;
    EXPECT_NE(m.find("may be blocked in dlopen"), std::string::npos) << m;
  }
  t.write("still");
  EXPECT_EQ(t.line(), "b'still'");
  EXPECT_EQ(t.wait_exit(), 0);
}

// The memfd handoff (a target in a container): the library arrives as a
// sealed memfd; the hook sees that very file before the dlopen; the
// target keeps no fd and no file; the constructor runs once.
TEST_F(InjectLibrary, MemfdHandoffLeavesNoFileAndNoFd) {
  Target t(R"(
import os
print("READY")
print(os.read(0, 10))
)");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  lt::inject::InjectOptions opts;
  opts.handoff = lt::inject::Handoff::memfd;
  opts.memfd_name = "lt-marker-test";
  std::string seen;
  std::uintmax_t seen_size = 0;
  int seals = -1;
  opts.before_dlopen = [&](const std::string& f) {
    seen = f;
    seen_size = fs::file_size(f);
    int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      seals = fcntl(fd, F_GET_SEALS);
      close(fd);
    }
  };
  auto r = inject_library(t.pid(), lib(), opts);
  EXPECT_TRUE(r.memfd);
  EXPECT_NE(r.handle, 0u);
  EXPECT_NE(r.detail.find("from a memfd"), std::string::npos) << r.detail;
  EXPECT_EQ(seen.rfind("/proc/" + std::to_string(t.pid()) + "/fd/", 0), 0u) << seen;
  EXPECT_EQ(seen_size, fs::file_size(lib()));
  EXPECT_EQ(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  std::string maps = slurp("/proc/" + std::to_string(t.pid()) + "/maps");
  EXPECT_NE(maps.find("/memfd:lt-marker-test (deleted)"), std::string::npos) << maps;
  EXPECT_EQ(maps.find(lib()), std::string::npos);
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(t.pid()) + "/fd"))
    EXPECT_EQ(fs::read_symlink(e.path()).string().find("memfd:"), std::string::npos) << e.path();
  EXPECT_EQ(slurp(marker_path(t.pid())), loaded_line(t.pid()));
  t.write("x");
  EXPECT_EQ(t.line(), "b'x'");
  EXPECT_EQ(t.wait_exit(), 0);
}

// A hook that throws abandons the injection: nothing loaded, no fd left.
TEST_F(InjectLibrary, MemfdHookFailureLoadsNothing) {
  Target t("import os\nprint('READY')\nprint(os.read(0, 10))\n");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  lt::inject::InjectOptions opts;
  opts.handoff = lt::inject::Handoff::memfd_or_path;
  opts.before_dlopen = [](const std::string&) { throw lt::Error(lt::ExitCode::bpf, "no probes"); };
  try {
    inject_library(t.pid(), lib(), opts);
    ADD_FAILURE() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(std::string(e.what()), "no probes");
  }
  EXPECT_EQ(slurp("/proc/" + std::to_string(t.pid()) + "/maps").find("inject_marker"), std::string::npos);
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(t.pid()) + "/fd"))
    EXPECT_EQ(fs::read_symlink(e.path()).string().find("memfd:"), std::string::npos) << e.path();
  EXPECT_FALSE(fs::exists(marker_path(t.pid())));
  t.write("y");
  EXPECT_EQ(t.line(), "b'y'");
  EXPECT_EQ(t.wait_exit(), 0);
}

// The thread's errno comes back as it was (this library's constructor
// leaves 77; glibc's dlopen keeps errno itself, our own failed calls do not:
// see the next test).  CPython zeroes errno before its read(); the program
// reads errno right after.
TEST_F(InjectLibrary, ErrnoIsPutBack) {
  for (auto handoff : {lt::inject::Handoff::path, lt::inject::Handoff::memfd}) {
    Target t(R"(
import ctypes, os
loc = ctypes.CDLL(None).__errno_location
loc.restype = ctypes.POINTER(ctypes.c_int)
print("READY")
os.read(0, 1)
print(loc()[0])
)");
    ASSERT_EQ(t.line(), "READY");
    ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
    lt::inject::InjectOptions opts;
    opts.handoff = handoff;
    inject_library(t.pid(), errno_lib(), opts);
    t.write("x");
    EXPECT_EQ(t.line(), "0");
    EXPECT_EQ(t.wait_exit(), 0);
  }
}

// A target whose pid namespace refuses executable memfds
// (vm.memfd_noexec = 2: memfd_create fails with EACCES, as it would under a
// seccomp-less sandbox that forbids it): memfd_or_path loads the library by
// its path (the same file there), says why, and the failed memfd_create's
// errno does not leak into the thread.
TEST_F(InjectLibrary, MemfdRefusedFallsBackToThePath) {
  if (!fs::exists("/proc/sys/vm/memfd_noexec")) GTEST_SKIP() << "kernel without vm.memfd_noexec (< 6.3)";
  Target t(R"(
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x20000000) != 0:  # CLONE_NEWPID: the sysctl is per pid namespace
    print("NO-UNSHARE", ctypes.get_errno()); sys.exit(0)
child = os.fork()
if child:
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
with open("/proc/sys/vm/memfd_noexec", "w") as f:
    f.write("2")
loc = libc.__errno_location
loc.restype = ctypes.POINTER(ctypes.c_int)
print("READY")
os.read(0, 1)
print(loc()[0])
)");
  fs::remove(marker_path(1));
  std::string first = t.line();
  if (first.rfind("NO-UNSHARE", 0) == 0) GTEST_SKIP() << first;
  ASSERT_EQ(first, "READY");
  // The python in the new pid namespace: the target's only child.
  std::istringstream kids(slurp("/proc/" + std::to_string(t.pid()) + "/task/" + std::to_string(t.pid()) + "/children"));
  pid_t inner = 0;
  kids >> inner;
  ASSERT_GT(inner, 0);
  ASSERT_TRUE(wait_blocked(inner, inner, SYS_read));
  lt::inject::InjectOptions opts;
  opts.handoff = lt::inject::Handoff::memfd_or_path;
  std::string seen;
  opts.before_dlopen = [&](const std::string& f) { seen = f; };
  auto r = inject_library(inner, lib(), opts);
  EXPECT_FALSE(r.memfd);
  EXPECT_NE(r.detail.find("by path (no memfd: memfd_create failed in the target: Permission denied)"),
            std::string::npos)
      << r.detail;
  EXPECT_EQ(seen, "/proc/" + std::to_string(inner) + "/root" + lib());
  EXPECT_NE(slurp("/proc/" + std::to_string(inner) + "/maps").find(lib()), std::string::npos);
  EXPECT_EQ(slurp(marker_path(1)), loaded_line(1));  // pid 1 of its namespace
  // Memfd only: the same refusal is an error that says why.
  opts.handoff = lt::inject::Handoff::memfd;
  try {
    inject_library(inner, lib(), opts);
    ADD_FAILURE() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no memfd (memfd_create failed in the target: Permission denied)"),
              std::string::npos)
        << e.what();
  }
  t.write("x");
  EXPECT_EQ(t.line(), "0");
  EXPECT_EQ(t.wait_exit(), 0);
  fs::remove(marker_path(1));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// How long one injection takes: a fresh library each time (dlopen maps and
// relocates it, runs its constructor), then the same one again.
TEST_F(InjectLibrary, Timing) {
  Target t("import os\nprint('READY')\nos.read(0, 1)\n");
  ASSERT_EQ(t.line(), "READY");
  ASSERT_TRUE(wait_blocked(t.pid(), t.pid(), SYS_read));
  std::vector<double> fresh, again;
  for (int i = 0; i < 11; ++i) {
    std::string copy = dir_ + "/libinject_copy" + std::to_string(i) + ".so";
    fs::copy_file(lib(), copy, fs::copy_options::overwrite_existing);
    auto t0 = std::chrono::steady_clock::now();
    inject_library(t.pid(), copy);
    fresh.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int i = 0; i < 11; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    inject_library(t.pid(), dir_ + "/libinject_copy0.so");
    again.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::string lines = slurp(marker_path(t.pid()));
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 11);
  std::printf(
      "      injection time, blocked target: fresh library median %.2f ms (min %.2f, max %.2f); "
      "already loaded median %.2f ms\n",
      median(fresh), *std::min_element(fresh.begin(), fresh.end()), *std::max_element(fresh.begin(), fresh.end()),
      median(again));
  RecordProperty("inject_fresh_median_ms", std::to_string(median(fresh)));
  t.write("x");
  EXPECT_EQ(t.wait_exit(), 0);

  std::string stop = dir_ + "/stop.timing";
  Target busy(kBusyScript, {stop});
  ASSERT_EQ(busy.line(), "READY");
  std::vector<double> running;
  for (int i = 0; i < 11; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    inject_library(busy.pid(), lib());
    running.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("      injection time, running target: median %.2f ms (max %.2f)\n", median(running),
              *std::max_element(running.begin(), running.end()));
  std::ofstream(stop).put('x');
  std::istringstream out(busy.line());
  std::uint64_t n = 0, s = 0, fbits = 0;
  out >> n >> s >> fbits;
  Checksum c;
  c.run(0, n);
  EXPECT_EQ(s, c.s);
  EXPECT_EQ(fbits, c.fbits());
  EXPECT_EQ(busy.wait_exit(), 0);
}

}  // namespace
