#include "user/torch/op_catalog.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "user/core/errors.h"

namespace lt {
namespace op_catalog_detail {

namespace {

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_ident_start(char c) {
  return is_ident(c) && !(c >= '0' && c <= '9');
}

// <source-name> ::= <positive length number> <identifier>
bool take_source_name(std::string_view& s, std::string_view& out) {
  if (s.empty() || s[0] < '1' || s[0] > '9') return false;  // lengths are positive, no leading zero
  std::size_t i = 0, n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + static_cast<std::size_t>(s[i] - '0');
    if (n > s.size()) return false;  // also stops overflow on absurd lengths
    ++i;
  }
  if (n > s.size() - i) return false;
  out = s.substr(i, n);
  s.remove_prefix(i + n);
  return true;
}

void add_unique(std::vector<SchemaResolver::Name>& v, std::string_view name, std::string_view overload,
                std::string_view schema) {
  for (auto& n : v)
    if (n.name == name && n.overload == overload) return;
  v.push_back({std::string(name), std::string(overload), std::string(schema)});
}

constexpr std::string_view kArrow = ") -> ";
constexpr std::string_view kAten = "aten::";

}  // namespace

std::optional<std::string_view> op_call_struct(std::string_view m) {
  // _ZN <source-name>... E <parameters>: a static member function has no
  // CV-qualifiers after N, so the components start right away.
  if (!m.starts_with("_ZN")) return std::nullopt;
  m.remove_prefix(3);
  std::string_view at, ops, st, call;
  if (!take_source_name(m, at) || at != "at" || !take_source_name(m, ops) || ops != "_ops" ||
      !take_source_name(m, st) || !take_source_name(m, call) || call != "call" || !m.starts_with('E'))
    return std::nullopt;
  if (!std::all_of(st.begin(), st.end(), is_ident)) return std::nullopt;
  return st;
}

SchemaResolver::SchemaResolver(const std::vector<std::string_view>& struct_names) {
  for (auto s : struct_names) wanted_.try_emplace(std::string(s));
}

void SchemaResolver::scan(std::string_view data) {
  // Only strings containing ") -> " can be schemas; memmem finds them far
  // faster than walking every string of a 17 MB .rodata.
  std::size_t pos = 0;
  while (pos < data.size()) {
    auto* hit = static_cast<const char*>(memmem(data.data() + pos, data.size() - pos, kArrow.data(), kArrow.size()));
    if (!hit) break;
    std::size_t h = static_cast<std::size_t>(hit - data.data());
    std::size_t start = h;
    while (start > pos && data[start - 1] != '\0') --start;  // data[pos - 1] is a NUL already passed
    auto* nul = static_cast<const char*>(memchr(hit, '\0', data.size() - h));
    std::size_t end = nul ? static_cast<std::size_t>(nul - data.data()) : data.size();
    scan_string(data.substr(start, end - start));
    pos = end + 1;
  }

  // "aten::X" strings (the ops' name constants) break ties between schemas
  // that disagree; see resolve().
  pos = 0;
  while (pos < data.size()) {
    auto* hit = static_cast<const char*>(memmem(data.data() + pos, data.size() - pos, kAten.data(), kAten.size()));
    if (!hit) break;
    std::size_t h = static_cast<std::size_t>(hit - data.data());
    std::size_t e = h + kAten.size();
    while (e < data.size() && is_ident(data[e])) ++e;
    if ((h == 0 || data[h - 1] == '\0') && e < data.size() && data[e] == '\0' && e > h + kAten.size())
      aten_names_.emplace(data.substr(h + kAten.size(), e - h - kAten.size()));
    pos = e;
  }
}

void SchemaResolver::scan_string(std::string_view s) {
  const std::size_t last_arrow = s.rfind(kArrow);
  // The linker merges a string into the tail of a longer one that ends with
  // it: "cos(Tensor self) -> Tensor" is stored only as the end of
  // "acos(Tensor self) -> Tensor", "dim(Tensor self) -> int" inside
  // "sparse_dim(...)".  So every suffix of the identifier run before each '('
  // is a candidate schema, not just the string's start.
  for (std::size_t q = s.find('('); q != std::string_view::npos && q < last_arrow; q = s.find('(', q + 1)) {
    std::size_t run = q;
    while (run > 0 && (is_ident(s[run - 1]) || s[run - 1] == '.')) --run;
    if (run == q || s[q - 1] == '.') continue;  // no name, or an empty overload
    std::size_t dots = 0;                       // '.'s in [p, q)
    for (std::size_t p = q; p-- > run;) {
      if (s[p] == '.' && ++dots > 1) break;  // name.overload has at most one '.'
      if (!is_ident_start(s[p])) continue;
      const std::string_view full = s.substr(p, q - p);
      const std::size_t dot = full.find('.');
      const std::string_view name = full.substr(0, dot);
      const std::string_view overload = dot == std::string_view::npos ? std::string_view() : full.substr(dot + 1);
      const bool whole = p == 0;
      if (whole) ++schemas_found_;
      key_.assign(name);
      if (!overload.empty()) key_.append("_").append(overload);
      auto it = wanted_.find(std::string_view(key_));
      if (it == wanted_.end()) continue;
      add_unique(whole ? it->second.whole : it->second.tail, name, overload, s.substr(p));
    }
  }
}

std::optional<SchemaResolver::Name> SchemaResolver::pick(const std::vector<Name>& candidates) const {
  if (candidates.size() == 1) return candidates[0];
  // Two splits of one struct name, e.g. ("foo", "out") from "xfoo.out(...)"
  // and ("foo_out", "") from "_foo_out(...)": the op's own name constant
  // "aten::foo" decides.  Neither real library needs this.
  const Name* found = nullptr;
  for (auto& c : candidates) {
    if (!aten_names_.contains(std::string_view(c.name))) continue;
    if (found) return std::nullopt;
    found = &c;
  }
  if (found) return *found;
  return std::nullopt;
}

std::optional<SchemaResolver::Name> SchemaResolver::resolve(std::string_view struct_name) const {
  auto it = wanted_.find(struct_name);
  if (it == wanted_.end()) return std::nullopt;
  // A string that starts with the schema is stronger evidence than a tail,
  // which may be a coincidence inside a longer name.
  if (auto n = pick(it->second.whole)) return n;
  if (!it->second.whole.empty()) return std::nullopt;
  return pick(it->second.tail);
}

}  // namespace op_catalog_detail

