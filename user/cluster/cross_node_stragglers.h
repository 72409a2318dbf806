// The straggler rule across nodes, for `cluster --slurm-job N watch` (issue
// 33): each node's watcher sees its own node's ranks only, so a rank that
// keeps the ranks of other nodes waiting is invisible to every one of them.
// The watchers send their ranks' c10d arrivals up (user/cluster/
// watch_uplink.h), already on the coordinator's wall clock (each measured
// its offset against the coordinator's clock server); this runs watch's own
// rule (user/watch/straggler.h) over every rank of the job and says which
// node's watcher should capture which process.
// The nodes' streams come in batches (each watcher's drain, ~100 ms apart,
// not in step): an arrival is held until every node's watcher has said it
// sent all its arrivals up to that time (`through`), then all released in
// time order -- as one node's ring buffer gives them to its own rule. (Fed
// as they came, the rule saw one node's newest calls before another's, its
// newest calls per process cut at different collectives, and the line-up
// of a job whose step is near the straggler's lateness failed every few
// checks: named again and again.)
// Pure: lines in, a verdict out; bounded as StragglerWatch is, and at most
// kMaxHeld arrivals held per node (the oldest go).
#pragma once
#include <climits>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "user/watch/straggler.h"

namespace lt::cluster {

struct NamedStraggler {
  std::string node;
  std::uint32_t pid = 0;  // on that node
  int rank = -1;          // -1: not known
  std::string what;       // one line: rank, node, how often last, the wait, the step
};

class CrossNodeStragglers {
 public:
  static constexpr std::size_t kMaxHeld = 65536;
  explicit CrossNodeStragglers(StragglerOptions o = {}) : watch_(o) {}
  // One c10d call of `pid` on `node`: its process group object, COMM's
  // sequence number on it, kind, and entry time on the coordinator's clock.
  void arrival(const std::string& node, std::uint32_t pid, std::uint64_t pg, std::uint64_t seq, std::uint8_t kind,
               std::int64_t t_ns);
  // `node`'s watcher sent every arrival it has up to t_ns (our clock).
  void through(const std::string& node, std::int64_t t_ns);
  // A rank's progress: its train steps so far and their median.
  void progress(const std::string& node, std::uint32_t pid, int rank, std::uint64_t steps, std::uint64_t median_ns);
  // The process exited: its calls no longer line up with anyone's.
  void gone(const std::string& node, std::uint32_t pid);
  // Every node's processes gone (its watcher ended).
  void node_gone(const std::string& node);
  // Every 50 ms at most, when calls came: the straggler when it is newly
  // one (named once while it stays the straggler, again after it stopped
  // being one). The lateness that counts: 5 ms, and a tenth of the slowest
  // rank's median step, as on one node.
  std::optional<NamedStraggler> check(std::int64_t now_ns);
  std::size_t ranks() const { return ids_.size(); }

 private:
  struct Proc {
    std::string node;
    std::uint32_t pid = 0;
    int rank = -1;
    std::uint64_t steps = 0, median_ns = 0;
  };
  struct Held {
    std::int64_t t_ns;
    std::uint32_t id;
    std::uint64_t pg, seq;
    std::uint8_t kind;
  };
  struct Node {
    std::deque<Held> held;
    std::int64_t through_ns = INT64_MIN;
  };
  std::uint32_t id_of(const std::string& node, std::uint32_t pid);
  void release();  // every held arrival up to the least `through` of the nodes with ranks
  std::map<std::string, Node> nodes_;
  StragglerWatch watch_;
  std::map<std::pair<std::string, std::uint32_t>, std::uint32_t> ids_;  // (node, pid) -> the rule's key (from 1)
  std::map<std::uint32_t, Proc> procs_;
  std::uint32_t next_id_ = 1;
  std::uint32_t named_ = 0;  // the key named now (0: none)
  std::int64_t checked_ns_ = 0;
  bool calls_since_check_ = false;
};

}  // namespace lt::cluster
