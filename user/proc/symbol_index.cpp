#include "user/proc/symbol_index.h"

#include <algorithm>

namespace lt::proc {

SymbolIndex::SymbolIndex(const std::string& path) : image_(path) {
  if (!image_.ok()) return;
  image_.for_each_symbol([&](const elf::SymbolEntry& s) {
    if (s.defined() && s.size != 0 && s.type == STT_FUNC && *s.name) syms_.push_back({s.value, s.size, s.name});
  });
  std::sort(syms_.begin(), syms_.end(), [](const Sym& a, const Sym& b) { return a.value < b.value; });
}

const char* SymbolIndex::function_at(std::uint64_t file_offset) const {
  std::uint64_t b = 0, e = 0;
  return function_at(file_offset, b, e);
}

const char* SymbolIndex::function_at(std::uint64_t file_offset, std::uint64_t& begin, std::uint64_t& end) const {
  begin = end = 0;
  const auto& loads = image_.loads();
  auto seg =
      std::find_if(loads.begin(), loads.end(), [&](const elf::LoadSegment& s) { return s.holds_offset(file_offset); });
  if (seg == loads.end()) return nullptr;
  const std::uint64_t vaddr = file_offset - seg->offset + seg->vaddr;
  auto to_offset = [&](std::uint64_t v) { return v - seg->vaddr + seg->offset; };
  // No symbol there: the gap between the symbols around it (the whole
  // segment without any), where every address is as nameless.
  std::uint64_t gap_begin = seg->vaddr, gap_end = seg->vaddr + seg->filesz;
  auto it =
      std::upper_bound(syms_.begin(), syms_.end(), vaddr, [](std::uint64_t v, const Sym& s) { return v < s.value; });
  if (it != syms_.end()) gap_end = std::min(gap_end, it->value);
  // .dynsym and .symtab both list most functions: look back past aliases.
  for (int back = 0; it != syms_.begin() && back < 8; ++back) {
    --it;
    if (vaddr < it->value + it->size) {
      begin = to_offset(std::max(it->value, seg->vaddr));
      end = to_offset(std::min(it->value + it->size, seg->vaddr + seg->filesz));
      return it->name;
    }
    gap_begin = std::max(gap_begin, it->value + it->size);
  }
  // Every address of the gap finds the same symbols before it, so the
  // same answer: none.
  if (gap_begin <= vaddr && vaddr < gap_end) {
    begin = to_offset(gap_begin);
    end = to_offset(gap_end);
  }
  return nullptr;
}

}  // namespace lt::proc
