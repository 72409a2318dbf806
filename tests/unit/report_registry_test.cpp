// The report registry: every report it names is one --report accepts, the
// probes a report list needs come from its entries, and write_reports
// prints what each entry's rule says, in the table's order.
#include "user/cli/report_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "user/cli/aggregators.h"
#include "user/cli/report_set.h"
#include "user/core/errors.h"

namespace {

lt::Options parse(std::vector<std::string> args) {
  std::string prog = "ltrace-bpf";
  std::vector<char*> argv{prog.data()};
  for (auto& a : args) argv.push_back(a.data());
  return lt::parse_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST(ReportRegistry, EveryNamedReportIsAnOption) {
  int named = 0;
  for (const auto& e : lt::report_entries()) {
    if (e.name.empty()) continue;
    ++named;
    const auto o = parse({"report", "t.ltrace", "--report", std::string(e.name)});
    EXPECT_TRUE(o.wants_report(std::string(e.name)));
    EXPECT_TRUE(lt::is_report_name(e.name));
    EXPECT_NE(lt::report_names_text().find(e.name), std::string::npos);
  }
  EXPECT_EQ(named, 9);
  EXPECT_FALSE(lt::is_report_name(""));
  EXPECT_FALSE(lt::is_report_name("flame"));
  try {
    parse({"report", "t.ltrace", "--report", "simple,flame"});
    ADD_FAILURE() << "an unknown report was accepted";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("simple, advanced, ops, gpu, memory, comm, steps"), std::string::npos)
        << e.what();
  }
}

TEST(ReportRegistry, SourcesComeFromTheReportsAskedFor) {
  const auto simple = lt::report_sources(parse({"report", "t.ltrace"}));
  EXPECT_FALSE(simple.stacks || simple.ops || simple.memory || simple.comm);
  const auto mem = lt::report_sources(parse({"report", "t.ltrace", "--report", "memory,comm"}));
  EXPECT_TRUE(mem.ops && mem.memory && mem.memory_stacks && mem.comm);
  EXPECT_FALSE(mem.stacks);
  EXPECT_TRUE(lt::report_sources(parse({"report", "t.ltrace", "--report", "advanced"})).stacks);
}

// Nothing recorded: Simple prints its (empty) report when asked; GPU tables
// only when asked or when there is GPU data; the unnamed sections only
// with their data or option.
TEST(ReportRegistry, PrintedRules) {
  lt::ReportResults none;
  auto printed = [&](const lt::Options& o) {
    std::string s;
    for (const auto& e : lt::report_entries())
      if (e.printed(o, none)) s += (s.empty() ? "" : ",") + std::string(e.name.empty() ? "-" : e.name);
    return s;
  };
  EXPECT_EQ(printed(parse({"report", "t.ltrace"})), "simple");
  EXPECT_EQ(printed(parse({"report", "t.ltrace", "--report", "gpu,ops"})), "ops,gpu");
  EXPECT_EQ(printed(parse({"report", "t.ltrace", "--report", "comm", "--profile-memory"})), "ops,comm");
  EXPECT_EQ(printed(parse({"report", "t.ltrace", "--report", "memory", "--device-stats"})), "memory,-");
}

// --report's help is made from the table: every named report with its words.
TEST(ReportRegistry, HelpComesFromTheTable) {
  const std::string help = lt::report_help_text();
  for (const auto& e : lt::report_entries()) {
    if (e.name.empty()) continue;
    EXPECT_FALSE(e.help.empty()) << e.name;
    EXPECT_NE(help.find(std::string(e.name) + ": " + std::string(e.help)), std::string::npos) << e.name;
  }
  EXPECT_NE(help.find("several at once: verdict,simple,"), std::string::npos) << help;
}

// ReportSet feeds every record to the catalogue's aggregators and collects
// each one's result into its member: an allocation reaches the memory
// result, a damaged stretch reaches them all.
TEST(ReportRegistry, ReportSetFeedsTheAggregatorCatalogue) {
  EXPECT_EQ(lt::aggregator_count(), 13u);
  const auto o = parse({"report", "t.ltrace", "--report", "memory"});
  lt::ReportSet set(o);
  lt::lt_mem_event e{};
  e.hdr = {lt::LT_EV_MEM, sizeof e, 42, 42, 0, 1000};
  e.ptr = 0x1000;
  e.bytes = 4096;
  e.what = LT_MEM_ALLOC;
  e.device_index = -1;
  set.add(e.hdr, reinterpret_cast<const std::byte*>(&e));
  set.gap();
  const lt::ReportResults r = set.finish();
  ASSERT_EQ(r.memory.processes.size(), 1u);
  EXPECT_EQ(r.memory.processes[0].pid, 42u);
  EXPECT_TRUE(r.comm.processes.empty());
}
