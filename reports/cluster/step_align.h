// One step numbering across ranks (`report DIR --merge --html`): each rank
// numbers its training steps from the first it saw after its attach, so
// ranks attached at different moments number the same step differently.
// The records carry no batch index or global step, but the collectives do
// line up: the aligned instances of reports/cluster/arrivals.h are the
// same collective on every rank, and a DDP step issues its collectives
// inside itself.  So at each instance entered inside a training step of
// both a rank and the reference rank, (reference's step - rank's step) is
// a vote for the rank's offset; the offset is the vote that at least 90%
// of at least 3 votes agree on (kAlignMinVotes, kAlignMinAgreement).
//
// The merged page puts the ranks with an offset on this common numbering
// (heat-map columns, findings, synced timelines, #step=N); a rank without
// one keeps its own and is drawn apart (reports/cluster/merged_html.cpp,
// docs/design-html.md).
// Pure functions of the reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "reports/aggregate/steps.h"
#include "reports/cluster/arrivals.h"

namespace lt {

inline constexpr std::size_t kAlignMinVotes = 3;
inline constexpr double kAlignMinAgreement = 0.9;

struct StepAlignment {
  bool measured = false;  // every rank with training steps got an offset
  int reference = -1;     // rank position: the one with the most training steps
  // Per rank position: common step = own step + offset; the smallest offset
  // of the ranks measured is 0 (the rank attached earliest numbers as is).
  std::vector<std::int64_t> offset;
  std::vector<bool> has_offset;
  std::vector<bool> has_steps;            // per rank position: it has training steps
  std::vector<std::size_t> votes, agree;  // per rank: instances in a step of both it and the reference; agreeing
};

// `steps`: per rank position (plan.ranks order).
StepAlignment align_steps(const ArrivalReport& rep, const std::vector<ProcessSteps>& steps);

// The page's sentence about step numbers; `labels`: per rank position.
std::string step_numbering_note(const StepAlignment& a, const ArrivalReport& rep,
                                const std::vector<std::string>& labels);

}  // namespace lt
