// --group-by-input-shapes: where a TensorImpl keeps its sizes among the
// words BPF captured (the word of ndim), found by vote over the first
// tensors seen, and the key torch prints for an op's input shapes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt {

class ShapeLayout {
 public:
  // Counts the tensors of one record; decides once one word wins clearly.
  void vote(const lt_op_shapes_event& e);
  // Decides with what there is (the stream ended, or too much was held).
  void decide();
  bool undecided() const { return word_ < 0 && !given_up_; }
  // Whether any tensor was counted yet.
  bool voted() const {
    for (int v : votes_)
      if (v) return true;
    return false;
  }
  // torch's format: one entry per schema argument, a tensor's sizes or []
  // (`arg_regs`: per argument, the register that held it, -1 none).
  std::string shapes(const std::vector<std::int8_t>& arg_regs, const lt_op_shapes_event& e) const;

 private:
  int word_ = -1;  // -1: not known yet
  bool given_up_ = false;
  int votes_[LT_SHAPE_WORDS] = {};
};

}  // namespace lt
