#include "user/torch/xla_sites.h"

#include <cstring>
#include <set>

#include "bpf/events.h"
#include "user/core/errors.h"
#include "user/proc/elf_image.h"

namespace lt {
namespace {

struct SiteName {
  std::string_view prefix;  // of the mangled name; `exact` for the whole name
  bool exact;
  std::uint32_t kind;
};

// torch_xla 2.1 to 2.9 (checked on 2.9.0's wheel): PjRtComputationClient is
// the runtime on every PJRT device (CPU, TPU, CUDA); IfrtComputationClient
// is its experimental sibling, same methods.
constexpr SiteName kSites[] = {
    {"_ZN9torch_xla7runtime21PjRtComputationClient7CompileE", false, LT_XLA_COMPILE},
    {"_ZN9torch_xla7runtime21PjRtComputationClient18ExecuteComputationE", false, LT_XLA_EXECUTE},
    {"_ZN9torch_xla7runtime21PjRtComputationClient17ExecuteReplicatedE", false, LT_XLA_EXECUTE_REPLICATED},
    {"_ZN9torch_xla7runtime21PjRtComputationClient16TransferToDeviceE", false, LT_XLA_TO_DEVICE},
    {"_ZN9torch_xla7runtime21PjRtComputationClient18TransferFromDeviceE", false, LT_XLA_FROM_DEVICE},
    {"_ZN9torch_xla7runtime21IfrtComputationClient7CompileE", false, LT_XLA_COMPILE},
    {"_ZN9torch_xla7runtime21IfrtComputationClient18ExecuteComputationE", false, LT_XLA_EXECUTE},
    {"_ZN9torch_xla7runtime21IfrtComputationClient17ExecuteReplicatedE", false, LT_XLA_EXECUTE_REPLICATED},
    {"_ZN9torch_xla7runtime21IfrtComputationClient16TransferToDeviceE", false, LT_XLA_TO_DEVICE},
    {"_ZN9torch_xla7runtime21IfrtComputationClient18TransferFromDeviceE", false, LT_XLA_FROM_DEVICE},
    {"_ZN9torch_xla16XLAGraphExecutor8MarkStepE", false, LT_XLA_MARK_STEP},
    // D1 and D2 share one address; either name finds it.
    {"_ZN9torch_xla7runtime7metrics12TimedSectionD1Ev", true, LT_XLA_TIMED_END},
    {"_ZN9torch_xla7runtime7metrics12TimedSectionD2Ev", true, LT_XLA_TIMED_END},
    {"_ZN9torch_xla7runtime7metrics6Metric9AddSampleEld", true, LT_XLA_METRIC_SAMPLE},
};

}  // namespace

std::uint32_t xla_site_kind(std::string_view m) {
  if (m.find('.') != std::string_view::npos) return 0;
  for (const auto& s : kSites)
    if (s.exact ? m == s.prefix : m.starts_with(s.prefix)) return s.kind;
  return 0;
}

std::vector<XlaSite> find_xla_sites(const std::string& path) {
  const elf::ElfImage file(path);
  if (file.problem() == elf::ElfImage::Problem::cannot_open)
    throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(file.error()));
  std::vector<XlaSite> out;
  if (!file.ok() || !file.is_elf64()) return out;
  std::set<std::uint64_t> seen;
  file.for_each_symbol([&](const elf::SymbolEntry& s) {
    if (!s.defined() || s.value == 0 || s.type != STT_FUNC) return;
    const std::uint32_t kind = xla_site_kind(s.name);
    if (!kind) return;
    const auto off = file.file_offset(s.value, true);
    if (!off || !seen.insert(*off).second) return;
    out.push_back({*off, kind, s.name});
  });
  return out;
}

std::string xla_sites_missing(const std::vector<XlaSite>& sites) {
  std::set<std::uint32_t> kinds;
  for (const auto& s : sites) kinds.insert(s.kind);
  std::string missing;
  auto need = [&](std::uint32_t k, const char* what) {
    if (!kinds.count(k)) missing += std::string(missing.empty() ? "" : ", ") + what;
  };
  need(LT_XLA_COMPILE, "PjRtComputationClient::Compile");
  need(LT_XLA_EXECUTE, "PjRtComputationClient::ExecuteComputation");
  need(LT_XLA_METRIC_SAMPLE, "metrics::Metric::AddSample");
  return missing;
}

}  // namespace lt
