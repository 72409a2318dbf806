#include "user/python/probe_sites.h"

#include <algorithm>
#include <cstdlib>
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

std::uint64_t cheap_entry_offset(const elf::ElfFile& f, std::uint64_t vaddr);

ProbeSite site(const elf::ElfFile& f, const std::string& name, std::uint64_t vaddr) {
  if (!in_exec_segment(f, vaddr)) throw Error(ExitCode::unsupported, name + " is not inside the interpreter's code");
  vaddr += cheap_entry_offset(f, vaddr);
  auto off = f.file_offset(vaddr);
  if (!off) throw Error(ExitCode::unsupported, name + " is not inside the interpreter's code");
  return {name, *off, starts_with_push(f, vaddr)};
}

// The first instruction of a probe site decides its cost: push, call and
// jumps are emulated by the kernel (~0.8 us a hit), most others are
// single-stepped out of line (~10 us).  Many CPython functions start with
// one or two register moves before their first push; this walks such a
// prologue, accepting only instructions it fully understands that leave the
// argument registers (rdi, rsi, rdx) untouched, and returns the offset of
// the first push, or 0 (probe the entry, single-stepped).
std::uint64_t cheap_entry_offset(const elf::ElfFile& f, std::uint64_t vaddr) {
  std::string b = f.read(vaddr, 24);
  auto byte = [&](std::size_t i) { return i < b.size() ? static_cast<unsigned char>(b[i]) : 0xff; };
  auto is_arg_reg = [](unsigned reg) { return reg == 7 || reg == 6 || reg == 2; };  // rdi, rsi, rdx
  std::size_t i = 0;
  while (i < 16) {
    unsigned c = byte(i);
    if ((c >= 0x50 && c <= 0x57) || (c == 0x41 && byte(i + 1) >= 0x50 && byte(i + 1) <= 0x57)) return i;
    if (c == 0xf3 && byte(i + 1) == 0x0f && byte(i + 2) == 0x1e && byte(i + 3) == 0xfa) {  // endbr64
      i += 4;
      continue;
    }
    if ((c & 0xf0) != 0x40) return 0;  // only REX-prefixed forms below
    bool rex_r = c & 4, rex_b = c & 1;
    unsigned op = byte(i + 1), modrm = byte(i + 2);
    unsigned mod = modrm >> 6, reg = ((modrm >> 3) & 7) | (rex_r ? 8 : 0), rm = (modrm & 7) | (rex_b ? 8 : 0);
    if (op == 0x8d && mod == 1 && (modrm & 7) != 4 && !is_arg_reg(reg)) {  // lea disp8(base), reg
      i += 4;
      continue;
    }
    if (op == 0x89 && mod == 3 && !is_arg_reg(rm)) {  // mov reg, reg
      i += 3;
      continue;
    }
    if (op == 0x8b && mod == 3 && !is_arg_reg(reg)) {  // mov reg, reg (other direction)
      i += 3;
      continue;
    }
    if (op == 0x83 && modrm == 0xec) {  // sub $imm8, %rsp
      i += 4;
      continue;
    }
    return 0;
  }
  return 0;
}

std::uint32_t le32(const std::string& b, std::size_t i) {
  std::uint32_t v;
  std::memcpy(&v, b.data() + i, 4);
  return v;
}

// Does any instruction take the address of t1 or t2 (one pass over the code)?  A static function reached
// only through a type slot is never named in code, unless the compiler
// promoted an indirect call to it (PGO: `cmp $gen_iternext, %reg; jne`) and
// inlined a copy, which a uprobe on the function would not see.  Looks for
// imm32 operands (non-PIE) and RIP-relative lea (PIE).  A false positive only
// costs speed (we fall back to the eval-frame probe), never correctness.
bool code_takes_address_of(const elf::ElfFile& f, std::uint64_t t1, std::uint64_t t2) {
  auto is_target = [&](std::uint64_t a) { return a == t1 || a == t2; };
  for (auto& s : f.segments()) {
    if (!s.executable) continue;
    std::string b = f.read(s.vaddr, s.filesz);
    for (std::size_t i = 2; i + 6 <= b.size(); ++i) {
      auto op = static_cast<unsigned char>(b[i]);
      auto modrm = static_cast<unsigned char>(b[i + 1]);
      if (op == 0x8d && (modrm & 0xC7) == 0x05) {  // lea disp32(%rip), reg
        auto disp = static_cast<std::int32_t>(le32(b, i + 2));
        if (is_target(s.vaddr + i + 6 + static_cast<std::int64_t>(disp))) return true;
      }
      // imm32 addresses exist only in non-PIE executables
      if (f.is_exec() && is_target(le32(b, i))) {
        auto p1 = static_cast<unsigned char>(b[i - 1]), p2 = static_cast<unsigned char>(b[i - 2]);
        if (p2 == 0x81 || p2 == 0xc7 || p1 == 0x3d || (p1 >= 0xb8 && p1 <= 0xbf)) return true;
      }
    }
  }
  return false;
}

