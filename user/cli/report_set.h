// Every aggregator a command's reports need, fed the same record stream
// (live from the collector, or from a trace file), and the reports and
// exports the options ask for, written once the stream ends.
#pragma once
#include <cstddef>
#include <memory>

#include "reports/aggregate/actions.h"
#include "user/cli/aggregators.h"
#include "user/cli/options.h"
#include "user/cli/report_registry.h"
#include "user/model/trace.h"
#include "user/tracefile/trace_reader.h"

namespace lt {

class ReportSet {
 public:
  explicit ReportSet(const Options& opts);
  // One record: the action aggregator first (it tells the others the
  // action open on the record's thread), then the catalogue's in order.
  void add(const lt_event_header& h, const std::byte* p);
  // A damaged stretch of a trace file: nothing pairs across it.
  void gap();
  // Every aggregator's result; once.
  ReportResults finish();
  // finish(), then the reports (stdout or Lightning's files; the registry,
  // user/cli/report_registry.h) and exports (the table of report_set.cpp:
  // --chrome, --perfetto, --html; flame graphs, pstats dumps).
  void write();

 private:
  const Options& opts_;
  ActionAggregator actions_;
  std::vector<std::unique_ptr<AggregatorSlot>> aggregators_;  // the catalogue's (aggregators.h), in order
};

// Streams trace file `path` through a ReportSet built on `opts`: without
// --report, `opts` takes the report list the trace was recorded with;
// damaged stretches are gaps. `keep`: the whole stream too (--dump).
// Reader warnings go to stderr when `warn`. Throws as the reader does.
struct FileReports {
  tracefile::ReadResult read;
  std::unique_ptr<ReportSet> reports;  // built on `opts` as read
};
FileReports read_reports(const std::string& path, Options& opts, Trace* keep, bool warn);

// One rank's reports in `report DIR --merge`: those `report FILE` prints,
// without its exports (the merge writes merged ones); returns its verdict
// findings (with --html they are the merged page's: the file's steps are
// kept for them).
std::vector<Finding> write_rank_reports(const Options& opts, const std::string& file, const OutputOptions& out);

// --dump FILE: every record as one text line ("-" or /dev/stdout: stdout).
void write_event_dump(const Trace& trace, const std::string& path);

}  // namespace lt
