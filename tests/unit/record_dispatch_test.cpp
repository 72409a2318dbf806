// visit_record: one decode per record, by the catalogue's size rule, to the
// overload that takes its struct.
#include "user/model/record_dispatch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace lt;

namespace {

template <typename R>
std::vector<std::byte> bytes_of(const R& r, std::size_t size) {
  std::vector<std::byte> b(size);
  std::memcpy(b.data(), &r, std::min(size, sizeof r));
  reinterpret_cast<lt_event_header*>(b.data())->size = static_cast<std::uint16_t>(size);
  return b;
}

const lt_event_header& header(const std::vector<std::byte>& b) {
  return *reinterpret_cast<const lt_event_header*>(b.data());
}

}  // namespace

TEST(RecordDispatch, ExactKindsDecodeOnlyAtTheirSize) {
  lt_op_event op{};
  op.hdr.kind = LT_EV_OP;
  op.op = 42;
  int seen = 0;
  auto handler = overloaded{[&](const lt_event_header&, const lt_op_event& e) { seen = static_cast<int>(e.op); }};
  auto exact = bytes_of(op, sizeof op);
  EXPECT_TRUE(visit_record(header(exact), exact.data(), handler));
  EXPECT_EQ(seen, 42);
  seen = 0;
  auto longer = bytes_of(op, sizeof op + 8);
  EXPECT_FALSE(visit_record(header(longer), longer.data(), handler));
  auto shorter = bytes_of(op, sizeof op - 8);
  EXPECT_FALSE(visit_record(header(shorter), shorter.data(), handler));
  EXPECT_EQ(seen, 0);
}

TEST(RecordDispatch, ReaderKindsKeepTheKnownPartOfALongerRecord) {
  lt_py_line_event line{};
  line.hdr.kind = LT_EV_PY_LINE;
  line.line = 77;
  int seen = 0;
  auto handler = overloaded{[&](const lt_event_header&, const lt_py_line_event& e) { seen = e.line; }};
  auto longer = bytes_of(line, sizeof line + 16);  // a newer writer's record
  EXPECT_TRUE(visit_record(header(longer), longer.data(), handler));
  EXPECT_EQ(seen, 77);
  seen = 0;
  auto shorter = bytes_of(line, sizeof line - 4);
  EXPECT_FALSE(visit_record(header(shorter), shorter.data(), handler));
  EXPECT_EQ(seen, 0);
}

TEST(RecordDispatch, SharedStructsReachOneOverloadAndOthersAreSkipped) {
  std::vector<int> kinds;
  auto handler = overloaded{[&](const lt_event_header& h, const lt_proc_event&) { kinds.push_back(h.kind); }};
  for (auto k : {LT_EV_PROC_FORK, LT_EV_PROC_EXEC, LT_EV_PROC_EXIT}) {
    lt_proc_event e{};
    e.hdr.kind = static_cast<std::uint16_t>(k);
    auto b = bytes_of(e, sizeof e);
    EXPECT_TRUE(visit_record(header(b), b.data(), handler));
  }
  EXPECT_EQ(kinds, (std::vector<int>{LT_EV_PROC_FORK, LT_EV_PROC_EXEC, LT_EV_PROC_EXIT}));
  lt_op_event op{};  // no overload takes it
  op.hdr.kind = LT_EV_OP;
  auto b = bytes_of(op, sizeof op);
  EXPECT_FALSE(visit_record(header(b), b.data(), handler));
  op.hdr.kind = 250;  // a kind the catalogue does not know
  b = bytes_of(op, sizeof op);
  EXPECT_FALSE(visit_record(header(b), b.data(), handler));
  EXPECT_EQ(kinds.size(), 3u);
}
