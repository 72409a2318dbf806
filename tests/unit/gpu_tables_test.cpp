// nsys-style GPU summary tables and kernel names; the expectations are worked
// out by hand (statistics in the comments).
#include "reports/gpu/gpu_tables.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/aggregate/kernel_names.h"
#include "reports/gpu/gpu_actions.h"
#include "user/text/code_points.h"

namespace {

lt::DurationStat dur(const std::string& name, std::vector<std::uint64_t> ns) {
  lt::DurationStat d;
  d.name = name;
  d.durations_ns = std::move(ns);
  return d;
}

lt::DurationStat nvtx(const std::string& name, std::vector<std::uint64_t> ns, const std::string& style,
                      const std::string& domain = "") {
  lt::DurationStat d = dur(name, std::move(ns));
  d.style = style;
  d.domain = domain;
  return d;
}

lt::DurationStat mem(const std::string& name, std::vector<std::uint64_t> ns, std::vector<std::uint64_t> bytes) {
  lt::DurationStat d = dur(name, std::move(ns));
  d.bytes = std::move(bytes);
  return d;
}

// The cells of the first line that contains `key` (split at runs of two or more spaces).
std::vector<std::string> row_cells(const std::string& table, const std::string& key) {
  std::size_t at = table.find(key);
  if (at == std::string::npos) return {};
  const std::size_t begin = table.rfind('\n', at) + 1;
  const std::string line = table.substr(begin, table.find('\n', at) - begin);
  std::vector<std::string> cells;
  for (std::size_t i = 0; i < line.size();) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t j = line.find("  ", i);
    if (j == std::string::npos) j = line.size();
    std::string cell = line.substr(i, j - i);
    while (!cell.empty() && cell.back() == ' ') cell.pop_back();  // a padded text cell
    if (!cell.empty()) cells.push_back(cell);
    i = j;
  }
  return cells;
}

}  // namespace

// The layout of a published `nsys stats` nvtx_sum: centred headers (odd space
// to the right), numbers right, text left and padded, one leading space.
TEST(GpuTables, NvtxSumMatchesNsysLayout) {
  const std::string expected =
      " Time (%)  Total Time (ns)  Instances   Avg (ns)     Med (ns)    Min (ns)   Max (ns)   StdDev (ns)   Style  "
      "    Range    \n"
      " --------  ---------------  ---------  -----------  -----------  ---------  ---------  -----------  -------  "
      "------------\n"
      "     95.0        3,481,709          1  3,481,709.0  3,481,709.0  3,481,709  3,481,709          0.0  PushPop  "
      "Profile_Loop\n"
      "      5.0          182,472          1    182,472.0    182,472.0    182,472    182,472          0.0  PushPop  "
      "Warmup      \n";
  EXPECT_EQ(lt::render_nvtx_sum({nvtx("Warmup", {182472}, "PushPop"), nvtx("Profile_Loop", {3481709}, "PushPop")}),
            expected);
}

// kernel_c {30000}; kernel_a {1000, 2000, 3000, 4000}: avg = med = 2500,
// s = sqrt((1500^2 * 2 + 500^2 * 2) / 3) = 1290.99; b {1, 2}: avg = med = 1.5,
// s = sqrt(0.5) = 0.71.  Shares of 40003: 74.99, 25.00, 0.0075.
TEST(GpuTables, KernSumStatistics) {
  const std::string expected =
      " Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)    Name  \n"
      " --------  ---------------  ---------  --------  --------  --------  --------  -----------  --------\n"
      "     75.0           30,000          1  30,000.0  30,000.0    30,000    30,000          0.0  kernel_c\n"
      "     25.0           10,000          4   2,500.0   2,500.0     1,000     4,000      1,291.0  kernel_a\n"
      "      0.0                3          2       1.5       1.5         1         2          0.7  b       \n";
  EXPECT_EQ(
      lt::render_gpu_kern_sum({dur("b", {2, 1}), dur("kernel_a", {4000, 1000, 3000, 2000}), dur("kernel_c", {30000})}),
      expected);
}

TEST(GpuTables, MedianOfOddAndEvenCounts) {
  const std::string t = lt::render_gpu_kern_sum({dur("odd", {5, 1, 3}), dur("even", {10, 1, 4, 7})});
  // odd: sorted 1 3 5 -> 3; mean 3; s = 2.  even: sorted 1 4 7 10 -> 5.5; mean 5.5;
  // s = sqrt((4.5^2 + 1.5^2) * 2 / 3) = 3.873.  Shares: 9 and 22 of 31.
  EXPECT_EQ(row_cells(t, " odd"), (std::vector<std::string>{"29.0", "9", "3", "3.0", "3.0", "1", "5", "2.0", "odd"}));
  EXPECT_EQ(row_cells(t, " even"),
            (std::vector<std::string>{"71.0", "22", "4", "5.5", "5.5", "1", "10", "3.9", "even"}));
}

