// The nn.Module tree read from outside (user/python/module_tree.cpp) against
// real interpreters: each pyenv CPython 3.8-3.13, and sid's 3.14/3.15 in
// the container root tests/roots/build.sh makes, runs a small stand-in for
// torch.nn.Module (attributes set the way nn.Module sets them, `_modules`
// a plain dict) and we read its named_modules() with process_vm_readv.
// The stand-in prints what named_modules() itself says, so the expected
// list comes from the interpreter, not from this file.
#include "user/python/module_tree.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "tests/unit/python_target.h"
#include "user/collector/module_namer.h"
#include "user/python/discovery.h"

namespace {

// Lines: "ROOT <id>", then "MOD <name>\t<type>" per named_modules() entry.
// `vars(head)` materializes one instance's __dict__ (the dict path on
// 3.11+); the others keep their attributes in split values.
constexpr const char* kScript = R"PY(
import sys
class Module:
    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
    def add(self, name, m):
        self._modules[name] = m
        return m
    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if self not in memo:
            memo.add(self)
            yield prefix, self
            for name, m in self._modules.items():
                if m is None:
                    continue
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)
class LightningModule(Module): pass
class Linear(Module): pass
Linear.__module__ = "torch.nn.modules.linear"
class Block(Module): pass
class Net(LightningModule):
    def wait(self):
        sys.stdin.read()
net = Net()
block = net.add("block", Block())
block.add("act", Linear())
seq = block.add("seq", Module())
for i in range(3):
    seq.add(str(i), Linear())
head = net.add("head", Linear())
vars(head)
net.add("alias", head)
net.add("nothing", None)
net.add("bl\u00f6ck", Block()).add("inner", head)
print("ROOT", id(net))
for name, m in net.named_modules():
    t = type(m)
    print("MOD %s\t%s.%s" % (name, t.__module__, t.__name__))
print("BLOCK", id(block))
print("END", flush=True)
net.wait()
)PY";

struct Target {
  pid_t pid = -1;
  std::uint64_t root = 0;
  std::uint64_t block = 0;
  std::vector<lt::python::ModuleEntry> expected;
};

Target start(const std::vector<std::string>& python) {
  Target t;
  t.pid = lt::testing::start_python(python, kScript, [&](const std::string& s) {
    if (s.rfind("ROOT ", 0) == 0) t.root = std::stoull(s.substr(5));
    if (s.rfind("BLOCK ", 0) == 0) t.block = std::stoull(s.substr(6));
    if (s.rfind("MOD ", 0) == 0) {
      auto tab = s.find('\t');
      t.expected.push_back({0, s.substr(4, tab - 4), s.substr(tab + 1)});
    }
    return s != "END";
  });
  return t;
}

void stop(const Target& t) {
  lt::testing::stop_python(t.pid);
}

using lt::testing::python_argv;

class ModuleTree : public ::testing::TestWithParam<int> {};

TEST_P(ModuleTree, NamedModulesOfARealInterpreter) {
  const int minor = GetParam();
  const auto python = python_argv(minor);
  if (python.empty()) GTEST_SKIP() << "no CPython 3." << minor;
  auto layout = lt::python::layout_for(minor);
  ASSERT_TRUE(layout);
  Target t = start(python);
  ASSERT_NE(t.root, 0u);
  ASSERT_EQ(t.expected.size(), 9u);  // the script's own named_modules(): alias and None not repeated
  auto tree = lt::python::read_module_tree(t.pid, t.root, *layout);
  const bool lightning = lt::python::derives_from(t.pid, t.root, "LightningModule", *layout);
  const bool not_lightning =
      tree.size() > 1 && lt::python::derives_from(t.pid, tree[1].addr, "LightningModule", *layout);
  // `object` is the MRO's last item: found only when the tuple's items
  // are read from where this version keeps them.
  const bool object_last = lt::python::derives_from(t.pid, t.root, "object", *layout);
  stop(t);
  ASSERT_EQ(tree.size(), t.expected.size());
  for (std::size_t i = 0; i < tree.size(); ++i) {
    EXPECT_EQ(tree[i].name, t.expected[i].name) << i;
    EXPECT_EQ(tree[i].type, t.expected[i].type) << i;
  }
  EXPECT_EQ(tree[0].addr, t.root);
  EXPECT_TRUE(lightning);
  EXPECT_FALSE(not_lightning);
  EXPECT_TRUE(object_last);
}

