// Native leaf names (user/proc/native_symbols.h) of this very process: each
// address named once, the interpreter's file (here: the test binary itself,
// as skip_file) never, whatever its address.
#include "user/proc/native_symbols.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace {

int in_this_binary(int x) {
  return x + 1;
}

}  // namespace

TEST(NativeSymbols, EachAddressOnceAndTheSkippedFileNever) {
  std::vector<std::string> names;
  lt::proc::NativeSymbols syms([&](const void* r, std::size_t n) {
    ASSERT_EQ(n, sizeof(lt::lt_native_sym_event));
    lt::lt_native_sym_event e;
    std::memcpy(&e, r, sizeof e);
    names.emplace_back(e.name);
  });
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = getpid();
  const auto libc_fn = reinterpret_cast<std::uint64_t>(dlsym(RTLD_DEFAULT, "getpid"));
  ASSERT_NE(libc_fn, 0u);
  syms.describe(pid, libc_fn, self, 1);
  syms.describe(pid, libc_fn, self, 2);
  ASSERT_EQ(names.size(), 1u);  // once
  EXPECT_NE(names[0].find("getpid"), std::string::npos) << names[0];
  // The skipped file: no name for any of its addresses, the first or later ones.
  const auto mine = reinterpret_cast<std::uint64_t>(&in_this_binary);
  for (std::uint64_t off = 0; off < 64; off += 4) syms.describe(pid, mine + off, self, 3);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(syms.remembered(), 1u);  // skipped by its mapping, not address by address
  EXPECT_EQ(in_this_binary(1), 2);
  // Forgotten (an exec): named again.
  syms.forget(pid);
  syms.describe(pid, libc_fn, self, 4);
  EXPECT_EQ(names.size(), 2u);
}
