// The c10d backend methods of real libtorch_cpu files (torch 2.x and 1.13.1
// from PyPI): the kinds each version has, the tensor register and form in
// each cookie, and manglings that must not match (nested classes).
#include "user/torch/comm_sites.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "bpf/events.h"

using namespace lt;

namespace {

TEST(CommSites, CookiesOfMethods) {
  EXPECT_EQ(
      comm_site_cookie("_ZN4c10d16ProcessGroupGloo9allreduceERSt6vectorIN2at6TensorESaIS3_EERKNS_16AllreduceOptionsE"),
      LT_COMM_COOKIE(std::uint64_t{LT_COMM_ALLREDUCE}, LT_COMM_GLOO, 2, LT_COMM_FORM_VECTOR));
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupGloo17all_gather_singleERN2at6TensorES3_RKNS_16AllgatherOptionsE"),
            LT_COMM_COOKIE(std::uint64_t{LT_COMM_ALLGATHER_INTO_TENSOR}, LT_COMM_GLOO, 3, LT_COMM_FORM_TENSOR));
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupGloo7barrierERKNS_14BarrierOptionsE"),
            LT_COMM_COOKIE(std::uint64_t{LT_COMM_BARRIER}, LT_COMM_GLOO, 0, LT_COMM_FORM_NONE));
  // a nested class's method, a name that is a prefix of another, other classes
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupGloo9AsyncWork4waitENSt6chrono8durationIlSt5ratioILl1ELl1000EEEE"),
            0u);
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupGloo7enqueueEN3c1013intrusive_ptrINS0_9AsyncWorkEEE"), 0u);
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupMPI9allreduceERSt6vector"), 0u);
  EXPECT_EQ(comm_site_cookie("_ZN4c10d16ProcessGroupGloo9allreduc"), 0u);
  EXPECT_EQ(comm_site_cookie(""), 0u);
}

TEST(CommMarkWhat, NamesTheTimingPoints) {
  EXPECT_EQ(
      comm_mark_what("_ZN4c10d16ProcessGroupGloo7enqueueEN3c1013intrusive_ptrINS0_9AsyncWorkENS1_6detail34intrusive_"
                     "target_default_null_typeIS3_EEEE"),
      LT_COMM_MARK_ENQUEUE);
  EXPECT_EQ(comm_mark_what("_ZN4c10d16ProcessGroupGloo9AsyncWork14finishWorkGlooEv"), LT_COMM_MARK_DONE);
  // 2.x takes the exception_ptr by const reference, 1.13 by value
  EXPECT_EQ(
      comm_mark_what("_ZN4c10d16ProcessGroupGloo9AsyncWork19finishWorkGlooErrorERKNSt15__exception_ptr13exception_"
                     "ptrE"),
      LT_COMM_MARK_DONE_ERROR);
  EXPECT_EQ(
      comm_mark_what("_ZN4c10d16ProcessGroupGloo9AsyncWork19finishWorkGlooErrorENSt15__exception_ptr13exception_ptrE"),
      LT_COMM_MARK_DONE_ERROR);
  EXPECT_EQ(comm_mark_what("_ZN4c10d4Work4waitENSt6chrono8durationIlSt5ratioILl1ELl1000EEEE"), LT_COMM_MARK_WAIT);
  EXPECT_EQ(comm_mark_what("_ZN4c10d7Reducer17all_reduce_bucketERNS0_6BucketE"), LT_COMM_MARK_DDP_LAUNCH);
  EXPECT_EQ(comm_mark_what("_ZN4c10d7Reducer17finalize_backwardEv"), LT_COMM_MARK_DDP_FINALIZE);
  EXPECT_EQ(comm_mark_what("_ZN4c10d7Reducer21finalize_bucket_denseERNS0_6BucketE"), LT_COMM_MARK_DDP_BUCKET_READY);
  // neighbours that are not the points
  EXPECT_EQ(comm_mark_what("_ZN4c10d7Reducer24finalize_backward_manualEv"), 0u);
  EXPECT_EQ(comm_mark_what("_ZN4c10d16ProcessGroupGloo9AsyncWork7executeERKN3c1013intrusive_ptrIS1_EE"), 0u);
  EXPECT_EQ(comm_mark_what("_ZN4c10d16ProcessGroupGloo9allreduceERSt6vector"), 0u);
  EXPECT_EQ(comm_mark_what("_ZN4c10d4Work9isSuccessEv"), 0u);
}

std::string source_dir() {
  const char* root = std::getenv("LT_SRCDIR");
  return root && *root ? std::string(root) + "/" : std::string();
}

class RealLibtorchCpu : public testing::TestWithParam<std::string> {};

TEST_P(RealLibtorchCpu, FindsTheCollectives) {
  const std::string path = source_dir() + GetParam();
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is not installed: run `make deps`";
  std::set<std::uint32_t> kinds, marks;
  for (const auto& s : find_comm_sites(path)) {
    EXPECT_GT(s.file_offset, 0u) << s.symbol;
    EXPECT_TRUE(marks.insert(static_cast<std::uint32_t>(s.cookie)).second || !s.mark) << "two sites for " << s.symbol;
    if (!s.mark) kinds.insert(static_cast<std::uint32_t>(s.cookie & 0xff));
  }
  // every point of the timing join, in both torch builds
  for (std::uint32_t w = LT_COMM_MARK_ENQUEUE; w < LT_COMM_MARK_MAX; ++w)
    EXPECT_TRUE(marks.count(w)) << "mark " << w << " missing in " << path;
  for (std::uint32_t k : {LT_COMM_ALLREDUCE, LT_COMM_BROADCAST, LT_COMM_REDUCE, LT_COMM_ALLGATHER,
                          LT_COMM_ALLGATHER_INTO_TENSOR, LT_COMM_GATHER, LT_COMM_SCATTER, LT_COMM_REDUCE_SCATTER,
                          LT_COMM_ALLTOALL_SINGLE, LT_COMM_BARRIER, LT_COMM_SEND, LT_COMM_RECV})
    EXPECT_TRUE(kinds.count(k)) << "kind " << k << " missing in " << path;
  // gloo gained the list all_to_all and reduce_scatter_tensor in 2.x
  const bool torch1 = path.find("torch113") != std::string::npos;
  EXPECT_EQ(kinds.count(LT_COMM_ALLTOALL), torch1 ? 0u : 1u);
  EXPECT_EQ(kinds.count(LT_COMM_REDUCE_SCATTER_TENSOR), torch1 ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Torch, RealLibtorchCpu,
                         testing::Values(".venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                                         ".venv-torch113/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           return p.param.find("torch113") != std::string::npos ? std::string("PyPI_1_13")
                                                                                : std::string("PyPI");
                         });

}  // namespace
