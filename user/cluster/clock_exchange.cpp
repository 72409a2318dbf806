#include "user/cluster/clock_exchange.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "user/core/clocks.h"
#include "user/core/errors.h"

namespace lt::cluster {

namespace {

constexpr std::uint32_t kMagic = 0x4b43544cu;  // "LTCK"

// On the wire, little-endian as both ends are (x86/arm64 Linux).
struct Response {
  std::uint32_t magic, seq;
  std::int64_t t0, t1, t2;
  char host[64];
};
// As large as the answer: the server never sends more than it received, so
// it cannot amplify a spoofed request.
struct Request {
  std::uint32_t magic, seq;
  std::int64_t t0;
  char pad[sizeof(Response) - 16];
};
static_assert(sizeof(Request) == sizeof(Response));

std::int64_t realtime_ns() {
  return static_cast<std::int64_t>(clock_ns(CLOCK_REALTIME));
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

ClockMeasurement best_exchange(const std::vector<ClockSample>& samples) {
  ClockMeasurement m;
  bool have = false;
  for (const auto& s : samples) {
    const std::int64_t delay = (s.t3 - s.t0) - (s.t2 - s.t1);
    if (delay < 0) continue;
    ++m.samples;
    if (have && delay >= m.delay_ns) continue;
    have = true;
    m.delay_ns = delay;
    // Halves first: the sum of two wall-clock differences cannot overflow.
    m.offset_ns = (s.t1 - s.t0) / 2 + (s.t2 - s.t3) / 2;
  }
  m.ok = have;
  if (!have) m.error = samples.empty() ? "no exchange came back" : "every exchange had a negative delay (a clock step)";
  return m;
}

struct ClockServer::State {
  int fd = -1;
  std::uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> answered{0};
  std::thread thread;
  char host[64] = {};
};

ClockServer::ClockServer(std::uint16_t port) : s_(std::make_unique<State>()) {
  s_->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s_->fd < 0) throw Error(ExitCode::io, std::string("clock server: socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(port);
  socklen_t len = sizeof a;
  if (bind(s_->fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(s_->fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(s_->fd);
    throw Error(ExitCode::io, "clock server: cannot bind UDP port " + std::to_string(port) + ": " + std::strerror(e));
  }
  s_->port = ntohs(a.sin_port);
  gethostname(s_->host, sizeof s_->host - 1);
  State* st = s_.get();
  st->thread = std::thread([st] {
    while (!st->stop.load()) {
      pollfd p{st->fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      Request rq{};
      sockaddr_storage from{};
      socklen_t flen = sizeof from;
      const ssize_t n = recvfrom(st->fd, &rq, sizeof rq, 0, reinterpret_cast<sockaddr*>(&from), &flen);
      const std::int64_t t1 = realtime_ns();
      if (n != static_cast<ssize_t>(sizeof rq) || rq.magic != kMagic) continue;
      Response rs{};
      rs.magic = kMagic;
      rs.seq = rq.seq;
      rs.t0 = rq.t0;
      rs.t1 = t1;
      std::memcpy(rs.host, st->host, sizeof rs.host);
      rs.t2 = realtime_ns();
      if (sendto(st->fd, &rs, sizeof rs, 0, reinterpret_cast<sockaddr*>(&from), flen) == sizeof rs) ++st->answered;
    }
  });
}

ClockServer::~ClockServer() {
  s_->stop.store(true);
  if (s_->thread.joinable()) s_->thread.join();
  close(s_->fd);
}

std::uint16_t ClockServer::port() const {
  return s_->port;
}

std::uint64_t ClockServer::answered() const {
  return s_->answered.load();
}

ClockMeasurement measure_clock(const std::string& host, std::uint16_t port, int exchanges, int timeout_ms) {
  ClockMeasurement fail;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0 || !res) {
    fail.error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return fail;
  }
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const bool connected = fd.fd >= 0 && connect(fd.fd, res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  if (!connected) {
    fail.error = "cannot reach " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    return fail;
  }
  std::vector<ClockSample> samples;
  std::string reference;
  int silent = 0;  // exchanges in a row without an answer: 3 and we give up
  for (int i = 0; i < exchanges && silent < 3; ++i) {
    Request rq{kMagic, static_cast<std::uint32_t>(i), 0, {}};
    rq.t0 = realtime_ns();
    ++silent;
    if (send(fd.fd, &rq, sizeof rq, 0) != sizeof rq) continue;
    // Wait for this exchange's answer; a late answer to an earlier one is
    // dropped (its t3 would be wrong).
    for (;;) {
      pollfd p{fd.fd, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) break;
      Response rs{};
      const ssize_t n = recv(fd.fd, &rs, sizeof rs, 0);
      const std::int64_t t3 = realtime_ns();
      if (n != static_cast<ssize_t>(sizeof rs) || rs.magic != kMagic || rs.seq != rq.seq || rs.t0 != rq.t0) continue;
      samples.push_back({rs.t0, rs.t1, rs.t2, t3});
      reference.assign(rs.host, strnlen(rs.host, sizeof rs.host));
      silent = 0;
      break;
    }
  }
  ClockMeasurement m = best_exchange(samples);
  m.reference = reference;
  if (!m.ok) m.error = "no answer from " + host + ":" + std::to_string(port) + " (" + m.error + ")";
  return m;
}

bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port) {
  const auto colon = s.rfind(':');
  const std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  host = colon == std::string::npos ? std::string() : s.substr(0, colon);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const long v = std::stol(p);
  if (v < 1 || v > 65535) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

}  // namespace lt::cluster
