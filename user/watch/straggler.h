// Watch mode's straggler rule (issue 33): one rank last to arrive at
// `share` or more of the last `window` collectives that kept someone
// waiting -- every watched rank made them, and the last arrived `gap` or
// more after the runner-up -- is named as it happens.  Collectives nobody
// waited for are ties whoever enters last by microseconds: counting them
// would make the rule a coin toss between healthy ranks (a DDP step's other
// collectives follow its gradient all_reduce in lockstep).
// Arrivals are the c10d calls' entries (COMM records) on the watcher's one
// clock, lined up across ranks as `report DIR --merge` lines them up
// (reports/cluster/arrivals.h: the k-th call of a process group is one
// collective on every rank, offsets learnt from kinds and times).  With one
// collective a step that it delays (a DDP job's gradient bucket), a rank
// slowed from step s is named by step s + window: s + 16 by default.
// Pure: calls in, a verdict out; bounded (the newest `keep` calls per
// process and group).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lt {

struct StragglerOptions {
  std::size_t window = 16;
  double share = 0.75;
  std::size_t min_last = 0;             // set: last at this many of `window` (exact, where share * window rounds up)
  std::int64_t min_gap_ns = 5'000'000;  // the least `gap` (the caller may ask for more)
  std::size_t keep = 128;               // calls per (process, group)
};

struct StragglerVerdict {
  std::uint32_t pid = 0;
  std::size_t last = 0, of = 0;     // last at `last` of the window's `of` collectives
  std::int64_t median_wait_ns = 0;  // what the others waited for it, per collective (median)
  std::string kind;                 // the collective most of those were ("all_reduce")
  std::size_t ranks = 0;            // processes lined up
};

class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerOptions o = {}) : o_(o) {}
  // One c10d call: its process, backend object, our sequence number on it
  // (COMM's seq), kind and entry time.
  void add(std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind, std::int64_t ts_ns);
  void forget(std::uint32_t pid);
  // The straggler over the newest window, if one stands out now; `gap_ns`:
  // the least lateness that counts (at least min_gap_ns).
  // Each group's line-up, once found, is kept (KnownOffsets): a later
  // window whose times alone are ambiguous lines up as the earlier did.
  std::optional<StragglerVerdict> check(std::int64_t gap_ns = 0);

 private:
  struct Call {
    std::int64_t t_ns;
    std::uint64_t seq;
    std::uint8_t kind;
  };
  struct Proc {
    std::map<std::uint64_t, std::size_t> group_of;  // backend object -> index in first-use order
    std::vector<std::deque<Call>> groups;
    std::vector<std::optional<std::int64_t>> offset;  // per group: instance number = seq + offset
  };
  StragglerOptions o_;
  std::map<std::uint32_t, Proc> procs_;
};

}  // namespace lt
