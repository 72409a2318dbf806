// The merged page's shape as the job grows (reports/cluster/merged_html.*):
// both heat maps bucket every row with one bucket size (so a cell's data-i
// is one step on every rank and fits the SVG), past kMaxHeatRows ranks the
// maps keep that many rows, past kMergedChartRanks ranks only a few ranks'
// step charts and timelines are drawn (the page names the others), and a
// 64-rank x 3000-step job's page stays under 20 MB.  Synthetic traces:
// one per host of 8 ranks, aggregated as `report DIR --merge` does.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/aggregate/comm.h"
#include "reports/cluster/merge.h"
#include "reports/cluster/merged_html.h"
#include "user/model/trace.h"

using namespace lt;

namespace {

constexpr std::uint64_t ms = 1'000'000, sec = 1'000'000'000;
constexpr std::uint64_t kHooks = 12;

template <typename R>
void put(Trace& t, R& r, std::uint16_t kind, std::uint32_t pid, std::uint64_t ts) {
  r.hdr = {kind, sizeof r, pid, pid, 0, ts};
  t.append(r);
}

void action(Trace& t, std::uint16_t kind, std::uint32_t pid, std::uint64_t key, const char* text, std::uint64_t ts) {
  lt_action_event e{};
  e.key = key;
  e.name_len = static_cast<std::uint32_t>(std::strlen(text));
  std::snprintf(e.name, sizeof e.name, "%s", text);
  put(t, e, kind, pid, ts);
}

// Ranks [first, first + n) on one host; rank r runs steps(r) training steps
// of (40 + r % 7) ms, each with a training_step and an optimizer_step
// (kHooks hooks in it) inside and one all-reduce, rank `slow` arriving 5 ms
// late.  `heavy`: every 15th step (20 of 300) is 45 ms longer and has that
// many more hooks, 10 us apart: the slowest steps, which fill the timelines.
// `skip(r)`: rank r attached that many steps late (its step s is the job's
// s + skip, with the job's times and collective seq); `loose`: a rank whose
// all-reduces are entered between its steps (no step offset measurable).
MergeInput host(int first, int n, int world, std::size_t (*steps)(int), int slow, std::uint64_t heavy = 0,
                std::size_t (*skip)(int) = nullptr, int loose = -1) {
  Trace t;
  const std::uint64_t mono = 1000 * sec;
  lt_window_event w{};
  w.begin = 1;
  put(t, w, LT_EV_WINDOW, 0, mono);
  lt_host_info_event hi{};
  hi.monotonic_ns = mono;
  hi.realtime_ns = 1'800'000'000ull * sec;
  std::snprintf(hi.hostname, sizeof hi.hostname, "node-%d", first / 8);
  put(t, hi, LT_EV_HOST_INFO, 0, mono);
  std::uint64_t end = mono;
  for (int r = first; r < first + n; ++r) {
    const auto pid = static_cast<std::uint32_t>(1000 + r);
    lt_proc_info_event p{};
    p.rank = r;
    p.local_rank = r % 8;
    p.world_size = world;
    p.flags = LT_PROC_PYTHON;
    put(t, p, LT_EV_PROC_INFO, pid, mono);
    const std::size_t late = skip ? skip(r) : 0;
    for (std::size_t s = 0; s < steps(r); ++s) {
      const std::size_t j = s + late;  // the job's step
      const bool big = heavy && j % 15 == 7;
      const std::uint64_t len = (40 + static_cast<std::uint64_t>(r % 7) + (big ? 45 : 0)) * ms;
      const std::uint64_t b = mono + 10 * ms + j * 100 * ms, k = 3 * s + 1;
      action(t, LT_EV_ACTION_BEGIN, pid, k, "run_training_batch", b);
      action(t, LT_EV_ACTION_BEGIN, pid, k + 1, "training_step", b + 1 * ms);
      action(t, LT_EV_ACTION_END, pid, k + 1, "training_step", b + len / 2);
      lt_comm_event c{};
      c.pg = 0x5000;
      c.seq = j;
      c.kind = LT_COMM_ALLREDUCE;
      c.ntensors = 1;
      c.peer = -1;
      put(t, c, LT_EV_COMM, pid,
          (r == loose ? b + len + 2 * ms : b + len / 2) + 100'000 * static_cast<std::uint64_t>(r % 8) +
              (r == slow ? 5 * ms : 0));
      action(t, LT_EV_ACTION_BEGIN, pid, k + 2, "optimizer_step", b + len / 2 + 6 * ms);
      // Hooks inside: slices enough to fill a rank's timeline budget.
      for (std::uint64_t h = 0; h < kHooks; ++h) {
        const std::uint64_t hb = b + len / 2 + 7 * ms + h * ms;
        action(t, LT_EV_ACTION_BEGIN, pid, (1ull << 40) + k * 64 + h, "on_before_optimizer_step", hb);
        action(t, LT_EV_ACTION_END, pid, (1ull << 40) + k * 64 + h, "on_before_optimizer_step", hb + ms / 2);
      }
      for (std::uint64_t h = 0; big && h < heavy; ++h) {
        const std::uint64_t hb = b + len / 2 + 20 * ms + h * 10'000;
        action(t, LT_EV_ACTION_BEGIN, pid, (2ull << 40) + k * 4096 + h, "on_after_backward", hb);
        action(t, LT_EV_ACTION_END, pid, (2ull << 40) + k * 4096 + h, "on_after_backward", hb + 5'000);
      }
      action(t, LT_EV_ACTION_END, pid, k + 2, "optimizer_step", b + len - 1 * ms);
      action(t, LT_EV_ACTION_END, pid, k, "run_training_batch", b + len);
      end = std::max(end, b + len);
    }
  }
  lt_window_event z{};
  put(t, z, LT_EV_WINDOW, 0, end + sec);
  ActionAggregator actions(true);
  CommAggregator comm(actions, CommAggregatorOptions{true});
  t.for_each([&](const lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    comm.add(h, p);
  });
  MergeInput in{"node-" + std::to_string(first / 8) + ".ltrace", actions.finish(), std::nullopt, std::nullopt};
  in.comm = comm.finish();
  return in;
}

std::string page(int ranks, std::size_t (*steps)(int), int slow, std::uint64_t heavy = 0,
                 std::size_t (*skip)(int) = nullptr, int loose = -1) {
  std::vector<MergeInput> in;
  for (int first = 0; first < ranks; first += 8)
    in.push_back(host(first, std::min(8, ranks - first), ranks, steps, slow, heavy, skip, loose));
  const MergePlan plan = plan_merge(in);
  EXPECT_EQ(plan.ranks.size(), static_cast<std::size_t>(ranks));
  std::ostringstream out;
  write_merged_html(plan, "summary", out);
  return out.str();
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// One map's cells: (rank, data-i) pairs and the largest x.
struct Cells {
  std::set<std::pair<int, long>> at;
  double max_x = 0;
};
Cells cells(const std::string& html, const std::string& cls) {
  Cells c;
  static const std::regex re("<rect class=\"(w?cell)\" x=\"([0-9.]+)\"[^>]*data-rank=\"(\\d+)\" data-i=\"(\\d+)\"");
  for (std::sregex_iterator it(html.begin(), html.end(), re), e; it != e; ++it) {
    if ((*it)[1] != cls) continue;
    c.max_x = std::max(c.max_x, std::stod((*it)[2]));
    c.at.insert({std::stoi((*it)[3]), std::stol((*it)[4])});
  }
  return c;
}

}  // namespace

TEST(MergedPage, BothHeatMapsBucketEveryRowAlike) {
  // 700 and 550 steps: one bucket of 3 for both rows (700 / 300 columns, rounded
  // up); the 550-step rank used to get its own bucket of 2: 275 cells drawn to
  // x = 1250 in an 1100-wide SVG, data-i up to 548 meaning another step.
  const std::string html = page(
      2, +[](int r) -> std::size_t { return r ? 550 : 700; }, 1);
  EXPECT_NE(html.find("<svg class=\"chart heatmap\" data-ranks=\"2\" data-bucket=\"3\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart waitmap\" data-ranks=\"2\" data-bucket=\"3\""), std::string::npos);
  const Cells heat = cells(html, "cell"), wait = cells(html, "wcell");
  std::size_t r1 = 0;
  for (const auto& [rank, i] : heat.at) {
    EXPECT_EQ(i % 3, 0) << rank << " " << i;
    EXPECT_LT(i, rank ? 550 : 700) << rank;
    r1 += rank == 1;
  }
  EXPECT_EQ(r1, (550u + 2) / 3);
  EXPECT_LE(heat.max_x, 150 + 940);
  EXPECT_LE(wait.max_x, 150 + 940);
  // The wait map's cells are the same (rank, step) cells.
  EXPECT_EQ(heat.at, wait.at);
}

TEST(MergedPage, ManyRanksDrawAFewTimelinesAndBoundedHeatMaps) {
  // 80 ranks: heat maps keep 64 rows; charts and timelines of the chosen few.
  const int slow = 37;
  const std::string html = page(
      80, +[](int) -> std::size_t { return 30; }, slow);
  EXPECT_NE(html.find("<svg class=\"chart heatmap\" data-ranks=\"64\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart waitmap\" data-ranks=\"64\""), std::string::npos);
  EXPECT_NE(html.find("Rows: 64 of 80 ranks"), std::string::npos);
  EXPECT_EQ(count(html, "<g class=\"wrow\""), 64u);
  // The straggler (rank 37, last at every all-reduce) keeps its row in both maps.
  EXPECT_NE(html.find("data-straggler=\"37\""), std::string::npos);
  EXPECT_EQ(count(html, "<rect class=\"straggler\""), 2u);
  const std::size_t timelines = count(html, "<section class=\"steptl\"");
  EXPECT_GE(timelines, 3u);  // the straggler, the slowest / fastest / median by step (some may coincide), rank 0
  EXPECT_LE(timelines, 5u);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(html, m, std::regex("id=\"ranks-left-out\" data-drawn=\"(\\d+)\" data-left-out=\"(\\d+)\"")));
  EXPECT_EQ(std::stoul(m[1]), timelines);
  EXPECT_EQ(std::stoul(m[1]) + std::stoul(m[2]), 80u);
  EXPECT_NE(html.find("report TRACE --html FILE"), std::string::npos);
  EXPECT_NE(html.find("id=\"r37-timeline\""), std::string::npos);  // the straggler's section
  EXPECT_NE(html.find("id=\"r0-timeline\""), std::string::npos);
  // Up to 8 ranks: every one drawn, no note.
  const std::string small = page(
      8, +[](int) -> std::size_t { return 12; }, 3);
  EXPECT_EQ(count(small, "<section class=\"steptl\""), 8u);
  EXPECT_EQ(small.find("ranks-left-out"), std::string::npos);
}

TEST(MergedPage, LargeJobsPageStaysUnder20MB) {
  // 3000 steps per rank (15 slices each: ~1.8 MB of a rank's 2 MiB budget): 8 ranks (all drawn, the
  // single-process budget each) and 64 ranks (a few drawn).
  // Then 64 ranks attached at 0-3 steps apart (r % 4): shifted onto the
  // common numbering, each cell's title also names the rank's own step.
  for (int ranks : {8, 64, -64}) {
    const bool shifted = ranks < 0;
    ranks = std::abs(ranks);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string html = shifted ? page(
                                           ranks, +[](int) -> std::size_t { return 3000; }, 5, 0,
                                           +[](int r) -> std::size_t { return static_cast<std::size_t>(r % 4); })
                                     : page(
                                           ranks, +[](int) -> std::size_t { return 3000; }, 5);
    EXPECT_EQ(shifted, html.find("(its own ") != std::string::npos);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto heat = html.find("id=\"heatmap\""), tl = html.find("<div id=\"timelines\""),
               end = html.find("<h2>Cluster summary");
    ASSERT_TRUE(heat < tl && tl < end);
    std::printf(
        "merged page, %d ranks x 3000 steps%s: %.2f MB (heat maps %.2f MB, charts and timelines %.2f MB), "
        "%.1f s (traces, merge and page)\n",
        ranks, shifted ? " (attached 0-3 steps apart)" : "", html.size() / 1e6, (tl - heat) / 1e6, (end - tl) / 1e6, s);
    EXPECT_LT(html.size(), 20'000'000u) << ranks;
  }
}

TEST(MergedPage, FullTimelinesStayUnder20MB) {
  // The worst case the bounds allow: every drawn rank's timeline at its
  // budget (20 steps of 2400 slices: 1.9 MB at the 40 B estimate, over any
  // drawn rank's share), both heat maps at 300 columns; 8 ranks (all drawn)
  // and 72 (past 64: capped rows, a few drawn).
  for (int ranks : {8, 72}) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string html = page(
        ranks, +[](int) -> std::size_t { return 300; }, 5, 2400);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto heat = html.find("id=\"heatmap\""), tl = html.find("<div id=\"timelines\""),
               end = html.find("<h2>Cluster summary");
    ASSERT_TRUE(heat < tl && tl < end);
    std::printf(
        "merged page, %d ranks x 300 steps, full timelines: %.2f MB (heat maps %.2f MB, charts and "
        "timelines %.2f MB), %.1f s\n",
        ranks, html.size() / 1e6, (tl - heat) / 1e6, (end - tl) / 1e6, s);
    EXPECT_LT(html.size(), 20'000'000u) << ranks;
    // The budgets were the bound: steps were left out (on all but at most one drawn rank).
    EXPECT_GE(count(html, "left out for that budget") + 1, count(html, "<section class=\"steptl\"")) << ranks;
  }
}

