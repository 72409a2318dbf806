#include "user/watch/request_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "user/core/errors.h"

namespace lt {

namespace {

constexpr std::size_t kMaxRequest = 64;
constexpr int kTimeoutMs = 2000;

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw Error(ExitCode::io, "socket path too long (" + std::to_string(path.size()) + " bytes): " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

void set_timeouts(int fd) {
  timeval tv{kTimeoutMs / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void send_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went: nothing to do
    off += static_cast<std::size_t>(n);
  }
}

// The groups of the process at the other end (its /proc status: the kernel's
// list, not a claim), besides its gid.
std::vector<gid_t> groups_of(pid_t pid, gid_t gid) {
  std::vector<gid_t> out{gid};
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Groups:", 0) == 0) {
      std::istringstream in(line.substr(7));
      for (long g; in >> g;) out.push_back(static_cast<gid_t>(g));
    }
  return out;
}

}  // namespace

std::string request_refusal(uid_t caller_uid, const std::vector<gid_t>& caller_groups, uid_t target_uid,
                            gid_t admin_gid) {
  if (caller_uid == 0 || caller_uid == target_uid) return "";
  if (admin_gid != static_cast<gid_t>(-1) &&
      std::find(caller_groups.begin(), caller_groups.end(), admin_gid) != caller_groups.end())
    return "";
  return "the process is not yours (it runs as uid " + std::to_string(target_uid) + ", you are uid " +
         std::to_string(caller_uid) + ")";
}

RequestServer::RequestServer(std::string path, gid_t admin_gid, Handlers handlers)
    : path_(std::move(path)), admin_gid_(admin_gid), handlers_(std::move(handlers)) {
  const sockaddr_un a = address(path_);
  // A socket left by a watcher that died (we hold the directory's lock):
  // only a socket is replaced, never a file or a link someone put there.
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw Error(ExitCode::unsafe_output, path_ + " exists and is not a socket: not replaced");
    unlink(path_.c_str());
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(ExitCode::io, std::string("socket: ") + std::strerror(errno));
  // Bound with no access for anyone, then opened to all: who may ask what
  // is checked per request.
  const mode_t old = umask(0777);
  const int bound = bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  const int bind_errno = errno;
  umask(old);
  if (bound != 0 || chmod(path_.c_str(), 0666) != 0 || listen(listen_fd_, 8) != 0 || pipe2(wake_, O_CLOEXEC) != 0) {
    const int e = bound != 0 ? bind_errno : errno;
    ::close(listen_fd_);
    if (bound == 0) unlink(path_.c_str());
    throw Error(ExitCode::io, "cannot serve " + path_ + ": " + std::strerror(e));
  }
  thread_ = std::thread([this] { serve(); });
}

RequestServer::~RequestServer() {
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
  unlink(path_.c_str());
}

void RequestServer::serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    set_timeouts(client);
    try {
      answer(client);
    } catch (const std::exception& e) {  // a handler's failure is the client's answer, never the watcher's end
      send_all(client, std::string("error ") + e.what() + "\n");
    }
    ::close(client);
  }
}

void RequestServer::answer(int client) {
  ucred who{};
  socklen_t len = sizeof who;
  if (getsockopt(client, SOL_SOCKET, SO_PEERCRED, &who, &len) != 0) return;
  std::string req;
  char buf[kMaxRequest];
  while (req.find('\n') == std::string::npos && req.size() < kMaxRequest) {
    const ssize_t n = recv(client, buf, std::min(sizeof buf, kMaxRequest - req.size()), 0);
    if (n <= 0) break;
    req.append(buf, static_cast<std::size_t>(n));
  }
  req = req.substr(0, req.find('\n'));
  std::istringstream in(req);
  std::string verb, extra;
  long pid = -1;
  double after_s = 0;
  in >> verb >> pid;
  // "capture PID SECS": a capture of SECS after the request (at most
  // kMaxCaptureAfterS: an escalation is bounded in time).
  if (verb == "capture" && in >> extra) {
    char* end = nullptr;
    after_s = std::strtod(extra.c_str(), &end);
    if (*end || !(after_s > 0) || after_s > kMaxCaptureAfterS) pid = -1;
  }
  if ((verb != "capture" && verb != "dump") || pid < 0 || (verb == "dump" && pid == 0)) {
    send_all(client, "error not a request: send \"capture PID\", \"capture PID SECS\" (SECS up to " +
                         std::to_string(static_cast<int>(RequestServer::kMaxCaptureAfterS)) + ") or \"dump PID\"\n");
    return;
  }
  std::string why;
  const auto groups = groups_of(who.pid, who.gid);
  // Root and the admin group see everything; anyone else gets a capture of
  // their own processes, which is theirs.
  const bool privileged = request_refusal(who.uid, groups, static_cast<uid_t>(-1), admin_gid_).empty();
  if (pid == 0) {  // every process: not any one user's
    why = request_refusal(who.uid, groups, 0, admin_gid_);
    if (!why.empty()) why = "a capture of every process is for root and the admin group";
  } else {
    struct stat st {};
    if (stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) {
      send_all(client, "error no process " + std::to_string(pid) + "\n");
      return;
    }
    why = request_refusal(who.uid, groups, st.st_uid, admin_gid_);
  }
  if (!why.empty()) {
    send_all(client, "refused " + why + "\n");
    return;
  }
  const Answer a = verb == "capture"
                       ? handlers_.capture(static_cast<pid_t>(pid),
                                           privileged ? std::nullopt : std::optional<uid_t>(who.uid), after_s)
                       : handlers_.dump(static_cast<pid_t>(pid));
  send_all(client, std::string(a.refused ? "refused " : a.ok ? "ok " : "error ") + a.line + "\n" + a.body);
}

RequestServer::Answer ask_watcher(const std::string& path, const std::string& request) {
  const sockaddr_un a = address(path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(ExitCode::io, std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(ExitCode::io, "no watcher answers on " + path + ": " + std::strerror(e));
  }
  set_timeouts(fd);
  send_all(fd, request + "\n");
  shutdown(fd, SHUT_WR);
  std::string all;
  char buf[65536];
  // A dump takes a while: wait for its answer as long as the watcher writes.
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  const auto nl = all.find('\n');
  const std::string first = all.substr(0, nl);
  RequestServer::Answer out;
  out.body = nl == std::string::npos ? "" : all.substr(nl + 1);
  if (first.rfind("ok ", 0) == 0) {
    out.line = first.substr(3);
    return out;
  }
  out.ok = false;
  if (first.rfind("refused ", 0) == 0) throw Error(ExitCode::refused, "the watcher refused: " + first.substr(8));
  if (first.rfind("error no process", 0) == 0) throw Error(ExitCode::no_such_process, first.substr(6));
  throw Error(ExitCode::io, "the watcher said: " + (first.empty() ? std::string("nothing") : first));
}

}  // namespace lt
