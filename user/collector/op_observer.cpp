#include "user/collector/op_observer.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "user/collector/bridge_files.h"
#include "user/collector/op_probes.h"
#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/core/errors.h"
#include "user/inject/inject_library.h"
#include "user/proc/census.h"
#include "user/proc/proc_stats.h"
#include "user/proc/procfs.h"
#include "user/proc/thread_status.h"
#include "user/proc/withheld_bound.h"
#include "user/sources/opprobe.h"
#include "user/text/utf8_text.h"
#include "user/torch/observer_layouts.h"

namespace lt {

namespace {

// The bridge polls its semaphore and our request every 100 ms; a process
// busy in a long native call may take longer to schedule its poll thread.
constexpr std::uint64_t kWaitNs = 2'000'000'000;
constexpr std::uint64_t kWaitMaxNs = 30'000'000'000;  // however loaded the machine
// A span that ends later than this past our clock is damaged, not early.
constexpr std::uint64_t kFutureNs = 1'000'000'000;
// The watermark goes out when it moved this much (one record, not one a
// drain), less a slack for the two sides' clock reads.
constexpr std::uint64_t kWatermarkStepNs = 50'000'000;
constexpr std::uint64_t kWatermarkSlackNs = 20'000'000;

template <typename T>
T load_acquire(const volatile T& v) {
  return __atomic_load_n(&v, __ATOMIC_ACQUIRE);
}
template <typename T>
void store_release(volatile T& v, T x) {
  __atomic_store_n(&v, x, __ATOMIC_RELEASE);
}

// The observer's memfd among pid's open files: "/memfd:ltrace-ops (deleted)".
int find_buffer_fd(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int found = -1;
  static const char kWant[] = "/memfd:" LT_OBS_MEMFD_NAME " (deleted)";
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256];
    const ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (std::strcmp(kWant, target) == 0) {
      found = std::atoi(e->d_name);
      break;
    }
  }
  closedir(d);
  return found;
}

