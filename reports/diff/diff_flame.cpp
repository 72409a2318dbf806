#include "reports/diff/diff_flame.h"

#include <algorithm>
#include <unordered_map>

#include "reports/aggregate/steps.h"

namespace lt {

void DiffFlameBuilder::add(int side, const ActionsReport& actions, const LineSamples& samples) {
  if (side < 0 || side > 1 || !samples.period_ns) return;
  // Each process's samples, in one pass over them.
  std::unordered_map<std::uint32_t, std::vector<const LineSamples::Sample*>> by_pid;
  for (const auto& s : samples.samples)
    if (s.stack < samples.stacks.size()) by_pid[s.pid].push_back(&s);
  for (const auto& p : actions.processes) {
    const std::vector<StepRecord> train = step_records(p).train;
    steps_[side] += train.size();
    auto it = by_pid.find(p.meta.pid);
    if (it == by_pid.end() || train.empty()) continue;
    for (const LineSamples::Sample* s : it->second) {
      if (!step_at(train, s->ts_ns)) continue;  // not in a train step
      const auto w = static_cast<double>(samples.period_ns) * s->weight;
      ++samples_[side];
      Node* n = &root_;
      n->ns[side] += w;
      for (std::uint32_t f : samples.stacks[s->stack]) {
        auto& kid = n->kids[f < samples.lines.size() ? samples.lines[f] : std::string("?")];
        if (!kid) kid = std::make_unique<Node>();
        n = kid.get();
        n->ns[side] += w;
      }
      n->self_ns[side] += w;
    }
  }
}

DiffFlameNode DiffFlameBuilder::convert(const std::string& name, const Node& n, const double per_step[2]) {
  DiffFlameNode out;
  out.name = name;
  out.a = n.ns[0] * per_step[0];
  out.b = n.ns[1] * per_step[1];
  out.self_a = n.self_ns[0] * per_step[0];
  out.self_b = n.self_ns[1] * per_step[1];
  out.children.reserve(n.kids.size());
  for (const auto& [k, kid] : n.kids) out.children.push_back(convert(k, *kid, per_step));
  return out;
}

DiffFlame DiffFlameBuilder::finish() const {
  // ns summed over a side's steps -> seconds per train step.
  const double per_step[2] = {steps_[0] ? 1e-9 / static_cast<double>(steps_[0]) : 0,
                              steps_[1] ? 1e-9 / static_cast<double>(steps_[1]) : 0};
  DiffFlame f;
  f.root = convert("train steps", root_, per_step);
  f.steps_a = steps_[0];
  f.steps_b = steps_[1];
  f.samples_a = samples_[0];
  f.samples_b = samples_[1];
  return f;
}

}  // namespace lt