// Py_FinalizeEx (public API, 3.6+): the drain is woken when a target's
// interpreter shuts down, so its last samples are named while it lives.
// Without it (a stripped embedder) they are named as before.
void add_finalize_site(const elf::ElfFile& file, std::vector<ProbeSite>& sites) {
  auto fin = file.symbol("Py_FinalizeEx");
  if (!fin) return;
  try {
    sites.push_back(site(file, "Py_FinalizeEx", fin->value));
  } catch (const Error&) {
  }
}

}  // namespace

// builtins.next's PyMethodDef: {ml_name "next", ml_meth builtin_next,
// ml_flags METH_FASTCALL, ml_doc "next(..."}.
std::optional<std::uint64_t> next_from_method_table(const elf::ElfFile& f) {
  std::vector<std::uint64_t> names;  // link-time addresses of "next\0" (also as a merged string tail)
  for (auto& s : f.segments()) {
    if (s.executable) continue;
    auto bytes = f.read(s.vaddr, s.filesz);
    for (std::size_t i = 0; i + 5 <= bytes.size(); ++i)
      if (std::memcmp(bytes.data() + i, "next", 5) == 0) names.push_back(s.vaddr + i);
  }
  constexpr std::uint64_t kMethFastcall = 0x80;
  for (auto& s : f.segments()) {
    if (s.executable) continue;
    const auto words = f.words_of(s);
    for (std::size_t i = 0; i + 3 < words.size(); ++i) {
      if (!words[i] || !words[i + 1] || !words[i + 2] || !words[i + 3]) continue;
      if (static_cast<std::uint32_t>(*words[i + 2]) != kMethFastcall) continue;
      if (std::find(names.begin(), names.end(), *words[i]) == names.end() || !in_exec_segment(f, *words[i + 1]))
        continue;
      auto doc = f.read(*words[i + 3], 5);
      if (doc == "next(") return *words[i + 1];
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> gen_throw_from_method_table(const elf::ElfFile& file, const Layout& layout) {
  auto gen_type = file.symbol("PyGen_Type");
  if (!gen_type) return std::nullopt;
  auto methods = file.pointer_at(gen_type->value + layout.type_tp_methods);
  if (!methods || !*methods) return std::nullopt;
  // PyMethodDef = 32 bytes: ml_name, ml_meth, ml_flags, ml_doc.
  for (int i = 0; i < 32; ++i) {
    auto name_ptr = file.pointer_at(*methods + 32ull * i);
    if (!name_ptr || *name_ptr == 0) break;
    auto name = file.string_at(*name_ptr, 16);
    auto meth = file.pointer_at(*methods + 32ull * i + 8);
    if (name && *name == "throw" && meth) return *meth;
  }
  return std::nullopt;
}

std::vector<ProbeSite> find_probe_sites(const elf::ElfFile& file, const std::string& path, const Layout& layout) {
  auto gen_type = file.symbol("PyGen_Type");
  if (!gen_type) throw Error(ExitCode::unsupported, path + " does not export PyGen_Type");
  // Both tables from the file with its relocations: the same sites whenever
  // discovery runs (a process held at its exec is not relocated yet).
  const std::optional<std::uint64_t> gen_throw = gen_throw_from_method_table(file, layout);
  std::optional<std::uint64_t> next;
  if (auto sym = file.symbol("builtin_next")) next = sym->value;
  if (!next) next = next_from_method_table(file);

  // LTRACE_BPF_FORCE_EVAL_PROBE=1 takes the fallback path on any build, so
  // the tests cover it on every CPython.
  const char* force = std::getenv("LTRACE_BPF_FORCE_EVAL_PROBE");
  const bool forced = force && *force == '1';
  if (!forced && gen_throw && next && !code_takes_address_of(file, *next, *gen_throw)) {
    std::vector<ProbeSite> sites{site(file, "builtin_next", *next), site(file, "gen_throw", *gen_throw)};
    // nn.Module calls are seen only at the eval loop's entry; a build where
    // it cannot be probed still traces actions (no module calls).
    if (auto eval = file.symbol("_PyEval_EvalFrameDefault")) {
      try {
        sites.push_back(site(file, "_PyEval_EvalFrameDefault", eval->value));
        sites.back().modules_only = true;
      } catch (const Error&) {
      }
    }
    add_finalize_site(file, sites);
    return sites;
  }

  // Not found, or the compiler inlined copies into callers (PGO): every
  // generator resume still enters the eval loop, so probe that instead
  // (correct, but it fires on every C-to-Python call).
  auto eval = file.symbol("_PyEval_EvalFrameDefault");
  if (!eval) throw Error(ExitCode::unsupported, path + " does not export _PyEval_EvalFrameDefault");
  std::vector<ProbeSite> sites{site(file, "_PyEval_EvalFrameDefault", eval->value)};
  if (next) sites.push_back(site(file, "builtin_next", *next));  // dataloader fetches only
  add_finalize_site(file, sites);
  return sites;
}

}  // namespace lt::python
