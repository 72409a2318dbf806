#include "reports/aggregate/op_shape_layout.h"

#include <algorithm>

namespace lt {

namespace {

// Does a TensorImpl hold a contiguous tensor's SizesAndStrides at word k of
// the captured words: ndim (1..5), its sizes, zeros in the unused inline
// size slots, then contiguous strides?  The pattern is specific enough to
// find the field in any torch build from a few tensors.
bool sizes_at(const std::uint64_t* w, int k) {
  if (k < 0 || k + 11 > LT_SHAPE_WORDS) return false;
  const std::uint64_t n = w[k];
  if (n < 1 || n > 5) return false;
  for (std::uint64_t i = 0; i < 5; ++i) {
    const std::uint64_t size = w[k + 1 + i];
    if (i < n ? (size < 1 || size > (1ull << 40)) : size != 0) return false;
  }
  const std::uint64_t* stride = w + k + 6;
  if (stride[n - 1] != 1) return false;
  for (std::uint64_t i = n - 1; i-- > 0;)
    if (stride[i] != stride[i + 1] * w[k + 2 + i]) return false;
  return true;
}
}  // namespace

void ShapeLayout::vote(const lt_op_shapes_event& e) {
  for (unsigned r = 0; r < LT_SHAPE_REGS; ++r)
    if (e.tensors & (1u << r))
      for (int k = 0; k < LT_SHAPE_WORDS; ++k) votes_[k] += sizes_at(e.impl[r], k);
  int best = 0, second = 0;
  for (int k = 1; k < LT_SHAPE_WORDS; ++k)
    if (votes_[k] > votes_[best]) best = k;
  for (int k = 0; k < LT_SHAPE_WORDS; ++k)
    if (k != best) second = std::max(second, votes_[k]);
  if (votes_[best] >= 8 && votes_[best] >= 4 * second) word_ = best;
}

void ShapeLayout::decide() {
  if (word_ >= 0) return;
  int best = 0;
  for (int k = 1; k < LT_SHAPE_WORDS; ++k)
    if (votes_[k] > votes_[best]) best = k;
  if (votes_[best] > 0)
    word_ = best;
  else
    given_up_ = true;
}

std::string ShapeLayout::shapes(const std::vector<std::int8_t>& arg_regs, const lt_op_shapes_event& e) const {
  std::string key = "[";
  bool first = true;
  for (std::int8_t reg : arg_regs) {
    key += first ? "[" : ", [";
    first = false;
    if (reg >= 0 && reg < LT_SHAPE_REGS && (e.tensors & (1u << reg)) && word_ >= 0) {
      const std::uint64_t* w = e.impl[reg] + word_;
      if (w[0] > 5) {
        key += "...";  // sizes out of line (more than 5 dims): not captured
      } else {
        for (std::uint64_t i = 0; i < w[0] && word_ + 1 + static_cast<int>(i) < LT_SHAPE_WORDS; ++i)
          key += (i ? ", " : "") + std::to_string(w[1 + i]);
      }
    }
    key += ']';
  }
  key += ']';
  return key;
}

}  // namespace lt
