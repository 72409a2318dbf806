// `cluster ... dump` (user/cluster/dump_lines, hang_verdict; user/cli's
// output; python::mark_still_blocked) on synthetic dumps: the agent's lines
// give back every byte of a dump, the verdict names who waits where and who
// has not entered, and a thread is only "blocked for at least" an interval
// when both reads agree and it never ran in between.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include "user/cli/cluster_dump_output.h"
#include "user/cli/options.h"
#include "user/cluster/dump_lines.h"
#include "user/cluster/hang_verdict.h"
#include "user/core/errors.h"
#include "user/text/utf8_text.h"

using namespace lt;
using lt::cluster::RankProcess;
using lt::python::PyFrameInfo;
using lt::python::ThreadDump;

namespace {

const std::string kC10d = "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py";

ThreadDump thread(pid_t tid, char state, long syscall, long long runs, std::vector<PyFrameInfo> frames) {
  ThreadDump t;
  t.status.tid = tid;
  t.status.name = "python";
  t.status.state = state;
  t.status.syscall = syscall;
  t.status.runs = runs;
  t.status.pc = syscall >= 0 ? 0x7f0000001234 : 0;
  t.python = true;
  t.frames = std::move(frames);
  return t;
}

std::vector<PyFrameInfo> in_all_reduce() {
  return {{"wrapper", "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 83, true},
          {"all_reduce", kC10d, 2288, true},
          {"wrapper", "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 83, true},
          {"step", "/job/train.py", 40, true},
          {"<module>", "/job/train.py", 95, true}};
}

std::vector<PyFrameInfo> in_load_batch() {
  return {{"read", "/usr/lib/python3.11/socket.py", 700, true},
          {"load_batch", "/job/train.py", 88, true},
          {"step", "/job/train.py", 38, true},
          {"<module>", "/job/train.py", 95, true}};
}

RankProcess rank(int r, ThreadDump t, double blocked_s, int world = 4) {
  RankProcess p;
  p.rank = r;
  p.world_size = world;
  p.node = "node" + std::to_string(r + 1);
  p.interval_s = 1.0;
  p.dump.pid = 1000 + r;
  t.status.tid = p.dump.pid;  // the main thread
  t.blocked_at_least_s = blocked_s;
  p.dump.threads.push_back(std::move(t));
  return p;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST(DumpLines, GiveBackEveryByteOfADump) {
  RankProcess p;
  p.rank = 3;
  p.world_size = 8;
  p.interval_s = 1.25;
  auto& d = p.dump;
  d.pid = 77;
  d.comm = "py\xff th";
  d.cmdline = {"python3", "tr\nain=1.py", "a b%c"};
  d.python_version = "3.11";
  d.python_binary = "/usr/bin/python3.11";
  d.gil_known = true;
  d.gil_tid = 78;
  d.read_ms = 2.5;
  ThreadDump t = thread(
      78, 'S', SYS_read, 12,
      {{"w\xc3\xa9ird", "odd\xed\xb3\xbf\n\xfe.py", 2, true}, {"", "", 0, false}, {"<module>", "m.py", 0, true}});
  t.holds_gil = true;
  t.torn = true;
  t.blocked_at_least_s = 1.25;
  t.leaf = proc::NativeName{"__libc_read", "libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"};
  d.threads.push_back(t);
  ThreadDump native;
  native.status.tid = 79;
  native.status.state = 'R';
  native.gone = true;
  d.threads.push_back(native);

  cluster::DumpLineReader r;
  for (const auto& line : cluster::dump_lines(p)) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;  // one line each, whatever the names hold
    auto m = cluster::parse_agent_line(line);
    ASSERT_TRUE(m) << line;
    ASSERT_TRUE(r.take(*m)) << r.error();
  }
  ASSERT_EQ(r.processes().size(), 1u);
  const RankProcess& q = r.processes()[0];
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.world_size, 8);
  EXPECT_DOUBLE_EQ(q.interval_s, 1.25);
  EXPECT_EQ(q.dump.pid, 77);
  EXPECT_EQ(q.dump.comm, d.comm);
  EXPECT_EQ(q.dump.cmdline, d.cmdline);
  EXPECT_EQ(q.dump.gil_tid, 78);
  EXPECT_TRUE(q.dump.gil_known);
  ASSERT_EQ(q.dump.threads.size(), 2u);
  const ThreadDump& u = q.dump.threads[0];
  EXPECT_EQ(u.status.tid, 78);
  EXPECT_EQ(u.status.state, 'S');
  EXPECT_EQ(u.status.syscall, SYS_read);
  EXPECT_EQ(u.status.runs, 12);
  EXPECT_EQ(u.status.pc, t.status.pc);
  EXPECT_TRUE(u.holds_gil && u.torn && !u.truncated && u.python);
  EXPECT_DOUBLE_EQ(u.blocked_at_least_s, 1.25);
  ASSERT_TRUE(u.leaf);
  EXPECT_EQ(u.leaf->function, "__libc_read");
  EXPECT_EQ(u.leaf->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_EQ(u.frames.size(), 3u);
  EXPECT_EQ(u.frames[0].function, t.frames[0].function);
  EXPECT_EQ(u.frames[0].file, t.frames[0].file);
  EXPECT_EQ(u.frames[0].line, 2);
  EXPECT_FALSE(u.frames[1].readable);
  EXPECT_TRUE(q.dump.threads[1].gone);
  EXPECT_FALSE(q.dump.threads[1].leaf);
  EXPECT_EQ(q.dump.threads[1].status.runs, -1);
}

TEST(DumpLines, OutOfPlaceOrBadLinesAreRefused) {
  cluster::DumpLineReader r;
  EXPECT_FALSE(r.take(*cluster::parse_agent_line("@ltrace-agent dump-frame function=f file=x.py line=1")));
  EXPECT_NE(r.error(), "");
  cluster::DumpLineReader r2;
  EXPECT_FALSE(r2.take(*cluster::parse_agent_line("@ltrace-agent dump-process pid=x rank=0")));
  EXPECT_NE(r2.error().find("pid"), std::string::npos);
  cluster::DumpLineReader r3;
  EXPECT_FALSE(r3.take(*cluster::parse_agent_line("@ltrace-agent done processes=1")));
  EXPECT_EQ(r3.error(), "");  // not a dump line: no error
}

TEST(HangVerdict, CollectiveIsTheOutermostC10dEntryPoint) {
  EXPECT_EQ(cluster::collective_of(in_all_reduce()), "all_reduce");
  EXPECT_EQ(cluster::collective_of(in_load_batch()), "");
  // all_gather_object calls all_gather: the one the user called counts.
  std::vector<PyFrameInfo> nested = {
      {"all_gather", kC10d, 3000, true}, {"all_gather_object", kC10d, 2500, true}, {"main", "/job/t.py", 5, true}};
  EXPECT_EQ(cluster::collective_of(nested), "all_gather_object");
  // The same name in another file, or a helper of c10d's, is not a collective.
  EXPECT_EQ(cluster::collective_of({{"all_reduce", "/job/my_comm.py", 3, true}}), "");
  EXPECT_EQ(cluster::collective_of({{"_get_default_group", kC10d, 1, true}}), "");
}

TEST(HangVerdict, InnermostUserFrameSkipsLibraries) {
  auto f = in_load_batch();
  ASSERT_TRUE(cluster::innermost_user_frame(f));
  EXPECT_EQ(cluster::innermost_user_frame(f)->function, "load_batch");  // socket.py is the standard library
  std::vector<PyFrameInfo> libs = {{"_bootstrap", "<frozen importlib._bootstrap>", 1, true},
                                   {"x", "/usr/lib/python3/dist-packages/y.py", 2, true}};
  EXPECT_EQ(cluster::innermost_user_frame(libs), nullptr);
}

TEST(HangVerdict, NamesTheRankThatHasNotEnteredAndWhereItIs) {
  std::vector<RankProcess> ps;
  for (int r = 0; r < 3; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 1.0 + r));
  ps.push_back(rank(3, thread(0, 'S', SYS_read, 9, in_load_batch()), 1.0));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_TRUE(v.hang);
  EXPECT_EQ(v.collective, "all_reduce");
  EXPECT_DOUBLE_EQ(v.waited_s, 1.0);  // the least of the waiting ranks'
  ASSERT_EQ(v.waiting.size(), 3u);
  ASSERT_EQ(v.not_waiting.size(), 1u);
  EXPECT_EQ(v.not_waiting[0].rank, 3);
  EXPECT_TRUE(v.unread.empty());
  const std::string text = joined(verdict_lines(v, 1.0));
  EXPECT_NE(text.find("hang: ranks 0-2 wait in all_reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 has not entered it: it is in /job/train.py:88 (load_batch), blocked in read for at "
                      "least 1.0 s"),
            std::string::npos)
      << text;
}

TEST(HangVerdict, AnotherCollectiveAndUnreadRanksAreSaid) {
  std::vector<RankProcess> ps;
  ps.push_back(rank(0, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 2.0, 6));
  ps.push_back(rank(1, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 2.0, 6));
  auto bcast = in_all_reduce();
  bcast[1].function = "broadcast";
  ps.push_back(rank(2, thread(0, 'S', SYS_futex, 5, bcast), 2.0, 6));
  ps.push_back(rank(4, thread(0, 'R', -1, 5, in_load_batch()), 0, 6));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_TRUE(v.hang);
  EXPECT_EQ(v.collective, "all_reduce");
  ASSERT_EQ(v.other_collective.size(), 1u);
  EXPECT_EQ(v.other_collective[0].rank, 2);
  EXPECT_EQ(v.unread, (std::vector<int>{3, 5}));
  const std::string text = joined(verdict_lines(v, 2.0));
  EXPECT_NE(text.find("rank 2 waits in broadcast instead"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 4 has not entered it: it is in /job/train.py:88 (load_batch), running"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks 3,5 of the job's world size not read"), std::string::npos) << text;
}

TEST(HangVerdict, RanksSeenInACollectiveOnceAreNoHang) {
  // A healthy job: a snapshot finds ranks inside all_reduce, but none stayed
  // blocked there across both reads.
  std::vector<RankProcess> ps;
  for (int r = 0; r < 3; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 0));
  ps.push_back(rank(3, thread(0, 'R', -1, 9, in_load_batch()), 0));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_FALSE(v.hang);
  EXPECT_EQ(v.inside_now.size(), 3u);
  EXPECT_EQ(joined(verdict_lines(v, 1.0)).rfind("no hang found", 0), 0u);
}

namespace {
// Lightning's training step inside DDP's backward: autograd's entry, below
// the user's code, with no c10d frame (the reducer's all-reduce is C++).
std::vector<PyFrameInfo> in_backward() {
  return {{"_engine_run_backward", "/v/lib/python3.11/site-packages/torch/autograd/graph.py", 768, true},
          {"backward", "/v/lib/python3.11/site-packages/torch/autograd/__init__.py", 289, true},
          {"backward", "/v/lib/python3.11/site-packages/torch/_tensor.py", 521, true},
          {"backward", "/v/lib/python3.11/site-packages/pytorch_lightning/core/module.py", 1090, true},
          {"fit", "/job/train.py", 60, true}};
}
}  // namespace

TEST(HangVerdict, DdpRanksBlockedInBackwardWaitForTheOneElsewhere) {
  std::vector<RankProcess> ps;
  for (int r = 0; r < 3; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_backward()), 1.0));
  ps.push_back(rank(3, thread(0, 'S', SYS_clock_nanosleep, 9, in_load_batch()), 1.0));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_TRUE(v.hang);
  EXPECT_EQ(v.collective, cluster::kBackward);
  EXPECT_EQ(v.waiting.size(), 3u);
  const std::string text = joined(verdict_lines(v, 1.0));
  EXPECT_NE(text.find("hang: ranks 0-2 wait in backward (DDP's gradient all-reduce, most likely"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 3 has not entered it: it is in /job/train.py:88 (load_batch), blocked in clock_nanosleep"),
            std::string::npos)
      << text;
  // Seen once in backward (not blocked across both reads): not waiting, but
  // in it -- not "has not entered it" (a rank arriving as we read).
  ps[0].dump.threads[0].blocked_at_least_s = 0;
  const auto once = cluster::hang_verdict(ps);
  EXPECT_EQ(once.waiting.size(), 2u);
  const std::string once_text = joined(verdict_lines(once, 1.0));
  EXPECT_NE(once_text.find("rank 0 is in backward too, but was not blocked there in both reads"), std::string::npos)
      << once_text;
  EXPECT_EQ(once_text.find("rank 0 has not entered it"), std::string::npos) << once_text;
}

