// Just enough ELF for discovery: file type, loadable segments, symbol values
// from .dynsym (which survives strip) with .symtab as a fallback, and the
// pointers in its data as the dynamic loader will have relocated them, read
// with the one ELF reader (user/proc/elf_image.h) and kept: no file stays open.
//
// Why the pointers come from the file: a process held at its exec (or at a
// library's load) has not been relocated yet, so its memory holds the
// link-time addends or zeros where the loader will put pointers; what the
// file and its relocations say is the same at every moment.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace lt::elf {

class ElfImage;

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
  // The 8-byte word at a virtual address as the loader leaves it, less the
  // load bias: a relocated pointer's link-time target (R_X86_64_RELATIVE's
  // addend, a symbol defined here plus its addend), else the file's word
  // (data, or a pointer of a non-PIE executable, or an implicit addend).
  // nullopt: outside the file image, or relocated against a symbol from
  // another object or by an ifunc resolver (known only at run time).
  std::optional<std::uint64_t> pointer_at(std::uint64_t vaddr) const;
  // Every 8-aligned word of a segment's file image as pointer_at reads it,
  // the first at align_up(s.vaddr, 8): one file read for a table scan.
  std::vector<std::optional<std::uint64_t>> words_of(const Segment& s) const;
  // The NUL-terminated string at a virtual address, at most `max` bytes
  // (nullopt: outside the file image or not terminated within max).
  std::optional<std::string> string_at(std::uint64_t vaddr, std::size_t max) const;

 private:
  void read_relocations(const ElfImage& image);
  std::string path_;
  // Opened at the first read and kept: a table walk reads ~100 words and
  // strings (one open each before).
  struct Fd {
    int fd = -1;
    ~Fd();
  };
  mutable std::shared_ptr<Fd> file_;
  int type_ = 0;
  std::vector<Segment> segments_;
  std::vector<std::pair<std::string, Symbol>> symbols_;  // dynsym then symtab
  // Relocated words by address: their link-time value (nullopt: only known
  // at run time). Words with no relocation are read from the file.
  std::unordered_map<std::uint64_t, std::optional<std::uint64_t>> relocated_;
};

}  // namespace lt::elf