TEST(MergedPage, CellsGiveTheirExportWindowAndStepNumbersAreStated) {
  // Two ranks, 6 and 4 steps from the same moment: each step-time cell
  // gives its step's window of the rank's own recording, counted from its
  // attach (the WINDOW begin): step s of rank r is [10 + 100 s, + 40 + r] ms.
  const std::string html = page(
      2, +[](int r) -> std::size_t { return r ? 4 : 6; }, -1);
  static const std::regex re(
      "<rect class=\"(w?cell)\"[^>]*data-rank=\"(\\d+)\" data-i=\"(\\d+)\" data-ns=\"\\d+\" data-window=\"([^\"]*)\"");
  std::size_t seen[2] = {0, 0};
  for (std::sregex_iterator it(html.begin(), html.end(), re), e; it != e; ++it) {
    const int r = std::stoi((*it)[2]);
    const long s = std::stol((*it)[3]);
    char want[64];
    std::snprintf(want, sizeof want, "%.6f,%.6f", (10 + 100 * s) / 1e3, (10 + 100 * s + 40 + r) / 1e3);
    EXPECT_EQ((*it)[4], want) << (*it)[1] << " " << r << " " << s;
    ++seen[(*it)[1] == "cell" ? 0 : 1];
  }
  EXPECT_EQ(seen[0], 10u);  // every step-time cell; the waiting map's look theirs up there (same rank, step)
  EXPECT_EQ(seen[1], 0u);
  EXPECT_EQ(count(html, "<rect class=\"wcell\""), 10u);
  // The command once, and each rank's trace for it (the script fills a clicked cell's in).
  EXPECT_NE(html.find("<code>ltrace-bpf report RANK_TRACE --window S,E --perfetto OUT</code>"), std::string::npos);
  EXPECT_NE(html.find("<script type=\"application/json\" id=\"rank-traces\">{\"0\":\"node-0.ltrace\",\"1\":\"node-0."
                      "ltrace\"}</script>"),
            std::string::npos);
  // One all-reduce a step, entered inside it on both ranks: numbered alike.
  EXPECT_NE(html.find("<p class=\"note\" id=\"step-numbering\" data-measured=\"1\" data-offsets=\"0,0\">"),
            std::string::npos);
  EXPECT_NE(html.find("every rank numbers the same step alike: rank 0 +0 (6/6), rank 1 +0 (4/4)"), std::string::npos);
}

