// The ATen operator entry points of a libtorch_cpu.so (read with
// user/proc/elf_image.h): every exported
// at::_ops::<Struct>::call, with the file offset a uprobe attaches at and the
// operator name torch.profiler reports for it.
//
// Every dispatcher call from Python or C++ goes through one of these
// functions, so a uprobe on each one sees the same operators the profiler
// records.  The struct name alone ("add_Tensor") cannot be split into name and
// overload reliably ("_foreach_add__Scalar", "native_layer_norm"), so the
// names come from the operator schema strings that torchgen compiles into the
// same library ("add.Tensor(Tensor self, ...) -> Tensor").
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace lt {

struct OpSymbol {
  std::uint64_t file_offset = 0;  // file offset of the first instruction: what a uprobe / uprobe_multi takes
  std::string struct_name;        // "add_Tensor"
  std::string name;               // "aten::add"
  std::string overload;           // "Tensor" ("" for the default overload)
  std::string schema;             // "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" ("": unknown)
                       // (may come from a longer op whose string shares the tail: names are exact, arguments not)
  std::string signature;  // demangled: "at::_ops::add_Tensor::call(at::Tensor const&, ...)" (exact)
};

struct OpCatalog {
  std::vector<OpSymbol> ops;      // sorted by struct_name, one per struct
  std::size_t schemas_found = 0;  // NUL-terminated "name[.overload](...) -> ..." strings in read-only data
  std::size_t unresolved = 0;     // ops no schema named: name = "aten::" + struct_name, overload = ""
  std::size_t skipped = 0;        // call symbols outside every executable segment's file image (no offset)
};

// Throws lt::Error with a one-line message when the file cannot be opened or
// is not a regular file (ExitCode::io) or is not a little-endian ELF64 file
// (ExitCode::unsupported).  An ELF file without .dynsym or without any ATen
// operator gives an empty catalog: the caller decides whether that is fatal.
OpCatalog load_op_catalog(const std::string& path);

// The link-time address of a defined .dynsym symbol (e.g. c10::TensorImpl's
// vtable in libc10.so), or nullopt.  Throws lt::Error(io) if unreadable.
std::optional<std::uint64_t> dynamic_object(const std::string& path, std::string_view symbol);

// The pieces of load_op_catalog, exposed for unit tests.
namespace op_catalog_detail {

// "Struct" when `mangled` is the Itanium name of at::_ops::Struct::call(...)
// (exactly the components at, _ops, Struct, call), else nullopt.
std::optional<std::string_view> op_call_struct(std::string_view mangled);

// Maps struct names to (operator name without "aten::", overload) using the
// schema strings found in blocks of read-only data.
class SchemaResolver {
 public:
  struct Name {
    std::string name;      // "add"
    std::string overload;  // "Tensor"
    std::string schema;    // "add.Tensor(Tensor self, ...) -> Tensor" (not compared)
    bool operator==(const Name& o) const { return name == o.name && overload == o.overload; }
  };

  // Only these struct names are looked for; candidates for any other key are
  // dropped while scanning, which keeps the scan cheap.
  explicit SchemaResolver(const std::vector<std::string_view>& struct_names);

  // Scans one block (a section's bytes) for NUL-terminated strings.  Nothing
  // is kept pointing into `data`.
  void scan(std::string_view data);

  // The name for `struct_name`, or nullopt when no schema (or no unambiguous
  // one) was seen for it.
  std::optional<Name> resolve(std::string_view struct_name) const;

  std::size_t schemas_found() const { return schemas_found_; }

 private:
  struct Candidates {
    std::vector<Name> whole;  // schema strings that start right after a NUL
    std::vector<Name> tail;   // schemas that are the tail of a longer string
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  void scan_string(std::string_view s);
  std::optional<Name> pick(const std::vector<Name>& candidates) const;

  std::unordered_map<std::string, Candidates, Hash, std::equal_to<>> wanted_;
  std::unordered_set<std::string, Hash, std::equal_to<>> aten_names_;  // X of every "aten::X" string
  std::size_t schemas_found_ = 0;
  std::string key_;  // scratch buffer for lookups
};

}  // namespace op_catalog_detail
}  // namespace lt
