// Collapsed ("folded") stacks, the text format of flamegraph.pl, inferno and
// speedscope: one line "root;outer;...;inner weight" per distinct stack.
// Also the merged call tree that the SVG and HTML flame graphs draw, so all
// three merge stacks the same way (by frame_label).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "reports/flame/named_profile.h"

namespace lt {

// Lines sorted bytewise; identical lines merged (weights summed); zero-weight
// stacks dropped.  ';' inside a label becomes ':' and newlines are removed, as
// ';' separates frames and a newline ends the record.
void write_collapsed(const std::vector<NamedProfile>& profiles, std::ostream& out);

struct FlameNode {
  enum class Kind { root, python, native };
  std::string label;     // frame_label, or a root name (unescaped)
  std::string function;  // what the colour hashes: the function, or the root name
  Kind kind = Kind::root;
  std::uint64_t value = 0;          // inclusive weight
  std::vector<FlameNode> children;  // sorted by label, as flamegraph.pl orders them
};

// One tree: `top` (Kind::root, weight = everything), below it each profile's
// non-empty root (merged by name), below that the frames root-first.
FlameNode flame_tree(const std::vector<NamedProfile>& profiles, const std::string& top);

// The frame a stack refers to; an out-of-range index reads as "<unknown>"
// rather than crashing an export over one bad record.
const StackFrame& frame_at(const StackProfile& p, std::uint32_t index);

}  // namespace lt
