#include "reports/aggregate/logging_time.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "reports/aggregate/py_symbols.h"
#include "reports/aggregate/sample_weight.h"
#include "user/model/record_dispatch.h"

namespace lt {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Directories whose every function is logging: in Lightning (2.x's
// `lightning.pytorch`, `pytorch_lightning`, Fabric), its loggers and the
// trainer's logger connector (self.log's results, the loggers' calls);
// anywhere, the logger libraries.
constexpr std::array<std::string_view, 2> kLightningLoggingDirs = {"/loggers/", "/logger_connector/"};
constexpr std::array<std::string_view, 7> kLoggingLibraryDirs = {
    "/torch/utils/tensorboard/", "/tensorboardX/",        "/site-packages/tensorboard/", "/site-packages/wandb/",
    "/site-packages/mlflow/",    "/dist-packages/wandb/", "/dist-packages/mlflow/",
};

bool in_lightning(std::string_view file) {
  return contains(file, "/lightning/") || contains(file, "/pytorch_lightning/") || contains(file, "/lightning_fabric/");
}

}  // namespace

bool is_logging_frame(const StackFrame& f) {
  if (f.native || f.file.empty()) return false;
  const std::string_view file = f.file, fn = f.function;
  // LightningModule.log / log_dict (co_qualname on 3.11+, co_name before).
  if (in_lightning(file) && ends_with(file, "/core/module.py") &&
      (fn == "log" || fn == "log_dict" || ends_with(fn, ".log") || ends_with(fn, ".log_dict")))
    return true;
  if (ends_with(file, "/logging/__init__.py") || ends_with(file, "/logging/handlers.py")) return true;
  for (std::string_view dir : kLoggingLibraryDirs)
    if (contains(file, dir)) return true;
  if (!in_lightning(file)) return false;
  for (std::string_view dir : kLightningLoggingDirs)
    if (contains(file, dir)) return true;
  return false;
}

struct LoggingAggregator::State {
  PySymbols symbols;
  std::uint64_t epoch = 0;
  // (pid, code, checksum) -> logging or not: the test per frame is string
  // searches, and a hot loop's frames repeat in every sample.
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>, bool> is_logging;
  std::map<std::string, std::uint32_t> name_index;
  LoggingReport out;

  std::uint32_t name(const std::string& n) {
    auto [it, fresh] = name_index.try_emplace(n, static_cast<std::uint32_t>(out.names.size()));
    if (fresh) out.names.push_back(n);
    return it->second;
  }

  bool logging(std::uint32_t pid, const lt_py_frame& f) {
    const auto key = std::make_tuple(pid, f.code, f.checksum);
    if (auto it = is_logging.find(key); it != is_logging.end()) return it->second;
    const bool yes = is_logging_frame(symbols.frame(pid, f));
    // Unnamed yet (its PY_CODE may come later): asked again next time.
    if (symbols.code(pid, f.code, f.checksum)) is_logging.emplace(key, yes);
    return yes;
  }

  void sample(const lt_event_header& h, const lt_py_sample_event& e) {
    if (h.kind != LT_EV_PY_SAMPLE || !e.nframes || (e.flags & LT_SAMPLE_IN_PROBE)) return;
    if (symbols.epoch() != epoch) {
      epoch = symbols.epoch();
      is_logging.clear();
    }
    out.sampled[h.pid] += sample_weight(e);
    const std::size_t n = std::min<std::size_t>(e.nframes, LT_STACK_MAX);
    // frames[0] is the leaf: the outermost logging frame is the entry.
    for (std::size_t i = n; i-- > 0;) {
      if (!logging(h.pid, e.frames[i])) continue;
      const StackFrame entry = symbols.frame(h.pid, e.frames[i]);
      LoggingSample s{h.ts_ns, h.tid, name(entry.function + " (" + std::string(base_name(entry.file)) + ")"),
                      LoggingReport::kNoCaller, static_cast<std::uint32_t>(sample_weight(e))};
      if (i + 1 < n) {
        const StackFrame caller = symbols.frame(h.pid, e.frames[i + 1]);
        s.caller =
            name(caller.file.empty() ? caller.function
                                     : caller.function + " (" + caller.file + ":" + std::to_string(caller.line) + ")");
      }
      out.procs[h.pid].push_back(s);
      return;
    }
  }
};

LoggingAggregator::LoggingAggregator() : s_(std::make_unique<State>()) {}
LoggingAggregator::~LoggingAggregator() = default;

void LoggingAggregator::add(const lt_event_header& h, const std::byte* record) {
  s_->symbols.add(h, record);
  visit_record(h, record,
               overloaded{[&](const lt_event_header&, const lt_sampler_info_event& e) {
                            if (e.flags & LT_SAMPLER_ON_CPU) s_->out.period_ns = e.period_ns;
                          },
                          [&](const lt_event_header& hh, const lt_py_sample_event& e) { s_->sample(hh, e); }});
}

LoggingReport LoggingAggregator::finish() {
  for (auto& [pid, v] : s_->out.procs)
    std::stable_sort(v.begin(), v.end(),
                     [](const LoggingSample& a, const LoggingSample& b) { return a.ts_ns < b.ts_ns; });
  return std::move(s_->out);
}

}  // namespace lt
