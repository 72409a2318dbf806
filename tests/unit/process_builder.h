// A process's completed actions built by hand for report tests: each
// action by name, its intervals given in ms on thread 7 (as
// ActionAggregator(keep_intervals) would make them).
#pragma once
#include <cstdint>
#include <string>

#include "reports/aggregate/actions.h"

namespace lt::testing_support {

struct ProcessBuilder {
  ProcessActions p;
  ProcessBuilder() { p.meta.pid = 7; }
  std::uint32_t index(const std::string& name) {
    for (std::uint32_t i = 0; i < p.actions.size(); ++i)
      if (p.actions[i].name == name) return i;
    p.actions.emplace_back(name);
    return static_cast<std::uint32_t>(p.actions.size() - 1);
  }
  // In the order the actions end (ActionAggregator's).
  void add(const std::string& name, double begin_ms, double end_ms, std::uint32_t tid = 7) {
    const auto i = index(name);
    p.actions[i].add((end_ms - begin_ms) / 1e3);
    p.intervals.push_back(
        {i, tid, static_cast<std::uint64_t>(begin_ms * 1e6), static_cast<std::uint64_t>(end_ms * 1e6), false});
  }
  ActionsReport report() && {
    ActionsReport r;
    r.processes.push_back(std::move(p));
    return r;
  }
};

}  // namespace lt::testing_support
