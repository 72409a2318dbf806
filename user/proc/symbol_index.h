// Function symbols of one mapped ELF file, for naming sampled addresses.
// Built for big files (libtorch_cpu.so: ~550k symbols): the file is mapped,
// names stay in its string tables (no copies), and the index is one sorted
// array of (address, size, name) for sized FUNC symbols.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "user/proc/elf_image.h"

namespace lt::proc {

class SymbolIndex {
 public:
  // Throws nothing: an unreadable file gives an empty index.
  explicit SymbolIndex(const std::string& path);
  SymbolIndex(const SymbolIndex&) = delete;
  SymbolIndex& operator=(const SymbolIndex&) = delete;
  // The function containing the byte at `file_offset` of the file, or null.
  const char* function_at(std::uint64_t file_offset) const;
  // The same, with the function's extent as file offsets [begin, end); with
  // no function there, the extent of the gap between the symbols around it
  // (every address of which has none); begin == end when unknown.
  const char* function_at(std::uint64_t file_offset, std::uint64_t& begin, std::uint64_t& end) const;
  std::size_t size() const { return syms_.size(); }

 private:
  struct Sym {
    std::uint64_t value, size;
    const char* name;
  };
  elf::ElfImage image_;  // owns the mapping the names point into
  std::vector<Sym> syms_;
};

}  // namespace lt::proc
