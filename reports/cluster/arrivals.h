// Who arrived last at each collective (`report DIR --merge`), measured from
// the COMM records' entry times (bpf/commprobe.bpf.c), not estimated from
// action durations.
//
// Lining up.  c10d requires every rank of a process group to issue its
// collectives in one order, so the k-th call of a group is one collective
// on every rank.  Our `seq` counts a process's calls on one pg object since
// attach (docs/design-comm.md): ranks attached at different moments number
// the same collective differently, by a constant offset per rank.  Groups
// are matched across ranks by their index (order of first use in each
// process).  Per group, the rank with the most calls is the reference; for
// every other rank each candidate offset (taken from the reference call
// nearest in time to a sample of its calls, and its neighbours) is scored
// over the calls both have: the kinds and byte counts must all agree, and
// the median |arrival difference| on the common clock decides.  The group
// is refused ("not aligned") when no candidate agrees, when the calls
// shared are fewer than 3, or when the runner-up's median is within 1.5x
// of the best's (a periodic job whose period is near the ranks' skew).
//
// Per instance: every rank's arrival (its call's entry) on the common
// clock; the last to arrive; the others' wait = last arrival - theirs.
// Only instances every aligned rank of the group recorded count (a rank not
// yet attached, or a lost record, could have been the last).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/cluster/merge.h"

namespace lt {

// One call of one rank in one group, its time already on the common clock.
struct ArrivalCall {
  std::int64_t t_ns = 0;
  std::uint64_t seq = 0;  // our per-(process, pg object) count
  std::uint8_t kind = 0;
  std::uint64_t bytes = 0;
  std::uint32_t tid = 0;      // for the traces' rows
  std::uint64_t mono_ns = 0;  // its recording's own clock, for the traces
};

// groups[g][r]: rank position r's calls in its g-th process group (any order).
using ArrivalInput = std::vector<std::vector<std::vector<ArrivalCall>>>;

struct CollectiveInstance {
  unsigned group = 0;
  std::uint64_t number = 0;  // 0: the first of the group any rank recorded
  std::uint8_t kind = 0;
  std::uint64_t bytes = 0;
  std::vector<std::int64_t> arrival_ns;  // per rank position; kMissing when not recorded
  std::vector<std::uint32_t> tid;        // per rank position
  std::vector<std::uint64_t> mono_ns;    // per rank position: its recording's clock
  int last = -1;                         // rank position of the latest arrival; -1: incomplete
  // The latest arrival is later than the runner-up's by more than the two
  // ranks' clock bounds (ArrivalClocks): only then does it count as "last"
  // (an exact tie, or a gap within what the clocks can tell, counts as no
  // rank's).  The waits use `last` either way.
  bool last_decided = false;
  static constexpr std::int64_t kMissing = INT64_MIN;
};

struct GroupAlignment {
  unsigned group = 0;
  bool aligned = false;
  std::string why_not;
  std::vector<bool> present;                // per rank position: has calls in this group
  std::vector<std::int64_t> offset;         // per rank: instance number = seq + offset
  std::vector<std::int64_t> median_dt_ns;   // per rank: median |arrival - reference's| at its offset
  std::size_t instances = 0, complete = 0;  // complete: every present rank recorded it
};

// Per rank and kind: over complete instances of that kind.
struct ArrivalStats {
  std::uint8_t kind = 0;
  std::size_t instances = 0, last = 0;    // last: instances where it was last, decided (last_decided)
  std::int64_t waited_for_ns = 0;         // the others' waits summed, over the instances it was last
  std::int64_t median_waited_for_ns = 0;  // median per such instance of the others' summed wait
  std::int64_t own_wait_ns = 0;           // its own waits summed (for the others)
};

struct ArrivalReport {
  std::vector<GroupAlignment> groups;
  std::vector<CollectiveInstance> instances;     // by group, then number
  std::vector<std::vector<ArrivalStats>> ranks;  // per rank position, by kind
};

// Per rank position: its host, and that host's clock-correction bound
// (HostClock::residual_ns; < 0 unknown, taken as 0).  Two ranks on one host
// share a clock: their arrivals differ by no correction error.  Empty: every
// rank on one clock (only exact ties are undecided).
struct ArrivalClocks {
  std::vector<std::size_t> host;
  std::vector<std::int64_t> bound_ns;
  // How far apart two ranks' arrivals must be for the order to be known.
  std::int64_t margin_ns(std::size_t a, std::size_t b) const;
};

// Offsets already known (a live rule's earlier line-up of the same
// processes: a process's seq never changes meaning while it is attached):
// known[g][r], when set, is rank position r's instance number = seq +
// known[g][r] on one scale for the group. A rank that has one, against a
// reference that has one, takes that offset if the kinds and sizes agree,
// without the search by time -- which is ambiguous while the ranks' skew
// is near the collectives' period (a straggler 30 ms late in a 35 ms step).
using KnownOffsets = std::vector<std::vector<std::optional<std::int64_t>>>;

ArrivalReport analyze_arrivals(const ArrivalInput& in, std::size_t nranks, const ArrivalClocks& clocks = {},
                               const KnownOffsets* known = nullptr);

// The plan's ranks' hosts and their clock bounds.
ArrivalClocks arrival_clocks(const MergePlan& plan);

// The plan's ranks' COMM calls (RankRun::comm), by group index, on the common clock.
ArrivalInput arrival_input(const MergePlan& plan);

// The name every rank's row shows for an instance: "all_reduce #N (pg P)".
std::string instance_name(const std::string& kind_name, std::uint64_t number, unsigned group);

}  // namespace lt
