// The op probes' catalogue: puts op probes on the libtorch of each target
// and names what they report (OpTracer, op_tracer.h, is the session's side).
// One catalog (at::_ops::*::call -> aten::name) per libtorch file, read once
// and shared by every process mapping it; op indexes are global to the
// session and announced (LT_EV_OP_NAME) before the first record using them.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bpf/events.h"

namespace lt {

class OpProbeSource;

class OpProbes {
 public:
  using Emit = std::function<void(const void*, std::size_t)>;
  // filters: --ops globs ("aten::mm", "aten::add*"); empty: every op.
  OpProbes(OpProbeSource& source, std::vector<std::string> filters, Emit emit);
  // &vtable(c10::TensorImpl) + 16 in pid (from its libc10.so), 0 if not
  // found: how BPF tells a tensor argument (--group-by-input-shapes).
  std::uint64_t tensor_vtable(pid_t pid) const;
  // Probes pid's libtorch (pid_filter -1: every process mapping it).
  // Returns false when the process has no libtorch mapped (yet).  Throws
  // lt::Error (usage: --ops matches nothing; bpf: attach failed).
  bool attach(pid_t pid, pid_t pid_filter);
  // torch.compile's code in pid (docs/design-compile.md): the compiled
  // region entry of its libtorch_python and the kernel of every inductor
  // kernel library it maps now, each file read once.  Called at attach and
  // then periodically: kernel libraries are built and loaded while the job
  // runs.  Returns the kernel libraries newly probed ("cpp_fused_relu_0").
  // Throws lt::Error(bpf) when an attach fails.
  std::vector<std::string> attach_compiled(pid_t pid, pid_t pid_filter);
  // pid's libtorch_cpu and its catalogue (read once per file); nullopt
  // when it has none mapped.  Throws lt::Error(usage) when --ops matches
  // none of its ops (the op observer's path checks --ops with it too).
  struct Mapped {
    std::string lib, open_path;
    std::pair<unsigned long, unsigned long> file;
  };
  std::optional<Mapped> catalogue(pid_t pid);
  // Writes the op's OP_NAME record the first time the op is seen.
  void announce(std::uint32_t op);
  // The op index of a name the op observer reported (one index per name,
  // session-wide), UINT32_MAX when --ops leaves it out.  With input shapes
  // (torch's "[[2, 3], []]"), one index per (name, shapes) pair, announced
  // with an OP_INPUT_SHAPES record after its OP_NAME.
  std::uint32_t index_of(const std::string& name, const std::string& shapes = {});
  std::size_t probes() const { return probes_; }
  double attach_ms() const { return attach_ms_; }  // catalog + attach, summed
  const std::string& describe() const { return last_; }

 private:
  struct Op {
    std::string name, overload;
    std::vector<std::int8_t> arg_reg;  // per schema argument: register of a tensor, -1 none
    std::string shapes;                // the op observer's input shapes ("": none)
  };
  OpProbeSource& source_;
  std::vector<std::string> filters_;
  Emit emit_;
  std::vector<Op> ops_;  // by global index
  std::vector<bool> announced_;
  std::map<std::string, std::uint32_t> observed_;  // index_of's names
  // (dev, inode) of a libtorch file -> first global index of its ops
  std::map<std::pair<unsigned long, unsigned long>, std::uint32_t> libraries_;
  // (dev, inode, pid filter) already attached
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::map<std::pair<unsigned long, unsigned long>, std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>>
      probes_of_;  // offsets, cookies per file
  std::size_t probes_ = 0;
  double attach_ms_ = 0;
  std::string last_;
  std::uint32_t region_base_ = UINT32_MAX;  // the compiled regions' block of op indexes (none yet)
  bool selected(const std::string& name) const;
  std::uint32_t add_op(std::string name);
  void attach_file(const std::string& open_path, std::pair<unsigned long, unsigned long> file, pid_t pid_filter);
};

}  // namespace lt
