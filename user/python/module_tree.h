// The nn.Module tree of a LightningModule, read out of the target with
// process_vm_readv: what Lightning's PyTorchProfiler(record_module_names=True)
// names its `[pl][module]{type}: {name}` rows after.  named_modules() order
// (pre-order over each module's `_modules` dict, each module once under its
// first name, None entries skipped) and type names as
// `type(m).__module__ + "." + type(m).__name__`.  Per-version facts (where
// an instance keeps its attributes, dict layouts) come from the Layout row.
// Every byte is untrusted: sizes are capped and a failed read ends that
// branch of the walk, never the process.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "user/python/offsets.h"

namespace lt::python {

struct ModuleEntry {
  std::uint64_t addr = 0;  // the module object
  std::string name;        // dotted path from the root; "" for the root itself
  std::string type;        // "torch.nn.modules.linear.Linear"
};

// named_modules() of the module at `root`, root first.  Empty if this
// version has no instance-dict row (Layout::InstDict::none) or the root
// is unreadable.
std::vector<ModuleEntry> read_module_tree(pid_t pid, std::uint64_t root, const Layout& l);

// Does the type of `obj` have a class named `base` (tp_name) in its MRO?
// (The root of the tree is the first module whose class derives from
// LightningModule.)
bool derives_from(pid_t pid, std::uint64_t obj, const std::string& base, const Layout& l);

// obj.<attr> when it lives in the instance's own attributes (not a class
// attribute or a property), or nullopt.
std::optional<std::uint64_t> instance_attr(pid_t pid, std::uint64_t obj, const std::string& attr, const Layout& l);

// Key str objects already read (address -> text), for reading many dicts
// that share their keys (attribute names are interned).  Keep one only for
// a short read: an address may be reused once its str is freed.
using KeyNames = std::unordered_map<std::uint64_t, std::string>;

// The (str key, value) items of a dict object in insertion order (non-str
// keys skipped), at most `max_items`.
std::vector<std::pair<std::string, std::uint64_t>> dict_items(pid_t pid, std::uint64_t dict, const Layout& l,
                                                              std::size_t max_items = 4096, KeyNames* names = nullptr);

// Every instance attribute of obj (what vars(obj) holds), in one read of
// its dict or split values; empty if it has none or is unreadable.
std::vector<std::pair<std::string, std::uint64_t>> instance_attrs(pid_t pid, std::uint64_t obj, const Layout& l,
                                                                  KeyNames* names = nullptr);

// The tp_name of obj's type ("dict", "collections.deque"); "" if unreadable.
std::string object_type_name(pid_t pid, std::uint64_t obj, const Layout& l);

// dict[key] for a str key, or nullopt.
std::optional<std::uint64_t> dict_get(pid_t pid, std::uint64_t dict, const std::string& key, const Layout& l);

}  // namespace lt::python