std::string read_status(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The bridge's poll thread ("ltrace-bridge") answers the handshake; a fork
// of a process it was put into has the library and no such thread.
bool has_poll_thread(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/comm");
    std::string comm;
    if (std::getline(f, comm) && comm == "ltrace-bridge") {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

bool alive(std::uint32_t pid) {
  return pid != 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

}  // namespace

// One process's shared buffer, mapped here.  Where its parts are is ours
// (the constants of opobserver_shm.h, checked against its header once):
// never an offset read from the job's memory.
struct OpObserver::Buffer {
  void* map = MAP_FAILED;
  lt_obs_header* hdr = nullptr;
  lt_obs_slot* slots = nullptr;
  const std::uint32_t* index = nullptr;
  const unsigned char* names = nullptr;
  const lt_obs_span* rings = nullptr;
  std::vector<std::uint32_t> ops;                     // name id -> op index (UINT32_MAX unknown yet)
  std::vector<std::uint8_t> op_known;                 // name id -> looked up
  std::map<pid_t, pid_t> host_tid;                    // the bridge's tids (its pid namespace) -> ours
  std::uint32_t slot_tid[LT_OBS_SLOTS] = {};          // the tid each slot had at our last read
  std::uint64_t dropped_base = 0, too_deep_base = 0;  // the counters when we came (the bridge outlives sessions)
  std::uint64_t damaged = 0;                          // spans with impossible times: skipped
  std::uint64_t watermark = 0;                        // the last one sent
  std::uint64_t probes_until = 0;                     // calls that began before: the op probes counted them
  bool compiled = false, compiled_said = false;       // a compiled region ran (torch.compile), take_compiled()
  // Handed over to the op probes (hand_over_to_probes): calls that begin
  // from then on are theirs; closed once every earlier call is read.
  std::uint64_t probes_from = UINT64_MAX, close_by = 0;
  bool drained_to_handover = false;
  bool shapes_said = false;  // the bridge's input shapes off: said once
  explicit Buffer(void* m) : map(m) {
    auto* base = static_cast<unsigned char*>(m);
    hdr = static_cast<lt_obs_header*>(m);
    slots = reinterpret_cast<lt_obs_slot*>(base + LT_OBS_SLOTS_OFFSET);
    index = reinterpret_cast<const std::uint32_t*>(base + LT_OBS_INDEX_OFFSET);
    names = base + LT_OBS_NAMES_OFFSET;
    rings = reinterpret_cast<const lt_obs_span*>(base + LT_OBS_RINGS_OFFSET);
  }
  lt_obs_slot* slot(std::uint32_t i) const { return slots + i; }
  const lt_obs_span* ring(std::uint32_t i) const { return rings + std::size_t{i} * LT_OBS_RING; }
  std::uint64_t dropped() const {
    std::uint64_t n = load_acquire(hdr->no_slot);
    for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i) n += load_acquire(slot(i)->dropped);
    return n;
  }
  std::uint64_t too_deep() const {
    std::uint64_t n = 0;
    for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i) n += load_acquire(slot(i)->too_deep);
    return n;
  }
  ~Buffer() {
    if (map != MAP_FAILED) munmap(map, LT_OBS_SIZE);
  }
};

OpObserver::OpObserver(const TracerContext& ctx, OpProbeSource& source, OpProbes& probes)
    : ctx_(ctx), source_(source), probes_(probes), bridge_path_(find_bridge_library()) {}

void OpObserver::emit_state(pid_t pid, std::uint32_t how, bool final, std::uint64_t dropped, std::uint64_t too_deep,
                            const std::string& detail) {
  lt_op_observer_event e{};
  e.hdr = user_header(LT_EV_OP_OBSERVER, sizeof e, pid, monotonic_ns());
  e.how = how;
  e.final = final ? 1 : 0;
  e.dropped = dropped;
  e.too_deep = too_deep;
  std::memcpy(e.detail, detail.data(), std::min(detail.size(), sizeof e.detail - 1));
  ctx_.emit(&e, sizeof e);
}

namespace {
// LTRACE_BPF_TEST_STOP_AT=POINT: the tracer stops itself (SIGSTOP) there,
// so a test can kill it at that step of the handshake (observer-asked: the
// buffer claimed and the bridge asked; observer-active: its answer read).
void stop_here_for_tests(const char* point) {
  static const char* at = std::getenv("LTRACE_BPF_TEST_STOP_AT");
  if (at && std::strcmp(at, point) == 0) kill(getpid(), SIGSTOP);
}
}  // namespace

// A handshake under way: the bridge is in (or was), its semaphore is up;
// its buffer and its answer are waited for without blocking the drain.
struct OpObserver::Pending {
  std::string version;
  lt_obs_layout layout{};  // the job's torch's, for the bridge
  bool injected = false;
  proc::WithheldBound phase;       // the phase under way's bound (start_phase)
  std::uint64_t started = 0;       // monotonic ns
  std::unique_ptr<Buffer> buffer;  // mapped, claimed, asked (the second phase)
  std::uint32_t request = 0;
};

OpObserver::~OpObserver() = default;

std::string OpObserver::start(pid_t pid) {
  const std::string version = proc::torch_version(pid);
  const auto layout = observer_layout(version);
  if (!layout)
    return "torch " + (version.empty() ? std::string("(version unreadable)") : version) +
           " is not in the op observer's table (user/torch/observer_layouts.cpp)";
  const auto torch = proc::find_mapped_library(pid, "libtorch_cpu.so");
  if (!torch) return "libtorch_cpu.so is not mapped";
  if (auto missing = missing_observer_symbol(torch->open_path); !missing.empty())
    return "libtorch_cpu.so lacks " + missing;
  auto asked = *layout;
  if (ctx_.opts.shapes) {
    // Input shapes: where RecordFunction keeps its inputs and a TensorImpl
    // its sizes, for this torch (the bridge checks its first calls' reads).
    const auto shapes = observer_shapes_layout(version, uses_cxx11_abi(torch->open_path));
    if (!shapes)
      return "--group-by-input-shapes: torch " + version + " has no input-shapes row in the op observer's table";
    asked.tensor_vtable = probes_.tensor_vtable(pid);
    if (asked.tensor_vtable == 0) return "--group-by-input-shapes: c10::TensorImpl's vtable not found in libc10.so";
    asked.shapes = 1;
    asked.off_inputs = shapes->off_inputs;
    asked.ivalue_size = shapes->ivalue_size;
    asked.ivalue_tag = shapes->ivalue_tag;
    asked.tag_tensor = shapes->tag_tensor;
    asked.sizes_word = shapes->sizes_word;
    // LTRACE_BPF_TEST_SHAPES_INPUTS_OFFSET=N: a wrong row, as a torch the
    // table mistakes would give (the test that the bridge's checks catch it).
    if (const char* o = std::getenv("LTRACE_BPF_TEST_SHAPES_INPUTS_OFFSET"))
      asked.off_inputs = static_cast<std::uint32_t>(std::strtoul(o, nullptr, 10));
  }

  // The bridge, with the semaphore up before its poll thread first looks.
  bool raised = false;
  auto p = std::make_unique<Pending>();
  p->version = version;
  p->layout = asked;
  try {
    if (std::string mapped = mapped_bridge(pid); !mapped.empty()) {
      source_.raise_observer_semaphore(mapped, pid);
      raised = true;
    } else {
      if (!ctx_.opts.inject) return "--no-inject";
      if (bridge_path_.empty()) return "libltrace-bridge.so not found next to ltrace-bpf";
      inject::InjectOptions io;
      io.handoff = inject::Handoff::memfd_or_path;
      io.memfd_name = kBridgeMemfdName;
      io.before_dlopen = [&](const std::string& file) {
        source_.raise_observer_semaphore(file, pid);
        raised = true;
      };
      auto r = inject::inject_library(pid, bridge_path_, io);
      p->injected = true;  // its poll thread is starting: named once it runs
      if (ctx_.opts.verbose) ctx_.note("pid " + std::to_string(pid) + ": op observer: bridge injected: " + r.detail);
    }
  } catch (const Error& e) {
    if (raised) source_.lower_observer_semaphore(pid);
    return e.what();
  }
  p->started = monotonic_ns();
  start_phase(pid, *p, p->started);
  pending_[pid] = std::move(p);
  return "";
}

// Each phase of a handshake has the bridge's 2 s, plus what the job's
// threads waited for a CPU meanwhile (proc/withheld_bound.h), 30 s at most.
void OpObserver::start_phase(pid_t pid, Pending& p, std::uint64_t now) {
  p.phase = proc::WithheldBound(now, kWaitNs, kWaitMaxNs);
  p.phase.watch(pid);
}

bool OpObserver::past_deadline(pid_t pid, Pending& p, std::uint64_t now) {
  return p.phase.over(now, {pid});
}

// One step of a handshake, never waiting: its buffer (found among the
// job's files, mapped, checked, claimed, asked), then the bridge's answer.
// "" and done: it records; "" and not done: later; else why not.
std::string OpObserver::advance(pid_t pid, Pending& p, bool& done) {
  done = false;
  const std::uint64_t now = monotonic_ns();
  if (!p.buffer) {
    int fd = -1;
    if (const int n = find_buffer_fd(pid); n >= 0)
      fd = open(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(n)).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      if (proc::exists(pid) && (p.injected || has_poll_thread(pid)) && !past_deadline(pid, p, now)) return "";
      return has_poll_thread(pid) ? "the bridge made no buffer within 2 s (more its CPU waits)"
                                  : "its bridge has no poll thread (a fork of a process it was put into)";
    }
    // Sealed against shrinking (a smaller file would fault our reads) and of
    // the one size this version makes.
    struct stat st {};
    const int seals = fcntl(fd, F_GET_SEALS);
    void* map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == LT_OBS_SIZE && seals >= 0 &&
        (seals & F_SEAL_SHRINK))
      map = mmap(nullptr, LT_OBS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return "the op observer's buffer is not one this ltrace-bpf can read (size or seals)";
    auto b = std::make_unique<Buffer>(map);
    auto& h = *b->hdr;
    // Sealed and sized before the bridge writes its header, magic last: a
    // buffer found in between is not finished, not of another version
    // (CI 112: "not of this ltrace-bpf's version" from a bridge of ours).
    const std::uint32_t magic = load_acquire(h.magic);
    if (magic == 0) {
      if (proc::exists(pid) && !past_deadline(pid, p, now)) return "";
      return "the bridge did not finish its op observer's buffer within 2 s (more its CPU waits)";
    }
    if (magic != LT_OBS_MAGIC || h.version != LT_OBS_VERSION || h.slots != LT_OBS_SLOTS || h.ring != LT_OBS_RING ||
        h.size != LT_OBS_SIZE || h.slots_offset != LT_OBS_SLOTS_OFFSET || h.names_index_offset != LT_OBS_INDEX_OFFSET ||
        h.names_offset != LT_OBS_NAMES_OFFSET || h.rings_offset != LT_OBS_RINGS_OFFSET)
      return "the op observer's buffer is not of this ltrace-bpf's version";
    // Its own buffer, not one inherited from the process it forked from.
    pid_t own = pid;
    if (auto ns = proc::parse_nspid(read_status(pid)); !ns.empty()) own = ns.back();
    if (h.bridge_pid != static_cast<std::uint32_t>(own))
      return "the op observer's buffer is its parent's (a fork: the bridge stays dormant in it)";
    // One reader at a time; a reader that died leaves its pid behind.
    const auto self = static_cast<std::uint32_t>(getpid());
    std::uint32_t reader = load_acquire(h.reader_pid);
    if (reader != self && alive(reader)) return "another ltrace-bpf (pid " + std::to_string(reader) + ") reads its ops";
    if (!__atomic_compare_exchange_n(&h.reader_pid, &reader, self, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return "another ltrace-bpf took its ops first";
    for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i)  // what a reader before us left is not this window's
      store_release(b->slot(i)->tail, load_acquire(b->slot(i)->head));
    h.layout = p.layout;
    p.request = load_acquire(h.answered) + 1;
    store_release(h.request, p.request);
    p.buffer = std::move(b);
    start_phase(pid, p, now);
    stop_here_for_tests("observer-asked");
  }
  auto& h = *p.buffer->hdr;
  if (load_acquire(h.answered) != p.request) {  // state and detail are written before it
    if (!past_deadline(pid, p, now) && proc::exists(pid)) return "";
    store_release(h.reader_pid, 0u);
    return "the bridge did not answer within 2 s (more its CPU waits)";
  }
  const std::uint32_t state = load_acquire(h.state);
  std::string detail(h.detail, strnlen(h.detail, sizeof h.detail));
  if (state != LT_OBS_ACTIVE) {
    store_release(h.reader_pid, 0u);
    return "the bridge refused: " + utf8_text(detail);
  }
  auto& b = *p.buffer;
  b.dropped_base = b.dropped();
  b.too_deep_base = b.too_deep();
  emit_state(pid, LT_OP_TIMES_OBSERVER, false, 0, 0,
             "RecordFunction callback via " + utf8_text(detail) + " (torch " + p.version + ")");
  if (ctx_.opts.verbose)
    ctx_.note("pid " + std::to_string(pid) + ": op observer: handshake " +
              std::to_string((now - p.started) / 1'000'000) + " ms after the injection");
  done = true;
  stop_here_for_tests("observer-active");
  return "";
}

std::vector<std::pair<pid_t, std::string>> OpObserver::settle() {
  std::vector<std::pair<pid_t, std::string>> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const pid_t pid = it->first;
    bool done = false;
    std::string why = advance(pid, *it->second, done);
    if (why.empty() && !done) {
      ++it;
      continue;
    }
    if (done) {
      buffers_[pid] = std::move(it->second->buffer);
    } else {
      source_.lower_observer_semaphore(pid);
    }
    out.emplace_back(pid, std::move(why));
    it = pending_.erase(it);
  }
  return out;
}

