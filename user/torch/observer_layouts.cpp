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

}  // namespace

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
