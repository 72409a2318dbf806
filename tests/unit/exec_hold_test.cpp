// Holding a freshly exec'd CPython until its probes can go in: which images
// are held (ExecClassifier), real held children (ExecHolds), and the
// pairing of exec records with the holder's verdicts (ExecPairing).
//
// ExecHoldCli.FromEnvironment is a command for
// tests/integration/test_first_instruction.py: with LT_EXEC_HOLD_PYTHON (a
// CPython in the libpython layout) and LT_EXEC_HOLD_MARKER (a file the
// child creates once Python runs) set, it starts the child, holds it at its
// exec until libpython is mapped, and releases it, printing
//   EXEC_HOLD_CHILD pid
//   EXEC_HOLD_RESULT released steps=N
// With LT_EXEC_HOLD_DIE_AT_STEP=N it SIGKILLs itself at the hold's N-th
// step: the child must run on as if never held.  With LT_EXEC_HOLD_LIBRARY
// (a library name) the child loads that library with ctypes before it
// writes the marker, and the hold goes on, seized, until that load
// (user/sources/libload.h); LT_EXEC_HOLD_DIE_AT_LIB_STEP=N then SIGKILLs
// it at the N-th step of that part alone (the exec hold's own number of
// steps varies with the loader's system calls).  Without them it is
// skipped.
#include "user/proc/exec_hold.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tests/unit/child_process.h"
#include "user/collector/exec_pairing.h"
#include "user/sources/libload.h"

using namespace lt;
using namespace lt::proc;
using namespace lt::testing;
using namespace std::chrono_literals;

