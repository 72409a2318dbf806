#include "user/proc/exec_hold.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

#include "user/proc/elf_image.h"
#include "user/proc/ptrace_stop.h"

namespace lt::proc {

namespace {

void (*step_hook)(int) = nullptr;
int step_count = 0;
void step() {
  if (step_hook) step_hook(++step_count);
}

// A loader that never maps the library it needs (it failed and exits, or
// it is not the loader we think): stop stepping after this many system
// calls and let the adoption decide (CPython's loader makes ~60).
constexpr int kMaxSteps = 20000;

// The loader has mapped the library's code and its data: the probes need
// the code's mapping, and discovery reads the interpreter's static data
// (3.13+: the _Py_DebugOffsets at the start of _PyRuntime), which needs no
// relocation. The loader maps the writable segment last.
bool library_mapped(pid_t pid, const std::string& library) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  const std::string tail = "/" + library;
  bool code = false, data = false;
  while (std::getline(maps, line)) {
    // "start-end perms offset dev inode   path"
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp + 4 >= line.size()) continue;
    if (line.size() < tail.size() || line.compare(line.size() - tail.size(), tail.size(), tail) != 0) continue;
    code |= line[sp + 3] == 'x';
    data |= line[sp + 2] == 'w';
  }
  return code && data;
}

// DT_NEEDED names of an ELF file.
std::vector<std::string> needed_libraries(const elf::ElfImage& image) {
  std::vector<elf::SectionEntry> sections{elf::SectionEntry{}};  // index 0: SHN_UNDEF
  image.for_each_section([&](const elf::SectionEntry& s) { sections.push_back(s); });
  std::vector<std::string> out;
  for (const auto& s : sections) {
    if (s.header.sh_type != SHT_DYNAMIC || s.header.sh_link >= sections.size()) continue;
    const std::string_view strings = sections[s.header.sh_link].bytes;
    for (std::size_t off = 0; off + sizeof(Elf64_Dyn) <= s.bytes.size(); off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, s.bytes.data() + off, sizeof d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strings.size()) continue;
      const std::string_view rest = strings.substr(d.d_un.d_val);
      out.emplace_back(rest.substr(0, rest.find('\0')));
    }
  }
  return out;
}

}  // namespace

ExecImage ExecClassifier::classify_file(const std::string& path) {
  bool readable = true;
  return classify_elf(path, readable);
}

ExecImage ExecClassifier::classify_elf(const std::string& path, bool& readable) {
  elf::ElfImage image(path);
  readable = image.problem() != elf::ElfImage::Problem::cannot_open;
  if (!image.ok() || !image.is_elf64() || !image.native_byte_order()) return {};
  bool interpreter = false;
  image.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        interpreter |= s.defined() && std::strcmp(s.name, "_PyEval_EvalFrameDefault") == 0;
      },
      elf::ElfImage::Tables::dynamic_only);
  if (interpreter) return {ExecImage::Kind::python, ""};
  for (const auto& lib : needed_libraries(image))
    if (lib.rfind("libpython3", 0) == 0) return {ExecImage::Kind::python_library, lib};
  return {};
}

ExecImage ExecClassifier::classify(pid_t pid) {
  // One open file for the key and the reading: a process that ends (or a
  // pid taken again) between the two must not have a CPython remembered
  // as no CPython -- the holder would then never wake for that executable
  // again (lt_exec_skip).  Gone before the open: not known, not remembered.
  const int fd = open(("/proc/" + std::to_string(pid) + "/exe").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return {};
  }
  const auto key = std::make_tuple(st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  if (auto it = known_.find(key); it != known_.end()) {
    close(fd);
    return it->second;
  }
  bool readable = true;
  ExecImage image = classify_elf("/proc/self/fd/" + std::to_string(fd), readable);
  close(fd);
  if (!readable) return {};  // not known: looked at again next time
  image.dev = (static_cast<std::uint64_t>(major(st.st_dev)) << 20) | minor(st.st_dev);
  image.ino = st.st_ino;
  if (known_.size() > 4096) known_.clear();  // a bound, not a policy: a machine of many programs
  known_.emplace(key, image);
  return image;
}

void ExecHolds::set_step_hook(void (*hook)(int)) {
  step_hook = hook;
  step_count = 0;
}

ExecHolds::~ExecHolds() {
  release_all();
}

bool ExecHolds::hold(pid_t pid, const std::string& library) {
  if (auto it = held_.find(pid); it != held_.end()) {
    if (!it->second.ours) {
      // Held, and exec'd again before we were done: its new image decides.
      it->second.library = library;
      return true;
    }
    release(pid);  // awaiting library loads of the image before: held afresh
  }
  const long options = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC;
  if (ptrace(PTRACE_SEIZE, pid, nullptr, reinterpret_cast<void*>(options)) < 0) {
    last_error_ = errno;
    return false;
  }
  step();
  if (ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) < 0) return true;  // gone: poll() sees it end
  step();
  held_[pid] = Held{library};
  return true;
}

int ExecHolds::steps(pid_t pid) const {
  auto it = held_.find(pid);
  return it == held_.end() ? 0 : it->second.steps;
}

bool ExecHolds::stepping() const {
  for (const auto& [pid, h] : held_)
    if (!h.ready) return true;
  return false;
}

