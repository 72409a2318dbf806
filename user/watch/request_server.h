// The watcher's local socket, DIR/watch.sock (issue 33): the watcher runs
// as root, and any local user may ask it, without sudo, for a capture or a
// dump of a process they own -- never of anyone else's. The caller is who
// the kernel says (SO_PEERCRED), not what it claims: its uid must own the
// target (its /proc entry), or be root, or the caller be in the watcher's
// --admin-group.
//
// Protocol, one request per connection: a line "capture PID" or "dump PID"
// (at most 64 bytes, within 2 s); the answer "ok TEXT", "refused TEXT" or
// "error TEXT" (one line), and for a dump then its text. One thread serves
// the clients one at a time; the handlers run on it.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace lt {

// Whether a caller may ask about a target: "" yes, else why not (one line).
// Root may; the target's owner may; a member of admin_gid ((gid_t)-1: no
// admin group) may.
std::string request_refusal(uid_t caller_uid, const std::vector<gid_t>& caller_groups, uid_t target_uid,
                            gid_t admin_gid);

class RequestServer {
 public:
  struct Answer {
    bool ok = true;
    std::string line;      // one line, no newline
    std::string body;      // after it (a dump's text)
    bool refused = false;  // "refused TEXT": the asker gets exit 18, as for another user's process
  };
  // The longest after-window a request may ask for ("capture PID SECS").
  static constexpr double kMaxCaptureAfterS = 600;
  struct Handlers {
    // pid 0: every watched process (root and admins only); for_uid: asked
    // by that user, neither root nor an admin (the capture is to be theirs);
    // after_s: "capture PID SECS", the capture holds SECS after the request
    // (escalated for them; 0: the watcher's --capture-after).
    std::function<Answer(pid_t, std::optional<uid_t> for_uid, double after_s)> capture;
    std::function<Answer(pid_t)> dump;
  };
  // Binds `path` (a stale socket there is replaced: the caller holds the
  // directory's watcher lock), mode 0666: who may ask what is decided per
  // request. Throws lt::Error(io) when it cannot.
  RequestServer(std::string path, gid_t admin_gid, Handlers handlers);
  ~RequestServer();  // stops serving, removes the socket
  RequestServer(const RequestServer&) = delete;
  RequestServer& operator=(const RequestServer&) = delete;
  const std::string& path() const { return path_; }

 private:
  void serve();
  void answer(int client);
  std::string path_;
  gid_t admin_gid_;
  Handlers handlers_;
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  std::thread thread_;
};

// The client side (watch --capture-now / --dump-now): sends one request to
// the socket at `path` and returns the answer; the first line's verdict as
// `ok`. Throws lt::Error(io) when no watcher answers there.
RequestServer::Answer ask_watcher(const std::string& path, const std::string& request);

}  // namespace lt
