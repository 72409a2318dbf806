#include "reports/simple/simple_report.h"

#include <gtest/gtest.h>

#include "reports/simple/number_format.h"

namespace {
std::string dashes(int n) {
  return "\n" + std::string(n, '-');
}
}  // namespace

// The real bytes given in spec §4.4 (stage fit, K = 42, 146 dashes).
TEST(SimpleReport, SpecExampleFit) {
  lt::SimpleReportInput in;
  in.stage_title = "FIT";
  in.actions = {{"run_training_epoch", {0.5}}, {"[LightningModule]BoringModel.training_step", {0.001, 0.0012}}};
  in.total_seconds = 1.25;
  std::string sep = dashes(146);
  std::string expected =
      "FIT Profiler Report\n" + sep +
      "\n|  Action                                    \t|  Mean duration (s)\t|  Num calls      \t|  Total time (s) "
      "\t|  Percentage %   \t|" +
      sep +
      "\n|  Total                                     \t|  -              \t|  3              \t|  1.25           "
      "\t|  100 %          \t|" +
      sep +
      "\n|  run_training_epoch                        \t|  0.5            \t|  1              \t|  0.5            "
      "\t|  40.0           \t|"
      "\n|  [LightningModule]BoringModel.training_step\t|  0.0011         \t|  2              \t|  0.0022         "
      "\t|  0.176          \t|" +
      sep + "\n";
  EXPECT_EQ(lt::render_simple_report(in), expected);
}

// Lightning's own tests/profilers test_simple_profiler_summary values:
// durations 0.773434 + i, start_time 63, now 70 (total 7.0), no stage.
lt::SimpleReportInput lightning_test_input(bool extended) {
  lt::SimpleReportInput in;
  const char* hooks[] = {"on_train_start",           "on_train_end", "on_train_epoch_start", "on_train_epoch_end",
                         "on_before_batch_transfer", "on_fit_start"};
  for (int i = 0; i < 6; ++i) in.actions.push_back({hooks[i], {0.773434 + i}});
  in.total_seconds = 70.0 - 63.0;
  in.extended = extended;
  return in;
}

TEST(SimpleReport, LightningTestExtended) {
  std::string sep = dashes(130);  // K = 24: A = 32, 129-wide rows, 130 dashes (spec)
  std::string expected =
      "Profiler Report\n" + sep +
      "\n|  Action                  \t|  Mean duration (s)\t|  Num calls      \t|  Total time (s) \t|  Percentage %   "
      "\t|" +
      sep +
      "\n|  Total                   \t|  -              \t|  6              \t|  7.0            \t|  100 %          "
      "\t|" +
      sep +
      "\n|  on_fit_start            \t|  5.7734         \t|  1              \t|  5.7734         \t|  82.478         \t|"
      "\n|  on_before_batch_transfer\t|  4.7734         \t|  1              \t|  4.7734         \t|  68.192         \t|"
      "\n|  on_train_epoch_end      \t|  3.7734         \t|  1              \t|  3.7734         \t|  53.906         \t|"
      "\n|  on_train_epoch_start    \t|  2.7734         \t|  1              \t|  2.7734         \t|  39.62          \t|"
      "\n|  on_train_end            \t|  1.7734         \t|  1              \t|  1.7734         \t|  25.335         \t|"
      "\n|  on_train_start          \t|  0.77343        \t|  1              \t|  0.77343        \t|  11.049         "
      "\t|" +
      sep + "\n";
  EXPECT_EQ(lt::render_simple_report(lightning_test_input(true)), expected);
}

TEST(SimpleReport, LightningTestNotExtended) {
  std::string sep = dashes(82);  // K = 24: 81-wide rows, 82 dashes (spec §4.5)
  std::string expected = "Profiler Report\n" + sep +
                         "\n|  Action                  \t|  Mean duration (s)\t|  Total time (s) \t|" + sep +
                         "\n|  on_fit_start            \t|  5.7734         \t|  5.7734         \t|"
                         "\n|  on_before_batch_transfer\t|  4.7734         \t|  4.7734         \t|"
                         "\n|  on_train_epoch_end      \t|  3.7734         \t|  3.7734         \t|"
                         "\n|  on_train_epoch_start    \t|  2.7734         \t|  2.7734         \t|"
                         "\n|  on_train_end            \t|  1.7734         \t|  1.7734         \t|"
                         "\n|  on_train_start          \t|  0.77343        \t|  0.77343        \t|" +
                         sep + "\n";
  EXPECT_EQ(lt::render_simple_report(lightning_test_input(false)), expected);
}

