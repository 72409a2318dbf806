// `ltrace-bpf run -- COMMAND`: starts COMMAND held at a gate, so the session
// can follow it before it runs a single instruction of its own, with the GPU
// bridge preloaded through the CUDA driver's and NVTX's injection variables.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace lt {

class Launch {
 public:
  // Forks; the child waits at the gate.  bridge: our library ("" = none).
  // Throws lt::Error(launch) if the fork fails.
  Launch(const std::vector<std::string>& argv, const std::string& bridge);
  ~Launch();  // a child never released is killed
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  pid_t pid() const { return pid_; }
  // Lets the child exec COMMAND.  Throws lt::Error(launch) with the reason
  // if the exec failed (not found, not executable).
  void release();
  // Reaps the child (after the session ended); its exit status, or -1.
  int wait();
  // What the child's environment got ("" when the bridge is absent), for notes.
  const std::string& injected() const { return injected_; }
  // The variable that marks COMMAND and everything it starts, even where
  // it is not our descendant (srun's tasks, started by slurmd, inherit the
  // environment): LTRACE_BPF_RUN=<our pid>.<start ns>.
  const std::pair<std::string, std::string>& marker() const { return marker_; }

 private:
  pid_t pid_ = -1;
  int gate_ = -1;   // write end: closing it releases the child
  int error_ = -1;  // read end: the child's errno if exec failed (close-on-exec: EOF = exec worked)
  bool released_ = false;
  std::string injected_;
  std::pair<std::string, std::string> marker_;
};

}  // namespace lt
