// A fresh directory under /tmp for one test, removed with everything in it
// when the test ends.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace lt::testing_support {

struct TempDir {
  std::string path;
  explicit TempDir(const char* prefix = "lt_test") {
    std::string t = std::string("/tmp/") + prefix + "_XXXXXX";
    path = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace lt::testing_support