TEST(HangVerdict, EveryRankBlockedInBackwardIsNotCalledAHang) {
  // As well a long backward (a GPU's work waited for on the CPU) as a stuck
  // reducer: nothing tells them apart, so no verdict of a hang.
  std::vector<RankProcess> ps;
  for (int r = 0; r < 4; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_backward()), 1.0));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_FALSE(v.hang);
  EXPECT_EQ(v.inside_now.size(), 4u);
  EXPECT_EQ(joined(verdict_lines(v, 1.0)).rfind("no hang found: every rank was blocked in backward", 0), 0u);
  // Every rank in backward, one of them moving (still computing): no hang.
  ps[1].dump.threads[0].blocked_at_least_s = 0;
  const auto moving = cluster::hang_verdict(ps);
  EXPECT_FALSE(moving.hang);
  const std::string moving_text = joined(verdict_lines(moving, 1.0));
  EXPECT_EQ(moving_text.rfind("no hang found: every rank was in backward, 3 blocked there in both reads", 0), 0u)
      << moving_text;
  EXPECT_NE(moving_text.find("rank 1 was inside backward when read, and moving"), std::string::npos) << moving_text;
  // Every rank blocked in one c10d collective is a hang: none is missing,
  // and that is said.
  std::vector<RankProcess> c;
  for (int r = 0; r < 2; ++r) c.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 1.0, 2));
  const auto w = cluster::hang_verdict(c);
  EXPECT_TRUE(w.hang);
  EXPECT_NE(joined(verdict_lines(w, 1.0)).find("none is missing from it"), std::string::npos);
}

