#include "user/proc/elf_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace lt::elf {

ElfImage::ElfImage(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    problem_ = Problem::not_elf;
    return;
  }
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    problem_ = Problem::cannot_open;
    errno_ = errno;
    return;
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem_ = Problem::not_regular;
    return;
  }
  // Mapped, not read: the kernel pages in only what is used.
  // (libelf falls back to reading when the file cannot be mapped.)
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF || !gelf_getehdr(elf_, &eh)) {
    problem_ = Problem::not_elf;
    return;
  }
  type_ = eh.e_type;
  machine_ = eh.e_machine;
  elf64_ = gelf_getclass(elf_) == ELFCLASS64;
  constexpr unsigned char host_data = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
  native_order_ = eh.e_ident[EI_DATA] == host_data;
  std::size_t raw_size = 0;
  if (const char* raw = elf_rawfile(elf_, &raw_size)) raw_ = {raw, raw_size};
  if (elf_getshdrstrndx(elf_, &shstrndx_) != 0) shstrndx_ = 0;

  std::size_t nphdr = 0;
  if (elf_getphdrnum(elf_, &nphdr) != 0) nphdr = 0;
  for (std::size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf_, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      loads_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, ph.p_flags});
  }
}

ElfImage::~ElfImage() {
  if (elf_) elf_end(elf_);
  if (fd_ >= 0) close(fd_);
}

std::optional<std::uint64_t> ElfImage::file_offset(std::uint64_t vaddr, bool executable_only) const {
  for (const auto& s : loads_)
    if ((!executable_only || s.executable()) && s.holds_vaddr(vaddr)) return vaddr - s.vaddr + s.offset;
  return std::nullopt;
}

bool ElfImage::next_symbol_table(Elf_Scn*& scn, GElf_Shdr& sh, Elf_Data*& data) const {
  if (!elf_) return false;
  while ((scn = elf_nextscn(elf_, scn))) {
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)) continue;
    if ((data = elf_getdata(scn, nullptr))) return true;
  }
  return false;
}

SectionEntry ElfImage::section_entry(const GElf_Shdr& sh) const {
  SectionEntry e{{}, sh, {}};
  if (const char* n = elf_strptr(elf_, shstrndx_, sh.sh_name)) e.name = n;
  // The file's own bytes (no conversion): what a string scan wants.
  if (sh.sh_type != SHT_NOBITS && sh.sh_offset <= raw_.size() && sh.sh_size <= raw_.size() - sh.sh_offset)
    e.bytes = raw_.substr(static_cast<std::size_t>(sh.sh_offset), static_cast<std::size_t>(sh.sh_size));
  return e;
}

}  // namespace lt::elf
