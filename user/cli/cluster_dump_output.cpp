#include "user/cli/cluster_dump_output.h"

#include <algorithm>

#include "user/cli/dump_output.h"
#include "user/proc/syscall_names.h"
#include "user/python/line_table.h"
#include "user/text/json_escape.h"
#include "user/text/numbers.h"

namespace lt {

namespace {

using cluster::RankPlace;

std::string ranks_word(const std::vector<RankPlace>& ps) {
  std::vector<int> r;
  for (const auto& p : ps) r.push_back(p.rank);
  return (r.size() == 1 ? "rank " : "ranks ") + cluster::rank_ranges(r);
}

std::string seconds(double s) {
  return fixed(s, 1) + " s";
}

// "train.py:88 (load_batch), blocked in read for at least 1.0 s"
std::string where(const RankPlace& p) {
  std::string s;
  if (p.where) {
    const auto& f = *p.where;
    s = one_line(f.file) + ":" + (f.line == python::kNoLine ? std::string("?") : std::to_string(f.line)) + " (" +
        one_line(f.function) + ")";
  } else {
    s = "no Python frame";
  }
  if (p.state == 'R')
    s += ", running";
  else if (p.syscall >= 0)
    s += ", blocked in " + proc::syscall_name(p.syscall);
  else if (p.state == 'X')
    s += ", exited while read";
  else
    s += ", not in a system call";
  if (p.blocked_s > 0) s += " for at least " + seconds(p.blocked_s);
  return s + " (thread " + std::to_string(p.tid) + ", " + one_line(p.node) + ")";
}

std::string place_json(const RankPlace& p) {
  std::string o = "{\"rank\": " + std::to_string(p.rank) + ", \"node\": " + json_string(p.node) +
                  ", \"pid\": " + std::to_string(p.pid) + ", \"tid\": " + std::to_string(p.tid) +
                  ", \"collective\": " + (p.collective.empty() ? "null" : json_string(p.collective)) + ", \"frame\": ";
  if (p.where)
    o += "{\"function\": " + json_string(p.where->function) + ", \"file\": " + json_string(p.where->file) +
         ", \"line\": " + (p.where->line == python::kNoLine ? std::string("null") : std::to_string(p.where->line)) +
         "}";
  else
    o += "null";
  o += ", \"state\": " + json_string(p.state == 'R' ? "running" : p.state == 'X' ? "exited" : "blocked");
  o += ", \"syscall\": " + (p.syscall >= 0 ? json_string(proc::syscall_name(p.syscall)) : std::string("null"));
  o += ", \"blocked_at_least_s\": " + (p.blocked_s > 0 ? fixed(p.blocked_s, 3) : std::string("null")) + "}";
  return o;
}

std::string places_json(const std::vector<RankPlace>& ps) {
  std::string o = "[";
  for (std::size_t i = 0; i < ps.size(); ++i) o += (i ? ", " : "") + place_json(ps[i]);
  return o + "]";
}

const char* kNotKnown[] = {
    "the collective's sequence number and process group: a dump reads stacks, not c10d's state (ranks in the "
    "same collective may be at different calls of it)",
    "which collective a rank blocked in backward() waits for: DDP's reducer runs its gradient all-reduce in C++, "
    "with no c10d Python frame (taken to be that wait)"};

double interval_of(const std::vector<cluster::RankProcess>& ps) {
  double least = 0;
  for (const auto& p : ps)
    if (p.interval_s > 0 && (least == 0 || p.interval_s < least)) least = p.interval_s;
  return least;
}

}  // namespace

std::vector<std::string> verdict_lines(const cluster::Verdict& v, double interval_s) {
  std::vector<std::string> out;
  if (!v.hang) {
    const std::string apart = (interval_s > 0 ? " (" + fixed(interval_s, 1) + " s apart)" : std::string()) + " (" +
                              std::to_string(v.ranks_read) + " rank(s) read)";
    // In the verdict, inside_now holds blocked ranks only when every rank
    // was in backward, some blocked there (hang_verdict.h).
    const auto blocked = std::count_if(v.inside_now.begin(), v.inside_now.end(),
                                       [](const cluster::RankPlace& p) { return p.blocked_s > 0; });
    const bool all_backward = blocked > 0;
    if (all_backward)
      out.push_back((blocked == static_cast<long>(v.inside_now.size())
                         ? "no hang found: every rank was blocked in backward in both reads"
                         : "no hang found: every rank was in backward, " + std::to_string(blocked) +
                               " blocked there in both reads") +
                    apart + ": a long backward is not told from a stuck DDP reducer (a longer --duration tells more)");
    else
      out.push_back("no hang found: no rank was blocked in a c10d collective in both reads" + apart);
    for (const auto& p : v.inside_now)
      out.push_back("rank " + std::to_string(p.rank) + " was inside " +
                    (p.collective.empty() ? std::string(cluster::kBackward) : p.collective) + " when read" +
                    (p.blocked_s > 0 ? ", blocked: " : ", and moving: ") + where(p));
  } else {
    out.push_back(
        "hang: " + ranks_word(v.waiting) + " wait in " + v.collective +
        (v.collective == cluster::kBackward
             ? " (DDP's gradient all-reduce, most likely: no c10d frame; bucket and sequence number not known)"
             : " (process group and sequence number not known)") +
        " for at least " + seconds(v.waited_s));
    for (const auto& p : v.other_collective)
      out.push_back("rank " + std::to_string(p.rank) + " waits in " + p.collective + " instead: " + where(p));
    for (const auto& p : v.not_waiting) {
      if (p.collective == v.collective)
        out.push_back("rank " + std::to_string(p.rank) + " is in " + p.collective +
                      " too, but was not blocked there in both reads: " + where(p));
      else
        out.push_back("rank " + std::to_string(p.rank) + " has not entered it: it is in " + where(p));
    }
    if (v.not_waiting.empty() && v.other_collective.empty())
      out.push_back("every rank read waits in " + v.collective +
                    ": none is missing from it (a rank may be at "
                    "another call of it, or a peer outside these ranks may be gone)");
  }
  if (!v.unread.empty())
    out.push_back((v.unread.size() == 1 ? "rank " : "ranks ") + cluster::rank_ranges(v.unread) +
                  " of the job's world size not read (their node gave no dump)");
  return out;
}

std::string cluster_dump_text(const cluster::ClusterDump& cd, const std::vector<cluster::RankProcess>& processes,
                              const cluster::Verdict& v) {
  std::string out = "Slurm job " + cd.job_id + " (" + one_line(cd.nodelist) + "): " + std::to_string(processes.size()) +
                    " process(es) on " + std::to_string(cd.nodes.size()) + " node(s), read in " + fixed(cd.seconds, 2) +
                    " s\n";
  for (const auto& n : cd.nodes)
    if (!n.error.empty()) out += "Node " + one_line(n.node) + ": no dump: " + one_line(n.error) + "\n";
  for (const auto& p : processes) {
    out += "\n=== " + (p.rank >= 0 ? "Rank " + std::to_string(p.rank) : std::string("No rank")) + " (" +
           one_line(p.node) + ") ===\n";
    out += dump_text(p.dump);
  }
  out += "\nVerdict:\n";
  for (const auto& l : verdict_lines(v, interval_of(processes))) out += "  " + l + "\n";
  out += "Not known:\n";
  for (const char* k : kNotKnown) out += "  " + std::string(k) + "\n";
  return out;
}

std::string cluster_dump_json(const cluster::ClusterDump& cd, const std::vector<cluster::RankProcess>& processes,
                              const cluster::Verdict& v) {
  std::string o = "{\"job\": " + json_string(cd.job_id) + ", \"nodelist\": " + json_string(cd.nodelist) +
                  ", \"seconds\": " + fixed(cd.seconds, 3) + ",\n\"nodes\": [";
  for (std::size_t i = 0; i < cd.nodes.size(); ++i) {
    const auto& n = cd.nodes[i];
    o += (i ? ", " : "") + std::string("{\"node\": ") + json_string(n.node) + ", \"host\": " + json_string(n.host) +
         ", \"ok\": " + (n.error.empty() ? "true" : "false") +
         ", \"error\": " + (n.error.empty() ? "null" : json_string(n.error)) + "}";
  }
  o += "],\n\"ranks\": [";
  for (std::size_t i = 0; i < processes.size(); ++i) {
    const auto& p = processes[i];
    o += (i ? ",\n" : "\n") + std::string("{\"rank\": ") + (p.rank >= 0 ? std::to_string(p.rank) : "null") +
         ", \"node\": " + json_string(p.node) + ", \"interval_s\": " + fixed(p.interval_s, 3) +
         ", \"process\": " + dump_process_json(p.dump) + "}";
  }
  o += "\n],\n\"verdict\": {\"hang\": " + std::string(v.hang ? "true" : "false") +
       ", \"collective\": " + (v.collective.empty() ? "null" : json_string(v.collective)) +
       ", \"waited_at_least_s\": " + (v.hang ? fixed(v.waited_s, 3) : std::string("null")) +
       ",\n \"waiting\": " + places_json(v.waiting) + ",\n \"other_collective\": " + places_json(v.other_collective) +
       ",\n \"not_waiting\": " + places_json(v.not_waiting) + ",\n \"unread\": [";
  for (std::size_t i = 0; i < v.unread.size(); ++i) o += (i ? ", " : "") + std::to_string(v.unread[i]);
  o += "],\n \"inside_now\": " + places_json(v.inside_now) + ",\n \"text\": [";
  const auto lines = verdict_lines(v, interval_of(processes));
  for (std::size_t i = 0; i < lines.size(); ++i) o += (i ? ", " : "") + json_string(lines[i]);
  o += "],\n \"not_known\": [";
  for (std::size_t i = 0; i < std::size(kNotKnown); ++i) o += (i ? ", " : "") + json_string(kNotKnown[i]);
  o += "]}}\n";
  return o;
}

}  // namespace lt
