#include "user/watch/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "user/core/errors.h"

namespace lt {

struct MetricsServer::State {
  int listen_fd = -1, stop_fd = -1;
  std::uint16_t port = 0;
  std::mutex mu;
  std::string text = "# no data yet\n";
  std::atomic<std::uint64_t> scrapes{0};
  std::thread thread;

  void serve();
  void answer(int fd);
};

namespace {

constexpr int kClientDeadlineMs = 2000;

// Sends all of `s` or gives up at the deadline.
void send_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, kClientDeadlineMs) <= 0) return;
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

void MetricsServer::State::answer(int fd) {
  // The request line and headers, up to the blank line (or 4 KiB).
  std::string req;
  char buf[1024];
  while (req.size() < 4096 && req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kClientDeadlineMs) <= 0) return;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    req.append(buf, static_cast<std::size_t>(n));
  }
  const bool get = req.rfind("GET ", 0) == 0;
  const std::size_t sp = get ? req.find(' ', 4) : std::string::npos;
  const std::string target = sp == std::string::npos ? "" : req.substr(4, sp - 4);
  std::string body, status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8";
  if (!get) {
    status = "405 Method Not Allowed";
    body = "GET /metrics\n";
  } else if (target == "/metrics" || target.rfind("/metrics?", 0) == 0) {
    std::lock_guard<std::mutex> l(mu);
    body = text;
    scrapes.fetch_add(1);
  } else {
    status = "404 Not Found";
    body = "ltrace-bpf watch: metrics are at /metrics\n";
  }
  send_all(fd, "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

void MetricsServer::State::serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(fd);
    ::close(fd);
  }
}

MetricsServer::MetricsServer(const std::string& host, std::uint16_t port) : s_(std::make_unique<State>()) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 || !res)
    throw Error(ExitCode::usage, "--metrics: cannot resolve '" + host + "'");
  std::string why;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      s_->listen_fd = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  if (s_->listen_fd < 0)
    throw Error(ExitCode::io,
                "--metrics: cannot listen on " + (host.empty() ? std::string("*") : host) + ":" + service + ": " + why);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(s_->listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  s_->port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  s_->stop_fd = eventfd(0, EFD_CLOEXEC);
  s_->thread = std::thread([s = s_.get()] { s->serve(); });
}

MetricsServer::~MetricsServer() {
  const std::uint64_t one = 1;
  if (write(s_->stop_fd, &one, sizeof one) < 0) {  // the thread sees it at its next poll
  }
  if (s_->thread.joinable()) s_->thread.join();
  ::close(s_->listen_fd);
  ::close(s_->stop_fd);
}

std::uint16_t MetricsServer::port() const {
  return s_->port;
}

void MetricsServer::publish(std::string text) {
  std::lock_guard<std::mutex> l(s_->mu);
  s_->text = std::move(text);
}

std::uint64_t MetricsServer::scrapes() const {
  return s_->scrapes.load();
}

}  // namespace lt
