// The one ELF reader (libelf): a file mapped read-only, its loadable
// segments, its symbol tables and its sections' bytes.  Built for big files
// (libtorch_cpu.so: ~450 MB, ~550k symbols): the kernel pages in only what is
// read, and names stay in the file's string tables (no copies), valid for as
// long as the image lives.
//
// It never throws: what went wrong is problem(), and each caller turns that
// into its own error (op catalog, Python discovery, symbolizer).
#pragma once
#include <gelf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lt::elf {

struct LoadSegment {  // a PT_LOAD program header
  std::uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  std::uint32_t flags = 0;  // PF_*
  bool executable() const { return (flags & PF_X) != 0; }
  bool holds_vaddr(std::uint64_t v) const { return v >= vaddr && v - vaddr < filesz; }
  bool holds_offset(std::uint64_t o) const { return o >= offset && o - offset < filesz; }
};

struct SymbolEntry {
  const char* name;  // never null ("" when it has none); points into the image
  std::uint64_t value, size;
  unsigned char type;   // STT_*
  std::uint16_t shndx;  // SHN_UNDEF: imported, not defined here
  bool dynamic;         // from .dynsym (else .symtab)
  bool defined() const { return shndx != SHN_UNDEF; }
};

struct SectionEntry {
  std::string_view name;  // ".rodata"
  GElf_Shdr header;
  std::string_view bytes;  // its file contents; empty for SHT_NOBITS or when outside the file
};

class ElfImage {
 public:
  enum class Problem {
    none,
    cannot_open,  // error() holds errno
    not_regular,  // a directory, a device, ...
    not_elf,      // no ELF header (an empty file, a script, an archive, a truncated header)
  };

  explicit ElfImage(const std::string& path);
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  Problem problem() const { return problem_; }
  bool ok() const { return problem_ == Problem::none; }
  int error() const { return errno_; }
  bool is_elf64() const { return elf64_; }
  bool native_byte_order() const { return native_order_; }
  int type() const { return type_; }        // ET_*
  int machine() const { return machine_; }  // EM_*

  const std::vector<LoadSegment>& loads() const { return loads_; }
  // File offset of a virtual address inside a PT_LOAD's file image (only
  // executable ones when asked), else nullopt.
  std::optional<std::uint64_t> file_offset(std::uint64_t vaddr, bool executable_only = false) const;

  // Every symbol of .dynsym and .symtab (or of .dynsym only), in section
  // order; f(const SymbolEntry&).
  enum class Tables { all, dynamic_only };
  template <class F>
  void for_each_symbol(F&& f, Tables tables = Tables::all) const;
  // Every section header with its name and bytes; f(const SectionEntry&).
  template <class F>
  void for_each_section(F&& f) const;

 private:
  bool next_symbol_table(Elf_Scn*& scn, GElf_Shdr& sh, Elf_Data*& data) const;
  SectionEntry section_entry(const GElf_Shdr& sh) const;

  int fd_ = -1;
  Elf* elf_ = nullptr;
  Problem problem_ = Problem::none;
  int errno_ = 0;
  bool elf64_ = false, native_order_ = false;
  int type_ = 0;
  int machine_ = 0;
  std::string_view raw_;  // the whole file
  std::size_t shstrndx_ = 0;
  std::vector<LoadSegment> loads_;
};

template <class F>
void ElfImage::for_each_symbol(F&& f, Tables tables) const {
  Elf_Scn* scn = nullptr;
  GElf_Shdr sh;
  Elf_Data* data = nullptr;
  while (next_symbol_table(scn, sh, data)) {
    if (tables == Tables::dynamic_only && sh.sh_type != SHT_DYNSYM) continue;
    GElf_Sym s;
    for (int i = 0; gelf_getsym(data, i, &s); ++i) {
      const char* n = elf_strptr(elf_, sh.sh_link, s.st_name);
      f(SymbolEntry{n ? n : "", s.st_value, s.st_size, static_cast<unsigned char>(GELF_ST_TYPE(s.st_info)), s.st_shndx,
                    sh.sh_type == SHT_DYNSYM});
    }
  }
}

template <class F>
void ElfImage::for_each_section(F&& f) const {
  if (!elf_) return;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh)) f(section_entry(sh));
  }
}

}  // namespace lt::elf
