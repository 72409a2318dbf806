// Real CPython interpreters for the tests that read objects from outside:
// each pyenv 3.8-3.13, and Debian sid's 3.14/3.15 in the container root
// tests/roots/build.sh makes (run there with chroot).
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace lt::testing {

// argv of CPython 3.<minor>, or empty when it is not installed.
inline std::vector<std::string> python_argv(int minor) {
  const std::string version = "3." + std::to_string(minor) + ".";
  for (const char* v : {"3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"})
    if (std::string(v).rfind(version, 0) == 0) {
      std::string python = std::string("/root/.pyenv/versions/") + v + "/bin/python3";
      if (access(python.c_str(), X_OK) == 0) return {python};
      return {};
    }
  // 3.14/3.15: Debian sid's (its python3.X lives in the executable, not in
  // a libpython), in the root `make deps` builds for the container tests.
  const std::string root = "/var/cache/ltrace-bpf/roots/sid";
  const std::string python = "/usr/bin/python3." + std::to_string(minor);
  if (access((root + python).c_str(), X_OK) == 0) return {"/usr/sbin/chroot", root, python};
  return {};
}

// Runs `python -c script`, hands each line it prints to `line` until that
// returns false (or the output ends), and returns the pid.  The target's
// stdin stays open: a script can wait on it until stop().
inline pid_t start_python(const std::vector<std::string>& python, const char* script,
                          const std::function<bool(const std::string&)>& line) {
  int in[2], out[2];
  if (pipe(in) || pipe(out)) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    std::vector<char*> argv;
    for (const auto& a : python) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(const_cast<char*>("-c"));
    argv.push_back(const_cast<char*>(script));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  char buf[4096];
  while (f && fgets(buf, sizeof buf, f)) {
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (!line(s)) break;
  }
  return pid;
}

inline void stop_python(pid_t pid) {
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

}  // namespace lt::testing