TEST(MergedPage, RanksAttachedLaterAreOnTheCommonNumbering) {
  // Rank 0 from the job's step 0 (12 steps); rank 1 attached 3 steps later
  // (9 steps: the job's 3..11); rank 2 from step 0 but its all-reduces fall
  // between its steps: no offset measurable, drawn apart in its own numbers.
  // The job's step 7 is heavy (2x the median): each rank's slow-step finding.
  const std::string html = page(
      3, +[](int r) -> std::size_t { return r == 1 ? 9 : 12; }, -1, 5,
      +[](int r) -> std::size_t { return r == 1 ? 3 : 0; }, 2);
  // The page for test_dashboard.py, which drives its script in Chromium.
  if (const char* path = std::getenv("LT_MERGED_PAGE_OUT"); path && *path) {
    std::ofstream f(path, std::ios::binary);
    f << html;
    ASSERT_TRUE(f.good()) << path;
  }
  ASSERT_NE(html.find("<p class=\"note\" id=\"step-numbering\" data-measured=\"0\" data-offsets=\"0,3,-\">"),
            std::string::npos)
      << html.substr(html.find("id=\"step-numbering\""), 600);
  EXPECT_NE(html.find("own step + rank 0 +0"), std::string::npos);
  EXPECT_NE(html.find("rank 1 +3"), std::string::npos);
  EXPECT_NE(html.find("Not measured (too few or disagreeing instances): rank 2: drawn apart"), std::string::npos);
  // Step-time cells: (rank, column) -> window of the rank's own recording, and whether drawn apart.
  static const std::regex re(
      "<rect class=\"cell\" x=\"[0-9.]+\" y=\"(\\d+)\"[^>]*data-rank=\"(\\d+)\" data-i=\"(\\d+)\" data-ns=\"(\\d+)\""
      "( data-apart=\"1\")? data-window=\"([^\"]*)\"><title>([^<]*)</title>");
  std::map<std::pair<int, long>, std::string> window, title;
  std::map<int, std::set<int>> ys;
  std::map<int, std::size_t> apart;
  for (std::sregex_iterator it(html.begin(), html.end(), re), e; it != e; ++it) {
    const int r = std::stoi((*it)[2]);
    const long i = std::stol((*it)[3]);
    window[{r, i}] = (*it)[6];
    title[{r, i}] = (*it)[7];
    ys[r].insert(std::stoi((*it)[1]));
    apart[r] += (*it)[5].matched;
  }
  // Rank 1's column k is rank 0's column k (the same step: the same moment
  // on this host) = rank 1's own step k - 3; it has no columns 0-2.
  for (long k = 0; k < 12; ++k) {
    ASSERT_TRUE((window.count({0, k}))) << k;
    EXPECT_EQ((window.count({1, k})), k >= 3 ? 1u : 0u) << k;
    if (k < 3) continue;
    // The same step begins at the same moment on both (rank 1's steps are 1 ms longer).
    EXPECT_EQ(window[std::make_pair(1, k)].substr(0, 8), window[std::make_pair(0, k)].substr(0, 8)) << k;
    char want[64];
    const int len = 41 + (k == 7 ? 45 : 0);
    std::snprintf(want, sizeof want, "%.6f,%.6f", (10 + 100 * k) / 1e3, (10 + 100 * k + len) / 1e3);
    EXPECT_EQ((window[{1, k}]), want) << k;  // its own step k - 3: [10 + 100 k, + 41] ms after the attach
    EXPECT_EQ(
        (title[{1, k}]).rfind("rank 1, step " + std::to_string(k) + " (its own " + std::to_string(k - 3) + "): ", 0),
        0u)
        << title[std::make_pair(1, k)];
  }
  // Rank 2: its own numbers, marked apart, in a row below the aligned ones.
  EXPECT_EQ(apart[2], 12u);
  EXPECT_EQ(apart[0] + apart[1], 0u);
  EXPECT_EQ((title[{2, 4}]).rfind("rank 2, its own step 4 (not lined up): ", 0), 0u);
  ASSERT_EQ(ys[2].size(), 1u);
  EXPECT_GT(*ys[2].begin(), *ys[1].begin() + 16);  // a line between, saying why
  EXPECT_NE(html.find("<text class=\"apart\""), std::string::npos);
  EXPECT_EQ(count(html, ">rank 2 (own steps)<"), 2u);  // its row's label in both maps, per rank
  EXPECT_NE(html.find("<svg class=\"chart heatmap\" data-ranks=\"3\" data-bucket=\"1\" data-straggler=\"-1\" "
                      "data-common=\"1\" data-apart=\"1\""),
            std::string::npos);
  // The waiting map: the same (rank, column) cells.
  const Cells heat = cells(html, "cell"), wait = cells(html, "wcell");
  EXPECT_EQ(heat.at, wait.at);
  EXPECT_EQ(heat.at.size(), 12u + 9u + 12u);
  EXPECT_EQ(count(html, "<rect class=\"wcell\"") - count(html, "data-apart=\"1\"><title>rank 2"), 21u);
  // The clicked cell's command finds each rank's own steps from these.
  EXPECT_NE(html.find("<script type=\"application/json\" id=\"rank-offsets\">{\"0\":0,\"1\":3,\"2\":null}</script>"),
            std::string::npos);
  // Findings name the job's step 7 in the common numbering, rank 2's in its own.
  EXPECT_NE(html.find("rank 1: 1 training step of 9 took over 2x the median"), std::string::npos);
  EXPECT_NE(html.find("slowest: step 7 (its own 4), "), std::string::npos);
  EXPECT_NE(html.find("slowest: step 7, "), std::string::npos);  // rank 0: shift 0
  EXPECT_NE(html.find("slowest: its own step 7 (offset not measured), "), std::string::npos);
  // The synced timelines: each rank's offset, rank 2 apart (not synced), said per rank.
  EXPECT_NE(html.find("<div class=\"rank-steps\" data-rank=\"0\" data-tl-offset=\"0\">"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"rank-steps\" data-rank=\"1\" data-tl-offset=\"3\">"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"rank-steps\" data-rank=\"2\" data-tl-apart=\"1\">"), std::string::npos);
  EXPECT_NE(html.find("rank 1: its own step numbers below; its step k is common step k + 3"), std::string::npos);
  EXPECT_NE(html.find("rank 2: its own step numbers (from its first step seen): its offset to the other ranks could "
                      "not be measured, so its timeline is not synced"),
            std::string::npos);
  // Each timeline embeds the others' picks translated to its own numbers:
  // rank 0's slowest (the job's 7) is rank 1's own 4, and back.
  static const std::regex tl("<section class=\"steptl\" id=\"r(\\d)-timeline\"[\\s\\S]*?\"def\":(\\d+)");
  std::map<int, int> def;
  for (std::sregex_iterator it(html.begin(), html.end(), tl), e; it != e; ++it)
    def[std::stoi((*it)[1])] = std::stoi((*it)[2]);
  EXPECT_EQ(def[0], 7);
  EXPECT_EQ(def[1], 4);
  EXPECT_EQ(def[2], 7);
}

