// Watch mode's metrics for Prometheus: GET /metrics on --metrics
// [HOST]:PORT answers the text exposition format (version 0.0.4) the
// watcher last published. One thread, one connection at a time, each with
// a 2 s deadline: a slow or hostile client costs the watcher nothing but
// that thread's wait; nothing else it sends is read beyond its request line.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace lt {

class MetricsServer {
 public:
  // Listens on host:port ("" host: every address; port 0: any, see port()).
  // Throws lt::Error(usage) for a bad address, lt::Error(io) when it
  // cannot listen.
  MetricsServer(const std::string& host, std::uint16_t port);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  std::uint16_t port() const;
  // What the next scrape gets.
  void publish(std::string text);
  std::uint64_t scrapes() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
