#include "user/cluster/agent_capture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "user/cluster/agent.h"
#include "user/cluster/job_ranks.h"
#include "user/core/errors.h"
#include "user/proc/census.h"
#include "user/watch/request_server.h"

namespace lt::cluster {

std::string node_watcher_socket(const std::string& dir, const std::string& node) {
  for (const std::string& at : {node.empty() ? std::string() : dir + "/" + node + "/watch.sock", dir + "/watch.sock"}) {
    struct stat st {};
    if (!at.empty() && lstat(at.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return at;
  }
  return "";
}

namespace {

std::vector<std::string> capture_dirs(const std::string& captures) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(captures, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  return out;
}

// Written: its reports begun (the trace is whole before they start) and
// the trace readable by us (a user's capture is given to them last).
bool capture_written(const std::string& dir) {
  return access((dir + "/reports.txt").c_str(), F_OK) == 0 && access((dir + "/trace.ltrace").c_str(), R_OK) == 0;
}

}  // namespace

std::string new_request_capture(const std::string& captures, pid_t pid, const std::vector<std::string>& before) {
  const std::string mark = "-" + std::to_string(pid) + "-r";
  for (const auto& name : capture_dirs(captures)) {
    const auto at = name.find(mark);
    if (at == std::string::npos || name.find("-request", at) == std::string::npos) continue;
    if (std::find(before.begin(), before.end(), name) == before.end()) return name;
  }
  return "";
}

int run_agent_capture(const std::vector<std::pair<std::string, std::string>>& job_env, double wait_s,
                      const std::string& watcher_dir, double after_s, bool bring_back, bool verbose) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  agent_say("hello", {{"host", host}, {"pid", std::to_string(getpid())}});
  auto fail = [](ExitCode code, const std::string& why) {
    agent_say("failed", {{"error", why}});
    throw Error(code, why);
  };
  std::string why;
  const std::vector<pid_t> pids = job_process_trees(job_env, wait_s, &why);
  if (pids.empty()) fail(ExitCode::no_such_process, "--job-env: " + why);
  std::string node;
  for (const auto& [k, v] : job_env)
    if (k == "SLURMD_NODENAME") node = v;
  const std::string sock = node_watcher_socket(watcher_dir, node);
  if (sock.empty())
    fail(ExitCode::io, "no watcher here: no socket at " +
                           (node.empty() ? "" : watcher_dir + "/" + node + "/watch.sock or ") + watcher_dir +
                           "/watch.sock (cluster ... watch --dir DIR, or the ltrace-bpf-watch service)");
  // The ranks: Python processes that are not launchers; a job with no rank
  // variables at all has its Python processes asked for.
  const auto envs = ranks_of(pids);
  std::vector<std::pair<pid_t, int>> asked;
  for (bool any_rank : {true, false}) {
    for (pid_t pid : pids)
      if (proc::probe_process(pid).python && (!any_rank || envs.at(pid).rank >= 0))
        asked.emplace_back(pid, envs.at(pid).rank);
    if (!asked.empty()) break;
  }
  if (asked.empty()) fail(ExitCode::no_such_process, "no Python process of the job here");
  // The captures land next to the socket (DIR/NODE/captures or DIR/captures).
  const std::string captures = std::filesystem::path(sock).parent_path().string() + "/captures";
  const std::vector<std::string> before = capture_dirs(captures);
  std::vector<std::pair<pid_t, int>> taken;
  std::size_t ok = 0, refused = 0;
  for (const auto& [pid, rank] : asked) {
    try {
      char secs[32] = "";
      if (after_s > 0) std::snprintf(secs, sizeof secs, " %.3f", after_s);
      const auto a = ask_watcher(sock, "capture " + std::to_string(pid) + secs);
      agent_say("captured", {{"pid", std::to_string(pid)}, {"rank", std::to_string(rank)}, {"answer", a.line}});
      taken.emplace_back(pid, rank);
      ++ok;
    } catch (const Error& e) {
      if (e.code() == ExitCode::refused) ++refused;
      if (verbose) std::cerr << "ltrace-bpf: agent: pid " << pid << ": " << e.what() << "\n";
      agent_say("capture-refused", {{"pid", std::to_string(pid)}, {"rank", std::to_string(rank)}, {"error", e.what()}});
    }
  }
  // Each capture back on stdout once written: its after-window, the
  // escalation's handshake and its reports take seconds (bounded here).
  std::size_t brought = 0;
  if (bring_back) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(300 + after_s);
    for (const auto& [pid, rank] : taken) {
      std::string name, err;
      while (std::chrono::steady_clock::now() < deadline) {
        if (name.empty()) name = new_request_capture(captures, pid, before);
        if (!name.empty() && capture_written(captures + "/" + name)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      const std::vector<std::pair<std::string, std::string>> who = {{"pid", std::to_string(pid)},
                                                                    {"rank", std::to_string(rank)}};
      if (name.empty() || !capture_written(captures + "/" + name)) {
        auto f = who;
        f.emplace_back("error", name.empty() ? "no capture of it appeared in " + captures + " within 300 s"
                                             : captures + "/" + name + " not written within 300 s");
        agent_say("capture-lost", f);
        continue;
      }
      auto f = who;
      f.emplace_back("name", name);
      agent_say("capture-file", f);
      if (stream_trace_file(captures + "/" + name + "/trace.ltrace", &err)) {
        ++brought;
      } else {
        if (verbose) std::cerr << "ltrace-bpf: agent: pid " << pid << ": " << err << "\n";
        return static_cast<int>(ExitCode::partial);  // the stream is cut: nothing more can follow on it
      }
    }
  }
  agent_say("done", {{"asked", std::to_string(ok)}, {"refused", std::to_string(asked.size() - ok)}});
  if (ok == asked.size() && (!bring_back || brought == ok)) return 0;
  if (bring_back && brought < ok && ok == asked.size()) return static_cast<int>(ExitCode::partial);
  return static_cast<int>(refused == asked.size() ? ExitCode::refused : ExitCode::partial);
}

}  // namespace lt::cluster