TEST(HangVerdict, RankRanges) {
  EXPECT_EQ(cluster::rank_ranges({}), "");
  EXPECT_EQ(cluster::rank_ranges({3}), "3");
  EXPECT_EQ(cluster::rank_ranges({7, 0, 1, 2, 4, 6, 2}), "0-2,4,6-7");
}

TEST(MarkStillBlocked, OnlyWhenBothReadsAgreeAndTheThreadNeverRan) {
  python::ProcessDump a;
  a.pid = 5;
  a.threads = {thread(5, 'S', SYS_futex, 10, in_all_reduce()), thread(6, 'S', SYS_futex, 10, in_all_reduce()),
               thread(7, 'S', SYS_read, 10, in_load_batch()),  thread(8, 'R', -1, 10, in_load_batch()),
               thread(9, 'S', SYS_read, -1, in_load_batch()),  thread(10, 'S', SYS_read, 3, in_load_batch())};
  python::ProcessDump b = a;
  b.threads[1].status.runs = 11;            // ran in between (woke, came back)
  b.threads[2].frames[1].line = 89;         // moved
  b.threads[5].status.syscall = SYS_futex;  // another call
  python::mark_still_blocked(a, b, 1.5);
  EXPECT_DOUBLE_EQ(b.threads[0].blocked_at_least_s, 1.5);
  EXPECT_EQ(b.threads[1].blocked_at_least_s, 0);
  EXPECT_EQ(b.threads[2].blocked_at_least_s, 0);
  EXPECT_EQ(b.threads[3].blocked_at_least_s, 0);  // running
  EXPECT_EQ(b.threads[4].blocked_at_least_s, 0);  // run count not known
  EXPECT_EQ(b.threads[5].blocked_at_least_s, 0);
  python::ProcessDump other = a;
  other.pid = 6;
  python::mark_still_blocked(other, b, 1.5);  // another process: nothing
}

