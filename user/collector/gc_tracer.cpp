#include "user/collector/gc_tracer.h"

#include <sys/stat.h>

#include "user/collector/session_options.h"
#include "user/collector/target_tracker.h"
#include "user/proc/procfs.h"
#include "user/python/discovery.h"
#include "user/sources/pygc.h"

namespace lt {
namespace {

// Whether BPF can tell a sample taken inside a collection (pystack.bpf.h's
// in_gc): the collector's flag, and the GIL holder to say which thread.
bool gc_flag_known(const python::Layout& l, int minor) {
  const bool flag = minor == 8 ? l.runtime_gc_collecting != 0 : l.interp_gc_collecting != 0;
  const bool gil = minor <= 11 ? l.runtime_gil_tstate != 0 : l.interp_gil_holder && l.interp_gil_locked;
  return flag && gil && l.tstate_interp;
}

}  // namespace

GcTracer::GcTracer(const TracerContext& ctx) : ctx_(ctx), source_(std::make_unique<PyGcSource>(ctx.proctrack)) {}
GcTracer::~GcTracer() = default;

void GcTracer::adopt(const python::Interpreter& interp, pid_t pid_filter) {
  if (!source_) return;
  struct stat st {};
  if (stat(interp.open_path.c_str(), &st) != 0) return;  // gone: the action probes said so
  const auto file = std::make_tuple(static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino));
  const auto key = std::tuple_cat(file, std::make_tuple(pid_filter));
  if (sampled_.count(file)) {
    sampled_at_[interp.pid] = sampled_fields(interp);  // the session's target entry comes next
    return;
  }
  if (without_.count(file) || attached_.count(key) || attached_.count(std::tuple_cat(file, std::make_tuple(pid_t{-1}))))
    return;
  try {
    if (source_->attach(interp.open_path, pid_filter) || source_->attach_callback(interp.open_path, pid_filter)) {
      attached_.insert(key);
      return;
    }
    if (pid_filter > 0 && !proc::exists(pid_filter)) return;  // it exited meanwhile: says nothing of the file
    without_.insert(file);
    const bool sampled = ctx_.opts.sample_rate_hz > 0 && gc_flag_known(interp.layout, interp.minor);
    if (sampled) {
      sampled_.insert(file);
      sampled_at_[interp.pid] = sampled_fields(interp);
    }
    ctx_.note("pid " + std::to_string(interp.pid) + ": " + interp.binary +
              " has no garbage-collection probes (built without --with-dtrace) and no invoke_gc_callback in its "
              "symbol table: its GC pauses are " +
              (sampled ? "estimated from its stack samples (those taken inside a collection)" : "not measured"));
  } catch (const Error& e) {
    if (pid_filter > 0 && !proc::exists(pid_filter)) return;
    without_.insert(file);
    ctx_.note("pid " + std::to_string(interp.pid) + ": " + e.what() + "; its GC pauses are not measured");
  }
}

// Where BPF looks in this process for the collector's flag and the GIL
// holder (lt_target's gc_* fields; the rest of `t` unset).
lt_target GcTracer::sampled_fields(const python::Interpreter& interp) {
  const auto& l = interp.layout;
  lt_target t{};
  t.flags = LT_TARGET_GC_SAMPLED;
  t.tstate_interp = static_cast<u16>(l.tstate_interp);
  if (interp.minor == 8)
    t.gc_collecting_at = interp.runtime_addr + l.runtime_gc_collecting;
  else
    t.interp_gc_collecting = static_cast<u16>(l.interp_gc_collecting);
  if (interp.minor <= 11) {
    t.gil_holder_at = interp.runtime_addr + l.runtime_gil_tstate;
  } else {
    t.interp_gil_holder = static_cast<u16>(l.interp_gil_holder);
    t.interp_gil_locked = static_cast<u16>(l.interp_gil_locked);
  }
  return t;
}

void GcTracer::fill_target(pid_t pid, lt_target& t) const {
  t.flags |= LT_TARGET_GC;
  if (sampled_.empty()) return;
  lt_target g{};
  if (auto it = sampled_at_.find(pid); it != sampled_at_.end()) {
    g = it->second;
  } else {
    // A child forked from a sampled process (--children): its image.
    const auto* interp = ctx_.targets.live(pid);
    struct stat st {};
    if (!interp || stat(interp->open_path.c_str(), &st) != 0 ||
        !sampled_.count({static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino)}))
      return;
    g = sampled_fields(*interp);
  }
  t.flags |= g.flags;
  t.gc_collecting_at = g.gc_collecting_at;
  t.gil_holder_at = g.gil_holder_at;
  t.tstate_interp = g.tstate_interp;
  t.interp_gc_collecting = g.interp_gc_collecting;
  t.interp_gil_holder = g.interp_gil_holder;
  t.interp_gil_locked = g.interp_gil_locked;
}

void GcTracer::forget(pid_t pid) {
  sampled_at_.erase(pid);
}

std::size_t GcTracer::probes() const {
  return source_ ? source_->probes() : 0;
}

void GcTracer::detach() {
  source_.reset();
}

}  // namespace lt
