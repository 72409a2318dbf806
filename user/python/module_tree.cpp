#include "user/python/module_tree.h"

#include <cstring>
#include <unordered_set>

#include "user/proc/procfs.h"
#include "user/python/py_objects.h"

namespace lt::python {

namespace {
// PyTypeObject and PyDictObject fields at the same offsets in 3.8-3.15
// (offsetof() against each pyenv version's headers and sid's 3.14/3.15,
// 2026-12-02); a tuple's items move in 3.14 (Layout::tuple_items).
constexpr std::uint64_t kTypeBasicsize = 32, kTypeFlags = 168, kTypeDict = 264, kTypeDictoffset = 288, kTypeMro = 344;
constexpr std::uint64_t kDictKeys = 32, kDictValues = 40;
constexpr std::uint64_t kTupleSize = 16;
constexpr std::uint64_t kFlagInlineValues = 1u << 2, kFlagManagedDict = 1u << 4;
constexpr std::uint64_t kManagedDict = 24, kManagedValues311 = 32;  // bytes before the object
constexpr std::size_t kMaxEntries = 1 << 16;                        // a dict's entries we look at
constexpr std::size_t kMaxModules = 100000;
constexpr std::size_t kMaxMro = 256;

std::uint64_t word(pid_t pid, std::uint64_t addr) {
  auto v = proc::read_value<std::uint64_t>(pid, addr);
  return v ? *v : 0;
}

std::uint64_t type_of(pid_t pid, std::uint64_t obj) {
  return obj ? word(pid, obj + 8) : 0;
}

std::string type_name(pid_t pid, std::uint64_t type, const Layout& l) {
  std::uint64_t name = type ? word(pid, type + l.type_tp_name) : 0;
  auto s = name ? proc::read_cstring(pid, name, 512) : std::nullopt;
  return s ? *s : std::string();
}

// A dict's key table: where the entries start, how many, how big.
struct KeysView {
  std::uint64_t entries = 0;
  std::size_t count = 0;
  unsigned entry_size = 24;  // {hash, key, value}; 16 for 3.11+'s unicode/split {key, value}
  unsigned key_at = 8;
};

std::optional<KeysView> view_keys(pid_t pid, std::uint64_t keys, const Layout& l) {
  if (!keys) return std::nullopt;
  KeysView v;
  if (l.dict_keys_log2) {
    // {dk_refcnt; u8 dk_log2_size, dk_log2_index_bytes, dk_kind; u32 dk_version;
    //  dk_usable; dk_nentries; dk_indices[]}
    std::uint8_t hdr[32];
    if (!proc::read_memory(pid, keys, hdr, sizeof hdr)) return std::nullopt;
    const unsigned log2_index_bytes = hdr[9], kind = hdr[10];
    std::int64_t n;
    std::memcpy(&n, hdr + 24, 8);
    if (log2_index_bytes > 40 || n < 0) return std::nullopt;
    v.entries = keys + 32 + (std::uint64_t{1} << log2_index_bytes);
    v.count = static_cast<std::size_t>(n);
    if (kind != 0) v.entry_size = 16, v.key_at = 0;
  } else {
    // {dk_refcnt; dk_size; dk_lookup; dk_usable; dk_nentries; dk_indices[]}
    std::int64_t hdr[5];
    if (!proc::read_memory(pid, keys, hdr, sizeof hdr)) return std::nullopt;
    const std::int64_t size = hdr[1], n = hdr[4];
    if (size <= 0 || n < 0) return std::nullopt;
    const std::uint64_t ix = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffLL ? 4 : 8;
    v.entries = keys + 40 + static_cast<std::uint64_t>(size) * ix;
    v.count = static_cast<std::size_t>(n);
  }
  if (v.count > kMaxEntries) v.count = kMaxEntries;
  return v;
}

// The keys of a key table, as entry index -> key object (0 for a deleted slot).
std::vector<std::pair<std::uint64_t, std::uint64_t>> read_entries(pid_t pid, const KeysView& k) {
  std::vector<std::uint64_t> raw(k.count * k.entry_size / 8);
  if (raw.empty() || !proc::read_memory(pid, k.entries, raw.data(), raw.size() * 8)) return {};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;  // (key, value of a combined table)
  const unsigned words = k.entry_size / 8;
  for (std::size_t i = 0; i < k.count; ++i)
    out.emplace_back(raw[i * words + k.key_at / 8], raw[i * words + k.key_at / 8 + 1]);
  return out;
}

std::string key_name(pid_t pid, std::uint64_t key, const Layout& l, KeyNames* names) {
  if (!names) return read_str(pid, key, l);
  auto it = names->find(key);
  if (it == names->end()) it = names->emplace(key, read_str(pid, key, l)).first;
  return it->second;
}

// Index of str key `name` in a key table, or nullopt.
std::optional<std::size_t> find_key(pid_t pid, const KeysView& k, const std::string& name, const Layout& l) {
  auto entries = read_entries(pid, k);
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].first && read_str(pid, entries[i].first, l) == name) return i;
  return std::nullopt;
}

