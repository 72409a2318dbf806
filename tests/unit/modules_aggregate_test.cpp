// `[pl][module]` calls from MODULE_CALL / MODULE_NAME records
// (reports/aggregate/modules.cpp): exact calls per module, Lightning's row
// names, a module named after its first calls, unnamed modules apart.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "reports/aggregate/modules.h"

namespace {

template <typename R>
void feed(lt::ModuleAggregator& a, const R& r) {
  a.add(r.hdr, reinterpret_cast<const std::byte*>(&r));
}

lt::lt_module_call_event call(std::uint32_t pid, std::uint64_t self) {
  lt::lt_module_call_event e{};
  e.hdr.kind = lt::LT_EV_MODULE_CALL;
  e.hdr.size = sizeof e;
  e.hdr.pid = e.hdr.tid = pid;
  e.self = self;
  return e;
}

lt::lt_module_name_event name(std::uint32_t pid, std::uint64_t addr, const std::string& type, const std::string& n) {
  lt::lt_module_name_event e{};
  e.hdr.kind = lt::LT_EV_MODULE_NAME;
  e.hdr.size = sizeof e;
  e.hdr.pid = e.hdr.tid = pid;
  e.module = addr;
  std::strncpy(e.type, type.c_str(), sizeof e.type - 1);
  std::strncpy(e.name, n.c_str(), sizeof e.name - 1);
  return e;
}

TEST(ModuleAggregate, ExactCallsUnderLightningsNames) {
  lt::ModuleAggregator a;
  feed(a, call(7, 0xb0));  // before the tree was read: named at the end
  feed(a, name(7, 0xa0, "m.Model", ""));
  feed(a, name(7, 0xb0, "m.Block", "block"));
  feed(a, name(7, 0xc0, "torch.nn.modules.activation.Tanh", "block.act"));
  feed(a, name(7, 0xb0, "m.Block", "alias"));  // a second name: named_modules() keeps the first
  for (int i = 0; i < 2; ++i) {
    feed(a, call(7, 0xa0));  // the LightningModule itself: no row
    feed(a, call(7, 0xb0));
    feed(a, call(7, 0xc0));
    feed(a, call(7, 0xc0));  // called twice per forward
  }
  feed(a, call(7, 0xd0));  // outside the tree
  feed(a, call(9, 0xb0));  // another process: its own modules
  auto out = a.finish();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].pid, 7u);
  ASSERT_EQ(out[0].rows.size(), 2u);
  EXPECT_EQ(out[0].rows[0].name, "[pl][module]m.Block: block");
  EXPECT_EQ(out[0].rows[0].calls, 3u);
  EXPECT_EQ(out[0].rows[1].name, "[pl][module]torch.nn.modules.activation.Tanh: block.act");
  EXPECT_EQ(out[0].rows[1].calls, 4u);
  EXPECT_EQ(out[0].unnamed_calls, 3u);  // 2 of the root, 1 outside
  EXPECT_TRUE(out[1].rows.empty());
  EXPECT_EQ(out[1].unnamed_calls, 1u);
}

TEST(ModuleAggregate, ShortRecordsAreIgnored) {
  lt::ModuleAggregator a;
  auto c = call(7, 0xb0);
  c.hdr.size = 30;
  feed(a, c);
  EXPECT_TRUE(a.finish().empty());
}

}  // namespace
