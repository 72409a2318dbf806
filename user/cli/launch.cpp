#include "user/cli/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "user/core/errors.h"

namespace lt {

Launch::Launch(const std::vector<std::string>& argv, const std::string& bridge) {
  int gate[2], err[2];
  if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw Error(ExitCode::launch, std::string("cannot start the command: pipe: ") + std::strerror(errno));
  // The child's environment: ours, plus the injection variables unless the
  // user set them (their own tool wins; we then get what CUPTI allows).
  std::vector<std::string> env_add;
  if (!bridge.empty()) {
    for (const char* var : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"})
      if (!std::getenv(var)) {
        env_add.push_back(std::string(var) + "=" + bridge);
        injected_ += (injected_.empty() ? "" : ", ") + std::string(var);
      }
  }
  // A mark of this run on the command and all it starts (never reused: our
  // pid and the time).
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  marker_ = {"LTRACE_BPF_RUN",
             std::to_string(getpid()) + "." + std::to_string(now.tv_sec * 1'000'000'000LL + now.tv_nsec)};
  env_add.push_back(marker_.first + "=" + marker_.second);
  std::vector<std::string> args = argv;
  pid_ = fork();
  if (pid_ < 0) throw Error(ExitCode::launch, std::string("cannot start the command: fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Child: only async-signal-safe calls from here on.
    close(gate[1]);
    close(err[0]);
    char c;
    ssize_t n;
    do n = read(gate[0], &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);  // the session never started: do not run unobserved
    for (auto& e : env_add) putenv(e.data());
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    int e = errno;
    ssize_t w = write(err[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  close(gate[0]);
  close(err[1]);
  gate_ = gate[1];
  error_ = err[0];
}

Launch::~Launch() {
  if (gate_ >= 0) close(gate_);
  if (error_ >= 0) close(error_);
  if (pid_ > 0 && !released_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Launch::release() {
  char go = 1;
  ssize_t w = write(gate_, &go, 1);
  close(gate_);
  gate_ = -1;
  released_ = true;
  int e = 0;
  ssize_t n;
  do n = read(error_, &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(error_);
  error_ = -1;
  if (w != 1 || n == static_cast<ssize_t>(sizeof e)) {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw Error(ExitCode::launch, "cannot run the command: " + std::string(std::strerror(w != 1 ? EPIPE : e)));
  }
}

int Launch::wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (waitpid(pid_, &status, 0) != pid_) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace lt
