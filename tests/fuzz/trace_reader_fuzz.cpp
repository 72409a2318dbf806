// libFuzzer target for the trace reader: any bytes must give records, a
// warning or an lt::Error, never a crash, a hang or an out-of-bounds access.
// What was read then goes through every aggregator of the catalogue
// (user/cli/aggregators.cpp) and every report of the registry
// (user/cli/report_registry.cpp), as `report FILE` does with every report
// asked for: a new aggregator or report is fuzzed with no edit here.
//   make fuzz                          bounded run (as in `make test`)
//   make fuzz FUZZ_SECONDS=3600        a longer one
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "reports/aggregate/actions.h"
#include "user/cli/aggregators.h"
#include "user/cli/options.h"
#include "user/cli/report_registry.h"
#include "user/core/errors.h"
#include "user/tracefile/trace_reader.h"

namespace {

// Every report by name, the option-driven tables on, and every aggregate
// kept whole (as the exports keep them).
lt::Options every_report() {
  lt::Options o;
  o.report.clear();
  for (const lt::ReportEntry& e : lt::report_entries())
    if (!e.name.empty()) o.report += (o.report.empty() ? "" : ",") + std::string(e.name);
  o.report_given = true;
  o.schedule = true;
  o.profile_memory = true;
  o.module_names = true;
  o.device_stats = true;
  return o;
}

// Reports print to stdout: kept out of libFuzzer's output, and not slowed
// by a terminal.
class SilencedStdout {
 public:
  SilencedStdout() : old_(std::cout.rdbuf(sink_.rdbuf())) {}
  ~SilencedStdout() { std::cout.rdbuf(old_); }
  SilencedStdout(const SilencedStdout&) = delete;
  SilencedStdout& operator=(const SilencedStdout&) = delete;

 private:
  std::ostringstream sink_;
  std::streambuf* old_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lt::Trace trace;
  try {
    lt::tracefile::read_trace(std::string_view(reinterpret_cast<const char*>(data), size), trace);
  } catch (const lt::Error&) {
    return 0;
  }
  // Whatever was read must also aggregate and render without trouble.
  static const lt::Options opts = every_report();
  lt::ActionAggregator actions;
  auto aggregators = lt::make_aggregators(opts, {.exports = true, .intervals = true}, actions);
  trace.for_each([&](const lt::lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    for (auto& a : aggregators) a->add(h, p);
  });
  lt::ReportResults results;
  results.actions = actions.finish();
  for (auto& a : aggregators) a->finish(results);
  SilencedStdout quiet;
  try {
    lt::write_reports(opts, results, {});
  } catch (const lt::Error&) {
    // An output error (io) is a clean failure; nothing is written to files here.
  }
  return 0;
}
