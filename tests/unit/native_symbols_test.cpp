// Native leaf names (user/proc/native_symbols.h) of this very process: each
// function named once, the interpreter's file (here: the test binary itself,
// as skip_file) never, whatever its address.
#include "user/proc/native_symbols.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "reports/aggregate/py_symbols.h"
#include "user/proc/symbol_index.h"

namespace {

int in_this_binary(int x) {
  return x + 1;
}

}  // namespace

TEST(NativeSymbols, EachFunctionOnceAndTheSkippedFileNever) {
  std::vector<std::string> names;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  lt::proc::NativeSymbols syms(
      [&](const void* r, std::size_t n) {
        ASSERT_EQ(n, sizeof(lt::lt_native_func_event));  // libc has symbols: a function's range
        lt::lt_native_func_event e;
        std::memcpy(&e, r, sizeof e);
        names.emplace_back(e.name);
        ranges.emplace_back(e.start, e.end);
      },
      {}, lt::proc::NativeNamer::kWaitAlways);  // named at once, however slow the machine
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = getpid();
  const auto libc_fn = reinterpret_cast<std::uint64_t>(dlsym(RTLD_DEFAULT, "getpid"));
  ASSERT_NE(libc_fn, 0u);
  syms.describe(pid, libc_fn, self, 1);
  syms.describe(pid, libc_fn, self, 2);
  ASSERT_EQ(names.size(), 1u);  // once
  EXPECT_NE(names[0].find("getpid"), std::string::npos) << names[0];
  // The function's other addresses: named by that one record.
  ASSERT_LE(ranges[0].first, libc_fn);
  ASSERT_GT(ranges[0].second, libc_fn + 1);
  syms.describe(pid, libc_fn + 1, self, 2);
  syms.describe(pid, ranges[0].second - 1, self, 2);
  EXPECT_EQ(names.size(), 1u);
  // The skipped file: no name for any of its addresses, the first or later ones.
  const auto mine = reinterpret_cast<std::uint64_t>(&in_this_binary);
  for (std::uint64_t off = 0; off < 64; off += 4) syms.describe(pid, mine + off, self, 3);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(syms.remembered(), 1u);  // getpid's range; the skipped file by its mapping, not address by address
  EXPECT_EQ(in_this_binary(1), 2);
  // Forgotten (an exec): named again.
  syms.forget(pid);
  syms.describe(pid, libc_fn, self, 4);
  EXPECT_EQ(names.size(), 2u);
}

// A library whose symbols are still being read (on their own thread) does
// not hold the caller: its leaf is left unnamed (false) and asked again by
// the next sample there, named once they are read; each file read once.
TEST(NativeSymbols, ALeafIsNamedOnceItsLibrarysSymbolsAreRead) {
  std::vector<std::string> names;
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<int> loads{0};
  lt::proc::NativeSymbols syms(
      [&](const void* r, std::size_t) {
        lt::lt_native_func_event e;
        std::memcpy(&e, r, sizeof e);
        names.emplace_back(e.name);
      },
      {}, std::chrono::milliseconds(1),
      [&](const std::string& path) {
        ++loads;
        gate.wait();  // a big library: still being read
        return std::make_shared<const lt::proc::SymbolIndex>(path);
      });
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = getpid();
  const auto libc_fn = reinterpret_cast<std::uint64_t>(dlsym(RTLD_DEFAULT, "getpid"));
  ASSERT_NE(libc_fn, 0u);
  EXPECT_FALSE(syms.describe(pid, libc_fn, self, 1));
  EXPECT_FALSE(syms.describe(pid, libc_fn, self, 2));
  EXPECT_TRUE(names.empty());
  go.set_value();
  // Read now (however long the machine takes): the next sample names it.
  bool named = false;
  for (int i = 0; i < 100000 && !named; ++i) named = syms.describe(pid, libc_fn, self, 3);
  ASSERT_TRUE(named);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_NE(names[0].find("getpid"), std::string::npos) << names[0];
  EXPECT_EQ(loads.load(), 1);
  EXPECT_TRUE(syms.describe(pid, libc_fn, self, 4));  // once
  EXPECT_EQ(names.size(), 1u);
}

// The reader's side (reports/aggregate/py_symbols.*): an address inside a
// NATIVE_FUNC's range is that function; NATIVE_SYM still names one address.
TEST(PySymbolsNative, AddressesInAFunctionsRangeAreThatFunction) {
  lt::PySymbols syms;
  auto feed = [&](const auto& e) { syms.add(e.hdr, reinterpret_cast<const std::byte*>(&e)); };
  lt::lt_native_func_event f{};
  f.hdr = {lt::LT_EV_NATIVE_FUNC, sizeof f, 7, 7, 0, 1};
  f.start = 0x1000;
  f.end = 0x1080;
  std::strcpy(f.name, "at::native::addmm");
  std::strcpy(f.dso, "libtorch_cpu.so");
  feed(f);
  lt::lt_native_sym_event one{};
  one.hdr = {lt::LT_EV_NATIVE_SYM, sizeof one, 7, 7, 0, 2};
  one.ip = 0x2000;
  std::strcpy(one.name, "memcpy");
  std::strcpy(one.dso, "libc.so.6");
  feed(one);
  ASSERT_TRUE(syms.native(7, 0x1000));
  EXPECT_EQ(syms.native(7, 0x1000)->function, "at::native::addmm");
  EXPECT_EQ(syms.native(7, 0x107f)->function, "at::native::addmm");
  EXPECT_EQ(syms.native(7, 0x1080), nullptr);  // the end is outside
  EXPECT_EQ(syms.native(7, 0xfff), nullptr);
  EXPECT_EQ(syms.native(7, 0x2000)->function, "memcpy");
  EXPECT_EQ(syms.native(7, 0x2001), nullptr);  // NATIVE_SYM: that address only
  EXPECT_EQ(syms.native(8, 0x1000), nullptr);  // another process
}
