// tests/unit/data/op_table/ was written by gen_op_table_golden.py from torch's
// own EventList.table(); each case is compared byte for byte.
#include "reports/ops/op_table.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The unit tests run from the repo root; LT_SRCDIR points elsewhere when they do not.
std::string data_dir() {
  const char* root = std::getenv("LT_SRCDIR");
  std::string dir = root && *root ? std::string(root) + "/" : std::string();
  return dir + "tests/unit/data/op_table/";
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    out.push_back(line.substr(start, tab - start));
  }
  out.push_back(line.substr(start));
  return out;
}

struct Case {
  std::vector<lt::OpRow> rows;
  lt::OpTableOptions opt;
};

// Fails the calling test (via the bool) on a malformed line rather than guessing.
bool read_case(const std::string& path, Case& c, std::string& error) {
  std::ifstream in(path);
  if (!in) return error = "missing " + path + " (run from the repo root or set LT_SRCDIR)", false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split_tabs(line);
    if (f[0] == "sort_by" && f.size() == 2) {
      c.opt.sort_by = f[1];
    } else if (f[0] == "row_limit" && f.size() == 2) {
      c.opt.row_limit = std::stoi(f[1]);
    } else if (f[0] == "with_input_shapes" && f.size() == 2) {
      c.opt.with_input_shapes = f[1] == "1";
    } else if (f[0] == "device" && f.size() == 2) {
      c.opt.device = f[1];
    } else if (f[0] == "estimated" && f.size() == 2) {
      c.opt.estimated = f[1] == "1";
    } else if (f[0] == "row" && (f.size() == 6 || f.size() == 9)) {
      // strtod reads Python's repr() back to the identical double.
      lt::OpRow r{f[1], f[2], std::strtod(f[3].c_str(), nullptr), std::strtod(f[4].c_str(), nullptr),
                  std::stoull(f[5])};
      if (f.size() == 9) {
        r.self_cuda_us = std::strtod(f[6].c_str(), nullptr);
        r.cuda_total_us = std::strtod(f[7].c_str(), nullptr);
        r.device_event = f[8] == "1";
      }
      c.rows.push_back(r);
    } else {
      return error = path + ": bad line: " + line, false;
    }
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  std::ifstream in(data_dir() + "cases.txt");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

lt::OpRow row(const std::string& name, double self_us, double total_us, std::uint64_t calls) {
  return {name, "", self_us, total_us, calls};
}

lt::OpRow gpu_row(const std::string& name, double self_us, double total_us, std::uint64_t calls, double self_cuda,
                  double cuda_total, bool device_event) {
  lt::OpRow r = row(name, self_us, total_us, calls);
  r.self_cuda_us = self_cuda;
  r.cuda_total_us = cuda_total;
  r.device_event = device_event;
  return r;
}

std::vector<std::string> names_in_order(const std::string& table) {
  std::vector<std::string> names;
  std::istringstream in(table);
  int seps = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("---", 0) == 0) {
      ++seps;
    } else if (seps == 2) {
      const std::size_t b = line.find_first_not_of(' ');
      names.push_back(line.substr(b, line.find("  ", b) - b));
    }
  }
  return names;
}

}  // namespace

TEST(OpTable, TorchGolden) {
  const std::vector<std::string> names = case_names();
  ASSERT_GE(names.size(), 50u) << "missing " << data_dir() << "cases.txt (run from the repo root or set LT_SRCDIR)";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    Case c;
    std::string error;
    ASSERT_TRUE(read_case(data_dir() + name + ".in", c, error)) << error;
    const std::string expected = read_file(data_dir() + name + ".expected");
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(lt::render_op_table(c.rows, c.opt), expected);
  }
}

