#include "user/cli/options.h"

#include <gtest/gtest.h>

#include <vector>

#include "user/core/errors.h"
#include "user/python/offsets.h"

namespace {
lt::Options parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "ltrace-bpf";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return lt::parse_options(static_cast<int>(argv.size()), argv.data());
}
lt::ExitCode code_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const lt::Error& e) {
    return e.code();
  }
  return lt::ExitCode::ok;
}
}  // namespace

TEST(Options, Parses) {
  auto o = parse({"--pid", "12", "-p", "13", "--children", "--duration=2.5", "--no-extended", "--dirpath", "d",
                  "--filename", "f"});
  EXPECT_EQ(o.pids, (std::vector<pid_t>{12, 13}));
  EXPECT_TRUE(o.children);
  EXPECT_DOUBLE_EQ(o.duration_s, 2.5);
  EXPECT_FALSE(o.extended);
  EXPECT_EQ(o.dirpath, "d");
}

TEST(Options, Errors) {
  EXPECT_EQ(code_of({"--what"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1x"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "0"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1", "--duration", "-1"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1", "--duration", "nan"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--help"}), lt::ExitCode::ok);
}

TEST(Offsets, TableCoversSupportedVersionsOnly) {
  for (int m = lt::python::kMinMinor; m <= lt::python::kMaxMinor; ++m) {
    auto l = lt::python::layout_for(m);
    ASSERT_TRUE(l.has_value()) << m;
    EXPECT_EQ(l->bpf.py_minor, m);
    EXPECT_EQ(l->bpf.gen_frame_embedded, m >= 11 ? 1 : 0);  // gi_iframe is inline from 3.11
  }
  EXPECT_FALSE(lt::python::layout_for(7).has_value());
  EXPECT_FALSE(lt::python::layout_for(14).has_value());
  // python-unwinding.md §2: 3.13 reads tstate->current_frame directly
  EXPECT_EQ(lt::python::layout_for(13)->tstate_frame, 72u);
  EXPECT_EQ(lt::python::layout_for(12)->bpf.str_ascii_data, 40);
}
