// Lightning action source (bpf/pyactions.bpf.c): one entry uprobe on
// _PyEval_EvalFrameDefault per interpreter binary, shared by every target
// process that uses that binary (filtered by pid in BPF).
#pragma once
#include <sys/types.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "user/python/discovery.h"
#include "user/sources/bpf_owner.h"
#include "user/sources/proctrack.h"
#include "user/sources/uprobe_multi.h"

struct lt_pyactions;
struct bpf_link;

namespace lt {

// Its skeleton's destroy, defined where the skeleton is (user/sources/pyactions.cpp).
template <>
void SkeletonDestroy<lt_pyactions>::operator()(lt_pyactions* s) const;

class PyActionsSource {
 public:
  // module_calls: also attach the eval loop's entry where only module
  // calls need it (--module-names: MODULE_CALL records).
  PyActionsSource(const ProcTrackSource& shared, bool module_calls);
  ~PyActionsSource();
  PyActionsSource(const PyActionsSource&) = delete;
  PyActionsSource& operator=(const PyActionsSource&) = delete;

  // Attaches the entry uprobes for this interpreter's binary (once per
  // binary: a uprobe lives in the file, and BPF filters by target pid).
  // pid: the process to scope the probes to, or -1 for every process that
  // maps the binary (needed to cover children forked later).
  void attach(const python::Interpreter& interp, pid_t pid);
  std::size_t probes() const { return uprobes_.probes(); }
  // A ring that gets a record when a target's interpreter starts to
  // finalize (Py_FinalizeEx): the drain waits on it instead of sleeping.
  int wakeup_fd() const;

 private:
  SkeletonPtr<lt_pyactions> skel_;
  bool module_calls_;
  EntryUprobes uprobes_;  // released before the skeleton
  // Per site: processes of one file may be given different sites (a
  // libpython held at its exec before or after the loader relocated the
  // tables discovery reads: the eval-loop fallback or builtin_next), and
  // each target's BPF flags follow its own; so each site is attached once
  // per file and scope, whichever process asked first.
  std::set<std::tuple<unsigned long, unsigned long, pid_t, std::string>> attached_;  // dev, inode, pid scope, site
};

}  // namespace lt