TEST(GpuTables, BigNumbersAndSeparators) {
  // 12,345,678,901,234 and 1: mean = median = 6,172,839,450,617.5;
  // s = 12,345,678,901,233 / sqrt(2) = 8,729,713,269,413.54.
  const std::string t = lt::render_api_sum(
      {dur("cudaDeviceSynchronize", {12345678901234ULL, 1}), dur("cudaLaunchKernel", {999, 1000, 1001})});
  EXPECT_EQ(row_cells(t, "cudaDeviceSynchronize"),
            (std::vector<std::string>{"100.0", "12,345,678,901,235", "2", "6,172,839,450,617.5", "6,172,839,450,617.5",
                                      "1", "12,345,678,901,234", "8,729,713,269,413.5", "cudaDeviceSynchronize"}));
  EXPECT_EQ(row_cells(t, "cudaLaunchKernel"), (std::vector<std::string>{"0.0", "3,000", "3", "1,000.0", "1,000.0",
                                                                        "999", "1,001", "1.0", "cudaLaunchKernel"}));
  // Columns widen to their values; headers centre in them, the odd space right:
  // Total 18 wide (1 + 15 + 2), Avg/Med 19 (5 + 8 + 6), Max 18 (5 + 8 + 5),
  // StdDev 19 (4 + 11 + 4), Name 21 (8 + 4 + 9).
  EXPECT_EQ(t.substr(0, t.find('\n')), std::string(" Time (%)") + "  " + " Total Time (ns)  " + "  " + "Num Calls" +
                                           "  " + "     Avg (ns)      " + "  " + "     Med (ns)      " + "  " +
                                           "Min (ns)" + "  " + "     Max (ns)     " + "  " + "    StdDev (ns)    " +
                                           "  " + "        Name         ");
}

TEST(GpuTables, SharesAndOrder) {
  const std::string t = lt::render_gpu_kern_sum({dur("x", {100}), dur("z", {100}), dur("y", {100}), dur("w", {700})});
  // 700 of 1000, then the 100s by name.
  EXPECT_EQ(row_cells(t, " w")[0], "70.0");
  EXPECT_LT(t.find(" x"), t.find(" y"));
  EXPECT_LT(t.find(" y"), t.find(" z"));
  EXPECT_LT(t.find(" w"), t.find(" x"));
  EXPECT_EQ(row_cells(t, " z")[0], "10.0");
  // Three equal thirds print 33.3 each, like nsys.
  const std::string thirds = lt::render_gpu_kern_sum({dur("a", {1}), dur("b", {1}), dur("c", {1})});
  EXPECT_EQ(row_cells(thirds, " c")[0], "33.3");
}

TEST(GpuTables, MergesSameNameAndSkipsEmpty) {
  const std::string t =
      lt::render_gpu_kern_sum({dur("k", {10}), dur("none", {}), dur("k", {30, 20}), dur("other", {1})});
  EXPECT_EQ(row_cells(t, " k "),
            (std::vector<std::string>{"98.4", "60", "3", "20.0", "20.0", "10", "30", "10.0", "k"}));
  EXPECT_EQ(t.find("none"), std::string::npos);
  EXPECT_EQ(lt::render_gpu_kern_sum({}), "");
  EXPECT_EQ(lt::render_gpu_kern_sum({dur("none", {})}), "");
  EXPECT_EQ(lt::render_api_sum({}), "");
  EXPECT_EQ(lt::render_nvtx_sum({}), "");
  EXPECT_EQ(lt::render_gpu_mem_time_sum({}), "");
  EXPECT_EQ(lt::render_gpu_mem_size_sum({mem("[CUDA memset]", {5}, {})}), "");  // durations but no sizes
}

TEST(GpuTables, MemTimeSum) {
  const std::string h2d = lt::memcpy_operation_name(1), d2h = lt::memcpy_operation_name(2);
  const std::string expected =
      " Time (%)  Total Time (ns)  Count  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)           Operation   "
      "       \n"
      " --------  ---------------  -----  --------  --------  --------  --------  -----------  "
      "----------------------------\n"
      "     75.0              150      2      75.0      75.0        50       100         35.4  [CUDA memcpy "
      "Host-to-Device]\n"
      "     25.0               50      1      50.0      50.0        50        50          0.0  [CUDA memcpy "
      "Device-to-Host]\n";
  EXPECT_EQ(lt::render_gpu_mem_time_sum({mem(d2h, {50}, {4}), mem(h2d, {100, 50}, {1048576, 524288})}), expected);
}

