// lt::load_op_catalog(): the Itanium parser and the schema resolver by hand,
// then a small ELF built here (so these run without torch installed), hostile
// files that must fail cleanly, and finally the real libtorch_cpu.so builds
// when they are installed (PyPI torch in .venv, Debian's torch 1.13).
#include "user/torch/op_catalog.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "user/core/errors.h"

using lt::OpCatalog;
using lt::OpSymbol;
using lt::op_catalog_detail::op_call_struct;
using lt::op_catalog_detail::SchemaResolver;

namespace {

using Name = SchemaResolver::Name;
using namespace std::string_view_literals;

// --- Itanium names -----------------------------------------------------------

TEST(OpCallStruct, AcceptsOnlyAtOpsStructCall) {
  EXPECT_EQ(op_call_struct("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE"), "add_Tensor");
  EXPECT_EQ(op_call_struct("_ZN2at4_ops2mm4callERKNS_6TensorES4_"), "mm");
  EXPECT_EQ(op_call_struct("_ZN2at4_ops20_foreach_add__Scalar4callEN3c108ArrayRefINS_6TensorEEERKNS2_6ScalarE"),
            "_foreach_add__Scalar");
  EXPECT_EQ(op_call_struct("_ZN2at4_ops3dim4callEv"), "dim");
  EXPECT_EQ(op_call_struct("_ZN2at4_ops3dim4callE"), "dim");  // no parameter list: still the nested name

  EXPECT_FALSE(op_call_struct("_ZN2at4_ops3add10redispatchEN3c1014DispatchKeySetE"));
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops3add4call"));                          // no E
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops3add4callB5cxx11Ev"));                 // abi tag: not our function
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops3add4call4moreEv"));                   // deeper nesting
  EXPECT_FALSE(op_call_struct("_ZNK2at4_ops3add4callEv"));                       // const member function
  EXPECT_FALSE(op_call_struct("_ZN2at5_opsx3add4callEv"));                       // namespace _opsx
  EXPECT_FALSE(op_call_struct("_ZN3c104_ops3add4callEv"));                       // c10, not at
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops4callEv"));                            // at::_ops::call
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops03add4callEv"));                       // leading zero
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops99add4callEv"));                       // length past the end
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops99999999999999999999999add4callEv"));  // overflowing length
  EXPECT_FALSE(op_call_struct("_ZN2at4_ops4ad.d4callEv"));                       // not an identifier
  EXPECT_FALSE(op_call_struct("_ZZN2at4_ops3add4callEvE1x"));                    // a local static inside call
  EXPECT_FALSE(op_call_struct(""));
  EXPECT_FALSE(op_call_struct("_ZN"));
}

// --- schema strings ----------------------------------------------------------

std::string nul_joined(const std::vector<std::string>& strings) {
  std::string out(1, '\0');
  for (auto& s : strings) out += s + '\0';
  return out;
}

TEST(SchemaResolver, WholeStrings) {
  SchemaResolver r({"add_Tensor", "relu", "native_layer_norm", "__and___Tensor", "_foreach_add__Scalar", "absent"});
  r.scan(nul_joined({
      "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
      "relu(Tensor self) -> Tensor",
      "native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> "
      "(Tensor, Tensor, Tensor)",
      "__and__.Tensor(Tensor self, Tensor other) -> Tensor",
      "_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()",
      "not a schema (at all) -> really",
      "also.not.one(x) -> y",
  }));
  EXPECT_EQ(r.schemas_found(), 5u);
  EXPECT_EQ(r.resolve("add_Tensor"), (Name{"add", "Tensor"}));
  EXPECT_EQ(r.resolve("relu"), (Name{"relu", ""}));
  EXPECT_EQ(r.resolve("native_layer_norm"), (Name{"native_layer_norm", ""}));
  EXPECT_EQ(r.resolve("__and___Tensor"), (Name{"__and__", "Tensor"}));
  EXPECT_EQ(r.resolve("_foreach_add__Scalar"), (Name{"_foreach_add_", "Scalar"}));
  EXPECT_FALSE(r.resolve("absent"));
  EXPECT_FALSE(r.resolve("never_asked_for"));
}

// The linker keeps "cos(...)" only as the tail of "acos(...)" when the rest is
// identical, so no string starts with it.
TEST(SchemaResolver, TailMergedStrings) {
  SchemaResolver r({"cos", "dim", "add_out", "relu"});
  r.scan(nul_joined({"acos(Tensor self) -> Tensor", "sparse_dim(Tensor self) -> int",
                     "_foreach_add.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
                     "Expected relu(Tensor self) -> Tensor here"}));
  EXPECT_EQ(r.schemas_found(), 3u);  // the prose one does not start with a schema
  EXPECT_EQ(r.resolve("cos"), (Name{"cos", ""}));
  EXPECT_EQ(r.resolve("dim"), (Name{"dim", ""}));
  EXPECT_EQ(r.resolve("add_out"), (Name{"add", "out"}));
  EXPECT_EQ(r.resolve("relu"), (Name{"relu", ""}));
}

TEST(SchemaResolver, StringsAcrossBlocksAndEdges) {
  SchemaResolver r({"mm", "abs", "neg"});
  // No NUL before the first string or after the last one: the block edges
  // bound them instead.
  r.scan("mm(Tensor self, Tensor mat2) -> Tensor");
  r.scan("junk\0abs(Tensor self) -> Tensor"sv);
  r.scan(") -> ");  // nothing before the arrow
  r.scan("");
  EXPECT_EQ(r.resolve("mm"), (Name{"mm", ""}));
  EXPECT_EQ(r.resolve("abs"), (Name{"abs", ""}));
  EXPECT_FALSE(r.resolve("neg"));
}

TEST(SchemaResolver, WholeStringBeatsTail) {
  SchemaResolver r({"foo_out"});
  r.scan(nul_joined({"_foo_out(Tensor self) -> Tensor", "foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"}));
  EXPECT_EQ(r.resolve("foo_out"), (Name{"foo", "out"}));
}

TEST(SchemaResolver, DisagreeingTailsNeedTheAtenName) {
  const std::string schemas = nul_joined({"_foo_out(Tensor self) -> Tensor", "xfoo.out(Tensor self) -> Tensor"});
  {
    SchemaResolver r({"foo_out"});
    r.scan(schemas);
    EXPECT_FALSE(r.resolve("foo_out"));  // ("foo","out") or ("foo_out",""): cannot tell
  }
  {
    SchemaResolver r({"foo_out"});
    r.scan(schemas + nul_joined({"aten::foo", "aten::xfoo"}));
    EXPECT_EQ(r.resolve("foo_out"), (Name{"foo", "out"}));
  }
  {
    SchemaResolver r({"foo_out"});
    r.scan(schemas + nul_joined({"aten::foo", "aten::foo_out"}));
    EXPECT_FALSE(r.resolve("foo_out"));  // both names exist: still ambiguous
  }
}

// --- a synthetic ELF ---------------------------------------------------------

struct SynthSym {
  std::string name;
  std::uint64_t value;
  std::uint16_t shndx;
  unsigned char type;
};

template <class T>
void put(std::string& blob, std::size_t off, const T& v) {
  if (blob.size() < off + sizeof v) blob.resize(off + sizeof v);
  std::memcpy(blob.data() + off, &v, sizeof v);
}

constexpr std::uint64_t kTextOff = 0x1000, kTextAddr = 0x401000, kTextSize = 0x100;
constexpr std::uint64_t kRoOff = 0x2000, kRoAddr = 0x402000;

// ET_DYN with one executable PT_LOAD whose vaddr differs from its offset (as
// in lld output), one read-only PT_LOAD, and the sections the catalog reads:
// .text, .rodata, .dynsym, .dynstr, .shstrtab.
std::string build_elf(const std::vector<SynthSym>& syms, const std::string& rodata) {
  std::string blob;
  std::string dynstr(1, '\0');
  std::string dynsym(sizeof(Elf64_Sym), '\0');
  for (auto& s : syms) {
    Elf64_Sym e{};
    e.st_name = static_cast<Elf64_Word>(dynstr.size());
    e.st_info = ELF64_ST_INFO(STB_GLOBAL, s.type);
    e.st_shndx = s.shndx;
    e.st_value = s.value;
    e.st_size = 16;
    dynstr += s.name + '\0';
    dynsym.append(reinterpret_cast<const char*>(&e), sizeof e);
  }
  const std::string shstr = std::string("\0.text\0.rodata\0.dynsym\0.dynstr\0.shstrtab\0", 42);
  auto align8 = [](std::uint64_t x) { return (x + 7) & ~std::uint64_t{7}; };
  const std::uint64_t sym_off = align8(kRoOff + rodata.size());
  const std::uint64_t str_off = sym_off + dynsym.size();
  const std::uint64_t shstr_off = str_off + dynstr.size();
  const std::uint64_t sh_off = align8(shstr_off + shstr.size());

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_shoff = sh_off;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 6;
  eh.e_shstrndx = 5;
  put(blob, 0, eh);

  Elf64_Phdr text{};
  text.p_type = PT_LOAD;
  text.p_flags = PF_R | PF_X;
  text.p_offset = kTextOff;
  text.p_vaddr = text.p_paddr = kTextAddr;
  text.p_filesz = text.p_memsz = kTextSize;
  put(blob, eh.e_phoff, text);
  Elf64_Phdr ro{};
  ro.p_type = PT_LOAD;
  ro.p_flags = PF_R;
  ro.p_offset = kRoOff;
  ro.p_vaddr = ro.p_paddr = kRoAddr;
  ro.p_filesz = ro.p_memsz = shstr_off - kRoOff;
  put(blob, eh.e_phoff + sizeof(Elf64_Phdr), ro);

  blob.resize(kTextOff, '\0');
  blob.append(kTextSize, '\xcc');
  blob.resize(kRoOff, '\0');
  blob += rodata;
  blob.resize(sym_off, '\0');
  blob += dynsym + dynstr + shstr;
  blob.resize(sh_off, '\0');

  auto section = [&](std::size_t i, Elf64_Word name, Elf64_Word type, std::uint64_t flags, std::uint64_t off,
                     std::uint64_t size, std::uint64_t addr, Elf64_Word link, std::uint64_t entsize) {
    Elf64_Shdr sh{};
    sh.sh_name = name;
    sh.sh_type = type;
    sh.sh_flags = flags;
    sh.sh_addr = addr;
    sh.sh_offset = off;
    sh.sh_size = size;
    sh.sh_link = link;
    sh.sh_entsize = entsize;
    put(blob, sh_off + i * sizeof(Elf64_Shdr), sh);
  };
  section(0, 0, SHT_NULL, 0, 0, 0, 0, 0, 0);
  section(1, 1, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, kTextOff, kTextSize, kTextAddr, 0, 0);
  section(2, 7, SHT_PROGBITS, SHF_ALLOC, kRoOff, rodata.size(), kRoAddr, 0, 0);
  section(3, 15, SHT_DYNSYM, SHF_ALLOC, sym_off, dynsym.size(), kRoAddr + (sym_off - kRoOff), 4, sizeof(Elf64_Sym));
  section(4, 23, SHT_STRTAB, SHF_ALLOC, str_off, dynstr.size(), kRoAddr + (str_off - kRoOff), 0, 0);
  section(5, 31, SHT_STRTAB, 0, shstr_off, shstr.size(), 0, 0, 0);
  return blob;
}

std::string synthetic_elf() {
  return build_elf(
      {
          {"_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE", kTextAddr + 0x10, 1, STT_FUNC},
          {"_ZN2at4_ops3cos4callERKNS_6TensorE", kTextAddr + 0x20, 1, STT_FUNC},
          {"_ZN2at4_ops3add10redispatchEN3c1014DispatchKeySetE", kTextAddr + 0x30, 1, STT_FUNC},
          {"_ZN2at4_ops7mystery4callEv", kTextAddr + 0x40, 1, STT_FUNC},
          {"_ZN2at4_ops2mm4callERKNS_6TensorES4_", 0, SHN_UNDEF, STT_FUNC},            // imported
          {"_ZN2at4_ops3neg4callERKNS_6TensorE", kRoAddr, 2, STT_OBJECT},              // not a function
          {"_ZN2at4_ops3abs4callERKNS_6TensorE", kTextAddr + kTextSize, 1, STT_FUNC},  // past the segment
          {"_ZN2at4_ops3foo4callEv", 0, 1, STT_FUNC},                                  // value 0
      },
      nul_joined({"add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", "acos(Tensor self) -> Tensor",
                  "aten::add"}));
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    static int n = 0;
    path_ = testing::TempDir() + "op_catalog_test_" + std::to_string(getpid()) + "_" + std::to_string(n++);
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const OpSymbol* find_op(const OpCatalog& c, const std::string& struct_name) {
  auto it = std::lower_bound(c.ops.begin(), c.ops.end(), struct_name,
                             [](const OpSymbol& o, const std::string& s) { return o.struct_name < s; });
  return it != c.ops.end() && it->struct_name == struct_name ? &*it : nullptr;
}

TEST(LoadOpCatalog, SyntheticElf) {
  TempFile f(synthetic_elf());
  const OpCatalog c = lt::load_op_catalog(f.path());
  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].struct_name, "add_Tensor");  // sorted by struct name
  EXPECT_EQ(c.ops[0].name, "aten::add");
  EXPECT_EQ(c.ops[0].overload, "Tensor");
  EXPECT_EQ(c.ops[0].file_offset, kTextOff + 0x10);  // vaddr 0x401010 -> offset 0x1010
  EXPECT_EQ(c.ops[1].struct_name, "cos");
  EXPECT_EQ(c.ops[1].name, "aten::cos");  // from the tail of "acos(...)"
  EXPECT_EQ(c.ops[1].overload, "");
  EXPECT_EQ(c.ops[1].file_offset, kTextOff + 0x20);
  EXPECT_EQ(c.ops[2].struct_name, "mystery");
  EXPECT_EQ(c.ops[2].name, "aten::mystery");  // fallback
  EXPECT_EQ(c.ops[2].overload, "");
  EXPECT_EQ(c.schemas_found, 2u);
  EXPECT_EQ(c.unresolved, 1u);
  EXPECT_EQ(c.skipped, 1u);  // abs, past the executable segment
}

