// The catalogue Session starts its library tracers from: each entry is
// started by a source flag of its own, so that asking for one source never
// starts another's probes, and each has a maker.
#include "user/collector/library_tracers.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace lt {
namespace {

TEST(LibraryTracers, EachEntryHasItsOwnSourceFlagAndAMaker) {
  std::set<std::string_view> names;
  for (const auto& e : library_tracers()) {
    EXPECT_FALSE(e.name.empty());
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_NE(e.make, nullptr) << e.name;
    // Only this entry's flag set: it is wanted, and no other is.
    SourceSet only;
    only.*e.wanted = true;
    for (const auto& other : library_tracers()) EXPECT_EQ(only.*other.wanted, &other == &e) << e.name;
  }
  EXPECT_GE(names.size(), 2u);  // memory and comm today
}

TEST(SourceSet, OrCombinesEveryFlag) {
  SourceSet a{.stacks = true, .memory = true};
  const SourceSet b{.ops = true, .memory_stacks = true, .comm = true};
  a |= b;
  EXPECT_TRUE(a.stacks && a.ops && a.memory && a.memory_stacks && a.comm);
}

}  // namespace
}  // namespace lt