TEST(ClusterDumpOutput, TextAndJsonAreValidUtf8) {
  std::vector<RankProcess> ps;
  ps.push_back(rank(0, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 1.0, 2));
  auto odd = in_load_batch();
  odd[1].file = "/job/tr\xff\nain.py";
  ps.push_back(rank(1, thread(0, 'S', SYS_clock_nanosleep, 9, odd), 1.0, 2));
  cluster::ClusterDump cd;
  cd.job_id = "42";
  cd.nodelist = "node[1-2]";
  cd.nodes.resize(2);
  cd.nodes[0].node = "node1";
  cd.nodes[1].node = "node2";
  const auto v = cluster::hang_verdict(ps);
  const std::string text = cluster_dump_text(cd, ps, v);
  EXPECT_EQ(utf8_text(text), text);  // valid UTF-8 already
  EXPECT_NE(text.find("=== Rank 1 (node2) ==="), std::string::npos) << text;
  EXPECT_NE(text.find("tr\\xff\\x0aain.py:88 (load_batch), blocked in clock_nanosleep"), std::string::npos) << text;
  const std::string json = cluster_dump_json(cd, ps, v);
  EXPECT_EQ(utf8_text(json), json);
  EXPECT_NE(json.find("\"hang\": true"), std::string::npos);
}