// Sizes in MB of 10^6 bytes, three decimals, sorted by total bytes.
// Host-to-Device {1048576, 524288}: 1.573 total, mean = med = 0.786,
// s = 524288 / sqrt(2) = 0.371.
TEST(GpuTables, MemSizeSum) {
  const std::string t = lt::render_gpu_mem_size_sum({mem(lt::memcpy_operation_name(2), {50}, {4}),
                                                     mem(lt::memcpy_operation_name(1), {100, 50}, {1048576, 524288}),
                                                     mem(lt::memset_operation_name(), {7}, {1000000000})});
  const std::string want =
      " Total (MB)  Count  Avg (MB)   Med (MB)   Min (MB)   Max (MB)   StdDev (MB)           Operation          \n"
      " ----------  -----  ---------  ---------  ---------  ---------  -----------  ----------------------------\n"
      "  1,000.000      1  1,000.000  1,000.000  1,000.000  1,000.000        0.000  [CUDA memset]               \n"
      "      1.573      2      0.786      0.786      0.524      1.049        0.371  [CUDA memcpy Host-to-Device]\n"
      "      0.000      1      0.000      0.000      0.000      0.000        0.000  [CUDA memcpy Device-to-Host]\n";
  EXPECT_EQ(t, want);
}

TEST(GpuTables, NvtxDomainsAndStyles) {
  const std::string t = lt::render_nvtx_sum({nvtx("cublasCreate_v2", {300}, "PushPop", "cuBLAS"),
                                             nvtx("step", {100, 100}, "PushPop"), nvtx("step", {50}, "StartEnd")});
  EXPECT_EQ(row_cells(t, "cuBLAS:"), (std::vector<std::string>{"54.5", "300", "1", "300.0", "300.0", "300", "300",
                                                               "0.0", "PushPop", "cuBLAS:cublasCreate_v2"}));
  EXPECT_EQ(row_cells(t, "PushPop   step")[8], "PushPop");
  EXPECT_EQ(row_cells(t, "StartEnd")[1], "50");
  EXPECT_EQ(row_cells(t, "StartEnd")[9], "step");
}

// nsys cuts text over 100 characters to 99 and "…" (widths count characters).
TEST(GpuTables, LongNamesAreCut) {
  const std::string long_name(150, 'k');
  const std::string t = lt::render_gpu_kern_sum({dur(long_name, {1}), dur("μs_kernel", {2})});
  const std::string cut = std::string(99, 'k') + "\xE2\x80\xA6";
  EXPECT_NE(t.find("  " + cut + "\n"), std::string::npos) << t;
  EXPECT_EQ(t.find(std::string(100, 'k')), std::string::npos);
  // The dashes of the Name column: 100 wide; "μs_kernel" is padded by characters.
  EXPECT_NE(t.find("  " + std::string(100, '-') + "\n"), std::string::npos);
  EXPECT_NE(t.find("  μs_kernel" + std::string(91, ' ') + "\n"), std::string::npos) << t;
  const std::string exactly100(100, 'e');
  EXPECT_NE(lt::render_gpu_kern_sum({dur(exactly100, {1})}).find(exactly100 + "\n"), std::string::npos);
}

TEST(GpuTables, MemcpyOperationNames) {
  const char* const want[] = {
      "[CUDA memcpy Unknown]",         "[CUDA memcpy Host-to-Device]",  "[CUDA memcpy Device-to-Host]",
      "[CUDA memcpy Host-to-Array]",   "[CUDA memcpy Array-to-Host]",   "[CUDA memcpy Array-to-Array]",
      "[CUDA memcpy Array-to-Device]", "[CUDA memcpy Device-to-Array]", "[CUDA memcpy Device-to-Device]",
      "[CUDA memcpy Host-to-Host]",    "[CUDA memcpy Peer-to-Peer]",
  };
  for (int k = 0; k <= 10; ++k) EXPECT_EQ(lt::memcpy_operation_name(static_cast<std::uint8_t>(k)), want[k]) << k;
  EXPECT_EQ(lt::memcpy_operation_name(11), "[CUDA memcpy Unknown]");
  EXPECT_EQ(lt::memcpy_operation_name(255), "[CUDA memcpy Unknown]");
  EXPECT_EQ(lt::memset_operation_name(), "[CUDA memset]");
}

