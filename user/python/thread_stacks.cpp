#include "user/python/thread_stacks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "user/proc/procfs.h"
#include "user/python/line_table.h"
#include "user/python/py_objects.h"

namespace lt::python {

namespace {

constexpr int kMaxThreads = 4096;
constexpr int kTries = 3;  // reads of one thread's chain before it is called torn
constexpr std::size_t kBlock = 128;

// glibc x86-64: struct pthread { tcbhead_t header (0x2c0); list_t list; pid_t
// tid; ... }.  Only 3.8-3.10 need it (no native_thread_id): checked against
// the target's own threads before use.
constexpr unsigned kGlibcPthreadTid = 0x2d0;

struct Code {
  bool readable = false;
  std::string name, file;
  int first_line = 0;
  std::vector<std::uint8_t> table;
};

class Reader {
 public:
  Reader(const Interpreter& interp, bool first_locals)
      : interp_(interp), l_(interp.layout), first_locals_(first_locals) {}

  // The frame chain of one thread state, innermost first. A chain that
  // faults or loops is read again; so is an empty one: a thread entering a
  // Python function (3.11/3.12) points its thread state at the new C frame
  // a few instructions before that frame's link to the Python frame is set,
  // and a read in between sees no frame at all (suspected in a CI failure:
  // a looping rank's main thread dumped with no Python frame).
  PyThreadStack stack_of(std::uint64_t tstate) {
    PyThreadStack out;
    out.tstate = tstate;
    for (int attempt = 0; attempt < kTries; ++attempt) {
      out.frames.clear();
      out.truncated = out.torn = false;
      walk(tstate, out);
      if (!out.torn && !out.frames.empty()) break;
    }
    return out;
  }

 private:
  template <typename T>
  static T at(const std::array<std::uint8_t, kBlock>& b, unsigned off) {
    T v{};
    if (off + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + off, sizeof v);
    return v;
  }

  void walk(std::uint64_t tstate, PyThreadStack& out) {
    const pid_t pid = interp_.pid;
    const auto& o = l_.bpf;
    auto first = proc::read_value<std::uint64_t>(pid, tstate + l_.tstate_frame);
    if (!first) {
      out.torn = true;
      return;
    }
    std::uint64_t frame = *first;
    if (frame && o.cframe_frame != 0xffff) {  // 3.11/3.12: through _PyCFrame
      auto f = proc::read_value<std::uint64_t>(pid, frame + o.cframe_frame);
      if (!f) {
        out.torn = true;
        return;
      }
      frame = *f;
    }
    std::set<std::uint64_t> seen;
    const std::size_t block = std::min<std::size_t>(o.frame_block, kBlock);
    // Shim frames (3.12+) cost a step but are no frame of ours: twice the room.
    for (std::size_t steps = 0; frame; ++steps) {
      if (out.frames.size() >= kMaxFrames || steps >= 2 * kMaxFrames) {
        out.truncated = true;
        return;
      }
      if (!seen.insert(frame).second) {  // a loop: a chain changing under us
        out.torn = true;
        return;
      }
      std::array<std::uint8_t, kBlock> b{};
      if (!proc::read_memory(pid, frame, b.data(), block)) {
        out.torn = true;
        return;
      }
      const std::uint64_t code = at<std::uint64_t>(b, o.frame_code) & ~std::uint64_t{o.stackref_tag_mask};
      const std::uint64_t this_frame = frame;
      frame = at<std::uint64_t>(b, o.frame_previous);
      std::int32_t lasti;
      if (o.py_minor >= 11) {
        // The same rules as the BPF walker (bpf/pystack.bpf.h): shim frames
        // owned by the C stack (3.12+) are skipped; the instruction pointer
        // becomes code units from the bytecode start.
        if (b[std::min<std::size_t>(o.frame_owner, kBlock - 1)] >= o.owner_cstack) continue;
        const auto ip = at<std::uint64_t>(b, o.frame_lasti);
        lasti = ip ? static_cast<std::int32_t>(static_cast<std::int64_t>(ip - (code + o.code_adaptive)) >> 1) : -1;
      } else {
        lasti = at<std::int32_t>(b, o.frame_lasti);
      }
      if (!code) continue;
      const Code& c = code_at(code);
      PyFrameInfo f;
      f.readable = c.readable;
      if (c.readable) {
        f.function = c.name;
        f.file = c.file;
        f.line = line_for(interp_.minor, c.first_line, c.table, lasti);
      }
      if (first_locals_) {
        // Past the block on <= 3.10 (f_localsplus lies after PyFrameObject's fields).
        auto local = o.frame_localsplus + 8u <= block
                         ? std::optional(at<std::uint64_t>(b, o.frame_localsplus))
                         : proc::read_value<std::uint64_t>(pid, this_frame + o.frame_localsplus);
        f.first_local = local ? *local & ~std::uint64_t{o.stackref_tag_mask} : 0;
      }
      out.frames.push_back(std::move(f));
    }
  }

