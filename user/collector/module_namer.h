// MODULE_NAME records for --module-names: the first time a MODULE_CALL
// names a module object we do not know, the target's LightningModule tree
// is read with process_vm_readv (python/module_tree.h) and every module of
// it goes into the trace, before that MODULE_CALL, so `report FILE` needs
// no process.  The root is the called module itself when its class derives
// from LightningModule, else the innermost LightningModule `self` on one of
// the target's Python stacks now (training_step and the other hooks run
// with it, and forward() runs under them); when none is there at that
// moment, a later call looks again (at most every 20 ms).  A module outside the tree (a
// loss module built by the trainer, or one added later) gets one re-read,
// then is left unnamed: no re-read storm on every call.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>

#include "user/python/discovery.h"

namespace lt {

class ModuleNamer {
 public:
  using Emit = std::function<void(const void*, std::size_t)>;
  explicit ModuleNamer(Emit emit) : emit_(std::move(emit)) {}

  // Names `self` (and its tree) unless it already is, or was given up on.
  void describe(const python::Interpreter& interp, std::uint64_t self, std::uint64_t ts);
  // The process exited or exec'd: its addresses mean nothing any more.
  void forget(pid_t pid) { known_.erase(pid), given_up_.erase(pid), last_try_.erase(pid); }

  std::size_t tree_reads() const { return tree_reads_; }  // how often a tree was read (tests)
  std::size_t named(pid_t pid) const {
    auto it = known_.find(pid);
    return it == known_.end() ? 0 : it->second.size();
  }

 private:
  std::uint64_t find_root(const python::Interpreter& interp, std::uint64_t self) const;

  Emit emit_;
  std::map<pid_t, std::set<std::uint64_t>> known_;     // modules named in the trace
  std::map<pid_t, std::set<std::uint64_t>> given_up_;  // read again once, still not in the tree
  std::map<pid_t, std::uint64_t> last_try_;            // when the root was last looked for
  std::size_t tree_reads_ = 0;
};

}  // namespace lt
