// The torch_xla runtime functions of an _XLAC extension that the XLA probes
// attach to (docs/design-xla.md), found by mangled name in its symbol tables
// (.symtab too: the wheel keeps its local symbols; the PJRT client's
// methods are not exported).  A table, not code per site: each row is a
// mangled-name prefix and the enum lt_xla_site it gives.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt {

struct XlaSite {
  std::uint64_t file_offset = 0;
  std::uint32_t kind = 0;  // enum lt_xla_site
  std::string symbol;
};

// The site kind of a mangled symbol, or 0 (exposed for unit tests).  Clones
// (".cold", ".constprop.0", ...) are no entry points: 0.
std::uint32_t xla_site_kind(std::string_view mangled);

// Throws lt::Error(io) if the file cannot be read.  A file without the
// runtime's symbols gives an empty list; one site per address.
std::vector<XlaSite> find_xla_sites(const std::string& xlac_path);

// What a set of sites lacks to make the report ("" when complete): the
// compiles, executions and the timers' end are needed; the rest are counted
// where present.
std::string xla_sites_missing(const std::vector<XlaSite>& sites);

}  // namespace lt