TEST(SimpleReport, EmptyIsTitleAndBlankLine) {
  lt::SimpleReportInput in;
  in.stage_title = "FIT";
  EXPECT_EQ(lt::render_simple_report(in), "FIT Profiler Report\n\n");
}

TEST(SimpleReport, TiesKeepFirstCompletionOrder) {
  lt::SimpleReportInput in;
  in.actions = {{"b", {1.0}}, {"a", {1.0}}, {"c", {2.0}}};
  in.total_seconds = 10;
  std::string r = lt::render_simple_report(in);
  EXPECT_LT(r.find("|  c"), r.find("|  b"));
  EXPECT_LT(r.find("|  b"), r.find("|  a"));
}

TEST(SimpleReport, ShortNamesUseHeaderWidth) {
  // K < 6: the "Action" header cell is wider than the data rows (spec §4.4)
  lt::SimpleReportInput in;
  in.actions = {{"ab", {1.0}}};
  in.total_seconds = 2;
  std::string r = lt::render_simple_report(in);
  EXPECT_NE(r.find("\n|  Action\t|"), std::string::npos);
  EXPECT_NE(r.find("\n|  ab\t|"), std::string::npos);     // K = 2: names only
  EXPECT_NE(r.find("\n|  Total\t|"), std::string::npos);  // never truncated
  EXPECT_NE(r.find("\n" + std::string(lt::expand_tabs("\n|  Action\t|  Mean duration (s)\t|  Num calls      \t|  "
                                                      "Total time (s) \t|  Percentage %   \t|")
                                          .size(),
                                      '-')),
            std::string::npos);
}

TEST(FileName, LightningPatterns) {
  EXPECT_EQ(lt::lightning_report_filename("fit", "profiler", -1), "fit-profiler.txt");
  EXPECT_EQ(lt::lightning_report_filename("fit", "profiler", 1), "fit-profiler-1.txt");
  EXPECT_EQ(lt::lightning_report_filename("test", "perf", -1), "test-perf.txt");
  EXPECT_EQ(lt::lightning_report_filename("", "perf", 0), "perf-0.txt");
  EXPECT_EQ(lt::lightning_report_filename("", "", -1), "profile.txt");
  EXPECT_EQ(lt::lightning_report_filename("fit", "a/b:c__d", -1), "fit-a_b_c_d.txt");
}

// Profiler._stats_to_str: " rank: {local_rank}" (the trainer's local rank, not
// the global one) when world_size > 1; Profiler.local_rank is 0 when unset.
TEST(FileName, RankInHeadersIsTheLocalRank) {
  EXPECT_EQ(lt::lightning_rank_suffix(8, 3), " rank: 3");   // global rank 7 on node 1: local 3
  EXPECT_EQ(lt::lightning_rank_suffix(8, -1), " rank: 0");  // local rank unknown
  EXPECT_EQ(lt::lightning_rank_suffix(1, 0), "");
  EXPECT_EQ(lt::lightning_rank_suffix(-1, 2), "");
  EXPECT_EQ(lt::lightning_local_rank(4, 1), 1);
  EXPECT_EQ(lt::lightning_local_rank(1, 1), -1);
}

// AdvancedProfiler's dump_stats: _prepare_filename(action_name=..., extension=".prof"), the spec's examples.
TEST(FileName, ProfPerAction) {
  EXPECT_EQ(lt::lightning_report_filename("fit", "perf", -1, ".prof", "[Strategy]DDPStrategy.backward"),
            "fit-perf-[Strategy]DDPStrategy.backward.prof");
  EXPECT_EQ(lt::lightning_report_filename("fit", "", -1, ".prof", "[LightningModule]BoringModel.training_step"),
            "fit-[LightningModule]BoringModel.training_step.prof");
  EXPECT_EQ(lt::lightning_report_filename("fit", "", 1, ".prof", "run_training_batch"),
            "fit-1-run_training_batch.prof");
  EXPECT_EQ(lt::lightning_report_filename(
                "fit", "", -1, ".prof", "[Callback]ModelCheckpoint{'monitor': None, 'mode': 'min'}.on_validation_end"),
            "fit-[Callback]ModelCheckpoint{'monitor'_ None, 'mode'_ 'min'}.on_validation_end.prof");
  EXPECT_EQ(lt::lightning_report_filename("fit", "", -1, ".prof", "../../etc/x"), "fit-.._.._etc_x.prof");
}
