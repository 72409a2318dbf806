#include "user/cluster/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace lt::cluster {

pid_t spawn_piped(const std::vector<std::string>& argv, int& out, int& err, const RunAs* as, int* in) {
  int o[2], e[2], i[2] = {-1, -1};
  if (pipe2(o, O_CLOEXEC) != 0) return -1;
  if (pipe2(e, O_CLOEXEC) != 0) {
    close(o[0]), close(o[1]);
    return -1;
  }
  if (in && pipe2(i, O_CLOEXEC) != 0) {
    close(o[0]), close(o[1]), close(e[0]), close(e[1]);
    return -1;
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    for (bool again = true; again;) {
      again = false;
      for (char** v = environ; *v; ++v)
        if (std::strncmp(*v, "SLURM_", 6) == 0 && std::strncmp(*v, "SLURM_CONF=", 11) != 0) {
          const std::string name(*v, std::strchr(*v, '=') - *v);
          unsetenv(name.c_str());
          again = true;
          break;
        }
    }
    if (in) {
      dup2(i[0], 0);
    } else {
      const int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
    }
    dup2(o[1], 1);
    dup2(e[1], 2);
    if (as && (setgroups(as->groups.size(), as->groups.data()) != 0 || setgid(as->gid) != 0 || setuid(as->uid) != 0 ||
               chdir("/") != 0)) {
      std::fprintf(stderr, "cannot become uid %u: %s\n", static_cast<unsigned>(as->uid), std::strerror(errno));
      _exit(126);
    }
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  const int saved = errno;
  close(o[1]), close(e[1]);
  if (in) close(i[0]);
  if (pid < 0) {
    close(o[0]), close(e[0]);
    if (in) close(i[1]);
    errno = saved;
    return -1;
  }
  out = o[0];
  err = e[0];
  if (in) *in = i[1];
  return pid;
}

pid_t spawn_srun(const std::vector<std::string>& argv, bool verbose, int& out, int& err, const RunAs* as, int* in) {
  if (verbose) {
    std::string line;
    for (const auto& s : argv) line += (line.empty() ? "" : " ") + s;
    std::cerr << "ltrace-bpf: cluster: " << (as ? "as uid " + std::to_string(as->uid) + ": " : "") << line << "\n";
  }
  return spawn_piped(argv, out, err, as, in);
}

std::string node_binary(const std::string& agent_path) {
  if (!agent_path.empty()) return agent_path;
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("ltrace-bpf") : p.string();
}

}  // namespace lt::cluster
