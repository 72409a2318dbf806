// The allocator hooks of real libc10 files (torch 2.x from PyPI, torch
// 1.13.1 from PyPI and Debian): each of the five found once, inside the
// executable code, and the manglings of both integer spellings of the totals.
#include "user/torch/mem_sites.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "bpf/events.h"

using namespace lt;

namespace {

TEST(MemHooks, KindsOfBothManglings) {
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1025ProfiledCPUMemoryReporter3NewEPvm"), LT_MEM_SITE_CPU_NEW);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1025ProfiledCPUMemoryReporter6DeleteEPv"), LT_MEM_SITE_CPU_DELETE);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1025ProfiledCPUMemoryReporter11OutOfMemoryEm"), LT_MEM_SITE_CPU_OOM);
  // torch 2.x: (void*, long, unsigned long, unsigned long, Device); 1.13: long totals
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"), LT_MEM_SITE_REPORT_USAGE);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"), LT_MEM_SITE_REPORT_USAGE);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE"), LT_MEM_SITE_REPORT_OOM);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1027reportOutOfMemoryToProfilerElllNS_6DeviceE"), LT_MEM_SITE_REPORT_OOM);
  EXPECT_EQ(lt::mem_hook_kind("_ZN3c1025ProfiledCPUMemoryReporter3NewEPvmm"), 0u);
  EXPECT_EQ(lt::mem_hook_kind(""), 0u);
}

std::string source_dir() {
  const char* root = std::getenv("LT_SRCDIR");
  return root && *root ? std::string(root) + "/" : std::string();
}

class RealLibc10 : public testing::TestWithParam<std::string> {};

TEST_P(RealLibc10, FindsAllFiveHooks) {
  std::string path = GetParam();
  if (path.front() != '/') path = source_dir() + path;
  if (path.starts_with("/usr/") && !std::filesystem::exists(path))
    GTEST_SKIP() << "Debian's python3-torch not installed";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is not installed: run `make deps`";
  const auto sites = lt::find_mem_hooks(path);
  std::set<std::uint32_t> kinds;
  for (const auto& s : sites) {
    EXPECT_GT(s.file_offset, 0u) << s.symbol;
    kinds.insert(s.kind);
  }
  EXPECT_EQ(sites.size(), 5u);
  EXPECT_EQ(kinds, (std::set<std::uint32_t>{LT_MEM_SITE_CPU_NEW, LT_MEM_SITE_CPU_DELETE, LT_MEM_SITE_CPU_OOM,
                                            LT_MEM_SITE_REPORT_USAGE, LT_MEM_SITE_REPORT_OOM}));
}

INSTANTIATE_TEST_SUITE_P(Torch, RealLibc10,
                         testing::Values(".venv/lib/python3.11/site-packages/torch/lib/libc10.so",
                                         ".venv-torch113/lib/python3.10/site-packages/torch/lib/libc10.so",
                                         "/usr/lib/x86_64-linux-gnu/libc10.so"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           if (p.param.starts_with("/usr/")) return std::string("Debian_1_13");
                           return p.param.find("torch113") != std::string::npos ? std::string("PyPI_1_13")
                                                                                : std::string("PyPI");
                         });

}  // namespace