void OpObserver::abandon(pid_t pid) {
  auto it = pending_.find(pid);
  if (it == pending_.end()) return;
  if (it->second->buffer) store_release(it->second->buffer->hdr->reader_pid, 0u);
  source_.lower_observer_semaphore(pid);
  pending_.erase(it);
}

std::uint32_t OpObserver::op_of(Buffer& b, std::uint32_t name, bool shaped) {
  if (name >= LT_OBS_NAMES) return UINT32_MAX;
  if (name < b.op_known.size() && b.op_known[name]) return b.ops[name];
  if (name >= load_acquire(b.hdr->names)) return UINT32_MAX;  // not published: a damaged buffer
  const std::uint64_t at = b.index[name];
  std::uint32_t len = 0;
  if (at > LT_OBS_NAME_BYTES - sizeof len) return UINT32_MAX;
  std::memcpy(&len, b.names + at, sizeof len);
  if (len > LT_OBS_NAME_BYTES - at - sizeof len) return UINT32_MAX;
  std::string s(reinterpret_cast<const char*>(b.names + at + sizeof len), len);
  if (s.find('\0') != std::string::npos) s.resize(s.find('\0'));
  // torch.compile in use: its frames' cache lookups (each call of a compiled
  // function, the first before its compile: the probes are in before the
  // graph first runs), its regions.
  if (s.rfind("TorchDynamo Cache Lookup", 0) == 0 || s.rfind("Torch-Compiled Region", 0) == 0) b.compiled = true;
  // "name\x1fshapes": a call with its input shapes (--group-by-input-shapes).
  std::string shapes;
  if (const auto sep = s.find(LT_OBS_SHAPES_SEP); shaped && sep != std::string::npos) {
    shapes = s.substr(sep + 1);
    s.resize(sep);
    // Written by the job: only what torch's format has in it, else none.
    if (shapes.empty() || shapes.find_first_not_of("[], 0123456789") != std::string::npos || shapes.front() != '[')
      shapes.clear();
  }
  const std::uint32_t op = probes_.index_of(s, shapes);
  if (b.ops.size() <= name) {
    b.ops.resize(name + 1, UINT32_MAX);
    b.op_known.resize(name + 1, 0);
  }
  b.ops[name] = op;
  b.op_known[name] = 1;
  return op;
}

