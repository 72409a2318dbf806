// What Dynamo keeps, read from outside (user/python/dynamo_state.cpp),
// against real interpreters 3.8-3.15: a stand-in `torch._dynamo.utils` in
// sys.modules holds what torch's does — `_compilation_metrics`, a
// deque(maxlen=64) of dataclass instances with ~100 fields (as torch
// 2.15's CompilationMetrics has: too many for a split dict), and
// `counters`, a defaultdict of Counters — and prints what it holds, so the
// expected values come from the interpreter.  70 compiles go in, so the
// deque has dropped its first 6 and its items start mid-block.
#include "user/python/dynamo_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/python_target.h"
#include "user/collector/dynamo_notes.h"

namespace {

constexpr const char* kScript = R"PY(
import sys, types, dataclasses, collections
fields = [("compile_id", object, None), ("co_name", object, None), ("co_filename", object, None),
          ("co_firstlineno", object, None), ("start_time_us", object, None), ("duration_us", object, None),
          ("num_graph_breaks", object, None), ("recompile_reason", object, None),
          ("fail_type", object, None), ("fail_reason", object, None)]
fields += [("extra_%d" % i, object, None) for i in range(90)]
CompilationMetrics = dataclasses.make_dataclass("CompilationMetrics", fields)
utils = types.ModuleType("torch._dynamo.utils")
utils._compilation_metrics = collections.deque(maxlen=64)
utils.counters = collections.defaultdict(collections.Counter)
sys.modules["torch._dynamo.utils"] = utils
for i in range(70):
    m = CompilationMetrics()
    m.compile_id = "%d/%d" % (i % 3, i // 3)
    m.co_name = "forward" if i % 2 else "torch_dynamo_resume_in_forward_at_38"
    m.co_filename = "/job/m\u00f6del.py"
    m.co_firstlineno = 31 + i
    m.start_time_us = 1796214809325742 + i * 1000003
    m.duration_us = i * 7919
    m.num_graph_breaks = i % 4
    if i >= 3:
        m.recompile_reason = "%d/%d: tensor 'x' size mismatch at index 0. expected %d, actual %d" % (i % 3, i // 3 - 1, 64 + i, 48)
    if i == 69:
        m.fail_type = "Unsupported"
        m.fail_reason = "a reason"
    utils._compilation_metrics.append(m)
utils.counters["graph_break"]["Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted"] += 7
utils.counters["graph_break"]["builtin: open \u2192 file"] += 2
utils.counters["stats"]["calls"] += 1
for m in utils._compilation_metrics:
    print("C\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s" % (m.compile_id, m.co_name, m.co_filename, m.co_firstlineno,
          m.start_time_us, m.duration_us, m.num_graph_breaks, m.recompile_reason or "",
          (m.fail_type + ": " + m.fail_reason) if m.fail_type else ""))
for k, v in utils.counters["graph_break"].items():
    print("B\t%s\t%d" % (k.replace("\n", "\\n"), v))
print("END", flush=True)
sys.stdin.read()
)PY";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (auto tab = s.find('\t'); tab != std::string::npos; tab = s.find('\t', at)) {
    out.push_back(s.substr(at, tab - at));
    at = tab + 1;
  }
  out.push_back(s.substr(at));
  return out;
}

std::string unescape_newlines(std::string s) {
  for (auto at = s.find("\\n"); at != std::string::npos; at = s.find("\\n", at)) s.replace(at, 2, "\n");
  return s;
}

class DynamoState : public ::testing::TestWithParam<int> {};

