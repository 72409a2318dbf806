#include "reports/cluster/step_align.h"

#include <algorithm>
#include <map>

namespace lt {

StepAlignment align_steps(const ArrivalReport& rep, const std::vector<ProcessSteps>& steps) {
  StepAlignment a;
  const std::size_t n = steps.size();
  a.offset.assign(n, 0);
  a.has_offset.assign(n, false);
  a.votes.assign(n, 0);
  a.agree.assign(n, 0);
  a.has_steps.assign(n, false);
  for (std::size_t r = 0; r < n; ++r) a.has_steps[r] = !steps[r].train.empty();
  for (std::size_t r = 0; r < n; ++r)
    if (!steps[r].train.empty() && (a.reference < 0 || steps[r].train.size() > steps[a.reference].train.size()))
      a.reference = static_cast<int>(r);
  if (a.reference < 0) return a;
  const auto ref = static_cast<std::size_t>(a.reference);
  std::vector<std::map<std::int64_t, std::size_t>> votes(n);
  for (const auto& x : rep.instances) {
    if (ref >= x.arrival_ns.size() || x.arrival_ns[ref] == CollectiveInstance::kMissing) continue;
    const long s_ref = step_holding(steps[ref].train, x.mono_ns[ref]);
    if (s_ref < 0) continue;
    for (std::size_t r = 0; r < n && r < x.arrival_ns.size(); ++r) {
      if (x.arrival_ns[r] == CollectiveInstance::kMissing) continue;
      const long s = step_holding(steps[r].train, x.mono_ns[r]);
      if (s >= 0) ++votes[r][s_ref - s];
    }
  }
  bool all = true;
  for (std::size_t r = 0; r < n; ++r) {
    if (steps[r].train.empty()) continue;
    std::size_t total = 0, best = 0;
    std::int64_t best_d = 0;
    for (const auto& [d, c] : votes[r]) {
      total += c;
      if (c > best) best = c, best_d = d;
    }
    a.votes[r] = total;
    a.agree[r] = best;
    if (total >= kAlignMinVotes && static_cast<double>(best) >= kAlignMinAgreement * static_cast<double>(total)) {
      a.has_offset[r] = true;
      a.offset[r] = best_d;
    } else {
      all = false;
    }
  }
  std::int64_t lo = INT64_MAX;
  for (std::size_t r = 0; r < n; ++r)
    if (a.has_offset[r]) lo = std::min(lo, a.offset[r]);
  for (std::size_t r = 0; r < n; ++r)
    if (a.has_offset[r]) a.offset[r] -= lo;
  a.measured = all;
  return a;
}

std::string step_numbering_note(const StepAlignment& a, const ArrivalReport& rep,
                                const std::vector<std::string>& labels) {
  const std::string per_rank =
      "Step numbers are per rank: each counts from its first training step seen after its attach (the records "
      "carry no batch index). ";
  if (a.reference < 0) return per_rank;
  if (rep.instances.empty())
    return per_rank +
           "Without COMM records (`--report comm` when recording) the ranks' numbers cannot be lined up; ranks "
           "attached at different moments number the same step differently.";
  std::string offsets, unmeasured;
  bool any_shift = false;
  for (std::size_t r = 0; r < a.offset.size(); ++r) {
    if (!a.has_steps[r]) continue;
    const std::string& label = r < labels.size() ? labels[r] : std::to_string(r);
    if (a.has_offset[r]) {
      offsets += (offsets.empty() ? "" : ", ") + label + " +" + std::to_string(a.offset[r]) + " (" +
                 std::to_string(a.agree[r]) + "/" + std::to_string(a.votes[r]) + ")";
      any_shift |= a.offset[r] != 0;
    } else {
      unmeasured += (unmeasured.empty() ? "" : ", ") + label;
    }
  }
  std::string s = per_rank +
                  "Lined up by the collectives (an instance entered inside a step of two ranks is the "
                  "same step on both; an offset needs >= " +
                  std::to_string(kAlignMinVotes) + " such instances, >= 90% agreeing): ";
  if (!offsets.empty())
    s += any_shift ? "the same step is, in a common numbering, own step + " + offsets + " (agreeing/instances). "
                   : "every rank numbers the same step alike: " + offsets + " (agreeing/instances). ";
  if (!unmeasured.empty())
    s += "Not measured (too few or disagreeing instances): " + unmeasured +
         (offsets.empty() ? "." : ": drawn apart, each in its own numbering, not synced with the others. ");
  if (!offsets.empty())
    s += "The heat maps' columns, the findings' step numbers, the synced step timelines and #step=N use the common "
         "numbering, from the earliest step of a rank lined up" +
         std::string(any_shift ? "; each rank's timeline and export commands keep its own step numbers." : ".");
  return s;
}

}  // namespace lt