double ExecHolds::held_ms(pid_t pid) const {
  auto it = held_.find(pid);
  return it == held_.end()
             ? 0.0
             : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - it->second.since).count();
}

namespace {

// The next report of a held process, for both loops below: nothing yet,
// gone (ended, or stopped by job control, which gets it back), or a stop
// to act on.
enum class Report { none, gone, stop };
Report take_report(pid_t pid, PtraceStop& s) {
  s = next_ptrace_stop(pid, false);
  if (s.kind == PtraceStop::none) return Report::none;
  if (s.kind == PtraceStop::ended) return Report::gone;
  step();
  if (s.group_stop()) {  // stopped by job control: give it back to it
    ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
    return Report::gone;
  }
  return Report::stop;
}

}  // namespace

bool ExecHolds::advance(pid_t pid, Held& h) {
  if (h.ours) return advance_awaiting(pid, h);
  // Paused and handed over, it has nothing to report -- unless it was killed.
  if (h.ready) return next_ptrace_stop(pid, false).kind != PtraceStop::ended;
  while (!h.ready) {
    PtraceStop s;
    if (const Report r = take_report(pid, s); r != Report::stop) return r == Report::none;
    // A signal on its way in is passed on; every other stop (our
    // interrupt, a system call, a new exec) is a point to look again.
    const int sig = s.signal_stop() ? s.sig : 0;
    if (!sig) {
      if (!h.library.empty() && (library_mapped(pid, h.library) || h.steps >= kMaxSteps)) h.library.clear();
      if (h.library.empty()) {
        h.ready = true;  // paused where it is
        return true;
      }
      ++h.steps;
    }
    ptrace(PTRACE_SYSCALL, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    step();
  }
  return true;
}

// A process running on, seized, until a library load: its stops until ours.
bool ExecHolds::advance_awaiting(pid_t pid, Held& h) {
  // Paused at a load, it has nothing to report -- unless it was killed.
  if (h.at_load) return next_ptrace_stop(pid, false).kind != PtraceStop::ended;
  for (;;) {
    PtraceStop s;
    if (const Report r = take_report(pid, s); r != Report::stop) return r == Report::none;
    if (s.event == PTRACE_EVENT_EXEC) {
      // A new program: the wait for the old one's libraries ends here.  A
      // CPython is held again from the exec ring; anything else (which BPF
      // may not even wake us for) runs on, untraced.
      ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
      step();
      return false;
    }
    if (s.signal_stop() && s.sig == SIGURG && h.ours(pid)) {
      h.at_load = true;  // paused at a library load, before its code runs
      loaded_.push_back(pid);
      return true;
    }
    // Another signal is passed on; every other stop goes on.
    const int sig = s.signal_stop() ? s.sig : 0;
    ptrace(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    step();
  }
}

void ExecHolds::await_libraries(pid_t pid, std::function<bool(pid_t)> ours) {
  auto it = held_.find(pid);
  if (it == held_.end() || !it->second.ready || it->second.ours) return;
  it->second.ours = std::move(ours);
  it->second.at_load = false;
  ptrace(PTRACE_CONT, pid, nullptr, nullptr);
  step();
}

std::vector<pid_t> ExecHolds::take_loaded() {
  std::vector<pid_t> out;
  for (pid_t pid : std::exchange(loaded_, {}))
    if (held_.count(pid)) out.push_back(pid);
  return out;
}

void ExecHolds::resume(pid_t pid) {
  auto it = held_.find(pid);
  if (it == held_.end() || !it->second.at_load) return;
  it->second.at_load = false;
  ptrace(PTRACE_CONT, pid, nullptr, nullptr);  // the SIGURG suppressed
  step();
}

bool ExecHolds::awaiting(pid_t pid) const {
  auto it = held_.find(pid);
  return it != held_.end() && it->second.ours;
}

bool ExecHolds::paused_at_load(pid_t pid) const {
  auto it = held_.find(pid);
  return it != held_.end() && it->second.at_load;
}

std::vector<pid_t> ExecHolds::poll() {
  std::vector<pid_t> ready;
  for (auto it = held_.begin(); it != held_.end();) {
    if (!advance(it->first, it->second)) {
      it = held_.erase(it);
      continue;
    }
    if (it->second.ready && !it->second.reported) {
      it->second.reported = true;
      ready.push_back(it->first);
    }
    ++it;
  }
  return ready;
}

void ExecHolds::release(pid_t pid) {
  auto it = held_.find(pid);
  if (it == held_.end()) return;
  // Running: awaiting a library load; paused: at our interrupt, a system
  // call or (detached with no signal: suppressed) our SIGURG.
  const bool paused = it->second.ready && (!it->second.ours || it->second.at_load);
  held_.erase(it);
  if (!paused) return detach_running(pid, [] { step(); });
  if (ptrace(PTRACE_DETACH, pid, nullptr, nullptr) < 0) {
    // Killed while paused: a dead tracee is reported to its tracer alone;
    // take that report, or its parent waits for it until we end.
    for (int i = 0; i < 1000 && next_ptrace_stop(pid, false).kind != PtraceStop::ended; ++i) usleep(100);
  }
  step();
}

void ExecHolds::release_all() {
  while (!held_.empty()) release(held_.begin()->first);
}

}  // namespace lt::proc
