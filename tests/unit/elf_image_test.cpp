// The one ELF reader (user/proc/elf_image.h) and the symbol index on it,
// against the unit-test binary itself: a real ELF file whose symbols and
// code we know.  (op_catalog_test covers synthetic and hostile files.)
#include "user/proc/elf_image.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "user/proc/symbol_index.h"
#include "user/python/elf_file.h"

extern "C" __attribute__((noinline, used)) int lt_elf_image_test_marker(int x) {
  return x * 3 + 1;
}

// Pointers the loader relocates (this binary is PIE: R_X86_64_RELATIVE).
extern "C" __attribute__((used)) const char* const lt_elf_file_test_pointers[] = {
    "lt-elf-file-test-string", reinterpret_cast<const char*>(&lt_elf_image_test_marker)};

namespace {

using lt::elf::ElfImage;

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string temp_file(const std::string& name, const std::string& contents) {
  std::string path = testing::TempDir() + "elf_image_test_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(ElfImage, ProblemsAreReportedNotThrown) {
  {
    ElfImage e(testing::TempDir() + "elf_image_test_no_such_file");
    EXPECT_EQ(e.problem(), ElfImage::Problem::cannot_open);
    EXPECT_EQ(e.error(), ENOENT);
  }
  EXPECT_EQ(ElfImage(testing::TempDir()).problem(), ElfImage::Problem::not_regular);
  for (const char* contents : {"", "#!/bin/sh\necho hi\n",
                               "\x7f"
                               "ELF"}) {
    const std::string p = temp_file("bad", contents);
    ElfImage e(p);
    EXPECT_EQ(e.problem(), ElfImage::Problem::not_elf) << '"' << contents << '"';
    int calls = 0;
    e.for_each_symbol([&](const lt::elf::SymbolEntry&) { ++calls; });
    e.for_each_section([&](const lt::elf::SectionEntry&) { ++calls; });
    EXPECT_EQ(calls, 0);
    EXPECT_TRUE(e.loads().empty());
    std::remove(p.c_str());
  }
}

TEST(ElfImage, ReadsItsOwnExecutable) {
  const std::string exe = self_exe();
  ElfImage e(exe);
  ASSERT_TRUE(e.ok()) << exe;
  EXPECT_TRUE(e.is_elf64());
  EXPECT_TRUE(e.native_byte_order());
  ASSERT_FALSE(e.loads().empty());

  // The marker: a defined FUNC in .symtab, inside an executable PT_LOAD,
  // whose file bytes are the code this process runs.
  const lt::elf::SymbolEntry* marker = nullptr;
  lt::elf::SymbolEntry copy{};
  e.for_each_symbol([&](const lt::elf::SymbolEntry& s) {
    if (std::strcmp(s.name, "lt_elf_image_test_marker") == 0 && s.defined()) {
      copy = s;
      marker = &copy;
    }
  });
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(marker->type, STT_FUNC);
  EXPECT_GT(marker->size, 0u);
  auto off = e.file_offset(marker->value, /*executable_only=*/true);
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(e.file_offset(marker->value), off);

  std::string_view text;
  std::uint64_t text_addr = 0;
  e.for_each_section([&](const lt::elf::SectionEntry& s) {
    if (s.name == ".text") {
      text = s.bytes;
      text_addr = s.header.sh_addr;
    }
  });
  ASSERT_FALSE(text.empty());
  ASSERT_GE(marker->value, text_addr);
  ASSERT_LE(marker->value - text_addr + marker->size, text.size());
  const auto* code = reinterpret_cast<const unsigned char*>(&lt_elf_image_test_marker);
  EXPECT_EQ(std::memcmp(text.data() + (marker->value - text_addr), code, marker->size), 0);

  // The users of the reader see the same symbol.
  lt::proc::SymbolIndex index(exe);
  ASSERT_NE(index.function_at(*off), nullptr);
  EXPECT_STREQ(index.function_at(*off), "lt_elf_image_test_marker");
  EXPECT_STREQ(index.function_at(*off + marker->size - 1), "lt_elf_image_test_marker");
  // Its extent, for NATIVE_FUNC: one record names every address of it.
  std::uint64_t b = 0, en = 0;
  EXPECT_STREQ(index.function_at(*off + 1, b, en), "lt_elf_image_test_marker");
  EXPECT_EQ(b, *off);
  EXPECT_EQ(en, *off + marker->size);
  // A gap between functions (alignment padding): no name, and its extent
  // runs to the next function, every address of which has none either.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> funcs;
  e.for_each_symbol([&](const lt::elf::SymbolEntry& s) {
    if (s.defined() && s.size != 0 && s.type == STT_FUNC && *s.name) funcs.emplace_back(s.value, s.value + s.size);
  });
  std::sort(funcs.begin(), funcs.end());
  std::uint64_t reach = 0, gap = 0, next = 0;
  for (std::size_t i = 0; i + 1 < funcs.size() && !gap; ++i) {
    reach = std::max(reach, funcs[i].second);
    if (reach < funcs[i + 1].first && e.file_offset(reach, true) && e.file_offset(funcs[i + 1].first - 1, true))
      gap = reach, next = funcs[i + 1].first;
  }
  ASSERT_NE(gap, 0u) << "no padding between two functions of " << exe;
  const std::uint64_t goff = *e.file_offset(gap, true);
  EXPECT_EQ(index.function_at(goff, b, en), nullptr);
  EXPECT_LE(b, goff);
  EXPECT_EQ(en, goff + (next - gap));
  EXPECT_EQ(index.function_at(en - 1), nullptr);
  lt::elf::ElfFile file(exe);
  auto sym = file.symbol("lt_elf_image_test_marker");
  ASSERT_TRUE(sym.has_value());
  EXPECT_EQ(sym->value, marker->value);
  EXPECT_EQ(file.file_offset(marker->value), off);
  EXPECT_EQ(file.read(marker->value, marker->size), std::string(reinterpret_cast<const char*>(code), marker->size));
}

// A pointer in the file's data reads as its link-time target, however the
// loader placed the binary: what discovery needs of a process not yet
// relocated (probe_sites.h).
TEST(ElfFile, PointersReadAsTheLoaderRelocatesThem) {
  const lt::elf::ElfFile file(self_exe());
  const auto marker = file.symbol("lt_elf_image_test_marker");
  const auto table = file.symbol("lt_elf_file_test_pointers");
  ASSERT_TRUE(marker && table);
  const auto bias = reinterpret_cast<std::uintptr_t>(&lt_elf_image_test_marker) - marker->value;
  const auto string_at_link = reinterpret_cast<std::uintptr_t>(lt_elf_file_test_pointers[0]) - bias;
  EXPECT_EQ(file.pointer_at(table->value), string_at_link);
  EXPECT_EQ(file.string_at(string_at_link, 64), "lt-elf-file-test-string");
  EXPECT_EQ(file.string_at(string_at_link, 4), std::nullopt) << "not terminated within 4 bytes";
  EXPECT_EQ(file.pointer_at(table->value + 8), marker->value);
  // The same words through a whole segment's read.
  for (const auto& s : file.segments()) {
    if (table->value < s.vaddr || table->value >= s.vaddr + s.filesz) continue;
    const auto words = file.words_of(s);
    const std::uint64_t first = (s.vaddr + 7) & ~std::uint64_t{7};
    ASSERT_LT((table->value - first) / 8 + 1, words.size());
    EXPECT_EQ(words[(table->value - first) / 8], string_at_link);
    EXPECT_EQ(words[(table->value - first) / 8 + 1], marker->value);
  }
  std::uint64_t past = 0;
  for (const auto& s : file.segments()) past = std::max(past, s.vaddr + s.memsz);
  EXPECT_EQ(file.pointer_at(past + 4096), std::nullopt) << "outside the file image";
}

}  // namespace
