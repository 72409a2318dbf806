#include "user/python/elf_file.h"

#include <algorithm>
#include <fstream>

#include "user/core/errors.h"
#include "user/proc/elf_image.h"

namespace lt::elf {

ElfFile::ElfFile(const std::string& path) : path_(path) {
  const ElfImage image(path);
  if (image.problem() == ElfImage::Problem::cannot_open) throw Error(ExitCode::not_python, "cannot open " + path);
  if (!image.ok() || !image.is_elf64()) throw Error(ExitCode::not_python, path + " is not a 64-bit ELF file");
  type_ = image.type();
  for (const auto& l : image.loads()) segments_.push_back({l.vaddr, l.offset, l.filesz, l.memsz, l.executable()});
  // .dynsym first: it survives strip; .symtab as the fallback.
  std::vector<std::pair<std::string, Symbol>> stat;
  image.for_each_symbol([&](const SymbolEntry& s) {
    if (!s.defined() || !*s.name) return;
    (s.dynamic ? symbols_ : stat).push_back({s.name, {s.value, s.size}});
  });
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
