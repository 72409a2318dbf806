// Puts the XLA probes on each target that runs torch_xla: the runtime sites
// of its _XLAC extension (user/torch/xla_sites.h), found once per file and
// attached per target (or for every process mapping the file, with
// --children).  Names torch_xla's metrics for the report: before the first
// record that carries a metric object, an XLA_METRIC_NAME read from the
// target (Metric::name_, a std::string, its first member); at the attach an
// XLA_INFO (version, PJRT device).
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bpf/events.h"
#include "user/collector/tracer.h"
#include "user/torch/xla_sites.h"

namespace lt {

class XlaProbeSource;

class XlaTracer final : public Tracer {
 public:
  explicit XlaTracer(const TracerContext& ctx);
  ~XlaTracer() override;
  std::string_view name() const override { return "XLA"; }
  bool library() const override { return true; }
  // Probes pid's _XLAC (pid_filter -1: every process mapping it).  Returns
  // false while it is not mapped: a job imports torch_xla when it likes,
  // and a job without it is polled at no cost beyond reading its maps.
  // Throws lt::Error (io: unreadable; unsupported: no runtime symbols; bpf).
  bool attach(pid_t pid, pid_t pid_filter) override;
  const char* lost() const override { return "its XLA compiles and executions are missing from the report"; }
  // Never holds a CPython at its exec for _XLAC: it is no dependency of
  // torch (a job without torch_xla would be held for nothing).
  bool holds_at_load() const override { return false; }
  std::size_t probes() const override { return probes_; }
  std::string describe(pid_t) const override { return last_; }
  void detach() override;
  void fill_target(pid_t, lt_target& t) const override { t.flags |= LT_TARGET_XLA; }
  void observe(const lt_event_header& h, std::span<const std::byte> record) override;
  void forget(pid_t pid) override;

 private:
  void emit_info(pid_t pid, const std::string& library);

  TracerContext ctx_;
  std::unique_ptr<XlaProbeSource> source_;
  // Reads the value a METRIC_VALUE added from the metric's samples: an
  // XLA_VALUE record (not found: flagged).
  void emit_value(const lt_event_header& h, std::uint64_t metric);

  std::map<std::pair<unsigned long, unsigned long>, XlaLibrary> libs_;  // per (dev, inode)
  std::map<pid_t, int> data_offset_;  // per process: XlaLibrary::metric_data_offset of its _XLAC
  // Value samples not found in a row, per process: past kMaxMisses the
  // reads stop (each can wait up to 1 ms for its sample: another layout
  // must not slow the drain), and a note says so.
  static constexpr int kMaxMisses = 8;
  std::map<pid_t, int> value_misses_;
  std::map<std::pair<pid_t, std::uint64_t>, std::string> names_;  // (pid, metric) -> name sent
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;
  std::size_t probes_ = 0;
  std::string last_;
};

// A metric's name as read from the target: printable ASCII or "".
std::string xla_metric_name_text(const char* bytes, std::size_t len);

// A metric sample (MetricData's ring: {timestamp ns, value}).
struct XlaSample {
  std::int64_t ts_ns = 0;
  double value = 0;
};
// The sample a value probe at CLOCK_REALTIME `at_ns` added: the earliest
// one from `at_ns - slack_ns` to `at_ns + window_ns` (AddSample takes its
// time right after the probe; the slack covers converting the probe's
// CLOCK_MONOTONIC time), or none (exposed for unit tests).
std::optional<XlaSample> xla_sample_at(const std::vector<XlaSample>& ring, std::int64_t at_ns,
                                       std::int64_t slack_ns = 5'000, std::int64_t window_ns = 20'000'000);

}  // namespace lt