TEST(LoadOpCatalog, ElfWithoutOpsIsEmpty) {
  TempFile f(build_elf({{"_Z3foov", kTextAddr, 1, STT_FUNC}}, nul_joined({"mm(Tensor self) -> Tensor"})));
  const OpCatalog c = lt::load_op_catalog(f.path());
  EXPECT_TRUE(c.ops.empty());
  EXPECT_EQ(c.unresolved, 0u);
}

void expect_error(const std::string& path, lt::ExitCode code) {
  try {
    lt::load_op_catalog(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(LoadOpCatalog, UnreadableAndNonElfFilesThrow) {
  expect_error(testing::TempDir() + "op_catalog_test_no_such_file", lt::ExitCode::io);
  expect_error(testing::TempDir(), lt::ExitCode::io);  // a directory
  {
    TempFile f("");
    expect_error(f.path(), lt::ExitCode::unsupported);
  }
  {
    TempFile f("#!/bin/sh\necho not an ELF file\n");
    expect_error(f.path(), lt::ExitCode::unsupported);
  }
  {
    std::string elf32 = synthetic_elf();
    elf32[EI_CLASS] = ELFCLASS32;
    TempFile f(elf32);
    expect_error(f.path(), lt::ExitCode::unsupported);
  }
  {
    std::string big_endian = synthetic_elf();
    big_endian[EI_DATA] = ELFDATA2MSB;
    TempFile f(big_endian);
    expect_error(f.path(), lt::ExitCode::unsupported);
  }
}

// Truncated and corrupted files: an lt::Error or some catalog, never a crash
// (ASan runs this too).
TEST(LoadOpCatalog, HostileFilesDoNotCrash) {
  const std::string good = synthetic_elf();
  for (std::size_t len = 0; len < good.size(); len += 7) {
    TempFile f(good.substr(0, len));
    try {
      lt::load_op_catalog(f.path());
    } catch (const lt::Error&) {
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    for (int j = 0; j < 8; ++j) {
      // Mostly the headers and tables, where a flipped byte moves offsets.
      const std::size_t at = rng() % 2 ? rng() % 0x100 : kRoOff + rng() % (bad.size() - kRoOff);
      bad[at] = static_cast<char>(rng());
    }
    TempFile f(bad);
    try {
      const OpCatalog c = lt::load_op_catalog(f.path());
      EXPECT_LE(c.ops.size(), 8u);
    } catch (const lt::Error&) {
    }
  }
}

// --- the real libraries ------------------------------------------------------

struct ExecRange {
  std::uint64_t begin, end;
};

// The executable PT_LOADs' file ranges, read independently of the code under test.
std::vector<ExecRange> exec_file_ranges(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  in.read(reinterpret_cast<char*>(&eh), sizeof eh);
  std::vector<ExecRange> out;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * sizeof ph));
    in.read(reinterpret_cast<char*>(&ph), sizeof ph);
    if (in && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) out.push_back({ph.p_offset, ph.p_offset + ph.p_filesz});
  }
  return out;
}

std::string source_dir() {
  const char* root = std::getenv("LT_SRCDIR");
  return root && *root ? std::string(root) + "/" : std::string();
}

class RealLibrary : public testing::TestWithParam<std::string> {};

TEST_P(RealLibrary, FindsAndNamesEveryOp) {
  std::string path = GetParam();
  if (path.front() != '/') path = source_dir() + path;
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is not installed: run `make deps`";

  const OpCatalog c = lt::load_op_catalog(path);
  EXPECT_GT(c.ops.size(), 2500u);  // 3110 in torch 2.15, 2952 in 1.13
  EXPECT_GT(c.schemas_found, 2500u);
  EXPECT_EQ(c.unresolved, 0u);
  EXPECT_EQ(c.skipped, 0u);

  auto expect_op = [&](const std::string& st, const std::string& name, const std::string& overload) {
    const OpSymbol* op = find_op(c, st);
    ASSERT_NE(op, nullptr) << st;
    EXPECT_EQ(op->name, name) << st;
    EXPECT_EQ(op->overload, overload) << st;
  };
  expect_op("add_Tensor", "aten::add", "Tensor");
  expect_op("add_out", "aten::add", "out");
  expect_op("mm", "aten::mm", "");
  expect_op("addmm", "aten::addmm", "");  // stored only as the tail of "_sparse_addmm(...)"
  expect_op("__and___Tensor", "aten::__and__", "Tensor");
  expect_op("native_layer_norm", "aten::native_layer_norm", "");
  expect_op("cos", "aten::cos", "");  // stored only inside "acos(Tensor self) -> Tensor"
  expect_op("relu_", "aten::relu_", "");
  if (find_op(c, "_foreach_add__Scalar")) expect_op("_foreach_add__Scalar", "aten::_foreach_add_", "Scalar");

  const auto ranges = exec_file_ranges(path);
  ASSERT_FALSE(ranges.empty());
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    const OpSymbol& op = c.ops[i];
    if (i > 0) {
      EXPECT_LT(c.ops[i - 1].struct_name, op.struct_name);
    }
    ASSERT_TRUE(op.name.starts_with("aten::")) << op.name;
    // torchgen's struct name is name + "_" + overload.
    EXPECT_EQ(op.struct_name, op.name.substr(6) + (op.overload.empty() ? "" : "_" + op.overload));
    EXPECT_TRUE(std::any_of(ranges.begin(), ranges.end(),
                            [&](const ExecRange& r) { return op.file_offset >= r.begin && op.file_offset < r.end; }))
        << op.struct_name << " at 0x" << std::hex << op.file_offset;
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, RealLibrary,
                         testing::Values(".venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                                         // torch 1.13.1 (make deps: .venv-torch113)
                                         ".venv-torch113/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           return p.param.find("torch113") != std::string::npos ? std::string("PyPI_1_13")
                                                                                : std::string("PyPI");
                         });

}  // namespace