TEST(MergedPage, RankWithoutOffsetKeepsItsOwnNumbersApart) {
  // Rank 1 attached 2 steps late, its all-reduces between its steps: no
  // offset.  It keeps its own numbers (its first step in column 0, not 2)
  // and is drawn apart, never in rank 0's columns as if lined up.
  const std::string html = page(
      2, +[](int) -> std::size_t { return 6; }, -1, 0, +[](int r) -> std::size_t { return r ? 2 : 0; }, 1);
  EXPECT_NE(html.find("data-offsets=\"0,-\""), std::string::npos);
  EXPECT_NE(html.find("data-rank=\"1\" data-i=\"0\""), std::string::npos);  // own numbering, apart
  EXPECT_NE(html.find("data-common=\"1\" data-apart=\"1\""), std::string::npos);
  EXPECT_EQ(count(html, "data-rank=\"1\" data-i=\""), count(html, "data-apart=\"1\" data-window") * 2);
  EXPECT_NE(html.find("<div class=\"rank-steps\" data-rank=\"1\" data-tl-apart=\"1\">"), std::string::npos);
}

TEST(MergedPage, BucketsAreOfTheCommonNumbering) {
  // 700 steps each, rank 1 attached 4 steps later: 704 common steps, buckets
  // of 3.  Rank 1's first cell is the common bucket 3-5, which holds only
  // its own steps 0-1 (the common 4-5); its last, common 702-703 = own 698-699.
  const std::string html = page(
      2, +[](int) -> std::size_t { return 700; }, -1, 0, +[](int r) -> std::size_t { return r ? 4 : 0; });
  ASSERT_NE(html.find("data-offsets=\"0,4\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart heatmap\" data-ranks=\"2\" data-bucket=\"3\""), std::string::npos);
  static const std::regex re(
      "<rect class=\"cell\"[^>]*data-rank=\"1\" data-i=\"(\\d+)\"[^>]*data-window=\"([^\"]*)\""
      "(?: data-last=\"(\\d+)\")?><title>([^<]*)</title>");
  std::vector<std::smatch> row;
  for (std::sregex_iterator it(html.begin(), html.end(), re), e; it != e; ++it) row.push_back(*it);
  ASSERT_EQ(row.size(), 234u);  // columns 1..234 of 0..234
  EXPECT_EQ(row.front()[1], "3");
  EXPECT_EQ(row.front()[3], "1");
  EXPECT_EQ(row.front()[4].str().rfind("rank 1, step 3+ (its own 0-1): ", 0), 0u) << row.front()[4];
  // Its window: own steps 0-1, the job's 4-5 (10 + 100 x 4 ms .. + 100 + 41 ms after the attach).
  EXPECT_EQ(row.front()[2], "0.410000,0.551000");
  EXPECT_EQ(row.back()[1], "702");
  EXPECT_EQ(row.back()[3], "699");
  EXPECT_EQ(row.back()[4].str().rfind("rank 1, step 702+ (its own 698-699): ", 0), 0u) << row.back()[4];
  for (std::size_t k = 1; k + 1 < row.size(); ++k) EXPECT_EQ(std::stol(row[k][1]) % 3, 0) << k;
}

