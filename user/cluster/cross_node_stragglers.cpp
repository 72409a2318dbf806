#include "user/cluster/cross_node_stragglers.h"

#include <algorithm>
#include <cstdio>

namespace lt::cluster {

std::uint32_t CrossNodeStragglers::id_of(const std::string& node, std::uint32_t pid) {
  auto [it, fresh] = ids_.try_emplace({node, pid}, next_id_);
  if (fresh) {
    nodes_.try_emplace(node);  // it holds the others back from now on
    procs_[next_id_] = Proc{node, pid};
    ++next_id_;
  }
  return it->second;
}

void CrossNodeStragglers::arrival(const std::string& node, std::uint32_t pid, std::uint64_t pg, std::uint64_t seq,
                                  std::uint8_t kind, std::int64_t t_ns) {
  auto& held = nodes_[node].held;
  held.push_back({t_ns, id_of(node, pid), pg, seq, kind});
  if (held.size() > kMaxHeld) held.pop_front();
}

void CrossNodeStragglers::through(const std::string& node, std::int64_t t_ns) {
  auto& n = nodes_[node];
  n.through_ns = std::max(n.through_ns, t_ns);
}

void CrossNodeStragglers::release() {
  // The nodes that have ranks hold the others back; one without (all its
  // ranks gone, or none yet) does not.
  std::map<std::string, bool> has_ranks;
  for (const auto& [key, id] : ids_) has_ranks[key.first] = true;
  std::int64_t upto = INT64_MAX;
  for (const auto& [name, n] : nodes_)
    if (has_ranks.count(name)) upto = std::min(upto, n.through_ns);
  std::vector<Held> out;
  for (auto& [name, n] : nodes_) {
    // A node's own arrivals come in its records' order, near enough to time order.
    while (!n.held.empty() && n.held.front().t_ns <= upto) {
      out.push_back(n.held.front());
      n.held.pop_front();
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Held& a, const Held& b) { return a.t_ns < b.t_ns; });
  for (const auto& h : out)
    if (procs_.count(h.id)) watch_.add(h.id, h.pg, h.seq, h.kind, h.t_ns);
  if (!out.empty()) calls_since_check_ = true;
}

void CrossNodeStragglers::progress(const std::string& node, std::uint32_t pid, int rank, std::uint64_t steps,
                                   std::uint64_t median_ns) {
  Proc& p = procs_[id_of(node, pid)];
  if (rank >= 0) p.rank = rank;
  p.steps = steps;
  p.median_ns = median_ns;
}

void CrossNodeStragglers::gone(const std::string& node, std::uint32_t pid) {
  auto it = ids_.find({node, pid});
  if (it == ids_.end()) return;
  watch_.forget(it->second);
  procs_.erase(it->second);
  for (auto& [name, n] : nodes_) std::erase_if(n.held, [id = it->second](const Held& h) { return h.id == id; });
  if (named_ == it->second) named_ = 0;
  ids_.erase(it);
}

void CrossNodeStragglers::node_gone(const std::string& node) {
  std::vector<std::uint32_t> pids;
  for (const auto& [key, id] : ids_)
    if (key.first == node) pids.push_back(key.second);
  for (auto pid : pids) gone(node, pid);
  nodes_.erase(node);
}

std::optional<NamedStraggler> CrossNodeStragglers::check(std::int64_t now_ns) {
  if (now_ns - checked_ns_ < 50'000'000) return std::nullopt;
  release();
  if (!calls_since_check_ || now_ns - checked_ns_ < 50'000'000) return std::nullopt;
  calls_since_check_ = false;
  checked_ns_ = now_ns;
  std::uint64_t median = 0;
  for (const auto& [id, p] : procs_) median = std::max(median, p.median_ns);
  const auto v = watch_.check(static_cast<std::int64_t>(median / 10));
  if (!v) {
    named_ = 0;
    return std::nullopt;
  }
  if (v->pid == named_) return std::nullopt;
  named_ = v->pid;
  const Proc& p = procs_[v->pid];
  std::size_t nodes = 0;
  std::string last_node;
  for (const auto& [key, id] : ids_)
    if (key.first != last_node) ++nodes, last_node = key.first;
  char what[320];
  std::snprintf(what, sizeof what,
                "the straggler across nodes: %s on %s, last to arrive at %zu of the last %zu %s collectives of %zu "
                "ranks on %zu nodes that kept others waiting (%.1f ms each, median), named at its train step %llu",
                p.rank >= 0 ? ("rank " + std::to_string(p.rank)).c_str() : ("pid " + std::to_string(p.pid)).c_str(),
                p.node.c_str(), v->last, v->of, v->kind.c_str(), v->ranks, nodes,
                static_cast<double>(v->median_wait_ns) / 1e6, static_cast<unsigned long long>(p.steps));
  return NamedStraggler{p.node, p.pid, p.rank, what};
}

}  // namespace lt::cluster
