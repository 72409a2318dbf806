#include "user/python/probe_sites.h"

#include <cstring>
#include <optional>

#include "user/core/errors.h"

namespace lt::python {

namespace {

bool in_exec_segment(const elf::ElfFile& f, std::uint64_t vaddr) {
  for (auto& s : f.segments())
    if (s.executable && vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz) return true;
  return false;
}

// The first byte of a uprobe site decides its cost: push is emulated by the
// kernel (~0.8 us), most other instructions are single-stepped (~10 us).
bool starts_with_push(const elf::ElfFile& f, std::uint64_t vaddr) {
  auto b = f.read(vaddr, 2);
  if (b.size() < 2) return false;
  auto c0 = static_cast<unsigned char>(b[0]), c1 = static_cast<unsigned char>(b[1]);
  return (c0 >= 0x50 && c0 <= 0x57) || (c0 == 0x41 && c1 >= 0x50 && c1 <= 0x57);
}

ProbeSite site(const elf::ElfFile& f, const std::string& name, std::uint64_t vaddr) {
  auto off = f.file_offset(vaddr);
  if (!off || !in_exec_segment(f, vaddr))
    throw Error(ExitCode::unsupported, name + " is not inside the interpreter's code");
  return {name, *off, starts_with_push(f, vaddr)};
}

// slotdefs[] holds {name, offset, function, wrapper, ...} per special
// method; the "__next__" entry's function is slot_tp_iternext.
std::optional<std::uint64_t> scan_slotdefs(pid_t pid, const elf::ElfFile& f, const std::string& path,
                                           const std::vector<proc::Mapping>& maps, std::uint64_t bias,
                                           const Layout& layout) {
  std::vector<std::uint64_t> names;  // runtime addresses of "__next__\0"
  for (auto& s : f.segments()) {
    if (s.executable) continue;
    auto bytes = f.read(s.vaddr, s.filesz);
    static const char needle[] = "__next__";
    for (std::size_t i = 0; i + sizeof needle <= bytes.size(); ++i)
      if (std::memcmp(bytes.data() + i, needle, sizeof needle) == 0) names.push_back(s.vaddr + i + bias);
  }
  if (names.empty()) return std::nullopt;
  for (auto& m : maps) {
    if (m.path != path || m.perms.size() < 3 || m.perms[0] != 'r' || m.perms[2] == 'x') continue;
    std::vector<std::uint64_t> words((m.end - m.start) / 8);
    if (words.empty() || !proc::read_memory(pid, m.start, words.data(), words.size() * 8)) continue;
    for (std::size_t i = 0; i + 3 < words.size(); ++i) {
      bool is_name = false;
      for (auto n : names) is_name |= words[i] == n;
      if (!is_name || static_cast<std::uint32_t>(words[i + 1]) != layout.type_tp_iternext) continue;
      std::uint64_t fn = words[i + 2];
      if (in_exec_segment(f, fn - bias)) return fn - bias;
    }
  }
  return std::nullopt;
}

std::uint32_t le32(const std::string& b, std::size_t i) {
  std::uint32_t v;
  std::memcpy(&v, b.data() + i, 4);
  return v;
}

// Does any instruction take `target`'s address?  A static function reached
// only through a type slot is never named in code, unless the compiler
// promoted an indirect call to it (PGO: `cmp $gen_iternext, %reg; jne`) and
// inlined a copy, which a uprobe on the function would not see.  Looks for
// imm32 operands (non-PIE) and RIP-relative lea (PIE).  A false positive only
// costs speed (we fall back to the eval-frame probe), never correctness.
bool code_takes_address_of(const elf::ElfFile& f, std::uint64_t target) {
  for (auto& s : f.segments()) {
    if (!s.executable) continue;
    std::string b = f.read(s.vaddr, s.filesz);
    for (std::size_t i = 2; i + 6 <= b.size(); ++i) {
      auto op = static_cast<unsigned char>(b[i]);
      auto modrm = static_cast<unsigned char>(b[i + 1]);
      if (op == 0x8d && (modrm & 0xC7) == 0x05) {  // lea disp32(%rip), reg
        auto disp = static_cast<std::int32_t>(le32(b, i + 2));
        if (s.vaddr + i + 6 + static_cast<std::int64_t>(disp) == target) return true;
      }
      if (target < 0x80000000ULL && le32(b, i) == target) {
        auto p1 = static_cast<unsigned char>(b[i - 1]), p2 = static_cast<unsigned char>(b[i - 2]);
        if (p2 == 0x81 || p2 == 0xc7 || p1 == 0x3d || (p1 >= 0xb8 && p1 <= 0xbf)) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<ProbeSite> find_probe_sites(pid_t pid, const elf::ElfFile& file, const std::string& path,
                                        const std::vector<proc::Mapping>& maps, std::uint64_t bias,
                                        const Layout& layout) {
  std::vector<ProbeSite> sites;
  auto gen_type = file.symbol("PyGen_Type");
  if (!gen_type) throw Error(ExitCode::unsupported, path + " does not export PyGen_Type");
  const std::uint64_t type = gen_type->value + bias;
  auto iternext = proc::read_value<std::uint64_t>(pid, type + layout.type_tp_iternext);
  auto methods = proc::read_value<std::uint64_t>(pid, type + layout.type_tp_methods);
  if (!iternext || !methods)
    throw Error(ExitCode::permission, "cannot read the target's memory (need CAP_SYS_PTRACE or root)");
  sites.push_back(site(file, "gen_iternext", *iternext - bias));

  // PyMethodDef {ml_name, ml_meth, ml_flags, ml_doc}: 32 bytes each.
  for (int i = 0; i < 32; ++i) {
    auto name_ptr = proc::read_value<std::uint64_t>(pid, *methods + 32ull * i);
    if (!name_ptr || *name_ptr == 0) break;
    auto name = proc::read_cstring(pid, *name_ptr, 16);
    if (name && *name == "throw") {
      auto meth = proc::read_value<std::uint64_t>(pid, *methods + 32ull * i + 8);
      if (meth) sites.push_back(site(file, "gen_throw", *meth - bias));
      break;
    }
  }
  if (sites.size() != 2) throw Error(ExitCode::unsupported, "cannot find generator.throw in " + path);
  if (code_takes_address_of(file, *iternext - bias)) {
    // Inlined copies of gen_iternext exist: every resume still enters the
    // eval loop, so probe that instead (correct, but fires on every
    // C-to-Python call).
    auto eval = file.symbol("_PyEval_EvalFrameDefault");
    if (!eval) throw Error(ExitCode::unsupported, path + " does not export _PyEval_EvalFrameDefault");
    sites.clear();
    sites.push_back(site(file, "_PyEval_EvalFrameDefault", eval->value));
  }

  std::optional<std::uint64_t> slot;
  if (auto sym = file.symbol("slot_tp_iternext")) slot = sym->value;
  if (!slot) slot = scan_slotdefs(pid, file, path, maps, bias, layout);
  if (slot) sites.push_back(site(file, "slot_tp_iternext", *slot));
  return sites;
}

}  // namespace lt::python
