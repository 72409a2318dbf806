#include "user/torch/observer_layouts.h"

#include <cstdio>
#include <cstring>
#include <set>

#include "user/core/errors.h"
#include "user/proc/elf_image.h"

namespace lt {

namespace {

// at::RecordFunctionCallback (ATen/record_function.h), the same from 1.13
// to 2.15 (read from the headers of 1.13.1, 2.9.0 and 2.15.0):
//   StartCallback start_; EndCallback end_; double sampling_prob_ = 1.0;
//   std::array<bool, RecordScope::NUM_SCOPES (10)> scopes_;
//   bool needs_inputs_, needs_outputs_, needs_ids_;
// 37 bytes, 40 with padding.  RecordScope::USER_SCOPE is 7 in all of them.
// A torch that changes either gets a new row.
constexpr lt_obs_layout kLayout1 = {40, 0, 8, 16, 24, 10, 34, 35, 36, 7};

constexpr ObserverLayoutRow kRows[] = {
    {1, 13, 2, 15, kLayout1},
};

// Input shapes, from the headers of every release 1.13 to 2.15 (offsetof
// compiled against 1.13.1, 2.9.0 and 2.15.0 and run; against each other
// release's headers over those trees, read from the assembly):
// - at::RecordFunction's members before inputs_ are the same in all of
//   them; only fn_'s std::string changes size with the C++ string ABI:
//   inputs_ at 184 with the old ABI (PyPI's wheels up to 2.6), 208 with
//   the cxx11 ABI (PyPI's from 2.7, conda's and source builds before).
// - c10::IValue: 16 bytes, payload (a tensor's TensorImpl*) then the u32
//   tag at 8; Tag::Tensor is 1 in all (later tags moved, not it).
// - c10::TensorImpl's sizes_and_strides_ word moves with the refcount and
//   the Python slot in front of it: 9 up to 2.2, 8 from 2.3, 7 from 2.13.
constexpr std::uint32_t kInputsOldAbi = 184, kInputsCxx11Abi = 208;
constexpr std::uint32_t kIValueSize = 16, kIValueTag = 8, kTagTensor = 1;
constexpr struct {
  int first_major, first_minor, last_major, last_minor;
  std::uint32_t sizes_word;
} kSizesWords[] = {
    {1, 13, 2, 2, 9},
    {2, 3, 2, 12, 8},
    {2, 13, 2, 15, 7},
};

int version_number(const std::string& torch_version) {
  int major = 0, minor = 0;
  if (std::sscanf(torch_version.c_str(), "%d.%d", &major, &minor) != 2) return -1;
  return major * 1000 + minor;
}

}  // namespace

std::optional<ObserverShapes> observer_shapes_layout(const std::string& torch_version, bool cxx11_abi) {
  const int v = version_number(torch_version);
  for (const auto& r : kSizesWords)
    if (v >= r.first_major * 1000 + r.first_minor && v <= r.last_major * 1000 + r.last_minor)
      return ObserverShapes{cxx11_abi ? kInputsCxx11Abi : kInputsOldAbi, kIValueSize, kIValueTag, kTagTensor,
                            r.sizes_word};
  return std::nullopt;
}

// torch's own symbols only (at::, torch::, c10::): the library also
// exports pieces of a static libstdc++ built with the new ABI whatever
// torch's own is (PyPI's 1.13.1 has 56 such, and no torch symbol with it).
bool uses_cxx11_abi(const std::string& libtorch_cpu) {
  const elf::ElfImage file(libtorch_cpu);
  bool found = false;
  auto torch_own = [](const char* n) {
    if (std::strncmp(n, "_ZN", 3) != 0) return false;
    n += 3;
    if (*n == 'K') ++n;
    return std::strncmp(n, "2at", 3) == 0 || std::strncmp(n, "5torch", 6) == 0 || std::strncmp(n, "3c10", 4) == 0;
  };
  if (file.ok())
    file.for_each_symbol(
        [&](const elf::SymbolEntry& s) {
          if (!found && s.defined() && torch_own(s.name) && std::strstr(s.name, "__cxx11") != nullptr) found = true;
        },
        elf::ElfImage::Tables::dynamic_only);
  return found;
}

std::optional<lt_obs_layout> observer_layout(const std::string& torch_version) {
  int major = 0, minor = 0;
  if (std::sscanf(torch_version.c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  const int v = major * 1000 + minor;
  for (const auto& r : kRows)
    if (v >= r.first_major * 1000 + r.first_minor && v <= r.last_major * 1000 + r.last_minor) return r.layout;
  return std::nullopt;
}

std::string missing_observer_symbol(const std::string& libtorch_cpu) {
  const elf::ElfImage file(libtorch_cpu);
  if (!file.ok()) return "cannot read " + libtorch_cpu;
  std::set<std::string> found;
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (!s.defined() || s.value == 0) return;
        for (const char* want : kObserverSymbols)
          if (std::strcmp(s.name, want) == 0) found.insert(want);
      },
      elf::ElfImage::Tables::dynamic_only);
  for (const char* want : kObserverSymbols)
    if (!found.count(want)) return want;
  return "";
}

}  // namespace lt
