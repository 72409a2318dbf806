#include "user/torch/mem_sites.h"

#include <cstring>

#include "bpf/events.h"
#include "user/core/errors.h"
#include "user/proc/elf_image.h"

namespace lt {

std::uint32_t mem_hook_kind(std::string_view m) {
  if (m == "_ZN3c1025ProfiledCPUMemoryReporter3NewEPvm") return LT_MEM_SITE_CPU_NEW;
  if (m == "_ZN3c1025ProfiledCPUMemoryReporter6DeleteEPv") return LT_MEM_SITE_CPU_DELETE;
  if (m == "_ZN3c1025ProfiledCPUMemoryReporter11OutOfMemoryEm") return LT_MEM_SITE_CPU_OOM;
  // (void*, long, T, T, c10::Device) with T = long (1.13) or unsigned long (2.x)
  if (m == "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE" ||
      m == "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE")
    return LT_MEM_SITE_REPORT_USAGE;
  if (m == "_ZN3c1027reportOutOfMemoryToProfilerElllNS_6DeviceE" ||
      m == "_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE")
    return LT_MEM_SITE_REPORT_OOM;
  return 0;
}

std::vector<MemHookSite> find_mem_hooks(const std::string& path) {
  const elf::ElfImage file(path);
  if (file.problem() == elf::ElfImage::Problem::cannot_open)
    throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(file.error()));
  std::vector<MemHookSite> out;
  if (!file.ok() || !file.is_elf64()) return out;
  std::uint32_t seen = 0;  // one site per kind
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (!s.defined() || s.value == 0 || s.type != STT_FUNC) return;
        const std::uint32_t kind = mem_hook_kind(s.name);
        if (!kind || (seen & (1u << kind))) return;
        const auto off = file.file_offset(s.value, true);
        if (!off) return;
        seen |= 1u << kind;
        out.push_back({*off, kind, s.name});
      },
      elf::ElfImage::Tables::dynamic_only);
  return out;
}

}  // namespace lt
