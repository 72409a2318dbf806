#include "reports/aggregate/gpu_names.h"

#include <algorithm>
#include <cstring>

namespace lt {

void GpuNameTable::add(std::uint32_t pid, const lt_gpu_name& n) {
  if (n.total_len > (1u << 20) || n.offset > n.total_len) return;  // a damaged record
  std::string& s = names_[{pid, n.kind, n.id}];
  if (s.size() != n.total_len) s.resize(n.total_len);
  const std::size_t len = std::min<std::size_t>({n.len, sizeof n.text, n.total_len - n.offset});
  std::memcpy(s.data() + n.offset, n.text, len);
}

const std::string* GpuNameTable::find(std::uint32_t pid, std::uint16_t kind, std::uint32_t id) const {
  auto it = names_.find({pid, kind, id});
  return it == names_.end() ? nullptr : &it->second;
}

std::string GpuNameTable::get(std::uint32_t pid, std::uint16_t kind, std::uint32_t id, const char* fallback) const {
  const std::string* s = find(pid, kind, id);
  return s ? *s : fallback + std::to_string(id);
}

}  // namespace lt