TEST(OpTable, EstimatedHeaders) {
  lt::OpTableOptions opt;
  opt.estimated = true;
  opt.row_limit = -1;
  const std::string expected =
      "----------------  ------------  ------------  ------------  ------------  -------------  ------------  \n"
      "            Name   Self CPU %~     Self CPU~  CPU total %~    CPU total~  CPU time avg~    # of Calls  \n"
      "----------------  ------------  ------------  ------------  ------------  -------------  ------------  \n"
      "    aten::linear        60.00%       3.000ms       100.00%       5.000ms        1.250ms             4  \n"
      "     aten::addmm        40.00%       2.000ms        40.00%       2.000ms      500.000us             4  \n"
      "----------------  ------------  ------------  ------------  ------------  -------------  ------------  \n"
      "Self CPU time total~: 5.000ms\n";
  EXPECT_EQ(lt::render_op_table({row("aten::addmm", 2000, 2000, 4), row("aten::linear", 3000, 5000, 4)}, opt),
            expected);
}

TEST(OpTable, EmptyIsEmpty) {
  EXPECT_EQ(lt::render_op_table({}, lt::OpTableOptions{}), "");
}

// The default row_limit is Lightning's 20; percentages still use every row.
TEST(OpTable, DefaultRowLimitKeepsTotals) {
  std::vector<lt::OpRow> rows;
  for (int i = 0; i < 25; ++i) rows.push_back(row("op" + std::to_string(i), 10, 10 + i, 1));
  const std::string out = lt::render_op_table(rows, lt::OpTableOptions{});
  EXPECT_NE(out.find(" op24 "), std::string::npos);  // the largest CPU total comes first
  EXPECT_EQ(out.find(" op4 "), std::string::npos);   // the five smallest are cut
  EXPECT_NE(out.find("4.00%"), std::string::npos);   // 10 of 250
  EXPECT_NE(out.find("Self CPU time total: 250.000us\n"), std::string::npos);
}

TEST(OpTable, UnknownSortKeyThrows) {
  lt::OpTableOptions opt;
  opt.sort_by = "wall_time";
  EXPECT_THROW(lt::render_op_table({row("a", 1, 1, 1)}, opt), std::invalid_argument);
}

// The "~" of sampled CPU times never reaches the device columns: CUPTI measures them.
TEST(OpTable, EstimatedLeavesDeviceHeadersAlone) {
  lt::OpTableOptions opt;
  opt.estimated = true;
  opt.device = "cuda";
  opt.sort_by = "self_cuda_time_total";
  const std::string out =
      lt::render_op_table({gpu_row("aten::mm", 30, 50, 1, 0, 20, false), gpu_row("gemm_kernel", 0, 0, 1, 20, 20, true),
                           gpu_row("cudaLaunchKernel", 20, 20, 1, 0, 0, false)},
                          opt);
  EXPECT_NE(out.find("  CPU time avg~     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  \n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\nSelf CPU time total~: 50.000us\nSelf CUDA time total: 20.000us\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA~"), std::string::npos);
  EXPECT_EQ(names_in_order(out), (std::vector<std::string>{"gemm_kernel", "aten::mm", "cudaLaunchKernel"}));
}

// Without a device the device fields stay out of the table (but still sort).
TEST(OpTable, NoDeviceNoDeviceColumns) {
  lt::OpTableOptions opt;
  opt.sort_by = "cuda_time_total";
  const std::string out =
      lt::render_op_table({gpu_row("a", 1, 1, 1, 0, 1, false), gpu_row("b", 1, 1, 1, 5, 5, true)}, opt);
  EXPECT_EQ(out.find("CUDA"), std::string::npos) << out;
  EXPECT_EQ(names_in_order(out), (std::vector<std::string>{"b", "a"}));
}

// A device with no self device time anywhere: torch's has_device_time is false.
TEST(OpTable, DeviceWithoutSelfDeviceTime) {
  lt::OpTableOptions opt;
  opt.device = "CUDA";
  const std::string out = lt::render_op_table({row("a", 1, 1, 1)}, opt);
  EXPECT_EQ(out.find("CUDA"), std::string::npos) << out;
}

