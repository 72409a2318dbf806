// diff --html's differential flame graph (issue 34): the on-CPU stack
// samples of both sides' train steps merged into one tree of Python frames,
// each frame with its time per train step in A and in B (samples x period /
// the side's train steps: estimates), in total and in itself (the samples
// whose innermost frame it is). The page (diff_html.h) draws it twice: B's
// widths coloured by the change from A, and A's widths coloured the same
// way, so that a frame gone from B still shows.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reports/aggregate/actions.h"
#include "reports/diff/step_diff.h"

namespace lt {

struct DiffFlameNode {
  std::string name;                     // "function (file:line)"; the root: "train steps"
  double a = 0, b = 0;                  // seconds per train step, the frame and what it called
  double self_a = 0, self_b = 0;        // ...the frame itself (innermost)
  std::vector<DiffFlameNode> children;  // by name
};

struct DiffFlame {
  DiffFlameNode root;
  std::size_t steps_a = 0, steps_b = 0;  // train steps with their samples
  std::uint64_t samples_a = 0, samples_b = 0;
  bool empty() const { return samples_a == 0 && samples_b == 0; }
};

class DiffFlameBuilder {
 public:
  // One recording of a side (0: A, 1: B): the samples (LineSamples read
  // with keep_stacks) that fell in its processes' train steps.
  void add(int side, const ActionsReport& actions, const LineSamples& samples);
  DiffFlame finish() const;

 private:
  struct Node {
    double ns[2] = {0, 0}, self_ns[2] = {0, 0};
    std::map<std::string, std::unique_ptr<Node>> kids;
  };
  static DiffFlameNode convert(const std::string& name, const Node& n, const double per_step[2]);
  Node root_;
  std::size_t steps_[2] = {0, 0};
  std::uint64_t samples_[2] = {0, 0};
};

}  // namespace lt
