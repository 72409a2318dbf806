// The allocator hooks of a libc10.so that the memory probes attach to
// (read with user/proc/elf_image.h): the CPU allocator's
// c10::ProfiledCPUMemoryReporter::{New,Delete,OutOfMemory} and the CUDA
// caching allocator's c10::report{MemoryUsage,OutOfMemory}ToProfiler, with
// the file offset a uprobe takes.  The mangled names differ between torch
// versions only in the integer types of the totals (1.13: long, 2.x:
// unsigned long), which the same registers carry.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt {

struct MemHookSite {
  std::uint64_t file_offset = 0;
  std::uint32_t kind = 0;  // enum lt_mem_site (bpf/events.h)
  std::string symbol;
};

// Throws lt::Error(io) if the file cannot be read.  A file without the
// hooks gives an empty list (the caller says what is missing).
std::vector<MemHookSite> find_mem_hooks(const std::string& libc10_path);

// The lt_mem_site of a mangled symbol, or 0 (exposed for unit tests).
std::uint32_t mem_hook_kind(std::string_view mangled);

}  // namespace lt