namespace {

const char* kDebianPython = "/usr/bin/python3.11";                         // the interpreter in the executable
const char* kPyenvPython = "/root/.pyenv/versions/3.11.7/bin/python3.11";  // in libpython3.11.so.1.0

// The child's program: (load `library` with ctypes, then) create `marker`.
std::string child_code(const std::string& marker, const std::string& library = "") {
  const std::string load = library.empty() ? "" : "import ctypes; ctypes.CDLL('" + library + "'); ";
  return load + "open('" + marker + "', 'w').close()";
}

// Starts `python -c CODE` and returns once it has exec'd (its close-on-exec
// pipe closed): the state a BPF exec wake-up finds.
pid_t start_exec(const std::string& python, const std::string& marker, const std::string& library = "") {
  int gone[2];
  if (pipe2(gone, O_CLOEXEC) != 0) return -1;
  const std::string code = child_code(marker, library);
  pid_t pid = fork();
  if (pid == 0) {
    close(gone[0]);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    execl(python.c_str(), python.c_str(), "-S", "-c", code.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(gone[1]);
  char c;
  while (read(gone[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(gone[0]);
  return pid;
}

// Starts a child that execs `python -c "open(marker, 'w')"` once a byte
// comes on the returned pipe's write end (*go).
pid_t start_waiting(const std::string& python, const std::string& marker, int* go, const std::string& library = "") {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const std::string code = child_code(marker, library);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    char c;
    while (read(p[0], &c, 1) < 0 && errno == EINTR) {
    }
    execl(python.c_str(), python.c_str(), "-S", "-c", code.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[0]);
  *go = p[1];
  return pid;
}

bool poll_until_ready(ExecHolds& holds, pid_t pid) {
  return poll_until_reported(holds, pid, 20us);
}

// A held, ready `pid` runs on, seized, stopped at each library load, until
// one has `library` mapped: then `at_load` looks at it and it is released.
// Returns the loads it stopped at, or -1 (not probed, gone, or 30 s).
// A held, ready `pid` runs on, seized, until its library loads stop it
// (the holder's `ours` check as TargetHolder's).  False if not probed.
bool start_awaiting(ExecHolds& holds, LibLoadSource& loads, pid_t pid) {
  if (!loads.watch(pid)) return false;
  const int signalled = loads.signalled_fd();
  holds.await_libraries(pid, [signalled](pid_t tid) {
    const std::uint32_t key = static_cast<std::uint32_t>(tid);
    return bpf_map_delete_elem(signalled, &key) == 0;
  });
  return true;
}

// Polls until `pid` is paused at a load (true), or is let go or 30 s pass.
bool next_load(ExecHolds& holds, pid_t pid) {
  for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    holds.poll();
    for (pid_t p : holds.take_loaded())
      if (p == pid) return true;
    if (!holds.held(pid)) return false;
    std::this_thread::sleep_for(50us);
  }
  return false;
}

int await_library(ExecHolds& holds, LibLoadSource& loads, pid_t pid, const std::string& library,
                  const std::function<void()>& at_load) {
  if (!start_awaiting(holds, loads, pid)) return -1;
  for (int stops = 1; next_load(holds, pid); ++stops) {
    if (!maps_name(pid, library)) {
      holds.resume(pid);
      continue;
    }
    at_load();
    loads.unwatch(pid);
    holds.release(pid);
    return stops;
  }
  return -1;
}

}  // namespace

TEST(ExecClassifier, LayoutsOfTheInterpreter) {
  if (access(kDebianPython, X_OK) != 0 || access(kPyenvPython, X_OK) != 0) GTEST_SKIP() << "no CPython 3.11 here";
  EXPECT_EQ(ExecClassifier::classify_file(kDebianPython).kind, ExecImage::Kind::python);
  const ExecImage lib = ExecClassifier::classify_file(kPyenvPython);
  EXPECT_EQ(lib.kind, ExecImage::Kind::python_library);
  EXPECT_EQ(lib.library, "libpython3.11.so.1.0");
  EXPECT_EQ(ExecClassifier::classify_file("/bin/true").kind, ExecImage::Kind::not_python);
  // A script (its interpreter is what the kernel runs), nothing, a directory.
  EXPECT_EQ(ExecClassifier::classify_file("/usr/bin/ldd").kind, ExecImage::Kind::not_python);
  EXPECT_EQ(ExecClassifier::classify_file("/nonexistent").kind, ExecImage::Kind::not_python);
  EXPECT_EQ(ExecClassifier::classify_file("/").kind, ExecImage::Kind::not_python);
}

TEST(ExecClassifier, AProcessGoneIsNotRememberedAsNoCPython) {
  if (access(kDebianPython, X_OK) != 0) GTEST_SKIP() << "no CPython 3.11 here";
  ExecClassifier images;
  // A live CPython: known, by its file.
  const std::string marker =
      (std::filesystem::temp_directory_path() / ("classify_" + std::to_string(getpid()))).string();
  const pid_t pid = start_exec(kDebianPython, marker);
  ASSERT_GT(pid, 0);
  const ExecImage live = images.classify(pid);
  EXPECT_EQ(live.kind, ExecImage::Kind::python);
  EXPECT_NE(live.ino, 0u);
  EXPECT_EQ(wait_status(pid), 0);
  std::remove(marker.c_str());
  // Gone (reaped): no file to read, so nothing to remember (ino 0: the
  // holder writes no "not a CPython" for it into lt_exec_skip).
  const ExecImage gone = images.classify(pid);
  EXPECT_EQ(gone.kind, ExecImage::Kind::not_python);
  EXPECT_EQ(gone.ino, 0u);
}

TEST(ExecHolds, HeldUntilLibpythonIsMappedThenRunsOnItsOwn) {
  if (geteuid() != 0 || access(kPyenvPython, X_OK) != 0) GTEST_SKIP() << "needs root and pyenv CPython 3.11";
  const std::string marker =
      (std::filesystem::temp_directory_path() / ("exec_hold_" + std::to_string(getpid()))).string();
  std::remove(marker.c_str());
  ExecHolds holds;
  const pid_t pid = start_exec(kPyenvPython, marker);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(holds.hold(pid, "libpython3.11.so.1.0"));
  ASSERT_TRUE(poll_until_ready(holds, pid));
  EXPECT_TRUE(maps_name(pid, "libpython3.11.so.1.0"));
  EXPECT_EQ(process_state(pid), 't');  // a ptrace stop, not a SIGSTOP its parent would see
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "Python ran while held";
  holds.release(pid);
  EXPECT_FALSE(holds.held(pid));
  EXPECT_EQ(wait_status(pid), 0);
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::remove(marker.c_str());
}

TEST(ExecHolds, ReleasedWhileSteppingRunsOn) {
  if (geteuid() != 0 || access(kPyenvPython, X_OK) != 0) GTEST_SKIP() << "needs root and pyenv CPython 3.11";
  const std::string marker =
      (std::filesystem::temp_directory_path() / ("exec_hold_r_" + std::to_string(getpid()))).string();
  std::remove(marker.c_str());
  pid_t pid;
  {
    ExecHolds holds;
    pid = start_exec(kPyenvPython, marker);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(holds.hold(pid, "libnever-mapped.so"));  // steps until released
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(holds.poll().empty());
      std::this_thread::sleep_for(1ms);
    }
  }  // the destructor releases it
  EXPECT_EQ(wait_status(pid), 0);
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::remove(marker.c_str());
}

TEST(LibraryLoads, PausedAtTheLoadThatMapsTheLibraryBeforeDlopenReturns) {
  if (geteuid() != 0 || access(kDebianPython, X_OK) != 0) GTEST_SKIP() << "needs root and CPython 3.11";
  const std::string marker =
      (std::filesystem::temp_directory_path() / ("lib_hold_" + std::to_string(getpid()))).string();
  std::remove(marker.c_str());
  LibLoadSource loads;
  ExecHolds holds;
  const pid_t pid = start_exec(kDebianPython, marker, "libzstd.so.1");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(holds.hold(pid));
  ASSERT_TRUE(poll_until_ready(holds, pid));
  ASSERT_FALSE(maps_name(pid, "libzstd.so")) << "the test needs a library the child has not loaded yet";
  bool checked = false;
  const int stops = await_library(holds, loads, pid, "libzstd.so", [&] {
    EXPECT_EQ(process_state(pid), 't');  // a ptrace stop: its parent sees nothing
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(std::filesystem::exists(marker)) << "CDLL returned while held";
    checked = true;
  });
  EXPECT_GE(stops, 1);
  std::printf("library load stops: %d\n", stops);
  EXPECT_TRUE(checked);
  EXPECT_EQ(wait_status(pid), 0);
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::remove(marker.c_str());
}

TEST(LibraryLoads, AProcessKilledWhilePausedAtALoadIsLetGo) {
  if (geteuid() != 0 || access(kDebianPython, X_OK) != 0) GTEST_SKIP() << "needs root and CPython 3.11";
  const std::string marker =
      (std::filesystem::temp_directory_path() / ("lib_kill_" + std::to_string(getpid()))).string();
  LibLoadSource loads;
  ExecHolds holds;
  const pid_t pid = start_exec(kDebianPython, marker, "libzstd.so.1");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(holds.hold(pid));
  ASSERT_TRUE(poll_until_ready(holds, pid));
  ASSERT_TRUE(start_awaiting(holds, loads, pid));
  ASSERT_TRUE(next_load(holds, pid));
  // Killed where it waits for us (an OOM kill, a launcher's SIGKILL): the
  // holder must see it go, not keep a dead tracee its parent cannot reap.
  kill(pid, SIGKILL);
  for (auto until = std::chrono::steady_clock::now() + 10s;
       holds.held(pid) && std::chrono::steady_clock::now() < until;) {
    holds.poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(holds.held(pid));
  EXPECT_EQ(wait_status(pid), 128 + SIGKILL);
  std::remove(marker.c_str());
}

TEST(LibraryLoads, ALoaderIsFoundWithItsDebuggerHook) {
  const LoaderSite site = find_loader_site(getpid());
  ASSERT_FALSE(site.open_path.empty());
  EXPECT_GT(site.offset, 0u);
  EXPECT_NE(site.r_debug_delta, 0) << "_r_debug not found: every loader call would stop a held process";
}

TEST(ExecPairing, RecordAndVerdictInEitherOrder) {
  ExecPairing p(1000);
  p.record(10, 0);
  EXPECT_TRUE(p.ready(1).empty());
  p.verdict(10, true, true, 2);
  auto r = p.ready(3);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].pid, 10);
  EXPECT_TRUE(r[0].held);
  EXPECT_TRUE(p.empty());
  // A verdict ahead of its record (a record still in the ring) waits for it.
  p.verdict(11, false, false, 10);
  EXPECT_TRUE(p.ready(11).empty());
  p.record(11, 12);
  r = p.ready(13);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].held);
  EXPECT_TRUE(r[0].not_python);
}

