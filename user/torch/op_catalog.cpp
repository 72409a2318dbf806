#include "user/torch/op_catalog.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "user/core/errors.h"
#include "user/proc/elf_image.h"

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

// The file as the catalog needs it, or lt::Error: unreadable (io) or not an
// ELF64 file of this machine's byte order (unsupported).
void check_readable(const elf::ElfImage& file, const std::string& path) {
  using P = elf::ElfImage::Problem;
  switch (file.problem()) {
    case P::none:
    case P::not_elf:
      return;
    case P::cannot_open:
      throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(file.error()));
    case P::not_regular:
      throw Error(ExitCode::io, "cannot read " + path + ": not a regular file");
  }
}

}  // namespace

OpCatalog load_op_catalog(const std::string& path) {
  const elf::ElfImage file(path);
  check_readable(file, path);
  if (file.problem() == elf::ElfImage::Problem::not_elf)
    throw Error(ExitCode::unsupported, path + " is not an ELF file");
  if (!file.is_elf64() || !file.native_byte_order())
    throw Error(ExitCode::unsupported, path + " is not a 64-bit ELF file of this machine's byte order");

  // Exported at::_ops::<Struct>::call symbols.  A uprobe takes a file offset;
  // the code's virtual addresses map to it through the executable PT_LOADs
  // (vaddr and offset differ in lld output).
  OpCatalog cat;
  struct Raw {
    std::string_view struct_name;
    std::uint64_t offset;
    std::string_view mangled;
  };
  std::vector<Raw> raw;
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (s.type != STT_FUNC || !s.defined() || s.value == 0) return;
        auto st = op_catalog_detail::op_call_struct(s.name);
        if (!st) return;
        auto offset = file.file_offset(s.value, /*executable_only=*/true);
        if (!offset) {
          ++cat.skipped;
          return;
        }
        raw.push_back({*st, *offset, s.name});
      },
      elf::ElfImage::Tables::dynamic_only);
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
    file.for_each_section([&](const elf::SectionEntry& sec) {
      const auto& sh = sec.header;
      if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
        return;
      if (sec.name.starts_with(".rodata") || sec.name.starts_with(".lrodata")) resolver.scan(sec.bytes);
    });
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
  const elf::ElfImage file(path);
  check_readable(file, path);
  if (!file.ok() || !file.is_elf64()) return std::nullopt;
  std::optional<std::uint64_t> found;
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (!found && s.defined() && s.value != 0 && s.name == symbol) found = s.value;
      },
      elf::ElfImage::Tables::dynamic_only);
  return found;
}

}  // namespace lt
