#include "user/cluster/hang_verdict.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

namespace lt::cluster {

namespace {

// c10d's Python entry points that block until peers take part (collectives,
// point-to-point, and the rendezvous of a new group).
constexpr std::string_view kCollectives[] = {"all_reduce",
                                             "all_reduce_coalesced",
                                             "all_gather",
                                             "all_gather_into_tensor",
                                             "all_gather_object",
                                             "all_gather_coalesced",
                                             "_all_gather_base",
                                             "reduce_scatter",
                                             "reduce_scatter_tensor",
                                             "_reduce_scatter_base",
                                             "all_to_all",
                                             "all_to_all_single",
                                             "broadcast",
                                             "broadcast_object_list",
                                             "barrier",
                                             "monitored_barrier",
                                             "reduce",
                                             "gather",
                                             "gather_object",
                                             "scatter",
                                             "scatter_object_list",
                                             "send",
                                             "recv",
                                             "send_object_list",
                                             "recv_object_list",
                                             "batch_isend_irecv",
                                             "init_process_group",
                                             "new_group"};

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_c10d_file(std::string_view file) {
  return ends_with(file, "torch/distributed/distributed_c10d.py");
}

// autograd's entry from Python: torch 2.x's _engine_run_backward, older
// torch's torch.autograd.backward itself.
bool is_backward_frame(const python::PyFrameInfo& f) {
  return f.readable && ((f.function == "_engine_run_backward" && ends_with(f.file, "torch/autograd/graph.py")) ||
                        (f.function == "backward" && ends_with(f.file, "torch/autograd/__init__.py")));
}

bool library_file(std::string_view f) {
  if (f.empty() || f.front() == '<') return true;  // <frozen importlib._bootstrap>, <string>
  for (std::string_view dir : {"/site-packages/", "/dist-packages/"})
    if (f.find(dir) != std::string_view::npos) return true;
  // The standard library: .../lib/python3.N/x.py (lib64 on some systems).
  for (std::string_view dir : {"/lib/python3", "/lib64/python3", "/lib/python2"}) {
    const auto at = f.find(dir);
    if (at == std::string_view::npos) continue;
    const auto slash = f.find('/', at + dir.size());
    if (slash != std::string_view::npos) return true;
  }
  return false;
}

struct ThreadPick {
  const python::ThreadDump* t = nullptr;
  std::string collective;
};

RankPlace place_of(const RankProcess& p, const python::ThreadDump& t, const std::string& collective) {
  RankPlace r;
  r.rank = p.rank;
  r.node = p.node;
  r.pid = p.dump.pid;
  r.tid = t.status.tid;
  r.collective = collective;
  if (const auto* f = innermost_user_frame(t.frames))
    r.where = *f;
  else if (!t.frames.empty())
    r.where = t.frames.front();
  r.state = t.gone ? 'X' : t.status.state;
  r.syscall = t.status.state == 'R' ? -1 : t.status.syscall;
  r.blocked_s = t.blocked_at_least_s;
  return r;
}

// The thread that speaks for a rank: one waiting in a collective (the main
// thread first), else one inside one, else the main thread, else the first
// Python thread with frames.
std::optional<RankPlace> rank_place(const RankProcess& p) {
  const python::ThreadDump* main = nullptr;
  const python::ThreadDump* first = nullptr;
  std::optional<RankPlace> waiting, inside;
  for (const auto& t : p.dump.threads) {
    if (!t.python || t.frames.empty()) continue;
    if (!first) first = &t;
    const bool is_main = t.status.tid == p.dump.pid;
    if (is_main) main = &t;
    std::string c = collective_of(t.frames);
    // Inside backward() with no c10d frame: blocked across both reads, that
    // is DDP's reducer waiting for the gradient all-reduce, most likely; seen
    // there once, the rank is in it (computing, or just arrived), not elsewhere.
    if (c.empty() && std::any_of(t.frames.begin(), t.frames.end(), is_backward_frame)) c = kBackward;
    if (c.empty()) continue;
    if (t.blocked_at_least_s > 0 && (!waiting || is_main)) waiting = place_of(p, t, c);
    if (!inside || is_main) inside = place_of(p, t, c);
  }
  if (waiting) return waiting;
  if (inside) return inside;
  if (main) return place_of(p, *main, "");
  if (first) return place_of(p, *first, "");
  return std::nullopt;
}

}  // namespace

std::string collective_of(const std::vector<python::PyFrameInfo>& frames) {
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!it->readable || !is_c10d_file(it->file)) continue;
    for (std::string_view c : kCollectives)
      if (it->function == c) return it->function;
  }
  return "";
}

const python::PyFrameInfo* innermost_user_frame(const std::vector<python::PyFrameInfo>& frames) {
  for (const auto& f : frames)
    if (f.readable && !library_file(f.file)) return &f;
  return nullptr;
}

Verdict hang_verdict(const std::vector<RankProcess>& processes) {
  Verdict v;
  // One process per rank: the first read (a launcher has no rank).
  std::map<int, RankPlace> places;
  int world = -1;
  for (const auto& p : processes) {
    if (p.rank < 0) continue;
    world = std::max(world, p.world_size);
    if (places.count(p.rank)) continue;
    if (auto r = rank_place(p)) places[p.rank] = *r;
  }
  v.ranks_read = static_cast<int>(places.size());
  std::set<int> seen;
  for (const auto& p : processes)
    if (p.rank >= 0) seen.insert(p.rank);
  // A world size from the environment bounds the ranks we list as unread,
  // not the loop: a crafted or odd WORLD_SIZE must not list 2^31 ranks.
  if (world > 0) world = std::min(world, (seen.empty() ? 0 : *seen.rbegin() + 1) + 65536);
  for (int r = 0; r < world; ++r)
    if (!seen.count(r)) v.unread.push_back(r);

  std::map<std::string, int> count;
  std::map<std::string, int> first_rank;
  for (const auto& [rank, r] : places)
    if (!r.collective.empty() && r.blocked_s > 0) {
      ++count[r.collective];
      first_rank.emplace(r.collective, rank);
    }
  if (count.empty()) {
    for (const auto& [rank, r] : places)
      if (!r.collective.empty()) v.inside_now.push_back(r);
    return v;
  }
  v.collective = std::max_element(count.begin(), count.end(), [&](const auto& a, const auto& b) {
                   if (a.second != b.second) return a.second < b.second;
                   return first_rank[a.first] > first_rank[b.first];  // ties: the lowest rank's
                 })->first;
  // Every rank in backward(), some blocked there, is as well a long backward
  // (a GPU's work, waited for on the CPU) as a stuck reducer: a hang only
  // when some rank is elsewhere.  Ranks that died or could not be read are
  // elsewhere too.
  const int expected = std::max({static_cast<int>(places.size()), static_cast<int>(seen.size()), world});
  const auto in_backward =
      std::count_if(places.begin(), places.end(), [](const auto& kv) { return kv.second.collective == kBackward; });
  v.hang = v.collective != kBackward || in_backward < expected;
  if (!v.hang) {
    for (const auto& [rank, r] : places) v.inside_now.push_back(r);
    v.collective.clear();
    return v;
  }
  for (const auto& [rank, r] : places) {
    if (r.collective == v.collective && r.blocked_s > 0)
      v.waiting.push_back(r);
    else if (!r.collective.empty() && r.blocked_s > 0)
      v.other_collective.push_back(r);
    else
      v.not_waiting.push_back(r);
  }
  v.waited_s = v.waiting.front().blocked_s;
  for (const auto& r : v.waiting) v.waited_s = std::min(v.waited_s, r.blocked_s);
  return v;
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace lt::cluster
