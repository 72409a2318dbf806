// The tracer's side of the op observer (torchbridge/op_observer.cpp;
// docs/design-op-observer.md): puts the bridge into a running job (ptrace,
// as for the GPU), raises its ltrace:ops semaphore, hands it the callback
// layout of the job's torch (user/torch/observer_layouts.h), and reads the
// op calls it measures out of the memory they share, as OP_SPAN records.
// OpTracer chooses it per process and falls back to the op probes when it
// cannot be had.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bpf/opobserver_shm.h"
#include "user/collector/tracer.h"

namespace lt {

class OpProbeSource;
class OpProbes;

class OpObserver {
 public:
  OpObserver(const TracerContext& ctx, OpProbeSource& source, OpProbes& probes);
  ~OpObserver();
  OpObserver(const OpObserver&) = delete;
  OpObserver& operator=(const OpObserver&) = delete;

  // Starts the observer in pid (libtorch loaded and initialised): the
  // bridge in, its semaphore up.  "" when the handshake is under way (see
  // settle()), else one line of why not (nothing is left raised then).
  std::string start(pid_t pid);
  // The handshakes under way, a step each, never waiting: those that ended,
  // with "" (it records) or why not (nothing left raised).
  std::vector<std::pair<pid_t, std::string>> settle();
  bool pending(pid_t pid) const { return pending_.count(pid) != 0; }
  // Whether the drain loop must look again at its next regular turn (~20
  // ms) rather than sleep until a ring record: a handshake under way, a
  // buffer handed over and not yet closed, calls written and not yet read, or a process recording whose thread running
  // ops would not wake the loop (`sampled(pid)` false: no stack samples come from it).
  bool needs_polling(const std::function<bool(pid_t)>& sampled) const;
  // Recording pid's calls (its handshake done, not handed over).
  bool active(pid_t pid) const;
  // pid's op probes stopped recording at `ns` (the observer began while
  // they ran, for a process adopted before its torch loaded): its calls
  // that began before are the probes', sent hidden.
  void take_over_from_probes(pid_t pid, std::uint64_t ns);
  // The op probes record pid's calls that begin from `ns` on: the observer
  // sends those hidden, and closes once every call that began before is
  // read (its final OP_OBSERVER record, its semaphore down).
  void hand_over_to_probes(pid_t pid, std::uint64_t ns);
  // The processes whose calls showed a compiled region (torch.compile)
  // since the last time asked, each once.
  std::vector<pid_t> take_compiled();
  // Reads the calls every observer wrote that ended before the last read
  // of the ring began (the actions around them are in the stream first):
  // OP_SPAN records, each op's OP_NAME ahead of its first.
  void drain();
  // pid exited or exec'd: its last spans, its final OP_OBSERVER record.
  void forget(pid_t pid);
  // The detach: the last read, the final records, every semaphore down.
  void finish();

 private:
  struct Buffer;
  struct Pending;
  std::string advance(pid_t pid, Pending& p, bool& done);
  static void start_phase(pid_t pid, Pending& p, std::uint64_t now);
  static bool past_deadline(pid_t pid, Pending& p, std::uint64_t now);
  void abandon(pid_t pid);  // a handshake given up: semaphore down, buffer let go
  void emit_state(pid_t pid, std::uint32_t how, bool final, std::uint64_t dropped, std::uint64_t too_deep,
                  const std::string& detail);
  void drain(pid_t pid, Buffer& b, std::uint64_t until);
  void close(pid_t pid, Buffer& b);
  std::uint32_t op_of(Buffer& b, std::uint32_t name, bool shaped);

  const TracerContext& ctx_;
  OpProbeSource& source_;
  OpProbes& probes_;
  std::string bridge_path_;
  std::map<pid_t, std::unique_ptr<Buffer>> buffers_;
  std::map<pid_t, std::unique_ptr<Pending>> pending_;
};

}  // namespace lt
