// The node side of `cluster --slurm-job N watch`'s straggler rule across
// nodes (user/cluster/cross_node_stragglers.h): a watcher started with
// `--upstream` sends its ranks' c10d arrivals, their progress and their
// exits to the coordinator as agent lines on stdout (srun carries them),
// and takes the coordinator's "straggler" requests from stdin (srun passes
// the coordinator's pipe on to its one task).
//
// Arrival times go up on the coordinator's wall clock: this host's
// CLOCK_MONOTONIC entry time + (CLOCK_REALTIME - CLOCK_MONOTONIC) + the
// offset measured against the coordinator's clock server
// (clock_exchange.h), at the start and every minute. Nothing is written
// before the first measurement is in (or failed: this host's clock is used
// then, and said).
//
// The drain loop never waits on the coordinator: lines are handed to a
// writer thread; past kMaxPending bytes not yet written, new lines are
// dropped, the arrivals among them counted (dropped()).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "user/watch/watcher.h"

namespace lt::cluster {

struct StragglerRequest {
  std::uint32_t pid = 0;
  std::string what;
};

// The coordinator's line asking a node's watcher for a straggler capture.
std::string straggler_request_line(std::uint32_t pid, const std::string& what);
std::optional<StragglerRequest> parse_straggler_request(const std::string& line);

class WatchUplink : public ArrivalSink {
 public:
  static constexpr std::size_t kMaxPending = 8u << 20;
  // clock_host empty: no measurement (this host's wall clock is taken as
  // the coordinator's). out_fd / in_fd: stdout and stdin (tests: pipes).
  // on_request: called (on the reader's thread) as a request comes.
  WatchUplink(std::string clock_host, std::uint16_t clock_port, std::function<void()> on_request = {}, int out_fd = 1,
              int in_fd = 0);
  ~WatchUplink() override;
  WatchUplink(const WatchUplink&) = delete;
  WatchUplink& operator=(const WatchUplink&) = delete;

  void arrival(std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind,
               std::uint64_t mono_ns) override;
  void gone(std::uint32_t pid) override;
  void progress(std::uint32_t pid, int rank, std::uint64_t steps, std::uint64_t median_ns);
  // What came since the last call is handed to the writer, with a
  // "through" line: every arrival up to `now_mono_ns` (the drain has read
  // the records until then) is sent, so that the coordinator lines the
  // nodes' streams up by time as one node's ring buffer does.
  void flush(std::uint64_t now_mono_ns);
  // The coordinator's requests since the last call.
  std::vector<StragglerRequest> take_requests();
  std::uint64_t dropped() const { return dropped_.load(); }

 private:
  struct Arrival {
    std::uint32_t pid;
    std::uint64_t pg, seq;
    std::uint8_t kind;
    std::uint64_t mono_ns;
  };
  void write_loop();
  void read_loop();
  void measure_clock_now();

  std::string clock_host_;
  std::function<void()> on_request_;
  std::uint16_t clock_port_;
  int out_fd_, in_fd_;
  // The drain's side (one thread): gathered until flush().
  std::vector<Arrival> arrivals_;
  std::string lines_;
  // Shared with the writer.
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Arrival> pending_arrivals_;
  std::uint64_t pending_through_ = 0;  // 0: none
  std::string pending_lines_;
  std::size_t pending_bytes_ = 0;
  bool stop_ = false;
  std::atomic<std::uint64_t> dropped_{0};
  std::int64_t to_coordinator_ns_ = 0;  // writer only: realtime - monotonic + offset
  std::atomic<bool> reading_{true};
  std::mutex req_m_;
  std::vector<StragglerRequest> requests_;
  std::thread writer_, reader_;
};

}  // namespace lt::cluster