namespace {

// The whole file, mapped read-only: the kernel pages in only what is read
// (.dynsym, .dynstr, .rodata: ~25 MB of a ~450 MB library).
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      throw Error(ExitCode::io, "cannot read " + path + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      const int err = errno;
      close(fd);
      if (p == MAP_FAILED) throw Error(ExitCode::io, "cannot map " + path + ": " + std::strerror(err));
      base_ = static_cast<const char*>(p);
    } else {
      close(fd);
    }
  }
  ~Mapping() {
    if (base_) munmap(const_cast<char*>(base_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::size_t size() const { return size_; }
  // [off, off + len) when it lies inside the file, else empty.
  std::string_view bytes(std::uint64_t off, std::uint64_t len) const {
    if (off > size_ || len > size_ - off) return {};
    return {base_ + off, static_cast<std::size_t>(len)};
  }
  // A copy, since the file gives no alignment guarantee for the struct.
  template <class T>
  bool get(std::uint64_t off, T& out) const {
    auto b = bytes(off, sizeof(T));
    if (b.size() != sizeof(T)) return false;
    std::memcpy(&out, b.data(), sizeof(T));
    return true;
  }

 private:
  const char* base_ = nullptr;
  std::size_t size_ = 0;
};

struct ExecSegment {
  std::uint64_t vaddr, offset, filesz;
};

std::string_view c_str_at(std::string_view table, std::uint64_t off) {
  if (off >= table.size()) return {};
  auto rest = table.substr(static_cast<std::size_t>(off));
  auto nul = rest.find('\0');
  return nul == std::string_view::npos ? std::string_view() : rest.substr(0, nul);
}

}  // namespace

OpCatalog load_op_catalog(const std::string& path) {
  Mapping file(path);
  Elf64_Ehdr eh{};
  if (!file.get(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    throw Error(ExitCode::unsupported, path + " is not an ELF file");
  constexpr unsigned char host_data = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != host_data)
    throw Error(ExitCode::unsupported, path + " is not a 64-bit ELF file of this machine's byte order");

  // A uprobe takes a file offset; the code's virtual addresses map to it
  // through the executable PT_LOADs (vaddr and offset differ in lld output).
  std::vector<ExecSegment> exec;
  if (eh.e_phentsize == sizeof(Elf64_Phdr)) {
    for (std::uint64_t i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph{};
      if (!file.get(eh.e_phoff + i * sizeof(Elf64_Phdr), ph)) break;
      if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) exec.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    }
  }

  std::vector<Elf64_Shdr> sections;
  if (eh.e_shoff != 0 && eh.e_shentsize == sizeof(Elf64_Shdr)) {
    std::uint64_t n = eh.e_shnum;
    Elf64_Shdr first{};
    if (n == 0 && file.get(eh.e_shoff, first)) n = first.sh_size;  // more than SHN_LORESERVE sections
    n = std::min<std::uint64_t>(n, file.size() / sizeof(Elf64_Shdr));
    sections.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < sections.size(); ++i)
      if (!file.get(eh.e_shoff + i * sizeof(Elf64_Shdr), sections[i])) sections[i] = {};
  }
  auto section_bytes = [&](std::size_t i) -> std::string_view {
    if (i >= sections.size() || sections[i].sh_type == SHT_NOBITS) return {};
    return file.bytes(sections[i].sh_offset, sections[i].sh_size);
  };
  std::size_t shstrndx = eh.e_shstrndx;
  if (shstrndx == SHN_XINDEX && !sections.empty()) shstrndx = sections[0].sh_link;
  const std::string_view shstr = section_bytes(shstrndx);

  // Exported at::_ops::<Struct>::call symbols.
  OpCatalog cat;
  struct Raw {
    std::string_view struct_name;
    std::uint64_t offset;
    std::string_view mangled;
  };
  std::vector<Raw> raw;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].sh_type != SHT_DYNSYM) continue;
    const std::string_view syms = section_bytes(i);
    const std::string_view strtab = section_bytes(sections[i].sh_link);
    for (std::size_t off = 0; off + sizeof(Elf64_Sym) <= syms.size(); off += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      std::memcpy(&s, syms.data() + off, sizeof s);
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
      auto st = op_catalog_detail::op_call_struct(c_str_at(strtab, s.st_name));
      if (!st) continue;
      auto seg = std::find_if(exec.begin(), exec.end(), [&](const ExecSegment& e) {
        return s.st_value >= e.vaddr && s.st_value - e.vaddr < e.filesz;
      });
      if (seg == exec.end()) {
        ++cat.skipped;
        continue;
      }
      raw.push_back({*st, s.st_value - seg->vaddr + seg->offset, c_str_at(strtab, s.st_name)});
    }
  }
  // One entry per struct (a symbol could appear twice only in a malformed file).
  std::sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) { return a.struct_name < b.struct_name; });
  raw.erase(
      std::unique(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) { return a.struct_name == b.struct_name; }),
      raw.end());

  // Schema strings: torchgen's schema_str constants land in .rodata (GNU ld
  // and lld alike); .lrodata in case of the large code model.
  std::vector<std::string_view> keys;
  keys.reserve(raw.size());
  for (auto& r : raw) keys.push_back(r.struct_name);
  op_catalog_detail::SchemaResolver resolver(keys);
  if (!raw.empty()) {
    for (std::size_t i = 0; i < sections.size(); ++i) {
      const auto& sh = sections[i];
      if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
        continue;
      const std::string_view name = c_str_at(shstr, sh.sh_name);
      if (name.starts_with(".rodata") || name.starts_with(".lrodata")) resolver.scan(section_bytes(i));
    }
  }
  cat.schemas_found = resolver.schemas_found();

  cat.ops.reserve(raw.size());
  for (auto& r : raw) {
    OpSymbol op{r.offset, std::string(r.struct_name), {}, {}, {}, {}};
    // The C++ parameter list (exact types: how each argument is passed).
    int status = 0;
    const std::string mangled(r.mangled);
    if (char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status)) {
      op.signature = d;
      std::free(d);
    }
    if (auto n = resolver.resolve(r.struct_name)) {
      op.name = "aten::" + n->name;
      op.overload = std::move(n->overload);
      op.schema = std::move(n->schema);
    } else {
      op.name = "aten::" + op.struct_name;
      ++cat.unresolved;
    }
    cat.ops.push_back(std::move(op));
  }
  return cat;
}

std::optional<std::uint64_t> dynamic_object(const std::string& path, std::string_view symbol) {
  Mapping file(path);
  Elf64_Ehdr eh{};
  if (!file.get(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    return std::nullopt;
  const std::uint64_t n = std::min<std::uint64_t>(eh.e_shnum, file.size() / sizeof(Elf64_Shdr));
  std::vector<Elf64_Shdr> sections(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < sections.size(); ++i)
    if (!file.get(eh.e_shoff + i * sizeof(Elf64_Shdr), sections[i])) sections[i] = {};
  for (auto& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= sections.size()) continue;
    const std::string_view syms = file.bytes(sh.sh_offset, sh.sh_size);
    const std::string_view strtab = file.bytes(sections[sh.sh_link].sh_offset, sections[sh.sh_link].sh_size);
    for (std::size_t off = 0; off + sizeof(Elf64_Sym) <= syms.size(); off += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      std::memcpy(&s, syms.data() + off, sizeof s);
      if (s.st_shndx != SHN_UNDEF && s.st_value != 0 && c_str_at(strtab, s.st_name) == symbol) return s.st_value;
    }
  }
  return std::nullopt;
}

}  // namespace lt
