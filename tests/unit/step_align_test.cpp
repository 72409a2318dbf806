// One step numbering across ranks: offsets measured from the collectives
// entered inside each rank's steps (reports/cluster/step_align.h).
#include "reports/cluster/step_align.h"

#include <gtest/gtest.h>

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1000000;

// `n` training steps of 10 ms, 12 ms apart, the first at `t0` ms.
ProcessSteps steps_from(std::uint64_t t0, std::size_t n) {
  ProcessSteps p;
  for (std::size_t i = 0; i < n; ++i) {
    StepRecord s;
    s.index = static_cast<std::uint32_t>(i);
    s.begin_ns = (t0 + 12 * i) * ms;
    s.end_ns = s.begin_ns + 10 * ms;
    p.train.push_back(s);
  }
  return p;
}

// One complete instance per common step k (two all_reduces a step), entered
// 3 and 7 ms into the step on every rank; `first[r]`: the common step of
// rank r's step 0.  The clocks are each rank's own (mono_ns).
ArrivalReport instances(const std::vector<ProcessSteps>& steps, const std::vector<std::size_t>& first,
                        std::size_t common_steps) {
  ArrivalReport rep;
  for (std::size_t k = 0; k < common_steps; ++k)
    for (std::uint64_t at : {3 * ms, 7 * ms}) {
      CollectiveInstance x;
      x.number = rep.instances.size();
      for (std::size_t r = 0; r < steps.size(); ++r) {
        if (k < first[r] || k - first[r] >= steps[r].train.size()) {
          x.arrival_ns.push_back(CollectiveInstance::kMissing);
          x.mono_ns.push_back(0);
          continue;
        }
        const std::uint64_t t = steps[r].train[k - first[r]].begin_ns + at;
        x.arrival_ns.push_back(static_cast<std::int64_t>(t));
        x.mono_ns.push_back(t);
      }
      x.last = 0;
      rep.instances.push_back(x);
    }
  return rep;
}

}  // namespace

TEST(StepAlign, OffsetsFromTheCollectives) {
  // Rank 0 attached first (20 steps); rank 1 three steps later, on its own
  // clock (another host: its steps begin at another time); rank 2 five later.
  std::vector<ProcessSteps> steps = {steps_from(1000, 20), steps_from(500000, 17), steps_from(7000, 15)};
  const ArrivalReport rep = instances(steps, {0, 3, 5}, 20);
  const StepAlignment a = align_steps(rep, steps);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.reference, 0);
  EXPECT_EQ(a.offset, (std::vector<std::int64_t>{0, 3, 5}));
  EXPECT_EQ(a.votes[1], 34u);  // 17 steps x 2 instances
  EXPECT_EQ(a.agree[1], 34u);
  const std::string note = step_numbering_note(a, rep, {"rank 0", "rank 1", "rank 2"});
  EXPECT_NE(note.find("Step numbers are per rank"), std::string::npos) << note;
  EXPECT_NE(note.find("own step + rank 0 +0 (40/40), rank 1 +3 (34/34), rank 2 +5 (30/30)"), std::string::npos) << note;
  // The page draws them on that numbering, each rank's own numbers kept where it exports.
  EXPECT_NE(note.find("use the common numbering, from the earliest step of a rank lined up; each rank's timeline and "
                      "export commands keep its own step numbers."),
            std::string::npos)
      << note;
}

TEST(StepAlign, SameAttachNumbersAlike) {
  std::vector<ProcessSteps> steps = {steps_from(1000, 8), steps_from(2000, 8)};
  const ArrivalReport rep = instances(steps, {0, 0}, 8);
  const StepAlignment a = align_steps(rep, steps);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.offset, (std::vector<std::int64_t>{0, 0}));
  EXPECT_NE(step_numbering_note(a, rep, {"rank 0", "rank 1"}).find("every rank numbers the same step alike"),
            std::string::npos);
}

TEST(StepAlign, NotMeasuredWithoutEnoughAgreement) {
  std::vector<ProcessSteps> steps = {steps_from(1000, 10), steps_from(1000, 10)};
  // Rank 1's entries land in alternating steps: half the votes say +0, half +1.
  ArrivalReport rep = instances(steps, {0, 0}, 10);
  for (std::size_t i = 0; i < rep.instances.size(); i += 2)
    if (rep.instances[i].mono_ns[1] + 12 * ms < steps[1].train.back().end_ns) rep.instances[i].mono_ns[1] += 12 * ms;
  const StepAlignment a = align_steps(rep, steps);
  EXPECT_FALSE(a.measured);
  EXPECT_TRUE(a.has_offset[0]);
  EXPECT_FALSE(a.has_offset[1]);
  EXPECT_NE(step_numbering_note(a, rep, {"rank 0", "rank 1"})
                .find("Not measured (too few or disagreeing "
                      "instances): rank 1"),
            std::string::npos);
  EXPECT_NE(step_numbering_note(a, rep, {"rank 0", "rank 1"}).find("rank 1: drawn apart, each in its own numbering"),
            std::string::npos);
  // Too few: two instances only.
  ArrivalReport two = instances(steps, {0, 0}, 1);
  EXPECT_FALSE(align_steps(two, steps).measured);
  // No COMM records: the page says numbers are per rank and cannot be lined up.
  const ArrivalReport none;
  const StepAlignment b = align_steps(none, steps);
  EXPECT_FALSE(b.measured);
  const std::string note = step_numbering_note(b, none, {"rank 0", "rank 1"});
  EXPECT_NE(note.find("per rank"), std::string::npos);
  EXPECT_NE(note.find("cannot be lined up"), std::string::npos) << note;
}
