#include "user/python/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "user/core/errors.h"

namespace lt::elf {

namespace {
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};
struct ElfCloser {
  Elf* e;
  ~ElfCloser() {
    if (e) elf_end(e);
  }
};
}  // namespace

ElfFile::ElfFile(const std::string& path) : path_(path) {
  if (elf_version(EV_CURRENT) == EV_NONE) throw Error(ExitCode::internal, "libelf init failed");
  FdCloser fd{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw Error(ExitCode::not_python, "cannot open " + path);
  ElfCloser e{elf_begin(fd.fd, ELF_C_READ, nullptr)};
  GElf_Ehdr eh;
  if (!e.e || elf_kind(e.e) != ELF_K_ELF || !gelf_getehdr(e.e, &eh) || gelf_getclass(e.e) != ELFCLASS64)
    throw Error(ExitCode::not_python, path + " is not a 64-bit ELF file");
  type_ = eh.e_type;

  size_t nphdr = 0;
  elf_getphdrnum(e.e, &nphdr);
  for (size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e.e, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    segments_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }

  std::vector<std::pair<std::string, Symbol>> dyn, stat;
  for (Elf_Scn* scn = elf_nextscn(e.e, nullptr); scn; scn = elf_nextscn(e.e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    auto& into = sh.sh_type == SHT_DYNSYM ? dyn : stat;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(data, static_cast<int>(i), &s) || s.st_shndx == SHN_UNDEF) continue;
      const char* n = elf_strptr(e.e, sh.sh_link, s.st_name);
      if (n && *n) into.push_back({n, {s.st_value, s.st_size}});
    }
  }
  symbols_ = std::move(dyn);
  symbols_.insert(symbols_.end(), stat.begin(), stat.end());
}

std::optional<Symbol> ElfFile::symbol(const std::string& name) const {
  for (auto& [n, s] : symbols_)
    if (n == name) return s;
  return std::nullopt;
}

std::optional<std::uint64_t> ElfFile::file_offset(std::uint64_t vaddr) const {
  for (auto& s : segments_)
    if (vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz) return vaddr - s.vaddr + s.offset;
  return std::nullopt;
}

std::string ElfFile::read(std::uint64_t vaddr, std::uint64_t len) const {
  for (auto& s : segments_) {
    if (vaddr < s.vaddr || vaddr >= s.vaddr + s.filesz) continue;
    len = std::min(len, s.vaddr + s.filesz - vaddr);
    std::ifstream in(path_, std::ios::binary);
    std::string out(len, '\0');
    in.seekg(static_cast<std::streamoff>(vaddr - s.vaddr + s.offset));
    in.read(out.data(), static_cast<std::streamsize>(len));
    out.resize(static_cast<std::size_t>(in.gcount()));
    return out;
  }
  return {};
}

}  // namespace lt::elf
