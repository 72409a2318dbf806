#include "user/python/elf_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  read_relocations(image);
}

namespace {
// x86-64's dynamic relocation types that put a pointer in a data word.
constexpr std::uint32_t kR64 = 1, kGlobDat = 6, kJumpSlot = 7, kRelative = 8;
}  // namespace

void ElfFile::read_relocations(const ElfImage& image) {
  // Other machines' types differ; their words are read as the file has them.
  if (image.machine() != EM_X86_64 || !image.native_byte_order()) return;
  std::vector<std::optional<std::uint64_t>> dynsym;  // by index: defined symbols' values
  image.for_each_symbol(
      [&](const SymbolEntry& s) {
        dynsym.push_back(s.defined() && s.shndx != SHN_ABS ? std::optional(s.value) : std::nullopt);
      },
      ElfImage::Tables::dynamic_only);
  // The loader's relocations are the allocated RELA sections (.rela.dyn,
  // .rela.plt); RELR (packed relative) and REL keep their addends in the
  // word itself, which the file read gives.
  image.for_each_section([&](const SectionEntry& sec) {
    if (sec.header.sh_type != SHT_RELA || !(sec.header.sh_flags & SHF_ALLOC)) return;
    for (std::size_t at = 0; at + sizeof(Elf64_Rela) <= sec.bytes.size(); at += sizeof(Elf64_Rela)) {
      Elf64_Rela r;
      std::memcpy(&r, sec.bytes.data() + at, sizeof r);
      const auto type = static_cast<std::uint32_t>(ELF64_R_TYPE(r.r_info));
      const auto sym = static_cast<std::size_t>(ELF64_R_SYM(r.r_info));
      std::optional<std::uint64_t> value;
      if (type == kRelative) {
        value = static_cast<std::uint64_t>(r.r_addend);
      } else if (type == kR64 || type == kGlobDat || type == kJumpSlot) {
        // Interposable in principle; in practice this object's own definition.
        if (sym < dynsym.size() && dynsym[sym])
          value = *dynsym[sym] + (type == kR64 ? static_cast<std::uint64_t>(r.r_addend) : 0);
      }
      relocated_[r.r_offset] = value;
    }
  });
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

ElfFile::Fd::~Fd() {
  if (fd >= 0) close(fd);
}

std::string ElfFile::read(std::uint64_t vaddr, std::uint64_t len) const {
  for (auto& s : segments_) {
    if (vaddr < s.vaddr || vaddr >= s.vaddr + s.filesz) continue;
    len = std::min(len, s.vaddr + s.filesz - vaddr);
    if (!file_) {
      file_ = std::make_shared<Fd>();
      file_->fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (file_->fd < 0) return {};
    std::string out(len, '\0');
    std::size_t got = 0;
    while (got < len) {
      const ssize_t n =
          pread(file_->fd, out.data() + got, len - got, static_cast<off_t>(vaddr - s.vaddr + s.offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.resize(got);
    return out;
  }
  return {};
}

std::optional<std::uint64_t> ElfFile::pointer_at(std::uint64_t vaddr) const {
  if (auto r = relocated_.find(vaddr); r != relocated_.end()) return r->second;
  const std::string b = read(vaddr, 8);
  if (b.size() != 8) return std::nullopt;
  std::uint64_t v;
  std::memcpy(&v, b.data(), 8);
  return v;
}

std::vector<std::optional<std::uint64_t>> ElfFile::words_of(const Segment& s) const {
  const std::uint64_t first = (s.vaddr + 7) & ~std::uint64_t{7};
  if (first >= s.vaddr + s.filesz) return {};
  const std::string b = read(first, s.vaddr + s.filesz - first);
  std::vector<std::optional<std::uint64_t>> out(b.size() / 8);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (auto r = relocated_.find(first + 8 * i); r != relocated_.end()) {
      out[i] = r->second;
      continue;
    }
    std::uint64_t v;
    std::memcpy(&v, b.data() + 8 * i, 8);
    out[i] = v;
  }
  return out;
}

std::optional<std::string> ElfFile::string_at(std::uint64_t vaddr, std::size_t max) const {
  std::string b = read(vaddr, max);
  const auto nul = b.find('\0');
  if (nul == std::string::npos) return std::nullopt;
  b.resize(nul);
  return b;
}

}  // namespace lt::elf
