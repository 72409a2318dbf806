#include "user/cluster/slurm_job.h"

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "user/cluster/subprocess.h"
#include "user/core/errors.h"

namespace lt::cluster {

std::map<std::string, std::string> parse_scontrol_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  // Keys: a run of [A-Za-z0-9_:/] right after a space (or the start) and
  // before '='.
  auto key_at = [&](std::size_t i, std::size_t& eq) {
    std::size_t j = i;
    while (j < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '_' || line[j] == ':' || line[j] == '/'))
      ++j;
    eq = j;
    return j > i && j < line.size() && line[j] == '=';
  };
  std::size_t i = line.find_first_not_of(' ');
  while (i != std::string::npos && i < line.size()) {
    std::size_t eq = 0;
    if (!key_at(i, eq)) {
      i = line.find(' ', i);
      if (i != std::string::npos) i = line.find_first_not_of(' ', i);
      continue;
    }
    const std::string key = line.substr(i, eq - i);
    std::size_t v = eq + 1, end = v;
    for (;;) {
      end = line.find(' ', end);
      if (end == std::string::npos) break;
      std::size_t next = line.find_first_not_of(' ', end), e2 = 0;
      if (next == std::string::npos || key_at(next, e2)) break;
      end = next;
    }
    // A job name is free text ("x NodeList=y" is a valid one): scontrol
    // always prints UserId= next, so it runs to there.
    if (key == "JobName")
      if (auto u = line.find(" UserId=", v); u != std::string::npos) end = u;
    std::string val = line.substr(v, end == std::string::npos ? std::string::npos : end - v);
    while (!val.empty() && (val.back() == '\n' || val.back() == ' ')) val.pop_back();
    out.emplace(key, val);
    i = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return out;
}

bool valid_job_id(const std::string& id) {
  if (id.empty() || id.size() > 32 || !std::isdigit(static_cast<unsigned char>(id[0]))) return false;
  for (char c : id)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '+') return false;
  return true;
}

std::string run_capture(const std::vector<std::string>& argv, int timeout_s) {
  int out_fd = -1, err_fd = -1;
  const pid_t pid = spawn_piped(argv, out_fd, err_fd);
  if (pid < 0) throw Error(ExitCode::slurm, "cannot run " + argv[0] + ": " + std::strerror(errno));
  std::string so, se;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool open_out = true, open_err = true, timed_out = false;
  while (open_out || open_err) {
    pollfd p[2] = {{open_out ? out_fd : -1, POLLIN, 0}, {open_err ? err_fd : -1, POLLIN, 0}};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    char buf[4096];
    for (int k = 0; k < 2; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(p[k].fd, buf, sizeof buf);
      if (n > 0)
        (k ? se : so).append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR)
        (k ? open_err : open_out) = false;
    }
  }
  close(out_fd), close(err_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw Error(ExitCode::slurm, argv[0] + " did not answer within " + std::to_string(timeout_s) + " s");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && so.empty())
    throw Error(ExitCode::slurm, "cannot run " + argv[0] + " (is Slurm's client installed and on PATH?)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string first = se.substr(0, se.find('\n'));
    throw Error(ExitCode::slurm, argv[0] + " failed" + (first.empty() ? "" : ": " + first));
  }
  return so;
}

SlurmJob query_slurm_job(const std::string& job_id, const std::string& scontrol) {
  if (!valid_job_id(job_id)) throw Error(ExitCode::usage, "invalid Slurm job id '" + job_id + "'");
  std::string text;
  try {
    text = run_capture({scontrol, "show", "job", "-o", job_id});
  } catch (const Error& e) {
    const std::string w = e.what();
    if (w.find("Invalid job id") != std::string::npos)
      throw Error(ExitCode::no_such_process, "Slurm job " + job_id + " does not exist (scontrol: Invalid job id)");
    throw;
  }
  // An array or het job prints one line per component: take the first
  // that is running (the caller may name a component: 4242_3).
  SlurmJob job;
  std::string first_state;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    auto f = parse_scontrol_fields(line);
    if (f.empty()) continue;
    if (first_state.empty()) first_state = f["JobState"];
    if (f["JobState"] != "RUNNING") continue;
    job.id = f.count("JobId") ? f["JobId"] : job_id;
    job.state = f["JobState"];
    job.nodelist = f["NodeList"];
    if (f.count("NumTasks")) job.num_tasks = std::atoi(f["NumTasks"].c_str());
    auto id_of = [](const std::string& v) {  // "name(1000)" -> 1000
      return v.find('(') == std::string::npos ? -1L : std::strtol(v.c_str() + v.find('(') + 1, nullptr, 10);
    };
    job.uid = id_of(f["UserId"]);
    job.gid = id_of(f["GroupId"]);
    break;
  }
  if (job.state != "RUNNING")
    throw Error(ExitCode::no_such_process, "Slurm job " + job_id + " is " +
                                               (first_state.empty() ? "unknown" : first_state) +
                                               ", not RUNNING: nothing to attach to");
  const std::string hosts = run_capture({scontrol, "show", "hostnames", job.nodelist});
  for (std::size_t at = 0; at < hosts.size();) {
    const std::size_t nl = hosts.find('\n', at);
    std::string h = hosts.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? hosts.size() : nl + 1;
    if (!h.empty()) job.nodes.push_back(h);
  }
  if (job.nodes.empty()) throw Error(ExitCode::slurm, "Slurm job " + job_id + ": no nodes in '" + job.nodelist + "'");
  return job;
}

std::vector<std::string> agent_srun_argv(const std::string& srun, const std::string& job_id, const std::string& node,
                                         const std::vector<std::string>& agent_argv) {
  std::vector<std::string> a = {srun, "--jobid=" + job_id, "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=" + node,
                                "--job-name=ltrace-bpf-agent", "--quiet",
                                // The agent's own stdout goes to us as it is written: status
                                // lines must not wait in a buffer.
                                "--unbuffered"};
  a.insert(a.end(), agent_argv.begin(), agent_argv.end());
  return a;
}

std::optional<RunAs> step_user_for(const SlurmJob& job) {
  if (geteuid() != 0 || job.uid <= 0) return std::nullopt;
  RunAs as{static_cast<uid_t>(job.uid), static_cast<gid_t>(job.gid >= 0 ? job.gid : job.uid), {}};
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(as.uid, &pw, buf.data(), buf.size(), &found) == 0 && found) {
    if (job.gid < 0) as.gid = pw.pw_gid;
    int n = 64;
    as.groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(pw.pw_name, as.gid, as.groups.data(), &n) < 0) {
      as.groups.resize(static_cast<std::size_t>(n));
      getgrouplist(pw.pw_name, as.gid, as.groups.data(), &n);
    }
    as.groups.resize(static_cast<std::size_t>(std::max(n, 0)));
  }
  if (as.groups.empty()) as.groups.push_back(as.gid);
  return as;
}

std::vector<std::string> chosen_nodes(const SlurmJob& job, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return job.nodes;
  for (auto& n : wanted)
    if (std::find(job.nodes.begin(), job.nodes.end(), n) == job.nodes.end())
      throw Error(ExitCode::usage,
                  "--nodes: " + n + " is not a node of Slurm job " + job.id + " (" + job.nodelist + ")");
  return wanted;
}

}  // namespace lt::cluster