  const Code& code_at(std::uint64_t addr) {
    if (auto it = codes_.find(addr); it != codes_.end()) return it->second;
    const auto& o = l_.bpf;
    Code c;
    constexpr std::size_t kCodeRead = 216;
    std::array<std::uint8_t, kCodeRead> raw{};
    const std::size_t need =
        std::min<std::size_t>(kCodeRead, 8 + std::max({l_.code_linetable, l_.code_qualname, unsigned{o.code_name},
                                                       unsigned{o.code_filename}, unsigned{o.code_firstlineno}}));
    auto u64 = [&](unsigned off) {
      std::uint64_t v = 0;
      if (off + 8 <= raw.size()) std::memcpy(&v, raw.data() + off, 8);
      return v;
    };
    if (proc::read_memory(interp_.pid, addr, raw.data(), need)) {
      c.name = read_str(interp_.pid, u64(l_.code_qualname ? l_.code_qualname : o.code_name), l_);
      if (c.name.empty() && l_.code_qualname) c.name = read_str(interp_.pid, u64(o.code_name), l_);
      c.file = read_str(interp_.pid, u64(o.code_filename), l_);
      std::int32_t first = 0;
      std::memcpy(&first, raw.data() + o.code_firstlineno, 4);
      c.first_line = first;
      c.table = read_bytes_object(interp_.pid, u64(l_.code_linetable));
      c.readable = !c.name.empty();
    }
    return codes_.emplace(addr, std::move(c)).first->second;
  }

  const Interpreter& interp_;
  const Layout& l_;
  bool first_locals_;
  std::map<std::uint64_t, Code> codes_;  // one dump: a code object on a stack is alive
};

// 3.8-3.10: thread_id is the pthread_t (the TCB address on glibc), whose
// struct pthread holds the kernel tid.  The offset is proven on the
// target's threads: every thread state's value there must be a tid of the
// process, each a different one.  0: not proven.
unsigned pthread_tid_offset(pid_t pid, const std::vector<std::uint64_t>& pthreads,
                            const std::map<pid_t, pid_t>& ns_tids) {
  auto fits = [&](unsigned off) {
    std::set<std::int32_t> got;
    for (auto p : pthreads) {
      auto tid = proc::read_value<std::int32_t>(pid, p + off);
      if (!tid || !ns_tids.count(*tid) || !got.insert(*tid).second) return false;
    }
    return !got.empty();
  };
  if (fits(kGlibcPthreadTid)) return kGlibcPthreadTid;
  return 0;
}

}  // namespace

PyThreads read_thread_stacks(const Interpreter& interp, bool first_locals) {
  PyThreads out;
  const pid_t pid = interp.pid;
  const Layout& l = interp.layout;
  auto interp_addr = proc::read_value<std::uint64_t>(pid, interp.runtime_addr + l.runtime_interp_head);
  if (!interp_addr || !*interp_addr) return out;
  // The thread list, bounded and loop-checked: threads come and go as we read.
  std::vector<std::uint64_t> tstates;
  std::set<std::uint64_t> seen;
  auto ts = proc::read_value<std::uint64_t>(pid, *interp_addr + l.interp_threads_head);
  for (int i = 0; ts && *ts && i < kMaxThreads && seen.insert(*ts).second; ++i) {
    tstates.push_back(*ts);
    ts = proc::read_value<std::uint64_t>(pid, *ts + l.tstate_next);
  }
  // native_thread_id (3.11+) and the pthread's tid are tids in the target's
  // pid namespace; we see host tids.
  const auto ns_tids = proc::host_tids(pid);
  unsigned pthread_tid = 0;
  if (!l.tstate_native_thread_id) {
    std::vector<std::uint64_t> pthreads;
    for (auto t : tstates)
      if (auto p = proc::read_value<std::uint64_t>(pid, t + l.tstate_thread_id); p && *p) pthreads.push_back(*p);
    pthread_tid = pthread_tid_offset(pid, pthreads, ns_tids);
  }
  Reader reader(interp, first_locals);
  for (auto t : tstates) {
    PyThreadStack s = reader.stack_of(t);
    std::optional<std::int64_t> ns_tid;
    if (l.tstate_native_thread_id) {
      if (auto v = proc::read_value<std::uint64_t>(pid, t + l.tstate_native_thread_id))
        ns_tid = static_cast<std::int64_t>(*v);
    } else if (pthread_tid) {
      if (auto p = proc::read_value<std::uint64_t>(pid, t + l.tstate_thread_id))
        if (auto v = proc::read_value<std::int32_t>(pid, *p + pthread_tid)) ns_tid = *v;
    }
    if (ns_tid && *ns_tid > 0 && *ns_tid < (1ll << 31))
      if (auto h = ns_tids.find(static_cast<pid_t>(*ns_tid)); h != ns_tids.end()) s.tid = h->second;
    out.threads.push_back(std::move(s));
  }
  if (l.runtime_gil_tstate) {
    if (auto v = proc::read_value<std::uint64_t>(pid, interp.runtime_addr + l.runtime_gil_tstate)) {
      out.gil_known = true;
      out.gil_tstate = *v;
    }
  } else if (l.interp_gil_holder && l.interp_gil_locked) {
    auto holder = proc::read_value<std::uint64_t>(pid, *interp_addr + l.interp_gil_holder);
    auto locked = proc::read_value<std::int32_t>(pid, *interp_addr + l.interp_gil_locked);
    if (holder && locked) {
      out.gil_known = true;
      out.gil_tstate = *locked ? *holder : 0;
    }
  }
  return out;
}

}  // namespace lt::python
