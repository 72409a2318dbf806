// The session's side of the aten ops (--report ops).  A job whose torch is
// running when we attach gets the op observer (op_observer.h): exact op
// times measured in the job, no probes.  A process adopted before its torch
// loaded (run, --all, a held exec) gets the op probes at the load, so that
// no call goes uncounted, and the observer once the load is over and the
// process runs free: from then on its calls are the observer's (each call
// is counted once, by the side that saw it begin).  Otherwise, or when the
// observer cannot be had, the op probes go on each target's libtorch (OpProbes names them),
// with the tensor vtable before them (--group-by-input-shapes) and
// torch.compile's code after them and again as kernel libraries appear,
// and op times are sampled estimates.  Dynamo's records of the compiles
// are read from the targets that run compiled regions.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "user/collector/every.h"
#include "user/collector/op_probes.h"
#include "user/collector/tracer.h"

namespace lt {

class OpProbeSource;
class OpObserver;
class DynamoNotes;

class OpTracer final : public Tracer {
 public:
  explicit OpTracer(const TracerContext& ctx);  // throws lt::Error(bpf|permission)
  ~OpTracer() override;
  std::string_view name() const override { return "ops"; }
  bool library() const override { return true; }
  // Returns false when the process has no libtorch mapped (yet).  Throws
  // lt::Error (usage: --ops matches nothing; bpf: attach failed).
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its ops are missing from the report"; }
  std::string describe(pid_t pid) const override;
  void fill_target(pid_t pid, lt_target& t) const override;
  void forget(pid_t pid) override;
  void observe(const lt_event_header& h, std::span<const std::byte> record) override;
  // While the op observer's handshake is under way (a process adopted
  // after the first attach: it does not stall the drain; its ops are
  // recorded from the handshake's end).
  bool settling(pid_t pid) const override;
  // watch (ops_on_demand): the op observer while escalated, nothing else.
  std::string escalate(pid_t pid, bool on) override;
  bool holds_at_load() const override;
  void tick(std::uint64_t now) override;
  std::uint64_t next_tick_ns(std::uint64_t now) const override;
  void last_look(std::uint64_t now) override;
  void flush(const std::function<bool()>& drain) override;
  void detach() override;
  std::size_t probes() const override { return probes_ ? probes_->probes() : 0; }
  std::string summary() const override;
  int op_stacks_fd() const override;

 private:
  void attach_compiled();
  void read_dynamo(std::uint64_t now);
  void describe_region(const lt_event_header& h, std::span<const std::byte> record);
  pid_t filter(pid_t pid) const;
  // "" when pid's op times may come from the op observer, else why not.
  std::string observer_unwanted(pid_t pid) const;
  bool fork_of_observed(pid_t pid) const;
  void settled(pid_t pid, const std::string& why);
  void settle_now(pid_t pid);  // waits for pid's handshake (the first attach)
  void start_late(std::uint64_t now);
  void back_to_probes(pid_t pid);
  void not_observed(pid_t pid, const std::string& why);
  void late_not_observed(pid_t pid, const std::string& why);
  bool use_probes(pid_t pid, pid_t pid_filter);

  const TracerContext& ctx_;
  std::unique_ptr<OpProbeSource> source_;
  std::unique_ptr<OpProbes> probes_;
  std::unique_ptr<OpObserver> observer_;  // exact op times, where it can be had
  std::unique_ptr<DynamoNotes> dynamo_;   // recompile reasons, graph breaks
  std::set<pid_t> torch_late_;            // libtorch not mapped yet at the first attach
  struct Late {
    std::uint64_t since = 0;  // its probes went in
    pid_t filter = 0;         // theirs
  };
  std::map<pid_t, Late> late_;        // probed at its torch's load: the observer once it runs free
  std::set<pid_t> late_pending_;      // ...its handshake under way, the probes still recording
  std::set<pid_t> on_demand_;         // ops_on_demand: libtorch mapped, the observer when escalated
  std::set<pid_t> off_when_settled_;  // ...escalation over while its handshake was under way
  std::set<pid_t> observer_tried_;
  std::map<pid_t, pid_t> pending_filter_;             // handshakes under way: the probes' pid filter if it fails
  bool ticked_ = false;                               // the drain loop (or the attach's wait) has begun
  std::map<pid_t, OpProbes::Mapped> observed_lib_;    // observed processes' libtorch (--ops, --children)
  std::set<pid_t> attached_;                          // their compiled code is looked for
  std::map<pid_t, std::uint64_t> tensor_vtables_;     // --group-by-input-shapes: how BPF tells a tensor
  std::map<pid_t, std::set<std::uint32_t>> regions_;  // region ops each target ran while attached
  Every compiled_scan_, dynamo_scan_;
};

}  // namespace lt
