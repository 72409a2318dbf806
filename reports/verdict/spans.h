// Time spans (begin_ns, end_ns) on one clock, for the verdict's findings:
// merged where they overlap, and the time of a span or instant they hold.
// The checkpoint, between-steps, gc and logging findings each ask it of
// sorted, disjoint spans.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace lt {

using Span = std::pair<std::uint64_t, std::uint64_t>;
using Spans = std::vector<Span>;

// Sorted and joined where they overlap or touch.
Spans merged_spans(Spans spans);

// The time of [a, b) that sorted, disjoint `spans` cover (ns).
std::uint64_t covered(const Spans& spans, std::uint64_t a, std::uint64_t b);

// The span of sorted, disjoint `spans` holding `ts`, if any.
const Span* span_at(const Spans& spans, std::uint64_t ts);

}  // namespace lt