// The watermark: no call still to come from the process starts before it.
// A thread's open outermost call says when it began (the bridge clears it
// only after the call's span is in the ring, so it is read before the
// heads); the calls in the rings that end after `until` wait for the next
// drain, so their starts count too.
void OpObserver::drain(pid_t pid, Buffer& b, std::uint64_t until) {
  if (ctx_.opts.shapes && !b.shapes_said && load_acquire(b.hdr->shapes_state) == LT_OBS_SHAPES_OFF) {
    b.shapes_said = true;
    const std::string why(b.hdr->shapes_detail, strnlen(b.hdr->shapes_detail, sizeof b.hdr->shapes_detail));
    ctx_.note("pid " + std::to_string(pid) + ": the op observer records no input shapes (" + utf8_text(why) +
              "): its calls from then on are grouped without them");
  }
  std::uint64_t watermark = until;
  for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i) {
    const std::uint64_t open = __atomic_load_n(&b.slot(i)->open_since, __ATOMIC_SEQ_CST);
    if (open != 0) watermark = std::min(watermark, open);
  }
  for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i) {
    lt_obs_slot& s = *b.slot(i);
    const std::uint64_t head = load_acquire(s.head);
    std::uint64_t tail = s.tail;
    if (head == tail) continue;
    if (head - tail > LT_OBS_RING) tail = head - LT_OBS_RING;  // cannot be: the writer waits for us
    const auto ns_tid = static_cast<pid_t>(load_acquire(s.tid));
    auto t = b.host_tid.find(ns_tid);
    if (t == b.host_tid.end() || b.slot_tid[i] != static_cast<std::uint32_t>(ns_tid)) {
      // A new thread in this slot: the host's view of its tid (the identity
      // outside a pid namespace), read again since tids are reused.
      for (auto& [in, out] : proc::host_tids(pid)) b.host_tid[in] = out;
      t = b.host_tid.find(ns_tid);
      if (t == b.host_tid.end()) t = b.host_tid.emplace(ns_tid, ns_tid).first;
      b.slot_tid[i] = static_cast<std::uint32_t>(ns_tid);
    }
    const lt_obs_span* ring = b.ring(i);
    const std::uint64_t latest = monotonic_ns() + kFutureNs;
    for (; tail < head; ++tail) {
      const lt_obs_span sp = ring[tail & (LT_OBS_RING - 1)];
      if (sp.end_ns > until && sp.end_ns <= latest) {  // a thread's calls are in the order they ended
        for (std::uint64_t k = tail; k < head; ++k)
          watermark = std::min(watermark, ring[k & (LT_OBS_RING - 1)].start_ns);
        break;
      }
      if (sp.end_ns < sp.start_ns || sp.end_ns > latest) {
        ++b.damaged;  // not a time this clock gave: never read as one
        continue;
      }
      // --ops leaves a call out of the table, not out of its callers'
      // nesting (nor does a damaged name): sent hidden.
      // A call that began before the switch from the op probes was counted
      // by them: sent hidden, so that it nests its later calls and counts
      // nowhere (each call is the probes' or the observer's, by its start).
      const bool probes_had_it = sp.start_ns < b.probes_until || sp.start_ns >= b.probes_from;
      const std::uint32_t op = probes_had_it ? UINT32_MAX : op_of(b, sp.name, sp.flags & LT_OBS_SPAN_SHAPES);
      if (op != UINT32_MAX) probes_.announce(op);
      lt_op_span_event e{};
      e.hdr = user_header(LT_EV_OP_SPAN, sizeof e, pid, sp.start_ns);
      e.hdr.tid = static_cast<std::uint32_t>(t->second);
      e.end_ns = sp.end_ns;
      e.self_ns = std::min(sp.self_ns, sp.end_ns - sp.start_ns);
      e.op = op;
      e.depth = sp.depth;
      e.flags = static_cast<std::uint16_t>((op == UINT32_MAX ? LT_OP_SPAN_HIDDEN : 0) |
                                           (sp.flags & LT_OBS_SPAN_USER ? LT_OP_SPAN_USER : 0));
      ctx_.emit(&e, sizeof e);
    }
    store_release(s.tail, tail);
  }
  if (until == UINT64_MAX) return;  // the last drain: nothing is to come
  // Handed over: no call that began before the hand-over is still to come.
  if (watermark >= b.probes_from) b.drained_to_handover = true;
  watermark = watermark > kWatermarkSlackNs ? watermark - kWatermarkSlackNs : 0;
  if (watermark < b.watermark + kWatermarkStepNs) return;
  b.watermark = watermark;
  lt_op_span_event e{};
  e.hdr = user_header(LT_EV_OP_SPAN, sizeof e, pid, watermark);
  e.end_ns = watermark;
  e.op = UINT32_MAX;
  e.flags = LT_OP_SPAN_WATERMARK;
  ctx_.emit(&e, sizeof e);
}

