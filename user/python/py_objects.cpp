#include "user/python/py_objects.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "user/model/action_name.h"
#include "user/proc/procfs.h"

namespace lt::python {

namespace {
constexpr std::size_t kMaxStrUnits = 4096;  // longer names/paths are cut
constexpr std::size_t kMaxTable = 1 << 20;  // line tables of huge generated functions
}  // namespace

// A str object as UTF-8 (compact strings only: every str the compiler makes).
std::string read_str(pid_t pid, std::uint64_t addr, const Layout& l) {
  if (!addr) return {};
  std::array<std::uint8_t, 40> hdr{};
  if (!proc::read_memory(pid, addr, hdr.data(), hdr.size())) return {};
  std::int64_t len;
  std::uint32_t state;
  std::memcpy(&len, hdr.data() + 16, 8);
  std::memcpy(&state, hdr.data() + 32, 4);
  const bool compact = state & (1u << 5), ascii = state & (1u << 6);
  const unsigned kind = (state >> 2) & 7;
  if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4)) return {};
  std::size_t units = std::min<std::size_t>(static_cast<std::size_t>(len), kMaxStrUnits);
  std::vector<std::uint8_t> data(units * kind);
  std::uint64_t start = addr + (ascii ? l.bpf.str_ascii_data : l.bpf.str_compact_data);
  if (!proc::read_memory(pid, start, data.data(), data.size())) return {};
  if (ascii) return std::string(data.begin(), data.end());
  return code_units_to_utf8(data.data(), data.size(), kind);
}

std::vector<std::uint8_t> read_bytes_object(pid_t pid, std::uint64_t addr) {
  auto size = proc::read_value<std::int64_t>(pid, addr + 16);  // ob_size
  if (!size || *size < 0 || static_cast<std::uint64_t>(*size) > kMaxTable) return {};
  std::vector<std::uint8_t> out(static_cast<std::size_t>(*size));
  if (!out.empty() && !proc::read_memory(pid, addr + 32, out.data(), out.size())) return {};  // ob_sval
  return out;
}

}  // namespace lt::python
