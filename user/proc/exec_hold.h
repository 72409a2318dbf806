// Holding a process that just exec'd a CPython until its probes are in.
//
// A job's first actions can come within ~50 ms of its exec (CPython starts
// in ~15 ms); attaching after the fact lost some of them (issue 32: 10 to
// 19 of 20 counted).  So the exec of every process we follow wakes the
// holder thread (bpf/proctrack.bpf.c, lt_exec_wakeups), which looks at the
// new image before touching the process:
//  - not a CPython (a shell, env, srun): never stopped;
//  - a CPython whose interpreter is in the executable: seized and paused
//    at once (it is still in the dynamic loader or CPython's start-up);
//  - a CPython whose interpreter is in libpython3.X.so: seized, paused,
//    and stepped from system call to system call until the loader has
//    mapped libpython (its probes need the mapping; no Python runs before
//    the loader is done).
// Then the session adopts it (its probes go in) and the holder lets it go.
//
// Same guarantees as the exit hold (user/proc/exit_hold.h): a ptrace stop,
// invisible to the target's parent; never PTRACE_O_EXITKILL, so a tracer
// that dies leaves the process running as if never held; a signal that
// arrives meanwhile is passed on; a process traced by someone else is not
// held.  ptrace ties a tracee to the tracing thread: one thread uses an
// ExecHolds.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace lt::proc {

// What a freshly exec'd image is, from its ELF file alone.
struct ExecImage {
  enum class Kind {
    not_python,      // never stopped
    python,          // the interpreter is in the executable
    python_library,  // the interpreter is in `library` (DT_NEEDED libpython3.X.so...)
  } kind = Kind::not_python;
  std::string library;
  // The file, as the kernel names it (dev: major << 20 | minor, as
  // super_block.s_dev; 0 when it could not be read).
  std::uint64_t dev = 0, ino = 0;
};

// Classifies /proc/PID/exe, remembering each file (device, inode, size,
// mtime) it read: a storm of execs of one program reads its ELF once.
class ExecClassifier {
 public:
  ExecImage classify(pid_t pid);
  // The rule, on an ELF file's path (tests).
  static ExecImage classify_file(const std::string& path);

 private:
  // `readable`: false when the file could not be opened (then the answer
  // is no knowledge, not "no CPython").
  static ExecImage classify_elf(const std::string& path, bool& readable);
  std::map<std::tuple<dev_t, ino_t, off_t, long, long>, ExecImage> known_;
};

class ExecHolds {
 public:
  ExecHolds() = default;
  ExecHolds(const ExecHolds&) = delete;
  ExecHolds& operator=(const ExecHolds&) = delete;
  ~ExecHolds();  // release_all()

  // Seizes and pauses process `pid` (single-threaded: it just exec'd).
  // With a `library`, it is stepped until a mapping of that file name
  // appears in its maps.  False when it cannot be held (gone, traced by
  // someone else, not permitted); last_error() then says why (errno).
  bool hold(pid_t pid, const std::string& library = "");
  int last_error() const { return last_error_; }
  // Steps and passes on signals; returns the processes now paused and
  // ready for their probes (each once).  A process that ended is dropped.
  std::vector<pid_t> poll();
  // Detaches `pid`: it runs on as if never held.
  void release(pid_t pid);

  // Library loads (user/sources/libload.h): a process handed over as ready
  // runs on, still seized, until a library load stops it at a SIGURG that
  // `ours(tid)` says we sent (each other signal is passed on, a new exec
  // goes on to be looked at again).  Then it is paused until resume().
  void await_libraries(pid_t pid, std::function<bool(pid_t)> ours);
  // Processes stopped at a library load since the last call (each once).
  std::vector<pid_t> take_loaded();
  // A process stopped at a library load runs on to the next, the SIGURG
  // suppressed.
  void resume(pid_t pid);
  bool awaiting(pid_t pid) const;
  // Awaiting, and paused at a load since when (nullopt: running).
  bool paused_at_load(pid_t pid) const;
  void release_all();
  bool any() const { return !held_.empty(); }
  std::size_t count() const { return held_.size(); }
  bool held(pid_t pid) const { return held_.count(pid) != 0; }
  // Some held process is not ready yet (stepping to its library).
  bool stepping() const;
  // System-call stops a process took before its library was mapped.
  int steps(pid_t pid) const;
  // How long `pid` has been held, in ms.
  double held_ms(pid_t pid) const;

  // A test's hook: called with 1, 2, ... at each step of a hold (the
  // seize, each stop, each resume, the release); a test SIGKILLs itself
  // there to prove that a dying tracer leaves the target running.
  static void set_step_hook(void (*hook)(int step));

 private:
  int last_error_ = 0;
  struct Held {
    std::string library;  // still to be mapped; empty once it is
    bool ready = false;   // paused with its library mapped, reported
    bool reported = false;
    int steps = 0;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    std::function<bool(pid_t)> ours;  // set: awaiting its library loads
    bool at_load = false;             // ...and paused at one
  };
  bool advance_awaiting(pid_t pid, Held& h);
  // Takes the stops of one process reported so far; false once it ended.
  bool advance(pid_t pid, Held& h);

  std::map<pid_t, Held> held_;
  std::vector<pid_t> loaded_;
};

}  // namespace lt::proc