std::vector<pid_t> OpObserver::take_compiled() {
  std::vector<pid_t> out;
  for (auto& [pid, b] : buffers_)
    if (b->compiled && !b->compiled_said && b->probes_from == UINT64_MAX) {
      b->compiled_said = true;
      out.push_back(pid);
    }
  return out;
}

void OpObserver::take_over_from_probes(pid_t pid, std::uint64_t ns) {
  if (auto it = buffers_.find(pid); it != buffers_.end()) it->second->probes_until = ns;
}

void OpObserver::drain() {
  const std::uint64_t until = ctx_.ring_read_at();
  for (auto& [pid, b] : buffers_) drain(pid, *b, until);
  // Handed over to the probes: closed once every earlier call is in (or
  // after a bound: a call open that long is cut).
  const std::uint64_t now = monotonic_ns();
  for (auto it = buffers_.begin(); it != buffers_.end();) {
    Buffer& b = *it->second;
    if (b.probes_from == UINT64_MAX || (!b.drained_to_handover && now < b.close_by)) {
      ++it;
      continue;
    }
    close(it->first, b);
    it = buffers_.erase(it);
  }
}

void OpObserver::hand_over_to_probes(pid_t pid, std::uint64_t ns) {
  if (auto it = buffers_.find(pid); it != buffers_.end()) {
    it->second->probes_from = ns;
    it->second->close_by = ns + kWaitNs;
  }
}

