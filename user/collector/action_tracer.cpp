#include "user/collector/action_tracer.h"

#include <cstring>

#include "user/collector/module_namer.h"
#include "user/collector/session_options.h"
#include "user/collector/target_tracker.h"
#include "user/sources/pyactions.h"

namespace lt {

ActionTracer::ActionTracer(const TracerContext& ctx)
    : ctx_(ctx), source_(std::make_unique<PyActionsSource>(ctx.proctrack, ctx.opts.module_names)) {
  if (ctx.opts.module_names) modules_ = std::make_unique<ModuleNamer>(ctx.emit);
}

ActionTracer::~ActionTracer() = default;

void ActionTracer::adopt(const python::Interpreter& interp, pid_t pid_filter) {
  source_->attach(interp, pid_filter);
}

void ActionTracer::fill_target(pid_t, lt_target& t) const {
  if (modules_) t.flags |= LT_TARGET_MODULES;
}

void ActionTracer::forget(pid_t pid) {
  if (modules_) modules_->forget(pid);
}

void ActionTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  if (h.kind != LT_EV_MODULE_CALL || !modules_) return;
  const auto* interp = ctx_.targets.live(static_cast<pid_t>(h.pid));
  if (!interp) return;
  lt_module_call_event e;
  std::memcpy(static_cast<void*>(&e), record.data(), sizeof e);
  modules_->describe(*interp, e.self, h.ts_ns);
}

void ActionTracer::detach() {
  source_.reset();
}

std::size_t ActionTracer::probes() const {
  return source_ ? source_->probes() : 0;
}

int ActionTracer::wakeup_fd() const {
  return source_->wakeup_fd();
}

}  // namespace lt
