// The Lightning actions (and, with --module-names, nn.Module calls): entry
// uprobes on each target's interpreter (user/sources/pyactions.h), put in
// at its adoption. Every session has this tracer; its finalize probe also
// wakes the drain when a target starts to exit.
#pragma once
#include <memory>

#include "user/collector/tracer.h"

namespace lt {

class PyActionsSource;
class ModuleNamer;

class ActionTracer final : public Tracer {
 public:
  explicit ActionTracer(const TracerContext& ctx);  // throws lt::Error(bpf|permission)
  ~ActionTracer() override;
  std::string_view name() const override { return "actions"; }
  void adopt(const python::Interpreter& interp, pid_t pid_filter) override;
  void fill_target(pid_t pid, lt_target& t) const override;
  void forget(pid_t pid) override;
  // The module a MODULE_CALL runs, named (with its whole tree) before it.
  void observe(const lt_event_header& h, std::span<const std::byte> record) override;
  void detach() override;
  std::size_t probes() const override;
  // Readable when a target's interpreter starts to finalize (the holder
  // waits on it).
  int wakeup_fd() const;

 private:
  const TracerContext& ctx_;
  std::unique_ptr<PyActionsSource> source_;
  std::unique_ptr<ModuleNamer> modules_;  // --module-names
};

}  // namespace lt
