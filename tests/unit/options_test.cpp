#include "user/cli/options.h"

#include <gtest/gtest.h>

#include <vector>

#include "user/cli/builtin.h"
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
  EXPECT_EQ(code_of({"--help"}), lt::ExitCode::ok);
}

// Values that once went through: an overflowing time (a double past 2^64 ns
// cast to an integer), a trigger list naming nothing, 'none' beside a
// trigger; and a floor of 0, once refused.
TEST(Options, WatchValuesAreBoundedAndNamed) {
  const std::vector<std::string> w = {"watch", "--pid", "1"};
  auto with = [&w](std::vector<std::string> more) {
    auto a = w;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  EXPECT_EQ(code_of(with({"--keep", "1e300h"})), lt::ExitCode::usage);
  EXPECT_EQ(code_of(with({"--capture-before", "1e12"})), lt::ExitCode::usage);
  EXPECT_EQ(code_of(with({"--keep", "8785h"})), lt::ExitCode::usage);  // past a year
  EXPECT_EQ(code_of(with({"--keep", "8784h"})), lt::ExitCode::ok);
  EXPECT_EQ(code_of(with({"--keep", "2h"})), lt::ExitCode::ok);
  EXPECT_EQ(code_of(with({"--triggers", ","})), lt::ExitCode::usage);
  EXPECT_EQ(code_of(with({"--triggers", "none,stall"})), lt::ExitCode::usage);
  EXPECT_EQ(code_of(with({"--triggers", "none"})), lt::ExitCode::ok);
  EXPECT_EQ(code_of(with({"--slow-floor", "0"})), lt::ExitCode::ok);
  EXPECT_EQ(code_of(with({"--slow-floor", "-1"})), lt::ExitCode::usage);
  EXPECT_EQ(code_of(with({"--memory-growth", "0"})), lt::ExitCode::usage);
  try {
    parse(with({"--slow-step", "abc"}));
    ADD_FAILURE() << "--slow-step abc parsed";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--slow-step"), std::string::npos) << e.what();
  }
  for (const char* bad : {"13/12", "0/4", "4", "4/200", "a/b"})
    EXPECT_EQ(code_of(with({"--straggler-rule", bad})), lt::ExitCode::usage) << bad;
  EXPECT_EQ(code_of(with({"--stall-factor", "0.5"})), lt::ExitCode::usage);
  const auto o = parse(with({"--straggler-rule", "6/8", "--straggler-wait", "0.02", "--stall-factor", "20"}));
  const lt::StragglerOptions rule = lt::straggler_options(o);
  EXPECT_EQ(rule.window, 8u);
  EXPECT_EQ(rule.min_last, 6u);
  EXPECT_DOUBLE_EQ(rule.share * rule.window, 6.0);
  EXPECT_EQ(rule.min_gap_ns, 20'000'000);
  EXPECT_DOUBLE_EQ(o.stall_factor, 20);
  EXPECT_EQ(code_of({"diff", "a", "b", "--fail-if-slower", "-2"}), lt::ExitCode::usage);
  EXPECT_EQ(parse({"diff", "a", "b", "--fail-if-slower", "0", "--any-job"}).fail_if_slower_pct, 0);
}

TEST(Offsets, TableCoversSupportedVersionsOnly) {
  for (int m = lt::python::kMinMinor; m <= lt::python::kMaxMinor; ++m) {
    auto l = lt::python::layout_for(m);
    ASSERT_TRUE(l.has_value()) << m;
    EXPECT_EQ(l->bpf.py_minor, m);
    EXPECT_EQ(l->bpf.gen_frame_embedded, m >= 11 ? 1 : 0);  // gi_iframe is inline from 3.11
  }
  EXPECT_FALSE(lt::python::layout_for(7).has_value());
  EXPECT_FALSE(lt::python::layout_for(16).has_value());
  // python-unwinding.md §2: 3.13 reads tstate->current_frame directly
  EXPECT_EQ(lt::python::layout_for(13)->tstate_frame, 72u);
  EXPECT_EQ(lt::python::layout_for(12)->bpf.str_ascii_data, 40);
}

TEST(Options, OpsReport) {
  auto o = parse({"--pid", "12", "--report", "simple,ops", "--sort-by", "count", "--row-limit", "-1", "--schedule"});
  EXPECT_TRUE(o.wants_ops());
  EXPECT_EQ(o.sort_by, "count");
  EXPECT_EQ(o.row_limit, -1);
  EXPECT_TRUE(o.schedule);
  EXPECT_TRUE(parse({"--pid", "12", "--report", "ops", "--group-by-input-shapes"}).group_by_input_shapes);
  EXPECT_EQ(o.effective_rate(), 999u);  // op times are sampled: a finer default
  EXPECT_EQ(parse({"--pid", "12", "--report", "ops", "--rate", "99"}).effective_rate(), 99u);
  // --ops alone asks for the op report, with its globs split on commas
  auto f = parse({"--pid", "12", "--ops", "aten::mm,aten::add*,"});
  EXPECT_TRUE(f.wants_ops());
  EXPECT_EQ(f.op_filters, (std::vector<std::string>{"aten::mm", "aten::add*"}));
  EXPECT_FALSE(parse({"--pid", "12"}).wants_ops());
  EXPECT_EQ(parse({"report", "f.ltrace", "--report", "ops", "--sort-by", "cpu_time"}).sort_by, "cpu_time");
}

TEST(Options, OpsErrors) {
  try {
    parse({"--pid", "12", "--report", "ops", "--sort-by", "wall"});
    FAIL() << "accepted a bad sort key";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), lt::ExitCode::usage);
    // Lightning's MisconfigurationException text, trailing space included
    EXPECT_EQ(std::string(e.what()),
              "Found sort_by_key: wall. Should be within {'cpu_time', 'cuda_time', 'cpu_time_total', "
              "'cuda_time_total', 'cpu_memory_usage', 'cuda_memory_usage', 'self_cpu_memory_usage', "
              "'self_cuda_memory_usage', 'count'}. ");
  }
  EXPECT_EQ(code_of({"--pid", "12", "--row-limit", "-2"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "12", "--row-limit", "x"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "12", "--ops", ","}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "12", "--report", "ops,heap"}), lt::ExitCode::usage);
  EXPECT_TRUE(parse({"--pid", "12", "--report", "ops,memory"}).wants_report("memory"));
  EXPECT_EQ(code_of({"report", "f.ltrace", "--ops", "aten::mm"}), lt::ExitCode::usage);  // nothing to probe offline
}