// Value `i` of a split table's values (PyObject **, or PyDictValues *).
std::uint64_t split_value(pid_t pid, std::uint64_t values, std::size_t i, const Layout& l) {
  return word(pid, values + l.dict_values_start + 8 * static_cast<std::uint64_t>(i));
}

std::optional<std::uint64_t> dict_lookup(pid_t pid, std::uint64_t dict, const std::string& key, const Layout& l) {
  if (!dict) return std::nullopt;
  for (auto& [k, v] : dict_items(pid, dict, l, kMaxEntries))
    if (k == key) return v;
  return std::nullopt;
}

// An attribute kept in the object's split values, keyed by its class's
// cached keys (3.11+, before anything asked for the object's __dict__).
std::optional<std::uint64_t> values_lookup(pid_t pid, std::uint64_t type, std::uint64_t values, const std::string& key,
                                           const Layout& l) {
  auto keys = view_keys(pid, word(pid, type + l.heap_cached_keys), l);
  if (!keys) return std::nullopt;
  auto ix = find_key(pid, *keys, key, l);
  if (!ix) return std::nullopt;
  std::uint64_t v = split_value(pid, values, *ix, l);
  return v ? std::optional(v) : std::nullopt;
}

}  // namespace

std::vector<std::pair<std::string, std::uint64_t>> dict_items(pid_t pid, std::uint64_t dict, const Layout& l,
                                                              std::size_t max_items, KeyNames* names) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  auto keys = view_keys(pid, dict ? word(pid, dict + kDictKeys) : 0, l);
  if (!keys) return out;
  // A split table (an instance's dict) keeps its values apart; its entry
  // order is the class's key order, which is what we need for lookups.
  const std::uint64_t values = word(pid, dict + kDictValues);
  auto entries = read_entries(pid, *keys);
  for (std::size_t i = 0; i < entries.size() && out.size() < max_items; ++i) {
    auto [key, value] = entries[i];
    if (values) value = split_value(pid, values, i, l);
    if (!key || !value) continue;  // deleted, or not set on this instance
    std::string name = key_name(pid, key, l, names);
    if (name.empty()) continue;  // not a str (or an empty one: no attribute name)
    out.emplace_back(std::move(name), value);
  }
  return out;
}

std::optional<std::uint64_t> instance_attr(pid_t pid, std::uint64_t obj, const std::string& attr, const Layout& l) {
  const std::uint64_t type = type_of(pid, obj);
  if (!type) return std::nullopt;
  const std::uint64_t flags = word(pid, type + kTypeFlags);
  using K = Layout::InstDict;
  const bool managed = l.inst_dict != K::dictoffset && (flags & kFlagManagedDict);
  if (l.inst_dict == K::none) return std::nullopt;
  if (!managed) {
    const auto off = static_cast<std::int64_t>(word(pid, type + kTypeDictoffset));
    if (off <= 0) return std::nullopt;  // no __dict__, or a variable-size object
    return dict_lookup(pid, word(pid, obj + static_cast<std::uint64_t>(off)), attr, l);
  }
  const std::uint64_t slot = word(pid, obj - kManagedDict);
  switch (l.inst_dict) {
    case K::managed:
      if (slot) return dict_lookup(pid, slot, attr, l);
      return values_lookup(pid, type, word(pid, obj - kManagedValues311), attr, l);
    case K::tagged:
      // stored as the values' address - 1 (_PyObject_InitializeDict)
      if (slot & 1) return values_lookup(pid, type, slot + 1, attr, l);
      return dict_lookup(pid, slot, attr, l);
    case K::inline_values: {
      if (slot) return dict_lookup(pid, slot, attr, l);
      if (!(flags & kFlagInlineValues)) return std::nullopt;
      const std::uint64_t values = obj + word(pid, type + kTypeBasicsize);
      std::uint8_t valid = 0;  // PyDictValues {capacity, size, embedded, valid, ...}
      if (!proc::read_memory(pid, values + 3, &valid, 1) || !valid) return std::nullopt;
      return values_lookup(pid, type, values, attr, l);
    }
    default:
      return std::nullopt;
  }
}

