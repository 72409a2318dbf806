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

struct XlaLibrary {
  std::vector<XlaSite> sites;  // one per address
  // Where a metrics::Metric keeps its MetricData* (`data_`), read off the
  // code of Metric::GetData (its first load from `this`); -1 unknown.  The
  // value samples' bytes are read through it (docs/design-xla.md).
  int metric_data_offset = -1;
};

// Throws lt::Error(io) if the file cannot be read.  A file without the
// runtime's symbols gives no sites.
XlaLibrary find_xla_sites(const std::string& xlac_path);

// The displacement of the first `mov disp(%rdi),%rax` in `code` (a
// function's first bytes), or -1 (exposed for unit tests).
int first_load_from_this(std::string_view code);

// What a set of sites lacks to make the report ("" when complete): the
// compiles, executions and the timers' end are needed; the rest are counted
// where present.
std::string xla_sites_missing(const std::vector<XlaSite>& sites);

}  // namespace lt