TEST(ExecPairing, TwoExecsAreAdoptedOnceAsTheLatestImage) {
  ExecPairing p(1000);
  // env (not held), then python (held): both records in, one verdict so far.
  p.record(20, 0);
  p.record(20, 1);
  p.verdict(20, false, false, 2);
  EXPECT_TRUE(p.ready(3).empty()) << "python's verdict is still to come";
  p.verdict(20, true, true, 4);
  auto r = p.ready(5);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].held);
  EXPECT_FALSE(r[0].not_python);
}

TEST(ExecPairing, AHeldVerdictStandsWhateverCameAfterIt) {
  // sh (known to be no CPython: its record is its verdict), then python
  // (held): the session takes the holder's verdict before it reads the
  // ring, so sh's comes second.
  ExecPairing p(1000);
  p.verdict(40, true, true, 0);
  p.record(40, 1);
  p.verdict(40, false, false, 1);
  p.record(40, 1);
  auto r = p.ready(2);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].held);
  EXPECT_FALSE(r[0].not_python);
}

TEST(ExecPairing, ALostWordIsWaitedForOnlySoLong) {
  ExecPairing p(1000);
  p.record(30, 100);               // its verdict never comes
  p.verdict(31, true, true, 200);  // its record was dropped
  EXPECT_TRUE(p.ready(1099).empty());
  auto r = p.ready(1100);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].pid, 30);
  EXPECT_FALSE(r[0].held);
  EXPECT_FALSE(r[0].not_python);  // not known: treated as a CPython we missed
  r = p.ready(1200);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].pid, 31);
  EXPECT_TRUE(r[0].held);
}