TEST(MergedPage, EveryRanksVerdictFindingsLeadRankedTogether) {
  // Two hosts of 8 ranks; each file's findings as `report DIR --merge`
  // hands them over (write_rank_reports): ranked across ranks by time at
  // stake, each naming its rank; one of a pid no rank has, and one put in
  // the wrong file's list, name no rank and are left out.
  std::vector<MergeInput> in;
  for (int first = 0; first < 16; first += 8)
    in.push_back(host(
        first, 8, 16, +[](int) -> std::size_t { return 12; }, 3));
  const MergePlan plan = plan_merge(in);
  std::vector<std::vector<Finding>> findings(2);
  findings[0].push_back({"gc", 1003, 2.0, 0.05, "12 collections", "gc.freeze()"});
  findings[0].push_back({"hooks", 1012, 9.0, 0.2, "in the wrong file", "-"});
  findings[1].push_back({"input-bound", 1012, 5.0, 0.12, "the dataloader takes 5.00 ms", "more workers"});
  findings[1].push_back({"logging", 9999, 7.0, 0.1, "no such rank", "-"});
  std::ostringstream out;
  write_merged_html(plan, "summary", out, &findings);
  const std::string html = out.str();
  const auto first = html.find("#1 input-bound (rank 12, pid 1012): 5.00 ms per train step at stake");
  const auto second = html.find("#2 gc (rank 3, pid 1003): 2.00 ms per train step at stake");
  ASSERT_NE(first, std::string::npos) << html.substr(html.find("<h3>Findings</h3>"), 3000);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
  EXPECT_EQ(html.find("#3 "), std::string::npos);
  EXPECT_EQ(html.find("no such rank"), std::string::npos);
  EXPECT_EQ(html.find("in the wrong file"), std::string::npos);
  // Ahead of the charts' own findings; each linked to its rank's step
  // charts where the page draws them (16 ranks: a few), else the heat map.
  EXPECT_LT(first, html.find("data-verdict=\"last_arrival\""));
  std::smatch m;
  const std::string s = html.substr(html.rfind("<li", first));
  ASSERT_TRUE(std::regex_search(s, m, std::regex("data-verdict=\"ranked-input-bound\"[^>]*><a href=\"(#[\\w-]+)\"")));
  EXPECT_TRUE(m[1] == "#r12-steps" ? html.find("id=\"r12-steps\"") != std::string::npos : m[1] == "#heatmap") << m[1];
  const std::string g = html.substr(html.rfind("<li", second));
  ASSERT_TRUE(std::regex_search(g, m, std::regex("data-verdict=\"ranked-gc\"[^>]*><a href=\"(#[\\w-]+)\"")));
  EXPECT_EQ(m[1], "#r3-steps");  // the straggler (rank 3): always drawn
  EXPECT_NE(html.find("id=\"r3-steps\""), std::string::npos);
  // Without them (no rank reports ran), the page is as before.
  std::ostringstream plain;
  write_merged_html(plan, "summary", plain);
  EXPECT_EQ(plain.str().find("ranked-"), std::string::npos);
}
