#include "user/cluster/agent.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "user/cluster/agent_protocol.h"
#include "user/proc/job_discovery.h"

namespace lt::cluster {

namespace fs = std::filesystem;

namespace {
// All of it to fd 1, through signals (a SIGTERM from Slurm at the job's end
// must not cut a line or the trace in half); false when stdout is gone.
bool write_stdout(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
}  // namespace

void agent_say(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& fields) {
  agent_say_line(agent_line(kind, fields));
}

void agent_say_line(const std::string& line) {
  const std::string l = line + "\n";
  write_stdout(l.data(), l.size());
}

AgentOutput agent_output(const std::string& output, const std::string& shared_marker, bool force_stream) {
  std::error_code ec;
  if (!force_stream && (shared_marker.empty() || fs::exists(shared_marker, ec))) return {output, false};
  // srun carries the login node's TMPDIR, which need not exist here.
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = tmp && *tmp && access(tmp, W_OK) == 0 ? tmp : "/tmp";
  const std::string name = "ltrace-agent-" + std::to_string(getpid()) + "-" + fs::path(output).filename().string();
  return {(dir / name).string(), true};
}

std::vector<pid_t> wait_for_job_processes(const std::vector<std::pair<std::string, std::string>>& match, double wait_s,
                                          std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    auto found = proc::find_job_processes(match, why);
    if (!found.empty() || std::chrono::steady_clock::now() >= deadline) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool stream_trace_file(const std::string& path, std::string* err) {
  std::ifstream f(path, std::ios::binary);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!f || ec) {
    *err = "cannot read " + path;
    return false;
  }
  agent_say("file", {{"bytes", std::to_string(size)}});
  // 57 bytes -> one 76-character line.
  unsigned char buf[57 * 64];
  std::string out;
  std::uintmax_t sent = 0;
  while (f) {
    f.read(reinterpret_cast<char*>(buf), sizeof buf);
    const std::size_t n = static_cast<std::size_t>(f.gcount());
    sent += n;
    out.clear();
    for (std::size_t i = 0; i < n; i += 57) out += base64_encode(buf + i, std::min<std::size_t>(57, n - i)) + "\n";
    if (!out.empty() && !write_stdout(out.data(), out.size())) {
      *err = "stdout closed while sending the trace";
      return false;
    }
  }
  if (f.bad() || sent != size) {
    // No "end": the coordinator sees the file cut short; ours is kept.
    *err = "cannot read all of " + path;
    return false;
  }
  agent_say("end");
  return true;
}

std::string clock_server_host(const std::string& host) {
  if (!host.empty()) return host;
  const char* launch = std::getenv("SLURM_LAUNCH_NODE_IPADDR");
  return launch && *launch ? launch : "";
}

}  // namespace lt::cluster
