// Just enough ELF for discovery: file type, loadable segments, and symbol
// values from .dynsym (which survives strip) with .symtab as a fallback, read
// with the one ELF reader (user/proc/elf_image.h) and kept: no file stays open.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lt::elf {

struct Segment {
  std::uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  bool executable = false;
};

struct Symbol {
  std::uint64_t value = 0;
  std::uint64_t size = 0;
};

class ElfFile {
 public:
  // Throws lt::Error(not_python) if the file cannot be read as ELF64.
  explicit ElfFile(const std::string& path);
  bool is_exec() const { return type_ == 2; }  // ET_EXEC: non-PIE, bias 0
  const std::vector<Segment>& segments() const { return segments_; }
  std::optional<Symbol> symbol(const std::string& name) const;
  // File offset of a virtual address, for uprobe attachment.
  std::optional<std::uint64_t> file_offset(std::uint64_t vaddr) const;
  // Up to `len` bytes of the file image at a virtual address (short if the
  // range leaves the segment's file contents).
  std::string read(std::uint64_t vaddr, std::uint64_t len) const;

 private:
  std::string path_;
  int type_ = 0;
  std::vector<Segment> segments_;
  std::vector<std::pair<std::string, Symbol>> symbols_;  // dynsym then symtab
};

}  // namespace lt::elf
