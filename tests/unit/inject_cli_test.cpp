// The injector as a command for tests/integration/test_inject.py: with
// LT_INJECT_PID and LT_INJECT_LIB set (LT_INJECT_TIMEOUT_MS optional),
//   build/unit-tests --gtest_filter=InjectCli.FromEnvironment
// injects once and prints one line:
//   INJECT_RESULT ok handle=0x... tid=N ms=T detail=...
//   INJECT_RESULT error code=N message=...
// Without them the test is skipped.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "user/core/errors.h"
#include "user/inject/inject_library.h"

TEST(InjectCli, FromEnvironment) {
  const char* pid = std::getenv("LT_INJECT_PID");
  const char* lib = std::getenv("LT_INJECT_LIB");
  if (!pid || !lib) GTEST_SKIP() << "LT_INJECT_PID / LT_INJECT_LIB not set";
  lt::inject::InjectOptions opts;
  if (const char* t = std::getenv("LT_INJECT_TIMEOUT_MS")) opts.timeout = std::chrono::milliseconds(std::atol(t));
  auto t0 = std::chrono::steady_clock::now();
  try {
    auto r = lt::inject::inject_library(static_cast<pid_t>(std::atol(pid)), lib, opts);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("INJECT_RESULT ok handle=0x%llx tid=%d ms=%.3f detail=%s\n", static_cast<unsigned long long>(r.handle),
                static_cast<int>(r.tid), ms, r.detail.c_str());
  } catch (const lt::Error& e) {
    std::printf("INJECT_RESULT error code=%d message=%s\n", static_cast<int>(e.code()), e.what());
  }
  std::fflush(stdout);
}