bool OpObserver::needs_polling(const std::function<bool(pid_t)>& sampled) const {
  if (!pending_.empty()) return true;
  for (const auto& [pid, b] : buffers_) {
    if (b->probes_from != UINT64_MAX || !sampled(pid)) return true;
    for (std::uint32_t i = 0; i < LT_OBS_SLOTS; ++i) {
      const lt_obs_slot& s = *b->slot(i);
      if (load_acquire(s.head) != s.tail) return true;  // a call still open ends on a thread that runs: sampled
    }
  }
  return false;
}

bool OpObserver::active(pid_t pid) const {
  const auto it = buffers_.find(pid);
  return it != buffers_.end() && it->second->probes_from == UINT64_MAX;
}

void OpObserver::close(pid_t pid, Buffer& b) {
  drain(pid, b, UINT64_MAX);  // the end: the ring was read out before
  if (b.damaged)
    ctx_.note("pid " + std::to_string(pid) + ": op observer: " + std::to_string(b.damaged) +
              " call(s) with impossible times skipped");
  emit_state(pid, LT_OP_TIMES_OBSERVER, true, b.dropped() - b.dropped_base, b.too_deep() - b.too_deep_base, "");
  store_release(b.hdr->reader_pid, 0u);
  source_.lower_observer_semaphore(pid);
}

void OpObserver::forget(pid_t pid) {
  abandon(pid);
  auto it = buffers_.find(pid);
  if (it == buffers_.end()) return;
  close(pid, *it->second);
  buffers_.erase(it);
}

void OpObserver::finish() {
  // Handshakes not ended at the detach: said, and in the trace.
  while (!pending_.empty()) {
    const pid_t pid = pending_.begin()->first;
    abandon(pid);
    const std::string why = "its handshake had not ended at the detach";
    ctx_.note("pid " + std::to_string(pid) + ": op observer not used (" + why +
              "): its ops are missing, unless the op probes recorded them (run, --all)");
    emit_state(pid, LT_OP_TIMES_SAMPLED, true, 0, 0, why);
  }
  for (auto& [pid, b] : buffers_) close(pid, *b);
  buffers_.clear();
}

}  // namespace lt