std::string object_type_name(pid_t pid, std::uint64_t obj, const Layout& l) {
  return type_name(pid, type_of(pid, obj), l);
}

std::optional<std::uint64_t> dict_get(pid_t pid, std::uint64_t dict, const std::string& key, const Layout& l) {
  return dict_lookup(pid, dict, key, l);
}

std::vector<std::pair<std::string, std::uint64_t>> instance_attrs(pid_t pid, std::uint64_t obj, const Layout& l,
                                                                  KeyNames* names) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  const std::uint64_t type = type_of(pid, obj);
  using K = Layout::InstDict;
  if (!type || l.inst_dict == K::none) return out;
  const std::uint64_t flags = word(pid, type + kTypeFlags);
  const bool managed = l.inst_dict != K::dictoffset && (flags & kFlagManagedDict);
  if (!managed) {
    const auto off = static_cast<std::int64_t>(word(pid, type + kTypeDictoffset));
    if (off <= 0) return out;
    return dict_items(pid, word(pid, obj + static_cast<std::uint64_t>(off)), l, kMaxEntries, names);
  }
  const std::uint64_t slot = word(pid, obj - kManagedDict);
  std::uint64_t values = 0;
  switch (l.inst_dict) {
    case K::managed:
      if (slot) return dict_items(pid, slot, l, kMaxEntries, names);
      values = word(pid, obj - kManagedValues311);
      break;
    case K::tagged:
      if (!(slot & 1)) return dict_items(pid, slot, l, kMaxEntries, names);
      values = slot + 1;
      break;
    case K::inline_values: {
      if (slot) return dict_items(pid, slot, l, kMaxEntries, names);
      if (!(flags & kFlagInlineValues)) return out;
      values = obj + word(pid, type + kTypeBasicsize);
      std::uint8_t valid = 0;
      if (!proc::read_memory(pid, values + 3, &valid, 1) || !valid) return out;
      break;
    }
    default:
      return out;
  }
  // Split values, keyed by the class's cached keys.
  auto keys = view_keys(pid, word(pid, type + l.heap_cached_keys), l);
  if (!keys || !values) return out;
  auto entries = read_entries(pid, *keys);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint64_t v = split_value(pid, values, i, l);
    if (!entries[i].first || !v) continue;
    std::string name = key_name(pid, entries[i].first, l, names);
    if (!name.empty()) out.emplace_back(std::move(name), v);
  }
  return out;
}

bool derives_from(pid_t pid, std::uint64_t obj, const std::string& base, const Layout& l) {
  const std::uint64_t mro = word(pid, type_of(pid, obj) + kTypeMro);
  auto n = mro ? proc::read_value<std::int64_t>(pid, mro + kTupleSize) : std::nullopt;
  if (!n || *n <= 0 || static_cast<std::uint64_t>(*n) > kMaxMro) return false;
  std::vector<std::uint64_t> items(static_cast<std::size_t>(*n));
  if (!proc::read_memory(pid, mro + l.tuple_items, items.data(), items.size() * 8)) return false;
  for (auto t : items)
    if (type_name(pid, t, l) == base) return true;
  return false;
}

std::vector<ModuleEntry> read_module_tree(pid_t pid, std::uint64_t root, const Layout& l) {
  std::vector<ModuleEntry> out;
  if (l.inst_dict == Layout::InstDict::none || !root) return out;
  std::unordered_set<std::uint64_t> seen;  // named_modules' memo: each module once
  // Explicit stack, children pushed in reverse so they pop in dict order.
  std::vector<std::pair<std::uint64_t, std::string>> todo{{root, ""}};
  while (!todo.empty() && out.size() < kMaxModules) {
    auto [addr, name] = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(addr).second) continue;
    const std::uint64_t type = type_of(pid, addr);
    if (!type) continue;
    ModuleEntry e{addr, name, type_name(pid, type, l)};
    if (auto mod = dict_lookup(pid, word(pid, type + kTypeDict), "__module__", l)) {
      std::string m = read_str(pid, *mod, l);
      if (!m.empty()) e.type = m + "." + e.type;
    }
    out.push_back(std::move(e));
    auto children = instance_attr(pid, addr, "_modules", l);
    if (!children) continue;
    auto items = dict_items(pid, *children, l);
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      if (type_name(pid, type_of(pid, it->second), l) == "NoneType") continue;  // _modules[name] = None
      todo.emplace_back(it->second, name.empty() ? it->first : name + "." + it->first);
    }
  }
  return out;
}

}  // namespace lt::python
