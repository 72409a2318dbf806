// The catalogue Session makes its optional tracers from: each entry has a
// name and a maker, and is wanted by the option that asks for it and by no
// other, so that asking for one source never starts another's probes.
#include "user/collector/tracers.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string_view>
#include <vector>

namespace lt {
namespace {

SessionOptions nothing() {
  SessionOptions o;
  o.gpu = false;
  return o;
}

TEST(TracerCatalogue, EachEntryIsWantedByItsOwnOptionOnly) {
  const std::vector<std::pair<std::string_view, std::function<void(SessionOptions&)>>> asks = {
      {"ops", [](SessionOptions& o) { o.sources.ops = true; }},
      {"GPU", [](SessionOptions& o) { o.gpu = true; }},
      {"memory", [](SessionOptions& o) { o.sources.memory = true; }},
      {"comm", [](SessionOptions& o) { o.sources.comm = true; }},
      {"XLA", [](SessionOptions& o) { o.sources.xla = true; }},
      {"GC", [](SessionOptions& o) { o.sources.gc = true; }},
      {"stacks", [](SessionOptions& o) { o.sample_rate_hz = 99; }},
      {"stacks", [](SessionOptions& o) { o.off_cpu = true; }},
      {"stacks", [](SessionOptions& o) { o.launch_stacks = true; }},
  };
  std::set<std::string_view> names;
  for (const auto& e : tracer_catalogue()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_NE(e.make, nullptr) << e.name;
    EXPECT_FALSE(e.wanted(nothing())) << e.name;
  }
  for (const auto& [name, ask] : asks) {
    SessionOptions o = nothing();
    ask(o);
    std::vector<std::string_view> wanted;
    for (const auto& e : tracer_catalogue())
      if (e.wanted(o)) wanted.push_back(e.name);
    EXPECT_EQ(wanted, std::vector<std::string_view>{name});
  }
  EXPECT_EQ(names.size(), 7u);
  // The op tracer comes first: the others join its op stacks.
  EXPECT_EQ(tracer_catalogue().front().name, "ops");
}

TEST(SourceSet, OrCombinesEveryFlag) {
  SourceSet a{.stacks = true, .memory = true};
  const SourceSet b{.ops = true, .memory_stacks = true, .comm = true};
  a |= b;
  EXPECT_TRUE(a.stacks && a.ops && a.memory && a.memory_stacks && a.comm);
}

}  // namespace
}  // namespace lt
