#include "user/python/thread_states.h"

#include "user/core/errors.h"
#include "user/proc/procfs.h"

namespace lt::python {

namespace {

// glibc: struct pthread_key_data { uintptr_t seq; void* data; }, 32 per
// block; the first block is inline in struct pthread, the others hang off
// specific[key / 32].
std::uint64_t tsd_slot(pid_t pid, std::uint64_t pthread_self, const TsdLookup& t) {
  if (t.key < 32) return pthread_self + t.block + 16ull * t.key + 8;
  auto level = proc::read_value<std::uint64_t>(pid, pthread_self + t.levels + 8ull * (t.key / 32));
  return level && *level ? *level + 16ull * (t.key % 32) + 8 : 0;
}

}  // namespace

TsdLookup find_tsd_lookup(const Interpreter& interp) {
  const pid_t pid = interp.pid;
  const Layout& l = interp.layout;
  auto fail = [&](const std::string& why) {
    return Error(ExitCode::unsupported, "pid " + std::to_string(pid) + ": cannot sample Python stacks: " + why);
  };
  auto not_yet = [&](const std::string& why) {
    return NotInitialisedYet(ExitCode::unsupported,
                             "pid " + std::to_string(pid) + ": cannot sample Python stacks: " + why);
  };
  // The map fallback needs native_thread_id (3.11+) to match samples.
  auto by_map = [&](const std::string& why) {
    if (!l.tstate_native_thread_id) throw fail(why);
    if (thread_states_by_tid(interp).empty()) throw not_yet("no thread state of the interpreter is readable yet");
    TsdLookup t;
    t.by_map = true;
    return t;
  };
  if (!l.runtime_tss) return by_map("no pthread key for thread states");
  // Py_tss_t { int _is_initialized; pthread_key_t _key; }
  auto init = proc::read_value<std::int32_t>(pid, interp.runtime_addr + l.runtime_tss);
  auto key = proc::read_value<std::uint32_t>(pid, interp.runtime_addr + l.runtime_tss + 4);
  if (!init || !key) throw fail("cannot read _PyRuntime");
  if (*init != 1) throw not_yet("the interpreter's thread-state key is not initialised");
  if (*key >= 1024) throw fail("thread-state key " + std::to_string(*key) + " is out of range");
  TsdLookup t;
  t.key = *key;
  // Prove the layout: every thread state of the main interpreter that is
  // bound to its thread must be found at pthread_self's TSD slot (thread_id
  // is the pthread_t, which glibc makes the TCB address, i.e. fsbase).
  auto interp_addr = proc::read_value<std::uint64_t>(pid, interp.runtime_addr + l.runtime_interp_head);
  if (!interp_addr || !*interp_addr) throw not_yet("no interpreter state yet");
  auto ts = proc::read_value<std::uint64_t>(pid, *interp_addr + l.interp_threads_head);
  for (int i = 0; ts && *ts && i < 4096; ++i) {
    auto self = proc::read_value<std::uint64_t>(pid, *ts + l.tstate_thread_id);
    if (self && *self) {
      ++t.threads_checked;
      if (auto slot = tsd_slot(pid, *self, t)) {
        auto v = proc::read_value<std::uint64_t>(pid, slot);
        if (v && *v == *ts) ++t.threads_matched;
      }
    }
    ts = proc::read_value<std::uint64_t>(pid, *ts + l.tstate_next);
  }
  // No thread bound to its thread state yet (start-up): nothing proves or
  // disproves the layout.
  if (t.threads_checked == 0) throw not_yet("no thread state bound to its thread yet");
  if (t.threads_matched == 0)
    return by_map("none of " + std::to_string(t.threads_checked) +
                  " thread(s) has its thread state at the glibc pthread-key slot (musl or an unknown libc?)");
  return t;
}

std::vector<std::pair<std::uint32_t, std::uint64_t>> thread_states_by_tid(const Interpreter& interp) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
  const Layout& l = interp.layout;
  if (!l.tstate_native_thread_id) return out;
  auto interp_addr = proc::read_value<std::uint64_t>(interp.pid, interp.runtime_addr + l.runtime_interp_head);
  if (!interp_addr || !*interp_addr) return out;
  auto ts = proc::read_value<std::uint64_t>(interp.pid, *interp_addr + l.interp_threads_head);
  // native_thread_id is gettid() in the target's pid namespace; BPF sees
  // host tids.
  const auto host_tid = proc::host_tids(interp.pid);
  for (int i = 0; ts && *ts && i < 4096; ++i) {
    auto tid = proc::read_value<std::uint64_t>(interp.pid, *ts + l.tstate_native_thread_id);
    if (tid && *tid && *tid < (1ull << 31)) {
      auto h = host_tid.find(static_cast<pid_t>(*tid));
      if (h != host_tid.end()) out.emplace_back(static_cast<std::uint32_t>(h->second), *ts);
    }
    ts = proc::read_value<std::uint64_t>(interp.pid, *ts + l.tstate_next);
  }
  return out;
}

}  // namespace lt::python