TEST(Options, GpuAndRun) {
  auto o = parse({"--pid", "12", "--report", "ops,gpu", "--launch-stacks", "--device-stats", "--no-inject"});
  EXPECT_TRUE(o.wants_report("gpu"));
  EXPECT_TRUE(o.report_given);
  EXPECT_TRUE(o.launch_stacks && o.device_stats && !o.inject && o.gpu);
  EXPECT_FALSE(parse({"--pid", "12", "--no-gpu"}).gpu);
  EXPECT_FALSE(parse({"--pid", "12"}).report_given);  // gpu tables then show when there is GPU data

  auto r = parse({"run", "--report", "gpu", "--", "python", "train.py", "--pid", "3"});
  EXPECT_EQ(r.command, lt::Options::Command::run);
  EXPECT_TRUE(r.children);  // the command's children (workers, ranks) too
  EXPECT_EQ(r.run_argv, (std::vector<std::string>{"python", "train.py", "--pid", "3"}));  // after --: the command's
  EXPECT_TRUE(r.pids.empty());
  EXPECT_EQ(code_of({"run"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"run", "--"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"run", "--pid", "3", "--", "python"}), lt::ExitCode::usage);
}

TEST(Options, AllAndPs) {
  // No target: every torch/Lightning process (--all), children followed.
  auto o = parse({});
  EXPECT_TRUE(o.all);
  EXPECT_TRUE(o.children);
  EXPECT_EQ(o.command, lt::Options::Command::live);
  auto r = parse({"record", "--all", "-o", "x.ltrace", "--duration", "5"});
  EXPECT_TRUE(r.all && r.children);
  EXPECT_TRUE(parse({"record", "-o", "x.ltrace"}).all);
  EXPECT_FALSE(parse({"--pid", "3"}).all);
  EXPECT_FALSE(parse({"--job-env", "A=B"}).all);
  EXPECT_EQ(code_of({"--all", "--pid", "3"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--all", "--job-env", "A=B"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"report", "f.ltrace", "--all"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"run", "--all", "--", "python"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"agent", "-o", "x"}), lt::ExitCode::usage);  // the agent needs its job
  // ps: only -v.
  auto p = parse({"ps", "-v"});
  EXPECT_EQ(p.command, lt::Options::Command::ps);
  EXPECT_TRUE(p.verbose);
  EXPECT_FALSE(p.all);
  EXPECT_EQ(code_of({"ps", "--pid", "3"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"ps", "--all"}), lt::ExitCode::usage);
}

// --help lists every exit code once, in order, from the one table
// (user/core/errors.h): a code added to the enum without its line fails here.
TEST(Options, EveryExitCodeIsInTheHelp) {
  int next = 0;
  for (const auto& e : lt::kExitCodeTexts) EXPECT_EQ(static_cast<int>(e.code), next++) << e.says;
  EXPECT_EQ(next, static_cast<int>(lt::ExitCode::watched) + 1);
  const std::string help = lt::usage_text();
  const auto at = help.find("\nexit codes:\n");
  ASSERT_NE(at, std::string::npos);
  for (const auto& e : lt::kExitCodeTexts)
    EXPECT_NE(help.find("\n  " + std::to_string(static_cast<int>(e.code)) + " ", at), std::string::npos) << e.says;
}

// --verdict: the verdict alone, or beside the reports --report names in
// either order (issue 34's `report --verdict`).
TEST(Options, VerdictIsTheVerdictBesideTheOtherReports) {
  EXPECT_EQ(parse({"report", "t.ltrace", "--verdict"}).report, "verdict");
  EXPECT_EQ(parse({"report", "t.ltrace", "--report", "simple", "--verdict"}).report, "simple,verdict");
  EXPECT_EQ(parse({"report", "t.ltrace", "--verdict", "--report", "simple,ops"}).report, "simple,ops,verdict");
  EXPECT_EQ(parse({"report", "t.ltrace", "--verdict", "--report", "verdict,simple"}).report, "verdict,simple");
  EXPECT_TRUE(parse({"report", "t.ltrace", "--verdict"}).report_given);
}

// --why-step N: the verdict beside the reports, which stay those given or
// recorded (a watch capture's: its render asks for its slow step).
TEST(Options, WhyStepAddsTheVerdictAndKeepsTheReports) {
  const lt::Options o = parse({"report", "t.ltrace", "--why-step", "30"});
  EXPECT_EQ(o.why_step, 30);
  EXPECT_FALSE(o.report_given);  // the recorded reports, as without it
  EXPECT_TRUE(o.wants_report("verdict"));
  EXPECT_FALSE(parse({"report", "t.ltrace"}).wants_report("verdict"));
  EXPECT_EQ(code_of({"report", "t.ltrace", "--why-step", "-1"}), lt::ExitCode::usage);
}

// strtol and strtod take a leading blank or '+'; an option's number does not.
TEST(Options, ANumberWithABlankOrAPlusIsRefused) {
  for (const char* v : {" 7", "+5", "\t3", "", "-", "7 "})
    EXPECT_EQ(code_of({"report", "t.ltrace", "--why-step", v}), lt::ExitCode::usage) << "'" << v << "'";
  EXPECT_EQ(code_of({"--pid", "+12"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"diff", "a", "b", "--fail-if-slower", " 2"}), lt::ExitCode::usage);
  EXPECT_EQ(parse({"diff", "a", "b", "--fail-if-slower", ".5"}).fail_if_slower_pct, 0.5);
  EXPECT_EQ(code_of({"watch", "--keep", " 5m"}), lt::ExitCode::usage);
}

// A capture's after-window is an escalation of the process: bounded on
// the command line as a request's is (an audit's --capture-after 1h).
TEST(Options, TheCaptureAfterWindowIsBounded) {
  EXPECT_EQ(parse({"watch", "--capture-after", "10m"}).capture_after_s, 600);
  EXPECT_EQ(code_of({"watch", "--capture-after", "1h"}), lt::ExitCode::usage);
}
