#include "user/python/dynamo_state.h"

#include <algorithm>
#include <unordered_map>

#include "user/proc/procfs.h"
#include "user/python/module_tree.h"
#include "user/python/py_objects.h"

namespace lt::python {

namespace {
// PyModuleObject.md_dict; PyVarObject.ob_size; collections.deque's
// {leftblock, rightblock, leftindex, rightindex} and a block's
// {leftlink, data[64], rightlink} (Modules/_collectionsmodule.c, the same
// in 3.8-3.15 GIL builds).
constexpr std::uint64_t kModuleDict = 16, kObSize = 16;
constexpr std::uint64_t kDequeLeftBlock = 24, kDequeLeftIndex = 40;
constexpr std::uint64_t kBlockLen = 64, kBlockData = 8, kBlockRight = 8 + 8 * kBlockLen;
constexpr std::int64_t kMaxCompiles = 4096;  // Dynamo keeps 64 unless told otherwise
constexpr std::size_t kMaxModules = 1 << 16, kMaxBreaks = 256;

std::uint64_t word(pid_t pid, std::uint64_t addr) {
  auto v = proc::read_value<std::uint64_t>(pid, addr);
  return v ? *v : 0;
}

bool is(pid_t pid, std::uint64_t obj, const char* type, const Layout& l) {
  return obj && object_type_name(pid, obj, l) == type;
}

// The items of a collections.deque, left to right, at most `max`.
std::vector<std::uint64_t> deque_items(pid_t pid, std::uint64_t dq, const Layout& l, std::int64_t max) {
  std::vector<std::uint64_t> out;
  if (!is(pid, dq, "collections.deque", l)) return out;
  auto n = proc::read_value<std::int64_t>(pid, dq + kObSize);
  auto index = proc::read_value<std::int64_t>(pid, dq + kDequeLeftIndex);
  if (!n || !index || *n <= 0 || *index < 0 || *index >= static_cast<std::int64_t>(kBlockLen)) return out;
  std::uint64_t block = word(pid, dq + kDequeLeftBlock);
  auto i = static_cast<std::uint64_t>(*index);
  const std::int64_t want = std::min(*n, max);
  std::uint64_t data[kBlockLen];
  while (block && static_cast<std::int64_t>(out.size()) < want) {
    if (!proc::read_memory(pid, block + kBlockData, data, sizeof data)) break;
    for (; i < kBlockLen && static_cast<std::int64_t>(out.size()) < want; ++i) out.push_back(data[i]);
    block = word(pid, block + kBlockRight);
    i = 0;
  }
  return out;
}

// One CompilationMetrics: its attributes read at once (a ~100-field
// dataclass: looking fields up one by one would read its keys each time).
DynamoCompile read_compile(pid_t pid, std::uint64_t m, const Layout& l, KeyNames& names) {
  std::unordered_map<std::string, std::uint64_t> attrs;
  for (auto& [k, v] : instance_attrs(pid, m, l, &names)) attrs.emplace(std::move(k), v);
  auto str = [&](const char* name) {
    auto it = attrs.find(name);
    return it == attrs.end() ? std::string() : read_str(pid, it->second, l);  // None reads as ""
  };
  auto num = [&](const char* name) {
    auto it = attrs.find(name);
    return it == attrs.end() ? std::nullopt : read_small_int(pid, it->second, l);
  };
  DynamoCompile c;
  c.compile_id = str("compile_id");
  c.function = str("co_name");
  c.file = str("co_filename");
  c.first_line = num("co_firstlineno").value_or(0);
  c.start_wall_us = num("start_time_us").value_or(0);
  c.duration_us = num("duration_us").value_or(-1);
  c.graph_breaks = num("num_graph_breaks").value_or(-1);
  c.recompile_reason = str("recompile_reason");
  const std::string type = str("fail_type"), why = str("fail_reason");
  if (!type.empty() || !why.empty()) c.failure = type + (type.empty() || why.empty() ? "" : ": ") + why;
  return c;
}
}  // namespace

std::optional<std::int64_t> read_small_int(pid_t pid, std::uint64_t obj, const Layout& l) {
  if (!is(pid, obj, "int", l)) return std::nullopt;
  struct {
    std::int64_t size_or_tag;
    std::uint32_t digit[2];
  } v;
  if (!proc::read_memory(pid, obj + kObSize, &v, sizeof v)) return std::nullopt;
  std::int64_t ndigits;
  bool negative;
  if (l.bpf.py_minor >= 12) {
    // lv_tag: digit count << 3 | sign (0 positive, 1 zero, 2 negative)
    const auto tag = static_cast<std::uint64_t>(v.size_or_tag);
    ndigits = static_cast<std::int64_t>(tag >> 3);
    negative = (tag & 3) == 2;
    if ((tag & 3) == 1) return 0;
  } else {
    ndigits = v.size_or_tag < 0 ? -v.size_or_tag : v.size_or_tag;
    negative = v.size_or_tag < 0;
  }
  if (ndigits < 0 || ndigits > 2) return std::nullopt;
  std::int64_t value = 0;
  if (ndigits >= 1) value = v.digit[0] & 0x3fffffff;
  if (ndigits == 2) value |= static_cast<std::int64_t>(v.digit[1] & 0x3fffffff) << 30;
  return negative ? -value : value;
}

std::uint64_t DynamoStateReader::utils_dict(const Interpreter& interp) {
  for (const auto& k : known_)
    if (k.pid == interp.pid) return k.dict;
  const Layout& l = interp.layout;
  if (!l.interp_modules || !interp.runtime_addr) return 0;
  const std::uint64_t main_interp = word(interp.pid, interp.runtime_addr + l.runtime_interp_head);
  const std::uint64_t modules = main_interp ? word(interp.pid, main_interp + l.interp_modules) : 0;
  if (!is(interp.pid, modules, "dict", l)) return 0;
  std::uint64_t dict = 0;
  for (auto& [name, module] : dict_items(interp.pid, modules, l, kMaxModules))
    if (name == "torch._dynamo.utils") {
      if (is(interp.pid, module, "module", l)) dict = word(interp.pid, module + kModuleDict);
      break;
    }
  if (!is(interp.pid, dict, "dict", l)) return 0;  // not imported (yet): look again next time
  known_.push_back({interp.pid, dict});
  return dict;
}

std::optional<DynamoState> DynamoStateReader::read(const Interpreter& interp, Newest* newest) {
  const std::uint64_t dict = utils_dict(interp);
  if (!dict) return std::nullopt;
  const pid_t pid = interp.pid;
  const Layout& l = interp.layout;
  DynamoState s;
  KeyNames names;  // the dataclass's field names, read once
  if (auto dq = dict_get(pid, dict, "_compilation_metrics", l)) {
    auto items = deque_items(pid, *dq, l, kMaxCompiles);
    auto from = items.begin();
    if (newest && newest->addr)
      if (auto seen = std::find(items.begin(), items.end(), newest->addr); seen != items.end()) {
        const DynamoCompile c = read_compile(pid, *seen, l, names);
        if (c.compile_id == newest->id && c.start_wall_us == newest->start_wall_us) from = seen + 1;
      }
    for (auto it = from; it != items.end(); ++it) s.compiles.push_back(read_compile(pid, *it, l, names));
    if (newest && from != items.end())
      *newest = {items.back(), s.compiles.back().compile_id, s.compiles.back().start_wall_us};
  }
  if (auto counters = dict_get(pid, dict, "counters", l))
    if (auto breaks = dict_get(pid, *counters, "graph_break", l))
      for (auto& [reason, count] : dict_items(pid, *breaks, l, kMaxBreaks))
        s.graph_breaks.push_back({reason, read_small_int(pid, count, l).value_or(0)});
  return s;
}

void DynamoStateReader::forget(pid_t pid) {
  std::erase_if(known_, [pid](const Known& k) { return k.pid == pid; });
}

}  // namespace lt::python