namespace {
Options parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "ltrace-bpf";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}
ExitCode code_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.code();
  }
  return ExitCode::ok;
}
}  // namespace

TEST(ClusterDumpOptions, DumpIsAWordAfterCluster) {
  auto o = parse({"cluster", "--slurm-job", "42", "dump", "--json", "--duration", "2", "--nodes", "a"});
  EXPECT_TRUE(o.cluster_dump);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.duration_s, 2);
  auto a = parse({"agent", "--dump-threads", "--job-env", "SLURM_JOB_ID=42", "--duration", "1"});
  EXPECT_TRUE(a.agent_dump);
  EXPECT_EQ(code_of({"cluster", "--slurm-job", "4", "dump", "-o", "t"}), ExitCode::usage);
  EXPECT_EQ(code_of({"cluster", "--slurm-job", "4", "dump", "--rate", "99"}), ExitCode::usage);
  EXPECT_EQ(code_of({"cluster", "--slurm-job", "4", "-o", "t", "--json"}), ExitCode::usage);
  EXPECT_EQ(code_of({"cluster", "--slurm-job", "4", "dump", "dump"}), ExitCode::usage);
  EXPECT_EQ(code_of({"agent", "--dump-threads", "--pid", "1", "--job-env", "A=1"}), ExitCode::usage);
  EXPECT_EQ(code_of({"record", "--pid", "1", "-o", "x", "--dump-threads"}), ExitCode::usage);
}

// Three of four ranks blocked in backward and the fourth gone (died, or
// unreadable): that is DDP's classic hang, not "every rank in backward".
TEST(HangVerdict, BackwardWithARankMissingIsAHang) {
  std::vector<RankProcess> ps;
  for (int r = 0; r < 3; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_backward()), 1.0));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_TRUE(v.hang);
  EXPECT_EQ(v.unread, std::vector<int>{3});
}

// A crafted WORLD_SIZE does not make the verdict list two billion ranks.
TEST(HangVerdict, HugeWorldSizeIsBounded) {
  std::vector<RankProcess> ps;
  for (int r = 0; r < 2; ++r) ps.push_back(rank(r, thread(0, 'S', SYS_futex, 5, in_all_reduce()), 1.0, 2'000'000'000));
  const auto v = cluster::hang_verdict(ps);
  EXPECT_LE(v.unread.size(), 65536u);
}
