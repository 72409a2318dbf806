// Where the action probes go (user/python/probe_sites.h), found from the
// interpreter's file alone: its data tables read with their relocations
// (user/python/elf_file.h), so that a process held at its exec, before the
// loader relocated anything, gets the same sites as one running for hours.
// Checked against real CPythons: pyenv's shared libpython (relocated
// pointers, symbols kept: the table scan must find what .symtab names) and
// Debian's non-PIE python3.11 (absolute pointers, stripped).
#include "user/python/probe_sites.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "user/python/elf_file.h"
#include "user/python/offsets.h"

namespace {

namespace fs = std::filesystem;

// Every pyenv CPython 3.8+ shared library on this machine, with its minor.
std::vector<std::pair<std::string, int>> pyenv_libpythons() {
  std::vector<std::pair<std::string, int>> out;
  const fs::path root = "/root/.pyenv/versions";
  std::error_code ec;
  for (const auto& v : fs::directory_iterator(root, ec)) {
    const std::string name = v.path().filename();
    int major = 0, minor = 0;
    if (std::sscanf(name.c_str(), "%d.%d", &major, &minor) != 2 || major != 3 || minor < 8) continue;
    const fs::path lib = v.path() / "lib" / ("libpython3." + std::to_string(minor) + ".so.1.0");
    if (fs::is_regular_file(lib, ec)) out.emplace_back(lib.string(), minor);
  }
  return out;
}

TEST(ProbeSites, TheTablesInTheFileNameWhatItsSymbolsName) {
  const auto libs = pyenv_libpythons();
  if (libs.empty()) GTEST_SKIP() << "no pyenv CPython 3.8+ with a shared libpython here";
  for (const auto& [path, minor] : libs) {
    SCOPED_TRACE(path);
    const lt::elf::ElfFile file(path);
    const auto layout = lt::python::layout_for(minor);
    ASSERT_TRUE(layout.has_value());
    // The static functions' own symbols (.symtab) are the oracle; the scans
    // read the pointers in the data, every one of them a relocation here.
    const auto next_sym = file.symbol("builtin_next");
    const auto throw_sym = file.symbol("gen_throw");
    ASSERT_TRUE(next_sym && throw_sym) << "pyenv builds keep .symtab";
    EXPECT_EQ(lt::python::next_from_method_table(file), next_sym->value);
    EXPECT_EQ(lt::python::gen_throw_from_method_table(file, *layout), throw_sym->value);
    // The sites do not depend on any process: found twice, the same.
    const auto a = lt::python::find_probe_sites(file, path, *layout);
    const auto b = lt::python::find_probe_sites(lt::elf::ElfFile(path), path, *layout);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].function, b[i].function);
      EXPECT_EQ(a[i].file_offset, b[i].file_offset);
    }
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a[0].function, "builtin_next") << "a build with symbols is probed at its generator entry points";
  }
}

TEST(ProbeSites, AStrippedNonPieInterpreterIsReadFromItsAbsolutePointers) {
  const std::string path = "/usr/bin/python3.11";
  if (!fs::is_regular_file(path)) GTEST_SKIP() << path << " is not here";
  const lt::elf::ElfFile file(path);
  ASSERT_FALSE(file.symbol("builtin_next").has_value()) << "Debian strips its static functions";
  const auto layout = lt::python::layout_for(11);
  ASSERT_TRUE(layout.has_value());
  const auto next = lt::python::next_from_method_table(file);
  const auto thrown = lt::python::gen_throw_from_method_table(file, *layout);
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(thrown.has_value());
  EXPECT_NE(*next, *thrown);
  // Both are code: their first bytes are in an executable segment.
  for (std::uint64_t at : {*next, *thrown}) {
    bool code = false;
    for (const auto& s : file.segments()) code |= s.executable && at >= s.vaddr && at < s.vaddr + s.filesz;
    EXPECT_TRUE(code) << std::hex << at;
  }
}

}  // namespace
