#include "user/sources/pyactions.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>

#include "pyactions.skel.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_pyactions>::operator()(lt_pyactions* s) const {
  lt_pyactions__destroy(s);
}

PyActionsSource::PyActionsSource(const ProcTrackSource& shared, bool module_calls)
    : skel_(lt_pyactions__open()), module_calls_(module_calls) {
  if (!skel_) throw bpf_error("open pyactions", errno);
  // One target table, one ring buffer for all sources.
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with pyactions", -err);
  // One uprobe_multi link per site: it detaches in one grace period, where a
  // perf-event uprobe takes one per site (user/sources/uprobe_multi.h).
  for (bpf_program* p :
       {skel_->progs.lt_next, skel_->progs.lt_gen_throw, skel_->progs.lt_eval_entry, skel_->progs.lt_finalize})
    uprobes_.prepare(p);
  if (int err = lt_pyactions__load(skel_.get())) throw bpf_error("load pyactions", -err);
}

PyActionsSource::~PyActionsSource() = default;

int PyActionsSource::wakeup_fd() const {
  return bpf_map__fd(skel_->maps.lt_wakeups);
}

void PyActionsSource::attach(const python::Interpreter& interp, pid_t pid) {
  struct stat st {};
  if (stat(interp.open_path.c_str(), &st) != 0)
    throw Error(ExitCode::no_such_process, "cannot stat " + interp.binary + " of pid " + std::to_string(interp.pid));
  const auto dev = static_cast<unsigned long>(st.st_dev), ino = static_cast<unsigned long>(st.st_ino);
  for (const auto& s : interp.sites) {
    if (s.modules_only && !module_calls_) continue;
    if (attached_.count({dev, ino, pid, s.function}) || attached_.count({dev, ino, pid_t{-1}, s.function})) continue;
    bpf_program* prog = s.function == "builtin_next"               ? skel_->progs.lt_next
                        : s.function == "gen_throw"                ? skel_->progs.lt_gen_throw
                        : s.function == "_PyEval_EvalFrameDefault" ? skel_->progs.lt_eval_entry
                        : s.function == "Py_FinalizeEx"            ? skel_->progs.lt_finalize
                                                                   : nullptr;
    if (!prog) continue;
    // pid -1: every process mapping this file (BPF keeps only targets),
    // which covers children forked later; otherwise one process, all its
    // threads.
    uprobes_.attach(prog, interp.open_path, {s.file_offset}, {0}, pid, "uprobe " + s.function);
    attached_.insert({dev, ino, pid, s.function});
  }
}

}  // namespace lt
