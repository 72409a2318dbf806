// The "records" table (--ops-layout records) sums the step tables row by row:
// every column, memory and [pl][profile] times included.
#include "reports/ops/records_table.h"

#include <gtest/gtest.h>

namespace lt {
namespace {

OpRowData row(const char* name, std::uint64_t calls, std::int64_t mem) {
  OpRowData r;
  r.name = name;
  r.calls = calls;
  r.self_samples = calls * 2;
  r.total_samples = calls * 3;
  r.record_total_ns = calls * 100;
  r.record_self_ns = calls * 10;
  r.cpu_mem = mem;
  r.self_cpu_mem = mem / 2;
  r.cuda_mem = -mem;
  r.self_cuda_mem = -mem / 2;
  return r;
}

TEST(RecordsTable, SumsEveryColumnOfTheStepTables) {
  OpTableData train, val, outside;
  train.title = "[Strategy]SingleDeviceStrategy.training_step";
  train.steps = 4;
  train.has_memory = true;
  train.rows = {row("aten::mm", 8, 4096), row("aten::add_", 4, 0)};
  val.title = "[Strategy]SingleDeviceStrategy.validation_step";
  val.steps = 2;
  val.has_cuda_memory = true;
  val.rows = {row("aten::mm", 2, 1024)};
  outside.title = "outside step functions";
  outside.rows = {row("aten::zeros", 5, 64)};
  const RecordsTable out = records_table({train, val, outside});
  ASSERT_EQ(out.table.rows.size(), 2u);
  const OpRowData& mm = out.table.rows[0];
  EXPECT_EQ(mm.name, "aten::mm");
  EXPECT_EQ(mm.calls, 10u);
  EXPECT_EQ(mm.self_samples, 20u);
  EXPECT_EQ(mm.total_samples, 30u);
  EXPECT_EQ(mm.record_total_ns, 1000u);
  EXPECT_EQ(mm.record_self_ns, 100u);
  EXPECT_EQ(mm.cpu_mem, 5120);
  EXPECT_EQ(mm.self_cpu_mem, 2560);
  EXPECT_EQ(mm.cuda_mem, -5120);
  EXPECT_EQ(mm.self_cuda_mem, -2560);
  EXPECT_EQ(out.table.steps, 6u);
  EXPECT_TRUE(out.table.has_memory);
  EXPECT_TRUE(out.table.has_cuda_memory);
  EXPECT_EQ(out.left_out_calls, 5u);
}

}  // namespace
}  // namespace lt
