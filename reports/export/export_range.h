// `--steps A-B` / `--window START,END`: the part of a recording the trace
// exports (--chrome, --chrome-dir, --perfetto) keep.  The text reports
// always cover the whole attach window.
//
// Steps are the training steps of reports/aggregate/steps.h, indexed from
// each process's first step seen; a window is seconds from the attach (the
// recording's WINDOW begin).  An event is kept whole when it overlaps the
// range (never clipped), so an enclosing action (fit, an epoch) stays, as
// do a fetch or kernel that straddles an edge; an instant (a memory event)
// is kept when it falls inside.  GPU work is kept by its own times or by
// its launch's, so a step's kernels stay with it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "reports/aggregate/actions.h"

namespace lt {

struct ExportRange {
  enum class Kind { all, steps, window } kind = Kind::all;
  std::uint32_t first_step = 0, last_step = 0;  // steps: inclusive
  double start_s = 0, end_s = 0;                // window: seconds from the attach, start < end
  bool all() const { return kind == Kind::all; }
};

// "A-B" or "A" (one step): 0 <= A <= B; std::nullopt when malformed.
std::optional<ExportRange> parse_step_range(const std::string& s);
// "START,END": seconds, 0 <= START < END; std::nullopt when malformed.
std::optional<ExportRange> parse_time_window(const std::string& s);

// A range resolved against one recording: per process, the CLOCK_MONOTONIC
// span it keeps (steps differ per process; a window is the same for all).
class RangeFilter {
 public:
  RangeFilter() = default;  // keeps everything
  RangeFilter(const ExportRange& range, const ActionsReport& rep);

  bool everything() const { return all_; }
  // [begin_ns, end_ns] overlaps the process's span (an instant: inside it).
  bool keeps(std::uint32_t pid, std::uint64_t begin_ns, std::uint64_t end_ns) const;
  // What the range matched, for a note on stderr ("" when everything).
  const std::string& summary() const { return summary_; }
  bool matched_nothing() const { return !all_ && spans_.empty() && !window_; }

 private:
  struct Span {
    std::uint64_t begin_ns = 0, end_ns = 0;
  };
  bool all_ = true;
  std::optional<Span> window_;                     // --window: every process
  std::unordered_map<std::uint32_t, Span> spans_;  // --steps: per process
  std::string summary_;
};

// `--window`'s argument for [begin_ns, end_ns] of a recording attached at
// origin_ns: "S,E" in seconds after the attach, rounded outward to the
// microsecond so the window holds the whole span; "" when the origin is
// unknown (0) or after begin_ns.
std::string window_arg(std::uint64_t begin_ns, std::uint64_t end_ns, std::uint64_t origin_ns);

// The attach time of a recording: its WINDOW begin, else the earliest process
// window begin (0: none).
std::uint64_t attach_begin_ns(const ActionsReport& rep);

}  // namespace lt