// Mangled names made by g++ from declarations shaped like torch's and
// cutlass's kernels (nvcc mangles with the same Itanium ABI); each expected
// text is what `c++filt` prints for it.
TEST(KernelName, DemanglesLikeCxxFilt) {
  EXPECT_EQ(lt::demangle_kernel(
                "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"),
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> "
            ">(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)");
  EXPECT_EQ(
      lt::demangle_kernel("_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIfffEEjfLi4EEEEEvT1_"),
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, "
      "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float>, "
      "unsigned int, float, 4>)");
  EXPECT_EQ(
      lt::demangle_kernel("_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_"
                          "11AdamFunctorIfLNS0_9ADAM_MODEE0EEEJfffffbEEEvT_T0_DpT1_"),
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
      "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::AdamFunctor<float, "
      "(at::native::ADAM_MODE)0>, float, float, float, float, float, bool>(at::native::(anonymous "
      "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::AdamFunctor<float, "
      "(at::native::ADAM_MODE)0>, float, float, float, float, float, bool)");
  EXPECT_EQ(
      lt::demangle_kernel("_ZN7cutlass7Kernel2I50cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4EEvNT_6ParamsE"),
      "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(cutlass_80_tensorop_s1688gemm_"
      "64x64_16x6_tn_align4::Params)");
  EXPECT_EQ(lt::demangle_kernel("_Z12plain_kernelPfPKfi"), "plain_kernel(float*, float const*, int)");
  EXPECT_EQ(lt::demangle_kernel("_Z3foov.cold"), "foo() [clone .cold]");
}

TEST(KernelName, LeavesOtherNamesAlone) {
  for (const char* s : {"ampere_sgemm_128x64_tn", "triton_poi_fused_add_0", "c_kernel", "i", "Z3foov", "_Z",
                        "_Zinvalid", "", "Memcpy HtoD (Pageable -> Device)"}) {
    EXPECT_EQ(lt::demangle_kernel(s), s);
  }
}

TEST(KernelName, ShortNames) {
  const std::string lambdas = lt::demangle_kernel(
      "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_"
      "copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_"
      "EUliE_EEviT1_");
  ASSERT_EQ(lambdas.rfind("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<", 0), 0u)
      << lambdas;
  EXPECT_EQ(lt::short_kernel_name(lambdas), "elementwise_kernel");
  EXPECT_EQ(
      lt::short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
      "vectorized_elementwise_kernel");
  EXPECT_EQ(lt::short_kernel_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
                                  "(anonymous namespace)::TensorListMetadata<4>, float>(at::native::(anonymous "
                                  "namespace)::TensorListMetadata<4>, float)"),
            "multi_tensor_apply_kernel");
  EXPECT_EQ(lt::short_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>"
                                  "(cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)"),
            "Kernel2");
  EXPECT_EQ(
      lt::short_kernel_name("void at::native::indexSelectSmallIndex<float, unsigned int, long, 2, 2, -2>(at::cuda::"
                            "detail::TensorInfo<float, unsigned int>, int, int, unsigned int, long)"),
      "indexSelectSmallIndex");
  EXPECT_EQ(lt::short_kernel_name("void foo<(int)64, (bool)1>(float*)"), "foo");
  EXPECT_EQ(lt::short_kernel_name("plain_kernel(float*, float const*, int)"), "plain_kernel");
  EXPECT_EQ(lt::short_kernel_name("foo() [clone .cold]"), "foo");
  EXPECT_EQ(lt::short_kernel_name("ns::{lambda(float)#1}::operator()(float) const"), "operator()");
  EXPECT_EQ(lt::short_kernel_name("at::native::(anonymous namespace)::bare"), "bare");
  EXPECT_EQ(lt::short_kernel_name("cutlass::Kernel<Op>"), "Kernel");
  EXPECT_EQ(lt::short_kernel_name("ampere_sgemm_128x64_tn"), "ampere_sgemm_128x64_tn");
  EXPECT_EQ(lt::short_kernel_name(""), "");
  EXPECT_EQ(lt::short_kernel_name("void broken<int(float*"), "void broken<int(float*");  // unbalanced: no crash
}

// Action names are any text: the columns line up by code points (and a byte
// that is not UTF-8 as wide as it is written), not by bytes.
TEST(GpuActions, NonAsciiNamesLineUp) {
  std::vector<lt::GpuActionRow> rows(3);
  rows[0].action = "[LightningModule]Modèle.training_step";
  rows[0].kernels = 12;
  rows[1].action = "ascii_only";
  rows[1].kernels = 3;
  rows[2].action = "odd\xFFname";
  rows[2].kernels = 1;
  const std::string t = lt::render_gpu_actions(rows, true);
  std::vector<std::size_t> widths;
  for (std::size_t a = 0, b; (b = t.find('\n', a)) != std::string::npos; a = b + 1)
    widths.push_back(lt::cp_len(t.substr(a, b - a)));
  ASSERT_EQ(widths.size(), 5u);  // head, rule, 3 rows
  for (auto w : widths) EXPECT_EQ(w, widths[0]) << t;
}