TEST_P(DynamoState, CompileLogAndGraphBreaksOfARealInterpreter) {
  const auto python = lt::testing::python_argv(GetParam());
  if (python.empty()) GTEST_SKIP() << "no CPython 3." << GetParam();
  std::vector<lt::python::DynamoCompile> want;
  std::vector<lt::python::DynamoGraphBreak> want_breaks;
  const pid_t pid = lt::testing::start_python(python, kScript, [&](const std::string& s) {
    auto f = split(s);
    if (f[0] == "C" && f.size() == 10)
      want.push_back(
          {f[1], f[2], f[3], std::stoll(f[4]), std::stoll(f[5]), std::stoll(f[6]), std::stoll(f[7]), f[8], f[9]});
    if (f[0] == "B" && f.size() == 3) want_breaks.push_back({unescape_newlines(f[1]), std::stoll(f[2])});
    return s != "END";
  });
  ASSERT_GT(pid, 0);
  auto interp = lt::python::discover(pid);
  lt::python::DynamoStateReader reader;
  auto got = reader.read(interp);
  auto again = reader.read(interp);  // from the cached module dict
  lt::python::DynamoStateReader::Newest newest;
  auto all = reader.read(interp, &newest);
  auto none_new = reader.read(interp, &newest);  // nothing after the newest
  auto stale = newest;
  stale.start_wall_us += 1;  // the address now holds another compile: read them all
  auto all_again = reader.read(interp, &stale);
  // The notes: each compile once, each graph break again only when its count grew.
  std::vector<lt::lt_compile_note_event> notes;
  lt::DynamoNotes dn([&](const void* r, std::size_t n) {
    ASSERT_EQ(n, sizeof(lt::lt_compile_note_event));
    notes.push_back(*static_cast<const lt::lt_compile_note_event*>(r));
  });
  dn.read(interp, 1);
  const std::size_t first = notes.size();
  dn.read(interp, 2);
  lt::testing::stop_python(pid);

  ASSERT_EQ(want.size(), 64u);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->compiles.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto &g = got->compiles[i], &w = want[i];
    EXPECT_EQ(g.compile_id, w.compile_id) << i;
    EXPECT_EQ(g.function, w.function) << i;
    EXPECT_EQ(g.file, w.file) << i;
    EXPECT_EQ(g.first_line, w.first_line) << i;
    EXPECT_EQ(g.start_wall_us, w.start_wall_us) << i;
    EXPECT_EQ(g.duration_us, w.duration_us) << i;
    EXPECT_EQ(g.graph_breaks, w.graph_breaks) << i;
    EXPECT_EQ(g.recompile_reason, w.recompile_reason) << i;
    EXPECT_EQ(g.failure, w.failure) << i;
  }
  ASSERT_EQ(got->graph_breaks.size(), want_breaks.size());
  for (std::size_t i = 0; i < want_breaks.size(); ++i) {
    EXPECT_EQ(got->graph_breaks[i].reason, want_breaks[i].reason);
    EXPECT_EQ(got->graph_breaks[i].count, want_breaks[i].count);
  }
  ASSERT_TRUE(again && all && none_new);
  EXPECT_EQ(again->compiles.size(), want.size());
  EXPECT_EQ(all->compiles.size(), want.size());
  EXPECT_NE(newest.addr, 0u);
  EXPECT_EQ(newest.id, want.back().compile_id);
  EXPECT_TRUE(none_new->compiles.empty());
  ASSERT_TRUE(all_again);
  EXPECT_EQ(all_again->compiles.size(), want.size());
  EXPECT_EQ(none_new->graph_breaks.size(), want_breaks.size());
  EXPECT_EQ(first, want.size() + want_breaks.size());
  ASSERT_EQ(notes.size(), first);  // nothing twice
  EXPECT_EQ(notes.back().what, LT_COMPILE_NOTE_GRAPH_BREAK);
  EXPECT_EQ(std::string(notes[0].compile_id), want[0].compile_id);
}

INSTANTIATE_TEST_SUITE_P(CPython, DynamoState, ::testing::Range(8, 16));

// No torch._dynamo.utils in sys.modules: nothing, and no error.
TEST(DynamoState, NotLoadedReadsNothing) {
  const auto python = lt::testing::python_argv(11);
  if (python.empty()) GTEST_SKIP() << "no CPython 3.11";
  const pid_t pid = lt::testing::start_python(python, "import sys\nprint('END', flush=True)\nsys.stdin.read()\n",
                                              [](const std::string& s) { return s != "END"; });
  auto interp = lt::python::discover(pid);
  lt::python::DynamoStateReader reader;
  auto got = reader.read(interp);
  lt::testing::stop_python(pid);
  EXPECT_FALSE(got);
}

}  // namespace
