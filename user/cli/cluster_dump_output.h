// `cluster ... dump` output: every rank's dump (dump_output.h's layout) in
// rank order, then the verdict (user/cluster/hang_verdict.h) in words, or
// one JSON document with both.  Valid UTF-8 whatever the targets hold.
#pragma once
#include <string>
#include <vector>

#include "user/cluster/cluster_dump.h"
#include "user/cluster/hang_verdict.h"

namespace lt {

std::string cluster_dump_text(const cluster::ClusterDump& cd, const std::vector<cluster::RankProcess>& processes,
                              const cluster::Verdict& v);
// {"job", "nodelist", "seconds", "nodes": [{"node", "host", "ok", "error"}],
//  "ranks": [{"rank", "node", "interval_s", "process": <dump's process>}],
//  "verdict": {"hang", "collective", "waited_at_least_s", "waiting": [place], "other_collective": [place],
//              "not_waiting": [place], "unread": [rank], "inside_now": [place], "text": [line],
//              "not_known": [what]}}
// place: {"rank", "node", "pid", "tid", "collective", "frame": {"function", "file", "line"} | null,
//         "state", "syscall", "blocked_at_least_s"}
std::string cluster_dump_json(const cluster::ClusterDump& cd, const std::vector<cluster::RankProcess>& processes,
                              const cluster::Verdict& v);

// The verdict as lines of text (the first says whether a hang was found).
std::vector<std::string> verdict_lines(const cluster::Verdict& v, double interval_s);

}  // namespace lt
