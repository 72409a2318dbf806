#include "user/cluster/watch_uplink.h"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "user/cluster/agent_protocol.h"
#include "user/cluster/clock_exchange.h"
#include "user/core/clocks.h"

namespace lt::cluster {

namespace {

// False once the reader is gone (EPIPE) or the descriptor fails.
bool write_all(int fd, const std::string& s) {
  std::size_t at = 0;
  while (at < s.size()) {
    const ssize_t w = write(fd, s.data() + at, s.size() - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    at += static_cast<std::size_t>(w);
  }
  return true;
}

constexpr auto kClockEvery = std::chrono::seconds(60);

}  // namespace

std::string straggler_request_line(std::uint32_t pid, const std::string& what) {
  return agent_line("straggler", {{"pid", std::to_string(pid)}, {"what", what}});
}

std::optional<StragglerRequest> parse_straggler_request(const std::string& line) {
  const auto m = parse_agent_line(line);
  if (!m || m->kind != "straggler") return std::nullopt;
  char* end = nullptr;
  const std::string pid = m->field("pid");
  const unsigned long v = std::strtoul(pid.c_str(), &end, 10);
  if (pid.empty() || *end || v == 0 || v > 0xffffffffUL) return std::nullopt;
  return StragglerRequest{static_cast<std::uint32_t>(v), m->field("what")};
}

WatchUplink::WatchUplink(std::string clock_host, std::uint16_t clock_port, std::function<void()> on_request, int out_fd,
                         int in_fd)
    : clock_host_(std::move(clock_host)),
      on_request_(std::move(on_request)),
      clock_port_(clock_port),
      out_fd_(out_fd),
      in_fd_(in_fd) {
  writer_ = std::thread([this] { write_loop(); });
  reader_ = std::thread([this] { read_loop(); });
}

WatchUplink::~WatchUplink() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  reading_.store(false);
  writer_.join();
  reader_.join();
}

void WatchUplink::arrival(std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind,
                          std::uint64_t mono_ns) {
  arrivals_.push_back({pid, pg, seq, kind, mono_ns});
}

void WatchUplink::progress(std::uint32_t pid, int rank, std::uint64_t steps, std::uint64_t median_ns) {
  lines_ += agent_line("progress", {{"pid", std::to_string(pid)},
                                    {"rank", std::to_string(rank)},
                                    {"steps", std::to_string(steps)},
                                    {"median_ns", std::to_string(median_ns)}}) +
            "\n";
}

void WatchUplink::gone(std::uint32_t pid) {
  lines_ += agent_line("gone", {{"pid", std::to_string(pid)}}) + "\n";
}

void WatchUplink::flush(std::uint64_t now_mono_ns) {
  // ~80 bytes a formatted arrival: the bound counts them so.
  const std::size_t bytes = arrivals_.size() * 80 + lines_.size();
  {
    std::lock_guard lock(m_);
    if (pending_bytes_ + bytes > kMaxPending) {
      dropped_ += arrivals_.size();  // (and the lines with them: progress is sent again each second)
    } else {
      pending_arrivals_.insert(pending_arrivals_.end(), arrivals_.begin(), arrivals_.end());
      pending_lines_ += lines_;
      pending_bytes_ += bytes;
      pending_through_ = now_mono_ns;
    }
  }
  arrivals_.clear();
  lines_.clear();
  cv_.notify_one();
}

std::vector<StragglerRequest> WatchUplink::take_requests() {
  std::lock_guard lock(req_m_);
  return std::exchange(requests_, {});
}

void WatchUplink::measure_clock_now() {
  std::vector<std::pair<std::string, std::string>> f;
  std::int64_t offset = 0;
  if (clock_host_.empty()) {
    f = {{"ok", "0"}, {"error", "no clock server: this host's wall clock taken as the coordinator's"}};
  } else {
    const auto c = measure_clock(clock_host_, clock_port_);
    if (c.ok) {
      offset = c.offset_ns;
      f = {{"ok", "1"},
           {"offset_ns", std::to_string(c.offset_ns)},
           {"delay_ns", std::to_string(c.delay_ns)},
           {"samples", std::to_string(c.samples)}};
    } else {
      f = {{"ok", "0"}, {"error", c.error}};
    }
  }
  to_coordinator_ns_ = realtime_minus_monotonic_ns() + offset;
  std::lock_guard lock(m_);
  pending_lines_ += agent_line("clock", f) + "\n";
}

void WatchUplink::write_loop() {
  measure_clock_now();
  auto next_clock = std::chrono::steady_clock::now() + kClockEvery;
  bool open = true;
  for (;;) {
    std::vector<Arrival> arrivals;
    std::string lines;
    std::uint64_t through = 0;
    bool stopping = false;
    {
      std::unique_lock lock(m_);
      cv_.wait_until(lock, next_clock, [this] {
        return stop_ || !pending_lines_.empty() || !pending_arrivals_.empty() || pending_through_;
      });
      arrivals.swap(pending_arrivals_);
      lines.swap(pending_lines_);
      through = std::exchange(pending_through_, 0);
      pending_bytes_ = 0;
      stopping = stop_;
    }
    std::string out;
    out.reserve(lines.size() + arrivals.size() * 80);
    out += lines;
    for (const auto& a : arrivals)
      out += agent_line("arrival", {{"pid", std::to_string(a.pid)},
                                    {"pg", std::to_string(a.pg)},
                                    {"seq", std::to_string(a.seq)},
                                    {"kind", std::to_string(a.kind)},
                                    {"t", std::to_string(static_cast<std::int64_t>(a.mono_ns) + to_coordinator_ns_)}}) +
             "\n";
    if (through)
      out += agent_line("through", {{"t", std::to_string(static_cast<std::int64_t>(through) + to_coordinator_ns_)}}) +
             "\n";
    if (open && !out.empty() && !write_all(out_fd_, out)) open = false;  // the coordinator is gone
    if (!open) dropped_ += arrivals.size();
    if (stopping) return;
    if (std::chrono::steady_clock::now() >= next_clock) {
      measure_clock_now();
      next_clock = std::chrono::steady_clock::now() + kClockEvery;
    }
  }
}

void WatchUplink::read_loop() {
  std::string buf;
  char chunk[4096];
  while (reading_.load()) {
    pollfd p{in_fd_, POLLIN, 0};
    const int r = poll(&p, 1, 250);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return;
    if (r == 0) continue;
    const ssize_t n = read(in_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the coordinator closed its end
    buf.append(chunk, static_cast<std::size_t>(n));
    bool any = false;
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
      if (auto req = parse_straggler_request(buf.substr(0, nl))) {
        std::lock_guard lock(req_m_);
        requests_.push_back(std::move(*req));
        any = true;
      }
    }
    if (buf.size() > 65536) buf.clear();  // no line of ours is that long
    if (any && on_request_) on_request_();
  }
}

}  // namespace lt::cluster