namespace {
int die_at_step = 0;
void die_here(int step) {
  if (step == die_at_step) raise(SIGKILL);
}
}  // namespace

TEST(ExecHoldCli, FromEnvironment) {
  const char* python = std::getenv("LT_EXEC_HOLD_PYTHON");
  const char* marker = std::getenv("LT_EXEC_HOLD_MARKER");
  if (!python || !marker) GTEST_SKIP() << "LT_EXEC_HOLD_PYTHON / LT_EXEC_HOLD_MARKER not set";
  if (const char* d = std::getenv("LT_EXEC_HOLD_DIE_AT_STEP")) {
    die_at_step = std::atoi(d);
    ExecHolds::set_step_hook(die_here);
  }
  const ExecImage image = ExecClassifier::classify_file(python);
  ASSERT_EQ(image.kind, ExecImage::Kind::python_library) << python;
  const char* library = std::getenv("LT_EXEC_HOLD_LIBRARY");
  std::unique_ptr<LibLoadSource> loads;
  if (library) loads = std::make_unique<LibLoadSource>();
  ExecHolds holds;
  // Seized before its exec, so that every step of the loader's way to
  // libpython is one the sweep can die at.
  int go = -1;
  const pid_t pid = start_waiting(python, marker, &go, library ? library : "");
  ASSERT_GT(pid, 0);
  std::printf("EXEC_HOLD_CHILD %d\n", static_cast<int>(pid));
  std::fflush(stdout);
  ASSERT_TRUE(holds.hold(pid, image.library));
  ASSERT_EQ(write(go, "g", 1), 1);
  close(go);
  ASSERT_TRUE(poll_until_ready(holds, pid));
  const int steps = holds.steps(pid);
  if (library) {
    if (const char* d = std::getenv("LT_EXEC_HOLD_DIE_AT_LIB_STEP")) {
      die_at_step = std::atoi(d);
      ExecHolds::set_step_hook(die_here);  // counts from 1 again
    }
    const int loads_stopped = await_library(holds, *loads, pid, library, [] {});
    ASSERT_GE(loads_stopped, 1);
    std::printf("EXEC_HOLD_LOADS %d\n", loads_stopped);
  } else {
    holds.release(pid);
  }
  std::printf("EXEC_HOLD_RESULT released steps=%d\n", steps);
  std::fflush(stdout);
  EXPECT_EQ(wait_status(pid), 0);
}
