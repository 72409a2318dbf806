#include "user/collector/session.h"

#include <bpf/libbpf.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "user/cluster/clock_exchange.h"
#include "user/collector/gpu_tracer.h"
#include "user/collector/op_tracer.h"
#include "user/collector/stats_sampler.h"
#include "user/core/errors.h"
#include "user/proc/census.h"
#include "user/proc/container.h"
#include "user/proc/native_symbols.h"
#include "user/proc/procfs.h"
#include "user/proc/rank_env.h"
#include "user/python/symbolizer.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/gpu.h"
#include "user/sources/loss_records.h"
#include "user/sources/opprobe.h"
#include "user/sources/proctrack.h"
#include "user/sources/pyactions.h"
#include "user/sources/pysample.h"

namespace lt {

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

namespace {

lt_event_header user_header(lt_event_kind kind, std::uint16_t size, pid_t pid) {
  lt_event_header h{};
  h.kind = static_cast<std::uint16_t>(kind);
  h.size = size;
  h.pid = static_cast<std::uint32_t>(pid);
  h.tid = static_cast<std::uint32_t>(pid);
  h.ts_ns = monotonic_ns();
  return h;
}

// The drain loop must run when the ring buffer fills, even when the targets
// keep every CPU busy: at nice 0 beside 50 busy forked children it waited so
// long between drains that 290,776 of 400,000 action records were dropped;
// at nice -10, none (issue 20, point 8, measured on 2 loaded cores).  It
// costs the targets only the CPU we need to keep up with what they produce.
// Linux applies it to this thread only; without CAP_SYS_NICE it fails and we
// keep the default.
void raise_drain_priority() {
  constexpr int kDrainNice = -10;
  errno = 0;
  int now = getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && now > kDrainNice) setpriority(PRIO_PROCESS, 0, kDrainNice);
}

std::string to_hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

Session::Session(SessionOptions opts) : opts_(std::move(opts)) {}
Session::~Session() = default;

void Session::prepare() {
  for (pid_t pid : opts_.pids) {
    if (!proc::exists(pid)) throw Error(ExitCode::no_such_process, "no such process: " + std::to_string(pid));
    try {
      prepared_[pid] = python::discover(pid);
    } catch (const Error& e) {
      // A launcher (shell, torchrun wrapper) is fine when we follow children.
      if (!(opts_.children && e.code() == ExitCode::not_python)) throw;
      notes_.push_back(std::string("pid ") + std::to_string(pid) + ": " + e.what() + "; following its children");
    }
  }
}

void Session::emit_proc_info(pid_t pid, const python::Interpreter* interp, std::uint32_t flags, std::uint64_t ts) {
  lt_proc_info_event e{};
  e.hdr = user_header(LT_EV_PROC_INFO, sizeof e, pid);
  if (ts) e.hdr.ts_ns = ts;
  e.ppid = static_cast<std::uint32_t>(proc::read_ppid(pid));
  // One environ read for both records: rank labels with the launchers'
  // fallbacks (Slurm, Open MPI) here, the job identity in PROC_ENV.
  const proc::RankEnv renv = proc::parse_rank_env(proc::read_environ(pid));
  e.rank = renv.rank;
  e.local_rank = renv.local_rank;
  e.world_size = renv.world_size;
  if (interp) {
    e.py_major = static_cast<std::uint16_t>(interp->major);
    e.py_minor = static_cast<std::uint16_t>(interp->minor);
  }
  e.flags = flags;
  std::strncpy(e.comm, proc::read_comm(pid).c_str(), sizeof e.comm - 1);
  std::string cmd;
  for (auto& a : proc::read_cmdline(pid)) cmd += (cmd.empty() ? "" : " ") + a;
  std::strncpy(e.cmdline, cmd.c_str(), sizeof e.cmdline - 1);
  std::strncpy(e.torch_version, proc::torch_version(pid).c_str(), sizeof e.torch_version - 1);
  emit(e);
  // The container it runs in, if any (reports name it).
  if (auto c = proc::container_of(pid)) {
    c->hdr.ts_ns = e.hdr.ts_ns;
    emit(*c);
  }
  // Right after its PROC_INFO, at the same time, only for a process that is
  // part of a distributed job.
  if (renv.any()) {
    lt_proc_env_event pe = proc::to_event(pid, renv, proc::process_hostname(pid));
    pe.hdr.ts_ns = e.hdr.ts_ns;
    emit(pe);
  }
}

// Starts tracing one process: interpreter config into BPF, uprobe on its
// binary, and its identity into the trace.
void Session::adopt(pid_t pid, bool must_be_python) {
  try {
    adopt_or_throw(pid);
  } catch (const Error& e) {
    // An explicit --pid must work; a process met on the way (a child, an
    // exec) that cannot be traced is noted, and the session goes on.
    if (must_be_python || e.code() == ExitCode::usage) throw;
    // A launcher in between (shell, torchrun wrapper, `ltrace-bpf run`'s
    // child before its exec): its descendants and its own exec are ours.
    if (opts_.children && proc::exists(pid)) proctrack_->follow(pid, LT_TARGET_FOLLOW_CHILDREN);
    emit_proc_info(pid, nullptr, e.code() == ExitCode::unsupported ? LT_PROC_UNSUPPORTED : LT_PROC_NOT_PYTHON);
    if (e.code() != ExitCode::not_python) notes_.push_back("pid " + std::to_string(pid) + ": " + e.what());
  }
}

// --all: adopts each process that became eligible since the last poll and
// is not ours already (a child of a followed process comes with its fork
// event).  One that cannot be profiled is a note, and leaves no trace.
void Session::adopt_eligible() {
  for (pid_t pid : watcher_->poll()) {
    if (auto it = alive_.find(pid); it != alive_.end() && it->second) continue;
    ++stats_.found;
    std::string why;
    ExitCode code = ExitCode::not_python;
    if (proc::root_deleted(pid)) {
      why = "its root directory was deleted, its files cannot be read";
      code = ExitCode::io;
    } else {
      try {
        adopt_or_throw(pid);
        continue;
      } catch (const Error& e) {
        if (e.code() == ExitCode::usage) throw;
        alive_.erase(pid);
        live_.erase(pid);
        if (e.code() == ExitCode::no_such_process || !proc::exists(pid)) {
          --stats_.found;  // gone before we got to it
          continue;
        }
        why = e.what();
        code = e.code();
      }
    }
    if (!stats_.first_refusal) stats_.first_refusal = static_cast<int>(code);
    notes_.push_back("pid " + std::to_string(pid) + " (" + proc::printable(proc::read_comm(pid)) +
                     "): not profiled: " + proc::printable(why));
  }
}

void Session::adopt_or_throw(pid_t pid) {
  alive_[pid] = true;
  auto pre = prepared_.find(pid);
  python::Interpreter interp = pre != prepared_.end() ? pre->second : python::discover(pid);
  // Without --children the probes are scoped to the target process, so
  // other processes using the same interpreter pay nothing.
  pyactions_->attach(interp, opts_.children ? -1 : pid);
  if (opts_.verbose) {
    std::string sites;
    for (auto& s : interp.sites)
      sites += " " + s.function + "@file+0x" + to_hex(s.file_offset) +
               (s.cheap_entry ? "" : " (single-stepped entry: ~10 us per hit)");
    std::fprintf(stderr, "ltrace-bpf: pid %d: CPython %s (%s), probes:%s\n", pid, interp.version_string().c_str(),
                 interp.binary.c_str(), sites.c_str());
  }
  bool has_fetch = false;
  for (auto& s : interp.sites) has_fetch |= s.function == "builtin_next";
  if (!has_fetch)
    notes_.push_back("pid " + std::to_string(pid) + ": builtins.next not found in " + interp.binary +
                     "; *_next dataloader actions will be missing");
  if (sampling()) {
    try {
      tsd_[pid] = python::find_tsd_lookup(interp);
    } catch (const Error& e) {
      notes_.push_back(std::string(e.what()) + "; its stacks are missing from the report");
    }
  }
  lt_target t = target_for(interp);
  proctrack_->set_target(pid, t);
  refresh_thread_states(pid);
  // Follow only once the target is in place: a child forked from now on
  // inherits it in BPF.
  if (opts_.children) proctrack_->follow(pid, LT_TARGET_FOLLOW_CHILDREN);
  live_[pid] = interp;
  ++stats_.traced;
  emit_proc_info(pid, &interp, LT_PROC_PYTHON);
  if (optracer_) attach_ops(pid, std::find(opts_.pids.begin(), opts_.pids.end(), pid) != opts_.pids.end());
  if (gputracer_) attach_gpu(pid);
}

// GPU data for one target; a process that has not loaded CUDA yet is polled.
void Session::attach_gpu(pid_t pid) {
  if (gputracer_->attach(pid)) {
    gpu_pending_.erase(pid);
    if (opts_.verbose) std::fprintf(stderr, "ltrace-bpf: pid %d: GPU: %s\n", pid, gputracer_->describe(pid).c_str());
  } else {
    gpu_pending_.emplace(pid, 0);
  }
}

// Detach from the bridges in order: their session probe first, so each
// flushes CUPTI and releases it while the data probes still carry what it
// flushes; we drain until every active bridge said DORMANT (at most ~1.5 s).
void Session::release_gpu(ring_buffer* rb) {
  if (!gpusrc_) return;
  gpusrc_->release_sessions();
  const auto until = monotonic_ns() + 1'500'000'000ull;
  while (monotonic_ns() < until) {
    bool waiting = false;
    for (auto& [pid, active] : bridge_active_) waiting |= active && proc::exists(pid);
    if (!waiting) break;
    struct timespec nap = {0, 20'000'000};
    nanosleep(&nap, nullptr);
    if (ring_buffer__consume(rb) < 0 || callback_error_) break;
  }
  for (auto& [pid, active] : bridge_active_)
    if (active && proc::exists(pid))
      notes_.push_back("pid " + std::to_string(pid) + ": GPU: the bridge did not confirm its last flush in time; " +
                       "the last GPU records of the window may be missing");
}

// Op probes for one target.  A process that has not imported torch yet is
// polled until it does (ops before that cannot exist).
void Session::attach_ops(pid_t pid, bool explicit_target) {
  try {
    // Shapes on before the probes, so that no call goes without them.
    if (opts_.shapes && !tensor_vtables_[pid]) {
      tensor_vtables_[pid] = optracer_->tensor_vtable(pid);
      if (tensor_vtables_[pid])
        if (auto it = live_.find(pid); it != live_.end()) proctrack_->set_target(pid, target_for(it->second));
    }
    if (optracer_->attach(pid, opts_.children ? -1 : pid)) {
      ops_pending_.erase(pid);
      if (opts_.verbose) std::fprintf(stderr, "ltrace-bpf: pid %d: %s\n", pid, optracer_->describe().c_str());
      if (opts_.shapes && !tensor_vtables_[pid])
        notes_.push_back("pid " + std::to_string(pid) +
                         ": c10::TensorImpl's vtable not found in libc10.so; input shapes show as []");
    } else {
      ops_pending_.emplace(pid, 0);
    }
  } catch (const Error& e) {
    ops_pending_.erase(pid);
    if (explicit_target || e.code() == ExitCode::usage) throw;
    notes_.push_back("pid " + std::to_string(pid) + ": " + e.what() + "; its ops are missing from the report");
  }
}

lt_target Session::target_for(const python::Interpreter& interp) {
  lt_target t{};
  t.off = interp.layout.bpf;
  t.flags = (opts_.children ? LT_TARGET_FOLLOW_CHILDREN : 0) | (interp.gen_via_eval() ? LT_TARGET_GEN_VIA_EVAL : 0);
  t.gen_type = interp.gen_type_addr;
  t.generation = generation_++;
  if (auto it = tsd_.find(interp.pid); it != tsd_.end()) {
    if (it->second.by_map) {
      t.flags |= LT_TARGET_TSTATE_MAP;
    } else {
      t.tss_key = it->second.key;
      t.tsd_block = it->second.block;
      t.tsd_levels = it->second.levels;
    }
    t.flags |= (opts_.sample_rate_hz ? LT_TARGET_SAMPLE : 0) | (opts_.off_cpu ? LT_TARGET_OFF_CPU : 0);
  }
  // Op times come from samples, which need no Python stack (tsd_block 0
  // tells BPF to skip the walk).
  if (opts_.ops) t.flags |= LT_TARGET_OPS | (opts_.sample_rate_hz ? LT_TARGET_SAMPLE : 0);
  if (opts_.gpu) t.flags |= LT_TARGET_GPU;
  if (opts_.launch_stacks && (t.tsd_block || (t.flags & LT_TARGET_TSTATE_MAP))) t.flags |= LT_TARGET_LAUNCH_STACKS;
  if (auto v = tensor_vtables_.find(interp.pid); v != tensor_vtables_.end() && v->second) {
    t.tensor_vtable = v->second;
    t.flags |= LT_TARGET_SHAPES;
  }
  return t;
}

template <typename F>
void Session::write_file(F&& f) {
  if (!writer_) return;
  try {
    f(*writer_);
  } catch (const Error& e) {
    if (!opts_.sink) throw;  // record: the file is all there is
    // The live report is still whole: keep it, drop the file.
    stats_.file_error = e.what();
    stats_.file_error_code = static_cast<int>(e.code());
    stats_.file_bytes = writer_->bytes_written();
    std::fprintf(stderr,
                 "ltrace-bpf: %s; stopped writing it after %llu bytes (the whole chunks in it are readable); "
                 "the live report goes on\n",
                 e.what(), static_cast<unsigned long long>(writer_->bytes_written()));
    writer_->abandon();
    writer_.reset();
  }
}

void Session::emit(const void* record, std::size_t size) {
  ++stats_.records;
  if (opts_.keep_in_memory) trace_.append(record, size);
  write_file([&](tracefile::TraceWriter& w) { w.append(record, size); });
  if (opts_.sink) {
    lt_event_header h;
    std::memcpy(&h, record, sizeof h);
    opts_.sink(h, static_cast<const std::byte*>(record));
  }
}

void Session::emit_host_info() {
  lt_host_info_event e{};
  e.hdr = user_header(LT_EV_HOST_INFO, sizeof e, 0);
  timespec mono{}, real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  e.monotonic_ns = static_cast<std::uint64_t>(mono.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(mono.tv_nsec);
  e.realtime_ns = static_cast<std::uint64_t>(real.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(real.tv_nsec);
  gethostname(e.hostname, sizeof e.hostname - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  std::strncpy(e.host_id, id.c_str(), sizeof e.host_id - 1);
  utsname u{};
  if (uname(&u) == 0) {
    std::string release = std::string(u.release).substr(0, sizeof e.kernel - 1);  // fits with its NUL
    std::memcpy(e.kernel, release.c_str(), release.size() + 1);
  }
  std::strncpy(e.tool, "ltrace-bpf 0.1.0", sizeof e.tool - 1);
  emit(e);
}

void Session::emit_clock_sync(std::uint32_t phase) {
  if (opts_.clock_host.empty()) return;
  const auto m = cluster::measure_clock(opts_.clock_host, opts_.clock_port);
  if (!m.ok) {
    // The trace stays usable: the merge falls back to the collectives.
    stats_.clock_errors.push_back(m.error);
    notes_.push_back("clock exchange " + std::string(phase ? "at detach" : "at attach") + ": " + m.error);
    return;
  }
  lt_clock_sync_event e{};
  e.hdr = user_header(LT_EV_CLOCK_SYNC, sizeof e, 0);
  e.offset_ns = m.offset_ns;
  e.delay_ns = static_cast<std::uint64_t>(m.delay_ns);
  e.samples = m.samples;
  e.phase = phase;
  std::strncpy(e.reference, m.reference.c_str(), sizeof e.reference - 1);
  emit(e);
  stats_.clock_syncs.push_back(e);
}

void Session::on_record(const lt_event_header& h, const void* data, std::size_t size) {
  if (h.size != size) return;  // never trust a record whose size disagrees
  switch (h.kind) {
    case LT_EV_PROC_FORK: {
      lt_proc_event p;
      std::memcpy(&p, data, sizeof p);
      emit(data, size);
      pid_t child = static_cast<pid_t>(p.child_pid);
      alive_[child] = true;
      // BPF already copied the parent's layout to the child (same image).
      if (auto parent = live_.find(static_cast<pid_t>(p.parent_pid)); parent != live_.end()) {
        auto interp = parent->second;
        interp.pid = child;
        live_[child] = interp;
        forked_from_[child] = parent->first;
        ++stats_.traced;
        // Same memory image, so BPF starts with the parent's thread-state
        // key; CPython re-creates the key in the child after fork, so it is
        // proven again there (check_forked_tsd) before we rely on it.
        if (auto tsd = tsd_.find(parent->first); tsd != tsd_.end()) {
          tsd_[child] = tsd->second;
          unproven_tsd_[child] = 0;
        }
        // BPF copied the parent's entry at fork; this covers a fork that
        // raced with the parent's own adoption.
        proctrack_->set_target(child, target_for(interp));
        emit_proc_info(child, &interp, LT_PROC_PYTHON, h.ts_ns);
      }
      return;
    }
    case LT_EV_PROC_EXEC: {
      lt_proc_event p;
      std::memcpy(&p, data, sizeof p);
      emit(data, size);
      live_.erase(static_cast<pid_t>(p.child_pid));
      tsd_.erase(static_cast<pid_t>(p.child_pid));
      forked_from_.erase(static_cast<pid_t>(p.child_pid));  // a new image: nothing shared any more
      if (symbolizer_) symbolizer_->forget(static_cast<pid_t>(p.child_pid));
      if (natives_) natives_->forget(static_cast<pid_t>(p.child_pid));
      pending_exec_.push_back(static_cast<pid_t>(p.child_pid));
      return;
    }
    case LT_EV_PROC_EXIT: {
      lt_proc_event p;
      std::memcpy(&p, data, sizeof p);
      emit(data, size);
      const auto pid = static_cast<pid_t>(p.child_pid);
      alive_[pid] = false;
      unproven_tsd_.erase(pid);
      // Every sample of it came before its exit: its symbol caches can go.
      if (symbolizer_) symbolizer_->forget(pid);
      if (natives_) natives_->forget(pid);
      return;
    }
    case LT_EV_PY_SAMPLE:
    case LT_EV_GPU_LAUNCH_STACK:
    case LT_EV_OFFCPU_BEGIN: {
      // Names and lines go in ahead of the sample, read while the code
      // objects are still alive.
      if (size != sizeof(lt_py_sample_event)) return;
      lt_py_sample_event e;
      std::memcpy(&e, data, sizeof e);
      // BPF reuses one buffer per CPU: slots past nframes hold an earlier
      // sample's frames.  Zero them (deterministic files, better zstd).
      const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
      std::memset(static_cast<void*>(e.frames + n), 0, sizeof(lt_py_frame) * (LT_STACK_MAX - n));
      const unsigned nops = std::min<unsigned>(e.nops, LT_OPS_DEPTH);
      std::memset(static_cast<void*>(e.ops + nops), 0, sizeof(std::uint32_t) * (LT_OPS_DEPTH - nops));
      if (optracer_)
        for (unsigned i = 0; i < nops; ++i) optracer_->announce(e.ops[i]);
      auto it = live_.find(static_cast<pid_t>(h.pid));
      if (symbolizer_ && it != live_.end()) {
        symbolizer_->describe(e, it->second, ancestors(it->first));
        natives_->describe(static_cast<pid_t>(h.pid), e.user_ip, it->second.binary, h.ts_ns);
      }
      emit(e);
      return;
    }
    case LT_EV_GPU_LAUNCH: {
      if (size != sizeof(lt_gpu_launch_event)) return;
      lt_gpu_launch_event e;
      std::memcpy(&e, data, sizeof e);
      const unsigned nops = std::min<unsigned>(e.nops, LT_OPS_DEPTH);
      std::memset(static_cast<void*>(e.ops + nops), 0, sizeof(std::uint32_t) * (LT_OPS_DEPTH - nops));
      if (optracer_)
        for (unsigned i = 0; i < nops; ++i) optracer_->announce(e.ops[i]);
      emit(e);
      return;
    }
    case LT_EV_GPU_STATUS: {
      if (size != sizeof(lt_gpu_status_event)) return;
      lt_gpu_status_event e;
      std::memcpy(&e, data, sizeof e);
      emit(e);
      const auto pid = static_cast<pid_t>(h.pid);
      if (e.s.state == LT_BRIDGE_ACTIVE) bridge_active_[pid] = true;
      if (e.s.state == LT_BRIDGE_DORMANT || e.s.state == LT_BRIDGE_CUPTI_BUSY || e.s.state == LT_BRIDGE_NO_CUPTI ||
          e.s.state == LT_BRIDGE_CUPTI_ERROR)
        bridge_active_[pid] = false;
      if (opts_.verbose || e.s.state == LT_BRIDGE_CUPTI_BUSY || e.s.state == LT_BRIDGE_DROPPED)
        std::fprintf(stderr, "ltrace-bpf: pid %d: GPU bridge: %s\n", pid,
                     std::string(e.s.detail, strnlen(e.s.detail, sizeof e.s.detail)).c_str());
      if (gputracer_) gputracer_->on_status(pid, e.s);
      return;
    }
    case LT_EV_OP: {
      lt_op_event e;
      std::memcpy(&e, data, sizeof e);
      if (optracer_) optracer_->announce(e.op);
      emit(data, size);
      return;
    }
    case LT_EV_OP_SHAPES: {
      if (size != sizeof(lt_op_shapes_event)) return;
      lt_op_shapes_event e;
      std::memcpy(&e, data, sizeof e);
      // BPF fills only the registers that held a tensor: zero the rest
      // (deterministic files).
      for (unsigned i = 0; i < LT_SHAPE_REGS; ++i)
        if (!(e.tensors & (1u << i))) std::memset(e.impl[i], 0, sizeof e.impl[i]);
      if (optracer_) optracer_->announce(e.op);
      emit(e);
      return;
    }
    default:
      emit(data, size);
  }
}

// Targets whose thread states BPF takes from lt_tstates: the interpreter's
// thread list, read again (a thread started since is sampled from the next
// refresh on; until then its samples count as having no thread state).
void Session::refresh_thread_states(pid_t only) {
  for (auto& [pid, tsd] : tsd_) {
    if (!tsd.by_map || (only && pid != only)) continue;
    auto interp = live_.find(pid);
    if (interp == live_.end() || !alive_[pid]) continue;
    proctrack_->set_thread_states(pid, python::thread_states_by_tid(interp->second));
  }
}

void Session::check_forked_tsd() {
  for (auto it = unproven_tsd_.begin(); it != unproven_tsd_.end();) {
    const pid_t pid = it->first;
    auto interp = live_.find(pid);
    if (interp == live_.end()) {
      it = unproven_tsd_.erase(it);
      continue;
    }
    try {
      auto proven = python::find_tsd_lookup(interp->second);
      const bool changed = proven.key != tsd_[pid].key || proven.by_map != tsd_[pid].by_map;
      tsd_[pid] = proven;
      if (changed) proctrack_->set_target(pid, target_for(interp->second));
      it = unproven_tsd_.erase(it);
    } catch (const Error& e) {
      // The child may still be re-initialising its interpreter: a few more
      // tries, then stop sampling it rather than read with a wrong key.
      if (++it->second < 25) {
        ++it;
        continue;
      }
      tsd_.erase(pid);
      proctrack_->set_target(pid, target_for(interp->second));
      notes_.push_back(std::string(e.what()) + " (after fork); its stacks are missing from the report");
      it = unproven_tsd_.erase(it);
    }
  }
}

std::vector<pid_t> Session::ancestors(pid_t pid) const {
  std::vector<pid_t> out;
  for (auto it = forked_from_.find(pid); it != forked_from_.end() && out.size() < 8; it = forked_from_.find(it->second))
    out.push_back(it->second);
  return out;
}

Trace Session::run(const std::atomic<bool>& stop) {
  auto t0 = monotonic_ns();
  check_bpf_privileges();
  libbpf_set_print([](libbpf_print_level level, const char* fmt, va_list args) -> int {
    return level == LIBBPF_WARN && std::getenv("LTRACE_BPF_DEBUG") ? vfprintf(stderr, fmt, args) : 0;
  });
  if (!opts_.output_path.empty()) writer_ = std::make_unique<tracefile::TraceWriter>(opts_.output_path);
  emit_host_info();
  emit_clock_sync(0);
  proctrack_ = std::make_unique<ProcTrackSource>();
  pyactions_ = std::make_unique<PyActionsSource>(*proctrack_);
  if (opts_.ops) {
    opprobe_ = std::make_unique<OpProbeSource>(*proctrack_);
    optracer_ =
        std::make_unique<OpTracer>(*opprobe_, opts_.op_filters, [this](const void* r, std::size_t n) { emit(r, n); });
  }
  if (opts_.gpu) {
    GpuTracerOptions go{opts_.inject, find_bridge_library(), opts_.verbose};
    gputracer_ = std::make_unique<GpuTracer>(
        [this]() -> GpuSource& {
          if (!gpusrc_)
            gpusrc_ = std::make_unique<GpuSource>(*proctrack_, opprobe_ ? opprobe_->stacks_fd() : -1,
                                                  opts_.launch_stack_interval_ns);
          return *gpusrc_;
        },
        go, [this](const std::string& n) { notes_.push_back(n); });
    if (!opts_.preloaded_bridge.empty()) gputracer_->expect_bridge(opts_.preloaded_bridge);
  }
  if (sampling()) {
    pysample_ = std::make_unique<PySampleSource>(*proctrack_, opts_.sample_rate_hz, opts_.off_cpu,
                                                 opprobe_ ? opprobe_->stacks_fd() : -1);
    symbolizer_ = std::make_unique<python::Symbolizer>([this](const void* r, std::size_t n) { emit(r, n); });
    natives_ = std::make_unique<proc::NativeSymbols>([this](const void* r, std::size_t n) { emit(r, n); });
    lt_sampler_info_event si{};
    si.hdr = user_header(LT_EV_SAMPLER_INFO, sizeof si, 0);
    si.period_ns = pysample_->period_ns();
    si.rate_hz = opts_.sample_rate_hz;
    si.flags = (opts_.sample_rate_hz ? LT_SAMPLER_ON_CPU : 0) | (opts_.off_cpu ? LT_SAMPLER_OFF_CPU : 0);
    emit(si);
  }

  for (pid_t pid : opts_.pids) {
    adopt(pid, !opts_.children);
    if (opts_.children)
      for (pid_t c : proc::descendants(pid)) adopt(c, false);
  }
  if (opts_.all) {
    watcher_ = std::make_unique<proc::EligibleWatcher>();
    adopt_eligible();
    if (opts_.verbose && live_.empty())
      std::fprintf(stderr, "ltrace-bpf: --all: no process with torch or Lightning loaded yet; waiting for one\n");
  }
  if (opts_.device_stats) {
    std::vector<pid_t> pids;
    for (auto& [pid, interp] : live_) pids.push_back(pid);
    stats_sampler_ =
        std::make_unique<StatsSampler>(pids, std::chrono::milliseconds(100),
                                       [this](const lt_event_header& h, const std::byte* r) { emit(r, h.size); });
    if (!stats_sampler_->gpu_note().empty()) notes_.push_back("device stats: " + stats_sampler_->gpu_note());
  }
  lt_window_event w{};
  w.hdr = user_header(LT_EV_WINDOW, sizeof w, 0);
  w.begin = 1;
  emit(w);
  stats_.attach_latency_ms = (w.hdr.ts_ns - t0) / 1e6;
  if (opts_.on_attached) opts_.on_attached();
  stats_.probes = pyactions_->probes() + (optracer_ ? optracer_->probes() : 0);
  if (opts_.verbose)
    std::fprintf(stderr, "ltrace-bpf: attached: %zu process(es), %zu uprobe(s), %.1f ms%s\n", live_.size(),
                 stats_.probes, stats_.attach_latency_ms,
                 optracer_ ? (" (op probes: " + std::to_string(optracer_->probes()) + " in " +
                              std::to_string(static_cast<int>(optracer_->attach_ms())) + " ms)")
                                 .c_str()
                           : "");

  auto sample = [](void* ctx, void* data, size_t size) -> int {
    auto* self = static_cast<Session*>(ctx);
    if (size < sizeof(lt_event_header)) return 0;
    lt_event_header h;
    std::memcpy(&h, data, sizeof h);
    // No exception may unwind through libbpf's C frames: keep it, stop
    // consuming, and raise it once the session is closed cleanly.
    try {
      self->on_record(h, data, size);
    } catch (...) {
      if (!self->callback_error_) self->callback_error_ = std::current_exception();
      return -1;
    }
    return 0;
  };
  std::unique_ptr<ring_buffer, decltype(&ring_buffer__free)> ring(
      ring_buffer__new(proctrack_->events_fd(), sample, this, nullptr), &ring_buffer__free);
  ring_buffer* rb = ring.get();
  if (!rb) throw bpf_error("open the ring buffer", errno);

  const auto deadline = opts_.duration_s > 0 ? t0 + static_cast<std::uint64_t>(opts_.duration_s * 1e9) : 0;
  auto last_liveness = monotonic_ns();
  auto last_ops_poll = last_liveness;
  auto last_gpu_poll = last_liveness;
  auto last_tstates = last_liveness;
  auto last_watch = last_liveness;
  bool behind = false;
  raise_drain_priority();
  while (!stop.load()) {
    // Producers never wake us (BPF_RB_NO_WAKEUP): a wakeup per event would
    // put our thread on the target's CPU in the middle of its step.  We
    // drain on a timer instead; 8 MiB at ~280 B/event holds ~30,000
    // records, >100 ms of a 250k events/s burst.  A drain that found more
    // than a tenth of that means we are falling behind (a fork storm, a
    // CPU-starved tracer): drain again at once instead of napping.
    struct timespec nap = {0, 20'000'000};
    if (!behind) nanosleep(&nap, nullptr);
    int n = ring_buffer__consume(rb);
    behind = n > 3000;
    if (callback_error_ || (n < 0 && n != -EINTR)) break;
    check_forked_tsd();
    for (pid_t p : pending_exec_) {
      // A followed process became a new program: rediscover it.
      if (proc::exists(p)) adopt(p, false);
    }
    pending_exec_.clear();
    auto now = monotonic_ns();
    if (now - last_tstates > 100'000'000) {
      last_tstates = now;
      refresh_thread_states();
    }
    if (watcher_ && now - last_watch > 500'000'000) {
      last_watch = now;
      adopt_eligible();
    }
    if (!ops_pending_.empty() && now - last_ops_poll > 250'000'000) {
      last_ops_poll = now;
      std::vector<pid_t> waiting;
      for (auto& [pid, tries] : ops_pending_) waiting.push_back(pid);
      for (pid_t p : waiting)
        if (alive_[p] && live_.count(p))
          attach_ops(p, false);
        else
          ops_pending_.erase(p);
    }
    if (!gpu_pending_.empty() && now - last_gpu_poll > 250'000'000) {
      last_gpu_poll = now;
      std::vector<pid_t> waiting;
      for (auto& [pid, tries] : gpu_pending_) waiting.push_back(pid);
      for (pid_t p : waiting)
        if (alive_[p] && live_.count(p))
          attach_gpu(p);
        else
          gpu_pending_.erase(p);
    }
    if (stats_sampler_) {
      std::vector<pid_t> pids;
      for (auto& [pid, interp] : live_)
        if (alive_[pid]) pids.push_back(pid);
      stats_sampler_->set_pids(std::move(pids));
      stats_sampler_->poll();
    }
    write_file([&](tracefile::TraceWriter& w) { w.maybe_flush(now); });  // a killed recorder loses at most ~1 s
    if (deadline && now >= deadline) break;
    if (now - last_liveness > 200'000'000) {
      last_liveness = now;
      bool any = false;
      for (auto& [pid, alive] : alive_) {
        if (alive && !proc::exists(pid)) {
          // Exit seen by polling (e.g. the exit event was dropped).
          lt_proc_event e{};
          e.hdr = user_header(LT_EV_PROC_EXIT, sizeof e, pid);
          e.child_pid = static_cast<std::uint32_t>(pid);
          emit(e);
          alive = false;
        }
        any |= alive;
      }
      // --all waits for processes still to come.
      if (!any && !watcher_) break;
    }
  }
  // Drain everything already produced, then stop producing.
  if (!callback_error_) ring_buffer__consume(rb);
  if (!callback_error_) release_gpu(rb);
  gpusrc_.reset();
  pyactions_.reset();
  pysample_.reset();
  opprobe_.reset();
  if (!callback_error_) ring_buffer__consume(rb);
  ring.reset();
  auto drops = proctrack_->drops();

  lt_window_event end{};
  end.hdr = user_header(LT_EV_WINDOW, sizeof end, 0);
  end.begin = 0;
  emit(end);
  lt_drops_event d{};
  d.hdr = user_header(LT_EV_DROPS, sizeof d, 0);
  d.ringbuf_full = drops.ringbuf_full;
  d.read_faults = drops.read_faults;
  emit(d);
  for (auto& r : loss_records(proctrack_->losses(), drops, d.hdr.ts_ns)) emit(r);
  emit_clock_sync(1);
  proctrack_.reset();
  stats_.processes = alive_.size();
  write_file([&](tracefile::TraceWriter& w) {
    w.close();
    stats_.file_bytes = w.bytes_written();
  });
  if (callback_error_) std::rethrow_exception(callback_error_);
  return std::move(trace_);
}

}  // namespace lt
