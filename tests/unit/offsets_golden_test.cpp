// Every value of every CPython offset row (user/python/offsets.cpp), compared
// with tests/unit/data/python_layouts.txt: a dump of the table taken before
// its rows got named fields, so the rewrite provably kept the data.  A row
// that changes on purpose changes the golden file in the same commit
// (LT_WRITE_GOLDEN=1 build/unit-tests --gtest_filter=PythonLayouts.* rewrites it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "user/python/offsets.h"

namespace {

std::string golden_path() {
  const char* root = std::getenv("LT_SRCDIR");
  std::string dir = root && *root ? std::string(root) + "/" : std::string();
  return dir + "tests/unit/data/python_layouts.txt";
}

// One line per field: "3.<minor> <name> <value>".
std::string dump(int minor, const lt::python::Layout& l) {
  std::ostringstream out;
  auto field = [&](const char* name, unsigned value) { out << "3." << minor << ' ' << name << ' ' << value << '\n'; };
  const auto& b = l.bpf;
#define LT_BPF(f) field("bpf." #f, b.f)
  LT_BPF(py_minor);
  LT_BPF(gen_frame);
  LT_BPF(gen_frame_embedded);
  LT_BPF(frame_code);
  LT_BPF(frame_lasti);
  LT_BPF(frame_localsplus);
  LT_BPF(code_argcount);
  LT_BPF(code_flags);
  LT_BPF(code_firstlineno);
  LT_BPF(code_filename);
  LT_BPF(code_name);
  LT_BPF(code_firsttraceable);
  LT_BPF(code_adaptive);
  LT_BPF(str_ascii_data);
  LT_BPF(eval_frame_arg);
  LT_BPF(frame_owner);
  LT_BPF(str_compact_data);
  LT_BPF(tstate_frame);
  LT_BPF(cframe_frame);
  LT_BPF(frame_previous);
  LT_BPF(frame_block);
  LT_BPF(owner_cstack);
  LT_BPF(stackref_tag_mask);
  LT_BPF(pad[0]);
  LT_BPF(pad[1]);
#undef LT_BPF
#define LT_FIELD(f) field(#f, l.f)
  LT_FIELD(frame_previous);
  LT_FIELD(frame_owner);
  LT_FIELD(tstate_frame);
  LT_FIELD(code_qualname);
  LT_FIELD(code_varnames);
  LT_FIELD(runtime_tss);
  LT_FIELD(runtime_interp_head);
  LT_FIELD(interp_threads_head);
  LT_FIELD(tstate_next);
  LT_FIELD(tstate_thread_id);
  LT_FIELD(tstate_native_thread_id);
  LT_FIELD(code_linetable);
  LT_FIELD(type_tp_name);
  LT_FIELD(type_tp_iternext);
  LT_FIELD(type_tp_methods);
  LT_FIELD(runtime_gil_tstate);
  LT_FIELD(interp_gil_holder);
  LT_FIELD(interp_gil_locked);
#undef LT_FIELD
  return out.str();
}

TEST(PythonLayouts, EveryRowMatchesTheGoldenDump) {
  std::string got;
  for (int minor = lt::python::kMinMinor; minor <= lt::python::kMaxMinor; ++minor) {
    auto l = lt::python::layout_for(minor);
    ASSERT_TRUE(l.has_value()) << "3." << minor;
    got += dump(minor, *l);
  }
  if (const char* w = std::getenv("LT_WRITE_GOLDEN"); w && *w == '1') {
    std::ofstream(golden_path()) << got;
    GTEST_SKIP() << "wrote " << golden_path();
  }
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << golden_path();
  std::stringstream want;
  want << in.rdbuf();
  // Line by line, so a failure names the field.
  std::istringstream g(got), w(want.str());
  std::string gl, wl;
  int line = 0;
  while (true) {
    bool more_g = static_cast<bool>(std::getline(g, gl));
    bool more_w = static_cast<bool>(std::getline(w, wl));
    ++line;
    if (!more_g && !more_w) break;
    ASSERT_EQ(more_g, more_w) << "line " << line << ": table and golden differ in length";
    EXPECT_EQ(gl, wl) << "line " << line;
  }
}

}  // namespace
