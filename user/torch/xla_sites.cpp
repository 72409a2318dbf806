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

// torch_xla 2.9.0's names (read off its wheel; other releases not run):
// PjRtComputationClient is the runtime on every PJRT device (CPU, TPU,
// CUDA); IfrtComputationClient is its experimental sibling, same methods.
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
    {"_ZN9torch_xla7runtime7metrics6Metric9AddSampleEd", true, LT_XLA_METRIC_VALUE},
};
constexpr std::string_view kGetData = "_ZNK9torch_xla7runtime7metrics6Metric7GetDataEv";

}  // namespace

std::uint32_t xla_site_kind(std::string_view m) {
  if (m.find('.') != std::string_view::npos) return 0;
  for (const auto& s : kSites)
    if (s.exact ? m == s.prefix : m.starts_with(s.prefix)) return s.kind;
  return 0;
}

int first_load_from_this(std::string_view code) {
  const auto* b = reinterpret_cast<const unsigned char*>(code.data());
  for (std::size_t i = 0; i + 3 < code.size(); ++i) {
    if (b[i] != 0x48 || b[i + 1] != 0x8b) continue;  // REX.W mov r64, r/m64
    if (b[i + 2] == 0x47) return b[i + 3];           // ModRM: rax <- disp8(%rdi)
    if (b[i + 2] == 0x87 && i + 6 < code.size())     // rax <- disp32(%rdi)
      return static_cast<int>(b[i + 3] | b[i + 4] << 8 | b[i + 5] << 16 | static_cast<unsigned>(b[i + 6]) << 24);
  }
  return -1;
}

XlaLibrary find_xla_sites(const std::string& path) {
  const elf::ElfImage file(path);
  if (file.problem() == elf::ElfImage::Problem::cannot_open)
    throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(file.error()));
  XlaLibrary out;
  if (!file.ok() || !file.is_elf64()) return out;
  std::set<std::uint64_t> seen;
  std::uint64_t get_data = 0;
  file.for_each_symbol([&](const elf::SymbolEntry& s) {
    if (!s.defined() || s.value == 0 || s.type != STT_FUNC) return;
    if (s.name == kGetData) get_data = s.value;
    const std::uint32_t kind = xla_site_kind(s.name);
    if (!kind) return;
    const auto off = file.file_offset(s.value, true);
    if (!off || !seen.insert(*off).second) return;
    out.sites.push_back({*off, kind, s.name});
  });
  if (get_data)
    file.for_each_section([&](const elf::SectionEntry& sec) {
      const auto& h = sec.header;
      if (get_data < h.sh_addr || get_data - h.sh_addr >= sec.bytes.size()) return;
      const int off = first_load_from_this(sec.bytes.substr(get_data - h.sh_addr, 48));
      if (off >= 0 && off < 4096 && off % 8 == 0) out.metric_data_offset = off;
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
