#include "user/collector/xla_tracer.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/core/clocks.h"
#include "user/core/errors.h"
#include "user/proc/census.h"
#include "user/proc/procfs.h"
#include "user/sources/proctrack.h"
#include "user/sources/xlaprobe.h"

namespace lt {
namespace {

template <std::size_t N>
void copy_text(char (&dst)[N], const std::string& s) {
  const std::size_t n = std::min(s.size(), N - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// Printable ASCII, else '?': names read from a target are untrusted bytes
// and the trace must stay valid UTF-8.
std::string ascii(const std::string& s) {
  std::string out = s;
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return out;
}

}  // namespace

std::string xla_metric_name_text(const char* bytes, std::size_t len) {
  if (len == 0 || len >= LT_XLA_METRIC_NAME_MAX) return "";
  for (std::size_t i = 0; i < len; ++i)
    if (static_cast<unsigned char>(bytes[i]) < 0x21 || static_cast<unsigned char>(bytes[i]) > 0x7e) return "";
  return std::string(bytes, len);
}

XlaTracer::XlaTracer(const TracerContext& ctx) : ctx_(ctx), source_(std::make_unique<XlaProbeSource>(ctx.proctrack)) {}
XlaTracer::~XlaTracer() = default;
void XlaTracer::detach() {
  source_.reset();
}

void XlaTracer::forget(pid_t pid) {
  names_.erase(names_.lower_bound({pid, 0}), names_.upper_bound({pid, ~std::uint64_t{0}}));
  data_offset_.erase(pid);
  value_misses_.erase(pid);
}

std::optional<XlaSample> xla_sample_at(const std::vector<XlaSample>& ring, std::int64_t at, std::int64_t slack,
                                       std::int64_t window) {
  std::optional<XlaSample> best;
  for (const auto& s : ring)
    if (s.ts_ns >= at - slack && s.ts_ns <= at + window && (!best || s.ts_ns < best->ts_ns)) best = s;
  return best;
}

void XlaTracer::emit_value(const lt_event_header& h, std::uint64_t metric) {
  const pid_t pid = static_cast<pid_t>(h.pid);
  lt_xla_value_event v{};
  v.hdr = h;
  v.hdr.kind = LT_EV_XLA_VALUE;
  v.hdr.size = sizeof v;
  v.metric = metric;
  v.flags = LT_XLA_VALUE_NOT_FOUND;
  // MetricData: std::mutex (40 bytes), std::function (32), count_, then
  // std::vector<Sample> samples_ (16-byte {int64 ts, double value}).
  constexpr std::uint64_t kCount = 0x48;  // count_, then samples_'s begin and end
  constexpr std::uint64_t kNewest = 64;   // samples read back from the newest
  int& misses = value_misses_[pid];
  if (misses >= kMaxMisses) {
    ctx_.emit(&v, sizeof v);
    return;
  }
  // A child of a --children target shares its parent's _XLAC.
  auto off = data_offset_.find(pid);
  int data_offset = off != data_offset_.end() ? off->second
                    : libs_.size() == 1       ? libs_.begin()->second.metric_data_offset
                                              : -1;
  std::uint64_t data = 0;
  if (data_offset < 0 ||
      !proc::read_memory(pid, metric + static_cast<std::uint64_t>(data_offset), &data, sizeof data) || !data) {
    ctx_.emit(&v, sizeof v);
    return;
  }
  const std::int64_t offset = realtime_minus_monotonic_ns();
  const std::int64_t at = static_cast<std::int64_t>(h.ts_ns) + offset;
  // The drain can run before the sample is in: AddSample takes a lock and
  // the time after the probe fired.  Read again while the newest sample is
  // older than the probe (at most ~1 ms: the target holds nothing of ours).
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::uint64_t head[3] = {0, 0, 0};
    if (!proc::read_memory(pid, data + kCount, head, sizeof head) || head[2] <= head[1] ||
        (head[2] - head[1]) % 16 != 0 || (head[2] - head[1]) / 16 > (1u << 20))
      break;
    const std::uint64_t cap = (head[2] - head[1]) / 16, count = head[0];
    std::vector<XlaSample> ring;
    for (std::uint64_t i = count > kNewest ? count - kNewest : 0; i < count; ++i) {
      XlaSample smp;
      if (proc::read_memory(pid, head[1] + 16 * (i % cap), &smp, sizeof smp)) ring.push_back(smp);
    }
    if (auto found = xla_sample_at(ring, at)) {
      v.sample_ns = found->ts_ns;
      v.value = found->value;
      v.flags = 0;
      break;
    }
    if (!ring.empty() && ring.back().ts_ns >= at) break;  // it was there and is gone, or never came
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  misses = (v.flags & LT_XLA_VALUE_NOT_FOUND) ? misses + 1 : 0;
  if (misses == kMaxMisses)
    ctx_.note("pid " + std::to_string(pid) + ": torch_xla's transfer byte counts were not found in its metrics " +
              std::to_string(kMaxMisses) +
              " times running (another layout?): its transfer bytes are unknown from here on");
  ctx_.emit(&v, sizeof v);
}

void XlaTracer::emit_info(pid_t pid, const std::string& library) {
  lt_xla_info_event e{};
  e.hdr = user_header(LT_EV_XLA_INFO, sizeof e, pid, monotonic_ns());
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  const std::string maps((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  copy_text(e.version, ascii(proc::torch_xla_version(pid, library)));
  copy_text(e.device, proc::xla_device(pid, proc::scan_maps(maps)));
  copy_text(e.library, ascii(library));
  ctx_.emit(&e, sizeof e);
}

bool XlaTracer::attach(pid_t pid, pid_t pid_filter) {
  auto found = proc::find_mapped_library(pid, "_XLAC.");  // not _XLAC_cuda_functions
  if (!found) return false;
  const auto& [lib, open_path, file] = *found;
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1})) {
    if (auto known = libs_.find(file); known != libs_.end()) data_offset_[pid] = known->second.metric_data_offset;
    emit_info(pid, lib);
    return true;
  }
  auto known = libs_.find(file);
  if (known == libs_.end()) {
    auto found_lib = find_xla_sites(open_path);
    if (auto missing = xla_sites_missing(found_lib.sites); !missing.empty())
      throw Error(ExitCode::unsupported, lib + " has no " + missing + ": XLA compiles cannot be traced");
    last_ = lib + ": " + std::to_string(found_lib.sites.size()) + " torch_xla runtime sites" +
            (found_lib.metric_data_offset < 0 ? " (no Metric::GetData: transfer bytes unknown)" : "");
    known = libs_.emplace(file, std::move(found_lib)).first;
  }
  data_offset_[pid] = known->second.metric_data_offset;
  std::vector<XlaProbeSource::Site> sites;
  for (const auto& s : known->second.sites) sites.push_back({s.file_offset, s.kind});
  probes_ += source_->attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  emit_info(pid, lib);
  return true;
}

void XlaTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  if (h.kind != LT_EV_XLA || record.size() != sizeof(lt_xla_event)) return;
  lt_xla_event e;
  std::memcpy(&e, record.data(), sizeof e);
  if ((e.site != LT_XLA_TIMED_END && e.site != LT_XLA_METRIC_SAMPLE && e.site != LT_XLA_METRIC_VALUE) || !e.obj) return;
  const pid_t pid = static_cast<pid_t>(h.pid);
  auto named = names_.find({pid, e.obj});
  if (named == names_.end()) {
    // Metric::name_ is a std::string (libstdc++): data pointer, length, and
    // the inline buffer; short names (all of torch_xla's) live in the buffer.
    lt_xla_metric_name_event n{};
    n.hdr = user_header(LT_EV_XLA_METRIC_NAME, sizeof n, pid, h.ts_ns);
    n.metric = e.obj;
    std::uint64_t str[2] = {0, 0};
    char text[LT_XLA_METRIC_NAME_MAX] = {};
    if (proc::read_memory(pid, e.obj, str, sizeof str) && str[1] > 0 && str[1] < LT_XLA_METRIC_NAME_MAX &&
        proc::read_memory(pid, str[0], text, str[1]))
      copy_text(n.name, xla_metric_name_text(text, str[1]));
    ctx_.emit(&n, sizeof n);
    named = names_.emplace(std::make_pair(pid, e.obj), std::string(n.name)).first;
  }
  // The transfers' bytes: torch_xla's value samples of them.
  if (e.site == LT_XLA_METRIC_VALUE && (named->second == "InboundData" || named->second == "OutboundData"))
    emit_value(h, e.obj);
}

}  // namespace lt
