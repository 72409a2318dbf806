// The op observer's tables by torch version (user/torch/observer_layouts.*):
// the rows the headers of each release gave.
#include "user/torch/observer_layouts.h"

#include <gtest/gtest.h>

namespace lt {
namespace {

TEST(ObserverLayouts, CallbackRowCoversTheReleasesChecked) {
  for (const char* v : {"1.13.1", "2.0.0", "2.9.0+cu128", "2.15.0+cpu"}) {
    auto l = observer_layout(v);
    ASSERT_TRUE(l) << v;
    EXPECT_EQ(l->size, 40u);
    EXPECT_EQ(l->off_needs_inputs, 34u);
    EXPECT_EQ(l->user_scope, 7u);
  }
  EXPECT_FALSE(observer_layout("1.12.1"));
  EXPECT_FALSE(observer_layout("2.16.0"));
  EXPECT_FALSE(observer_layout("unknown"));
}

TEST(ObserverLayouts, InputsMoveWithTheStringAbiSizesWithTheRelease) {
  // inputs_ follows fn_, whose std::string is 8 bytes (old ABI) or 32.
  EXPECT_EQ(observer_shapes_layout("2.4.1", false)->off_inputs, 184u);
  EXPECT_EQ(observer_shapes_layout("2.4.1", true)->off_inputs, 208u);
  // TensorImpl's SizesAndStrides: after a 16-byte refcount and a 16-byte
  // Python slot (word 9), an 8-byte refcount (8), an 8-byte slot (7).
  EXPECT_EQ(observer_shapes_layout("1.13.1", false)->sizes_word, 9u);
  EXPECT_EQ(observer_shapes_layout("2.2.2", false)->sizes_word, 9u);
  EXPECT_EQ(observer_shapes_layout("2.3.0", false)->sizes_word, 8u);
  EXPECT_EQ(observer_shapes_layout("2.12.1", true)->sizes_word, 8u);
  EXPECT_EQ(observer_shapes_layout("2.13.0", true)->sizes_word, 7u);
  EXPECT_EQ(observer_shapes_layout("2.15.0", true)->sizes_word, 7u);
  const auto l = *observer_shapes_layout("2.15.0", true);
  EXPECT_EQ(l.ivalue_size, 16u);
  EXPECT_EQ(l.ivalue_tag, 8u);
  EXPECT_EQ(l.tag_tensor, 1u);
  EXPECT_FALSE(observer_shapes_layout("2.16.0", true));
  EXPECT_FALSE(observer_shapes_layout("", true));
}

}  // namespace
}  // namespace lt
