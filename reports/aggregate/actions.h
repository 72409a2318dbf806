// Lightning actions per process: pairs starts with stops and keeps, per
// action name, the list of durations in the order SimpleProfiler would
// (dict order = order of first completion).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reports/model/trace.h"

namespace lt {

enum class Stage { none, fit, validate, test, predict };
const char* stage_title(Stage s);  // "FIT", ... ; "" for none
const char* stage_name(Stage s);   // "fit", ... ; "" for none

struct ProcessMeta {
  std::uint32_t pid = 0, ppid = 0;
  int rank = -1, local_rank = -1, world_size = -1;
  int py_major = 0, py_minor = 0;
  std::uint32_t flags = 0;
  std::string comm, cmdline;
};

struct ActionSeries {
  std::string name;
  std::vector<double> durations_s;
};

struct ProcessActions {
  ProcessMeta meta;
  std::vector<ActionSeries> actions;  // first-completion order
  Stage stage = Stage::none;
  std::uint64_t window_begin_ns = 0, window_end_ns = 0;
  std::uint64_t open_at_end = 0;      // started, never stopped in the window
  std::uint64_t unmatched_stops = 0;  // stopped, start not seen (began before attach)
  std::uint64_t estimated = 0;        // *_next fetches, manual optimizer_step: closed by the next action
  bool exited = false;
  double window_seconds() const {
    return window_end_ns > window_begin_ns ? (window_end_ns - window_begin_ns) / 1e9 : 0.0;
  }
  std::size_t total_calls() const;
};

struct ActionsReport {
  std::vector<ProcessActions> processes;  // in order of first appearance
  std::uint64_t ringbuf_drops = 0, read_faults = 0;
  bool complete = true;  // the stream has its detach record
};

// Consumes records one at a time, so a live session needs no copy of the
// stream in memory; finish() once, at the end.
class ActionAggregator {
 public:
  ActionAggregator();
  ~ActionAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  ActionsReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

ActionsReport aggregate_actions(const Trace& trace);

}  // namespace lt