TEST(OpTable, SortsByDeviceKeys) {
  lt::OpTableOptions opt;
  opt.device = "cuda";
  opt.row_limit = -1;
  // Device totals 30, 40, 25; self 0, 40, 25; per-call averages 30, 4, 25.
  const std::vector<lt::OpRow> rows = {gpu_row("op", 9, 9, 1, 0, 30, false), gpu_row("k_many", 0, 0, 10, 40, 40, true),
                                       gpu_row("k_one", 0, 0, 1, 25, 25, true)};
  opt.sort_by = "cuda_time_total";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"k_many", "op", "k_one"}));
  opt.sort_by = "self_cuda_time_total";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"k_many", "k_one", "op"}));
  opt.sort_by = "cuda_time";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"op", "k_one", "k_many"}));
  opt.sort_by = "self_xpu_time_total";  // torch maps every device prefix to the same attribute
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"k_many", "k_one", "op"}));
}

// --profile-memory: torch 2.15's columns after the times, its _format_memory
// (values from torch itself: 0 B, 1023 B, 1.00 KB, -1.50 KB, 3.00 MB,
// -2.00 GB, 500.00 MB), and the four memory sort keys sort for real.
lt::OpRow mem_row(const std::string& name, std::int64_t cpu, std::int64_t self_cpu, std::int64_t cuda = 0,
                  std::int64_t self_cuda = 0) {
  lt::OpRow r = row(name, 1, 1, 1);
  r.cpu_mem = cpu;
  r.self_cpu_mem = self_cpu;
  r.cuda_mem = cuda;
  r.self_cuda_mem = self_cuda;
  return r;
}

TEST(OpTable, MemoryColumnsAndFormat) {
  lt::OpTableOptions opt;
  opt.profile_memory = true;
  opt.sort_by = "";
  const std::string out =
      lt::render_op_table({mem_row("a", 0, 1023), mem_row("b", 1024, -1536),
                           mem_row("c", 1048576 * 3 + 5, -2147483649LL), mem_row("d", 524288000, 0)},
                          opt);
  EXPECT_NE(out.find("  CPU time avg       CPU Mem  Self CPU Mem    # of Calls  \n"), std::string::npos) << out;
  EXPECT_NE(out.find("           0 B        1023 B             1  \n"), std::string::npos) << out;
  EXPECT_NE(out.find("       1.00 KB      -1.50 KB             1  \n"), std::string::npos) << out;
  EXPECT_NE(out.find("       3.00 MB      -2.00 GB             1  \n"), std::string::npos) << out;
  EXPECT_NE(out.find("     500.00 MB           0 B             1  \n"), std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA"), std::string::npos);
  opt.memory_bytes = true;
  EXPECT_NE(lt::render_op_table({mem_row("c", 3145733, -2147483649LL)}, opt).find("     3145733   -2147483649"),
            std::string::npos);
}

TEST(OpTable, MemorySortKeys) {
  lt::OpTableOptions opt;
  opt.profile_memory = true;
  opt.device = "cuda";
  opt.row_limit = -1;
  const std::vector<lt::OpRow> rows = {mem_row("x", 10, -5, 0, 0), mem_row("y", 30, 1, 7, 2),
                                       mem_row("z", 20, 4, 9, -1)};
  opt.sort_by = "cpu_memory_usage";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"y", "z", "x"}));
  opt.sort_by = "self_cpu_memory_usage";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"z", "y", "x"}));
  opt.sort_by = "cuda_memory_usage";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"z", "y", "x"}));
  opt.sort_by = "self_cuda_memory_usage";
  EXPECT_EQ(names_in_order(lt::render_op_table(rows, opt)), (std::vector<std::string>{"y", "x", "z"}));
  // has_device_mem (some self device memory > 0): the CUDA memory columns follow the CPU ones
  EXPECT_NE(lt::render_op_table(rows, opt).find("  CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls"),
            std::string::npos)
      << lt::render_op_table(rows, opt);
  // without profile_memory: no memory columns at all (torch's default)
  opt.profile_memory = false;
  EXPECT_EQ(lt::render_op_table(rows, opt).find("Mem"), std::string::npos);
}
