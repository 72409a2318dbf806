#include "user/collector/xla_tracer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "user/collector/session_options.h"
#include "user/collector/synthesized_records.h"
#include "user/core/errors.h"
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

std::string environ_value(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = name + "=";
  std::size_t at = 0;
  while (at < env.size()) {
    const std::size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, key.size(), key) == 0) return env.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return "";
}

}  // namespace

std::string xla_device_of(const std::string& pjrt_device, const std::vector<std::string>& paths) {
  if (!pjrt_device.empty()) return ascii(pjrt_device.substr(0, 31));
  for (const auto& p : paths) {
    const std::string base = std::filesystem::path(p).filename().string();
    if (base.starts_with("libtpu")) return "TPU";
    if (base.find("pjrt") != std::string::npos && base.find("cuda") != std::string::npos) return "CUDA";
    if (base.find("pjrt_c_api_gpu") != std::string::npos) return "CUDA";
  }
  return "CPU";
}

std::string xla_version_of(const std::string& xlac_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path site = fs::path(xlac_path).parent_path();  // site-packages (where _XLAC lives)
  for (fs::directory_iterator it(site, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string prefix = "torch_xla-", suffix = ".dist-info";
    if (name.starts_with(prefix) && name.ends_with(suffix) && name.size() > prefix.size() + suffix.size())
      return ascii(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
  }
  return "";
}

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
  named_.erase(named_.lower_bound({pid, 0}), named_.upper_bound({pid, ~std::uint64_t{0}}));
}

void XlaTracer::emit_info(pid_t pid, const std::string& library) {
  lt_xla_info_event e{};
  e.hdr = user_header(LT_EV_XLA_INFO, sizeof e, pid, monotonic_ns());
  std::vector<std::string> paths;
  for (const auto& m : proc::read_maps(pid)) paths.push_back(m.path);
  copy_text(e.version, xla_version_of(library));
  copy_text(e.device, xla_device_of(environ_value(pid, "PJRT_DEVICE"), paths));
  copy_text(e.library, ascii(library));
  ctx_.emit(&e, sizeof e);
}

bool XlaTracer::attach(pid_t pid, pid_t pid_filter) {
  auto found = proc::find_mapped_library(pid, "_XLAC.");  // not _XLAC_cuda_functions
  if (!found) return false;
  const auto& [lib, open_path, file] = *found;
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1})) {
    emit_info(pid, lib);
    return true;
  }
  auto known = sites_.find(file);
  if (known == sites_.end()) {
    auto sites = find_xla_sites(open_path);
    if (auto missing = xla_sites_missing(sites); !missing.empty())
      throw Error(ExitCode::unsupported, lib + " has no " + missing + ": XLA compiles cannot be traced");
    last_ = lib + ": " + std::to_string(sites.size()) + " torch_xla runtime sites";
    known = sites_.emplace(file, std::move(sites)).first;
  }
  std::vector<XlaProbeSource::Site> sites;
  for (const auto& s : known->second) sites.push_back({s.file_offset, s.kind});
  probes_ += source_->attach(open_path, pid_filter, sites);
  attached_.insert({file.first, file.second, pid_filter});
  emit_info(pid, lib);
  return true;
}

void XlaTracer::observe(const lt_event_header& h, std::span<const std::byte> record) {
  if (h.kind != LT_EV_XLA || record.size() != sizeof(lt_xla_event)) return;
  lt_xla_event e;
  std::memcpy(&e, record.data(), sizeof e);
  if ((e.site != LT_XLA_TIMED_END && e.site != LT_XLA_METRIC_SAMPLE) || !e.obj) return;
  if (!named_.insert({static_cast<pid_t>(h.pid), e.obj}).second) return;
  // Metric::name_ is a std::string (libstdc++): data pointer, length, and
  // the inline buffer; short names (all of torch_xla's) live in the buffer.
  lt_xla_metric_name_event n{};
  n.hdr = user_header(LT_EV_XLA_METRIC_NAME, sizeof n, static_cast<pid_t>(h.pid), h.ts_ns);
  n.metric = e.obj;
  std::uint64_t str[2] = {0, 0};
  char text[LT_XLA_METRIC_NAME_MAX] = {};
  if (proc::read_memory(static_cast<pid_t>(h.pid), e.obj, str, sizeof str) && str[1] > 0 &&
      str[1] < LT_XLA_METRIC_NAME_MAX && proc::read_memory(static_cast<pid_t>(h.pid), str[0], text, str[1]))
    copy_text(n.name, xla_metric_name_text(text, str[1]));
  ctx_.emit(&n, sizeof n);
}

}  // namespace lt
