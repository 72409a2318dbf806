// Measuring one host's wall clock against another's, NTP's way: UDP round
// trips between a node agent (client) and the `cluster` coordinator
// (server).  HTA aligns ranks by their earliest timestamps; this gives each
// host a correction with a stated error bound instead.
//
// One exchange: the client reads t0 and sends; the server reads t1 when the
// request arrives and t2 when it answers; the client reads t3 on receipt
// (every t is CLOCK_REALTIME, read with clock_gettime).
//   offset = ((t1 - t0) + (t2 - t3)) / 2   the server's time minus the client's
//   delay  = (t3 - t0) - (t2 - t1)          the time on the wire, both ways
// If the two directions took equal time the offset is exact; however they
// split, it is off by at most delay / 2.  Of many exchanges the one with the
// least delay is the least disturbed (by scheduling, queueing): it counts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lt::cluster {

struct ClockSample {
  std::int64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
};

struct ClockMeasurement {
  bool ok = false;
  std::int64_t offset_ns = 0;  // add to the client's wall clock to get the server's
  std::int64_t delay_ns = 0;   // of the exchange used: |error| <= delay_ns / 2
  std::uint32_t samples = 0;   // exchanges that came back
  std::string reference;       // the server's host name
  std::string error;           // why not ok
};

// The least-delay sample's offset (pure; samples with a negative delay,
// impossible unless a clock stepped mid-exchange, are ignored).
ClockMeasurement best_exchange(const std::vector<ClockSample>& samples);

// Answers exchanges on a UDP port (IPv4, every address) from a thread of
// its own, until destroyed.  Throws lt::Error(io) when it cannot bind.
class ClockServer {
 public:
  explicit ClockServer(std::uint16_t port = 0);
  ~ClockServer();
  ClockServer(const ClockServer&) = delete;
  ClockServer& operator=(const ClockServer&) = delete;
  std::uint16_t port() const;
  std::uint64_t answered() const;  // exchanges answered so far

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// `exchanges` round trips to host:port, back to back, each waiting at most
// timeout_ms.  Never throws: a failure is !ok with the reason.
ClockMeasurement measure_clock(const std::string& host, std::uint16_t port, int exchanges = 32, int timeout_ms = 200);

// "HOST:PORT" -> parts; a missing HOST ("":PORT) is left empty.  False when
// the port is not a number in 1..65535.
bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port);

}  // namespace lt::cluster
