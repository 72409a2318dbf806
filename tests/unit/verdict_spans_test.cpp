// reports/verdict/spans.h: the span arithmetic the checkpoint, between-steps,
// gc and logging findings share.
#include <gtest/gtest.h>

#include "reports/verdict/spans.h"

namespace lt {
namespace {

TEST(VerdictSpans, MergedWhereTheyOverlapOrTouch) {
  EXPECT_EQ(merged_spans({{30, 40}, {0, 10}, {5, 12}, {12, 20}, {35, 38}}), (Spans{{0, 20}, {30, 40}}));
  EXPECT_TRUE(merged_spans({}).empty());
}

TEST(VerdictSpans, CoveredCountsEachPartOnce) {
  const Spans s{{10, 20}, {30, 40}, {50, 60}};
  EXPECT_EQ(covered(s, 0, 100), 30u);
  EXPECT_EQ(covered(s, 15, 35), 10u);  // the tail of one, the head of the next
  EXPECT_EQ(covered(s, 20, 30), 0u);   // between them
  EXPECT_EQ(covered(s, 12, 18), 6u);   // inside one
  EXPECT_EQ(covered(s, 55, 55), 0u);   // empty
  EXPECT_EQ(covered(s, 60, 10), 0u);   // reversed
  EXPECT_EQ(covered({}, 0, 100), 0u);
}

TEST(VerdictSpans, SpanAtHoldsItsBeginNotItsEnd) {
  const Spans s{{10, 20}, {30, 40}};
  EXPECT_EQ(span_at(s, 9), nullptr);
  ASSERT_NE(span_at(s, 10), nullptr);
  EXPECT_EQ(*span_at(s, 10), (Span{10, 20}));
  EXPECT_EQ(span_at(s, 20), nullptr);
  EXPECT_EQ(*span_at(s, 39), (Span{30, 40}));
  EXPECT_EQ(span_at(s, 45), nullptr);
  EXPECT_EQ(span_at({}, 5), nullptr);
}

}  // namespace
}  // namespace lt