INSTANTIATE_TEST_SUITE_P(CPython, ModuleTree, ::testing::Range(8, 16));

// --module-names' MODULE_NAME records: a call of a submodule (not a
// LightningModule) finds the root as the `self` of a frame on the target's
// stack, names the whole tree once, and a second call reads nothing.
class ModuleNamer : public ::testing::TestWithParam<int> {};

TEST_P(ModuleNamer, RootFromAFrameSelfWholeTreeOnce) {
  const auto python = python_argv(GetParam());
  if (python.empty()) GTEST_SKIP() << "no CPython 3." << GetParam();
  Target t = start(python);
  ASSERT_NE(t.block, 0u);
  usleep(200 * 1000);  // into Net.wait
  std::vector<lt::lt_module_name_event> got;
  lt::ModuleNamer namer([&](const void* r, std::size_t n) {
    ASSERT_EQ(n, sizeof(lt::lt_module_name_event));
    got.push_back(*static_cast<const lt::lt_module_name_event*>(r));
  });
  auto interp = lt::python::discover(t.pid);
  namer.describe(interp, t.block, 1);
  const std::size_t first = got.size();
  const std::size_t reads_first = namer.tree_reads();
  namer.describe(interp, t.block, 2);  // known: no read
  const std::size_t reads_known = namer.tree_reads();
  namer.describe(interp, 0x12345678, 100'000'000);  // not a module of the tree: one re-read,
  const std::size_t reads_unknown = namer.tree_reads();
  namer.describe(interp, 0x12345678, 200'000'000);  // then given up: none
  stop(t);
  EXPECT_EQ(reads_first, 1u);
  EXPECT_EQ(reads_known, 1u);
  EXPECT_EQ(reads_unknown, 2u);
  EXPECT_EQ(namer.tree_reads(), 2u);
  ASSERT_EQ(first, t.expected.size());
  EXPECT_EQ(got.size(), first);  // nothing named twice
  for (std::size_t i = 0; i < first; ++i) {
    EXPECT_EQ(std::string(got[i].name), t.expected[i].name) << i;
    EXPECT_EQ(got[i].hdr.kind, lt::LT_EV_MODULE_NAME);
    EXPECT_EQ(got[i].flags, 0u);
  }
  EXPECT_EQ(got[0].module, t.root);
  EXPECT_EQ(std::string(got[1].type), "__main__.Block");
}

INSTANTIATE_TEST_SUITE_P(CPython, ModuleNamer, ::testing::Range(8, 16));

// The eval loop's entry, when found only for module calls, does not make
// generator resumes come from it (builtin_next / gen_throw take them).
TEST(ModuleSites, ModulesOnlyEvalSiteIsNotTheResumePath) {
  lt::python::Interpreter interp;
  interp.sites = {{"builtin_next", 1}, {"gen_throw", 2}, {"_PyEval_EvalFrameDefault", 3}};
  EXPECT_TRUE(interp.gen_via_eval());
  interp.sites.back().modules_only = true;
  EXPECT_FALSE(interp.gen_via_eval());
}

TEST(ModuleTree, UnknownVersionReadsNothing) {
  lt::python::Layout layout{};  // no instance-dict row
  ASSERT_EQ(layout.inst_dict, lt::python::Layout::InstDict::none);
  EXPECT_TRUE(lt::python::read_module_tree(getpid(), 0x1000, layout).empty());
}

}  // namespace
