#include "user/proc/symbol_index.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>

namespace lt::proc {

SymbolIndex::SymbolIndex(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return;
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return;
  // Mapped, not read: names point into the mapping for as long as we live.
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF || !gelf_getehdr(elf_, &eh)) return;
  size_t nphdr = 0;
  elf_getphdrnum(elf_, &nphdr);
  for (size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf_, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      segments_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
  }
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) || !sh.sh_entsize) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    const size_t n = sh.sh_size / sh.sh_entsize;
    syms_.reserve(syms_.size() + n);
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(data, static_cast<int>(i), &s) || s.st_shndx == SHN_UNDEF || s.st_size == 0 ||
          GELF_ST_TYPE(s.st_info) != STT_FUNC)
        continue;
      const char* name = elf_strptr(elf_, sh.sh_link, s.st_name);
      if (name && *name) syms_.push_back({s.st_value, s.st_size, name});
    }
  }
  std::sort(syms_.begin(), syms_.end(), [](const Sym& a, const Sym& b) { return a.value < b.value; });
}

SymbolIndex::~SymbolIndex() {
  if (elf_) elf_end(elf_);
  if (fd_ >= 0) close(fd_);
}

const char* SymbolIndex::function_at(std::uint64_t file_offset) const {
  std::uint64_t vaddr = 0;
  bool found = false;
  for (auto& s : segments_)
    if (file_offset >= s.offset && file_offset < s.offset + s.filesz) {
      vaddr = file_offset - s.offset + s.vaddr;
      found = true;
      break;
    }
  if (!found || syms_.empty()) return nullptr;
  auto it =
      std::upper_bound(syms_.begin(), syms_.end(), vaddr, [](std::uint64_t v, const Sym& s) { return v < s.value; });
  // .dynsym and .symtab both list most functions: look back past aliases.
  for (int back = 0; it != syms_.begin() && back < 8; ++back) {
    --it;
    if (vaddr < it->value + it->size) return it->name;
  }
  return nullptr;
}

}  // namespace lt::proc
