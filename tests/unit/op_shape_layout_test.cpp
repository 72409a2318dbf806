// --group-by-input-shapes: the TensorImpl word that holds a tensor's ndim,
// found by vote over captured TensorImpl words, and torch's key format.
#include "reports/aggregate/op_shape_layout.h"

#include <gtest/gtest.h>

#include <initializer_list>

using namespace lt;

namespace {

// A contiguous tensor of `sizes` as a TensorImpl would hold it from word
// `at`: ndim, five inline sizes (unused ones 0), then contiguous strides;
// noise before it.
void put_tensor(lt_op_shapes_event& e, int reg, int at, std::initializer_list<std::uint64_t> sizes) {
  for (int k = 0; k < LT_SHAPE_WORDS; ++k) e.impl[reg][k] = 0x7f0000001000ull + k;  // pointers, refcounts
  std::uint64_t* w = e.impl[reg] + at;
  w[0] = sizes.size();
  int i = 0;
  for (auto s : sizes) w[1 + i++] = s;
  for (; i < 5; ++i) w[1 + i] = 0;
  std::uint64_t stride = 1;
  std::vector<std::uint64_t> v(sizes);
  for (int d = static_cast<int>(v.size()) - 1; d >= 0; --d) {
    w[6 + d] = stride;
    stride *= v[d];
  }
  e.tensors |= 1u << reg;
}

}  // namespace

TEST(ShapeLayout, VotesForTheWordOfNdimAndPrintsTorchsKey) {
  ShapeLayout layout;
  EXPECT_TRUE(layout.undecided());
  lt_op_shapes_event e{};
  put_tensor(e, 0, 3, {2, 3});
  put_tensor(e, 2, 3, {4});
  // Eight tensors seen, all agreeing: decided.
  for (int i = 0; i < 3; ++i) layout.vote(e);
  EXPECT_TRUE(layout.undecided()) << "6 votes: not enough yet";
  layout.vote(e);
  ASSERT_FALSE(layout.undecided());
  // Per schema argument: the register that held it (-1: not a tensor).
  EXPECT_EQ(layout.shapes({0, -1, 2}, e), "[[2, 3], [], [4]]");
  // A tensor of more than five dimensions keeps its sizes out of line.
  lt_op_shapes_event big{};
  put_tensor(big, 1, 3, {1});
  big.impl[1][3] = 6;
  EXPECT_EQ(layout.shapes({1}, big), "[[...]]");
  // An argument whose register held no tensor prints [].
  EXPECT_EQ(layout.shapes({4}, e), "[[]]");
}

TEST(ShapeLayout, DecidesWithWhatThereIsOrGivesUp) {
  ShapeLayout few;
  lt_op_shapes_event e{};
  put_tensor(e, 0, 5, {7, 7});
  few.vote(e);
  few.decide();  // one vote, the stream ended: the best there is
  ASSERT_FALSE(few.undecided());
  EXPECT_EQ(few.shapes({0}, e), "[[7, 7]]");

  ShapeLayout none;
  none.decide();  // no tensor seen at all: shapes stay unknown
  EXPECT_FALSE(none.undecided());
  EXPECT_EQ(none.shapes({0}, e), "[[]]");
}
