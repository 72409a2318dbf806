// The cluster command's parts that need no Slurm: the clock exchange (real
// UDP on the loopback), the agent's status lines and trace streaming
// (base64), scontrol's output, the srun line and the manifest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "user/cli/options.h"
#include "user/cluster/agent_capture.h"
#include "user/cluster/agent_protocol.h"
#include "user/cluster/clock_exchange.h"
#include "user/cluster/coordinator.h"
#include "user/cluster/slurm_job.h"
#include "user/cluster/streamed_file.h"
#include "user/core/errors.h"

using namespace lt;
using namespace lt::cluster;

TEST(ClockExchange, LeastDelayExchangeCounts) {
  // Server 5 ms ahead.  Exchange 1: 100 us each way; exchange 2: 10 us out,
  // 300 us back (asymmetric, larger delay); exchange 3: 20 us each way.
  const std::int64_t off = 5'000'000;
  std::vector<ClockSample> s = {
      {0, 100'000 + off, 110'000 + off, 210'000},
      {1'000'000, 1'010'000 + off, 1'020'000 + off, 1'320'000},
      {2'000'000, 2'020'000 + off, 2'025'000 + off, 2'045'000},
  };
  auto m = best_exchange(s);
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.samples, 3u);
  EXPECT_EQ(m.delay_ns, 40'000);
  EXPECT_EQ(m.offset_ns, off);
  // An asymmetric best exchange is off by at most delay / 2.
  auto a = best_exchange({s[1]});
  EXPECT_LE(std::llabs(a.offset_ns - off), a.delay_ns / 2);
  EXPECT_NE(a.offset_ns, off);
}

TEST(ClockExchange, NegativeDelaysAreIgnored) {
  auto m = best_exchange({{0, 10, 1'000'000, 20}});
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("negative"), std::string::npos);
  EXPECT_FALSE(best_exchange({}).ok);
}

TEST(ClockExchange, RoundTripsOnTheLoopbackAgreeWithOneClock) {
  ClockServer server;
  ASSERT_GT(server.port(), 0);
  auto m = measure_clock("127.0.0.1", server.port(), 32);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.samples, 32u);
  // The server counts an answer once sendto returns, which may be after the
  // client already has it.
  for (int i = 0; i < 100 && server.answered() < 32; ++i) usleep(10'000);
  EXPECT_EQ(server.answered(), 32u);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(m.reference, host);
  // One clock: the true offset is 0, so the error is the offset itself,
  // and it must be within the bound the exchange states.
  EXPECT_GE(m.delay_ns, 0);
  EXPECT_LE(std::llabs(m.offset_ns), m.delay_ns / 2 + 1) << m.offset_ns << " " << m.delay_ns;
}

TEST(ClockExchange, NoServerFailsQuicklyWithAReason) {
  std::uint16_t port;
  {
    ClockServer gone;  // a port that was just free, now closed
    port = gone.port();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto m = measure_clock("127.0.0.1", port, 32, 100);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("127.0.0.1"), std::string::npos) << m.error;
  EXPECT_LT(s, 2.0);
  EXPECT_FALSE(measure_clock("no-such-host.invalid", 9, 1, 50).ok);
}

TEST(ClockExchange, HostPort) {
  std::string h;
  std::uint16_t p = 0;
  EXPECT_TRUE(parse_host_port("10.0.0.1:4242", h, p));
  EXPECT_EQ(h, "10.0.0.1");
  EXPECT_EQ(p, 4242);
  EXPECT_TRUE(parse_host_port(":9", h, p));
  EXPECT_EQ(h, "");
  EXPECT_EQ(p, 9);
  EXPECT_FALSE(parse_host_port("x:0", h, p));
  EXPECT_FALSE(parse_host_port("x:65536", h, p));
  EXPECT_FALSE(parse_host_port("x:", h, p));
  EXPECT_FALSE(parse_host_port("x:1a", h, p));
}

TEST(AgentProtocol, LinesRoundTripAnyText) {
  const std::string err = "cannot attach: 50% done = bad\nsecond line\t%41";
  const std::string line = agent_line("failed", {{"code", "3"}, {"error", err}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("@ltrace-agent failed code=3 error=", 0), 0u) << line;
  auto m = parse_agent_line(line + "\r\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, "failed");
  EXPECT_EQ(m->field("code"), "3");
  EXPECT_EQ(m->field("error"), err);
  EXPECT_EQ(m->field("missing", "x"), "x");
  EXPECT_FALSE(parse_agent_line("Epoch 0: loss=1"));
  EXPECT_FALSE(parse_agent_line("@ltrace-agent "));
}

TEST(AgentProtocol, Base64RoundTripsEveryLengthAndLineSplit) {
  std::mt19937 rng(7);
  for (std::size_t n = 0; n < 300; ++n) {
    std::string data(n, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    const auto* d = reinterpret_cast<const unsigned char*>(data.data());
    // As the agent sends it: 57-byte blocks, one 76-character line each.
    std::string back;
    for (std::size_t i = 0; i < n; i += 57) {
      const std::string line = base64_encode(d + i, std::min<std::size_t>(57, n - i));
      EXPECT_LE(line.size(), 76u);
      ASSERT_TRUE(base64_decode_append(line + "\r", back));
    }
    EXPECT_EQ(back, data) << n;
  }
  EXPECT_EQ(base64_encode(reinterpret_cast<const unsigned char*>("Man"), 3), "TWFu");
  EXPECT_EQ(base64_encode(reinterpret_cast<const unsigned char*>("Ma"), 2), "TWE=");
  std::string out;
  EXPECT_FALSE(base64_decode_append("TW*u", out));
}

TEST(Slurm, ScontrolFieldsWithSpacesInValues) {
  const std::string line =
      "JobId=4242 JobName=train ddp UserId=root(0) GroupId=root(0) Priority=1 JobState=RUNNING Reason=None "
      "NumNodes=2 NumCPUs=4 NumTasks=4 TRES=cpu=4,node=2 NodeList=node[1-2] BatchHost=node1 "
      "Command=/tmp/run job.sh WorkDir=/tmp\n";
  auto f = parse_scontrol_fields(line);
  EXPECT_EQ(f["JobId"], "4242");
  EXPECT_EQ(f["JobName"], "train ddp");
  EXPECT_EQ(f["JobState"], "RUNNING");
  EXPECT_EQ(f["NumTasks"], "4");
  EXPECT_EQ(f["TRES"], "cpu=4,node=2");
  EXPECT_EQ(f["NodeList"], "node[1-2]");
  EXPECT_EQ(f["Command"], "/tmp/run job.sh");
  EXPECT_EQ(f["WorkDir"], "/tmp");
  // A job name that looks like fields cannot shadow the real ones.
  auto g = parse_scontrol_fields("JobId=7 JobName=x NodeList=evil UserId=u(1) JobState=RUNNING NodeList=n[1-2]");
  EXPECT_EQ(g["JobName"], "x NodeList=evil");
  EXPECT_EQ(g["NodeList"], "n[1-2]");
}

TEST(Slurm, JobIdsAndTheAgentLine) {
  EXPECT_TRUE(valid_job_id("4242"));
  EXPECT_TRUE(valid_job_id("4242_3"));
  EXPECT_FALSE(valid_job_id(""));
  EXPECT_FALSE(valid_job_id("42;rm"));
  EXPECT_FALSE(valid_job_id("-1"));
  auto a = agent_srun_argv("srun", "4242", "node2", {"/usr/bin/ltrace-bpf", "agent"});
  auto has = [&](const std::string& x) { return std::find(a.begin(), a.end(), x) != a.end(); };
  EXPECT_EQ(a.front(), "srun");
  EXPECT_TRUE(has("--jobid=4242"));
  EXPECT_TRUE(has("--overlap"));
  EXPECT_TRUE(has("--nodelist=node2"));
  EXPECT_TRUE(has("--ntasks=1"));
  EXPECT_EQ(a[a.size() - 2], "/usr/bin/ltrace-bpf");
  EXPECT_EQ(a.back(), "agent");
}

TEST(Slurm, NoScontrolIsASlurmError) {
  try {
    query_slurm_job("4242", "/nonexistent/scontrol");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::slurm);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/scontrol"), std::string::npos) << e.what();
  }
  try {
    query_slurm_job("4242;x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
  }
}

TEST(Manifest, FailedNodesBecomeNotes) {
  const auto dir = std::filesystem::temp_directory_path() / ("lt-manifest-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(manifest_notes(dir.string()).empty());
  std::ofstream(dir / "cluster-nodes.tsv")
      << "# ltrace-bpf cluster: Slurm job 7 (n[1-3]), 3 node(s)\n# node\tstatus\t...\n"
      << "n1\tok\tn1\t2\t0,1\t1.100\tn1.ltrace\t100\t-5\t40\t-\n"
      << "n2\tfailed\tn2\t-\t-\t-\t-\t0\t-\t-\tagent ended with killed by signal 9\n"
      << "n3\tfailed\tn3\t2\t4,5\t1.2\tn3.ltrace\t50\t-\t-\tagent ended with exit status 7; partial trace kept\n";
  auto notes = manifest_notes(dir.string());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "node n2: its agent failed (agent ended with killed by signal 9): no trace");
  EXPECT_EQ(notes[1],
            "node n3: its agent failed (agent ended with exit status 7; partial trace kept): its trace n3.ltrace may "
            "be incomplete");
  std::filesystem::remove_all(dir);
}

namespace {
Options parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "ltrace-bpf";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}
ExitCode usage_code(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.code();
  }
  return ExitCode::ok;
}
}  // namespace

TEST(ClusterOptions, RecordOptionsArePassedOnToAgents) {
  auto o = parse({"cluster", "--slurm-job", "42", "-o", "traces", "--rate", "499", "--ops=aten::mm", "--off-cpu",
                  "--report", "simple,comm", "--duration", "5", "--nodes", "a,b", "--gather", "stream"});
  EXPECT_EQ(o.command, Options::Command::cluster);
  EXPECT_EQ(o.slurm_job, "42");
  EXPECT_EQ(o.output, "traces");
  EXPECT_EQ(o.duration_s, 5);
  EXPECT_EQ(o.nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.gather, "stream");
  EXPECT_EQ(o.agent_args,
            (std::vector<std::string>{"--rate", "499", "--ops=aten::mm", "--off-cpu", "--report", "simple,comm"}));
  auto a = parse(
      {"agent", "--job-env", "SLURM_JOB_ID=42", "-o", "x.ltrace", "--clock-server", ":9", "--stream", "--wait", "2"});
  EXPECT_EQ(a.command, Options::Command::agent);
  EXPECT_EQ(a.clock_server, ":9");
  EXPECT_TRUE(a.stream);
  EXPECT_EQ(a.wait_s, 2);
  EXPECT_TRUE(a.children);
}

TEST(ClusterOptions, MisuseIsAUsageError) {
  EXPECT_EQ(usage_code({"cluster", "-o", "t"}), ExitCode::usage);           // no job
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4"}), ExitCode::usage);  // no -o
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "-o", "t", "--pid", "1"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "-o", "t", "--gather", "ftp"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"record", "--pid", "1", "-o", "t", "--slurm-job", "4"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"record", "--pid", "1", "-o", "t", "--stream"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"agent", "--job-env", "A=1"}), ExitCode::usage);  // no -o
  EXPECT_EQ(usage_code({"agent", "--job-env", "A=1", "-o", "x", "--wait", "-1"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"record", "--pid", "1", "-o", "x", "--wait", "3"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "-o", "t", "--wait", "3"}), ExitCode::ok);
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "capture", "-o", "back"}), ExitCode::ok);  // brought back
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "capture", "--gather", "stream"}), ExitCode::usage);
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "capture", "--duration", "30"}), ExitCode::ok);
  EXPECT_EQ(usage_code({"cluster", "--slurm-job", "4", "capture", "--duration", "601"}), ExitCode::usage);
}

// cluster ... capture -o: the agent finds the capture its request made by
// its directory's name (a request's, of that pid, not there before).
TEST(AgentCapture, TheNewRequestCaptureOfItsPid) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / ("lt-agentcap-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  for (const char* n : {"20261206T080000.000Z-node1-4242-r0-request", "20261206T080001.000Z-node1-4242-r0-slow-step",
                        "20261206T080002.000Z-node1-14242-r1-request"})
    std::filesystem::create_directory(d / n);
  const std::vector<std::string> before = {"20261206T080000.000Z-node1-4242-r0-request"};
  EXPECT_EQ(lt::cluster::new_request_capture(d.string(), 4242, before), "");  // the old one, a trigger's, another pid's
  std::filesystem::create_directory(d / "20261206T080003.000Z-node1-4242-r0-request-2");
  EXPECT_EQ(lt::cluster::new_request_capture(d.string(), 4242, before), "20261206T080003.000Z-node1-4242-r0-request-2");
  EXPECT_EQ(lt::cluster::new_request_capture((d / "none").string(), 4242, before), "");
  std::filesystem::remove_all(d);
}

// A file streamed back by an agent: every byte announced, written as it
// comes (whole); fewer (cut short); a corrupt line (said); a path that
// cannot be written (said, its lines consumed); an agent gone mid-stream.
TEST(StreamedFile, WholeCutCorruptUnwritableAndAbandoned) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / ("lt-streamed-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  const std::string data = "trace bytes: \x01\x02 and more";
  const auto line = lt::cluster::base64_encode(reinterpret_cast<const unsigned char*>(data.data()), data.size());
  const std::string end = std::string(lt::cluster::kAgentPrefix) + "end";
  lt::cluster::StreamedFile f;
  f.begin((d / "a.ltrace").string(), data.size());
  EXPECT_TRUE(f.receiving());
  EXPECT_FALSE(f.take(line));
  EXPECT_TRUE(f.take(end));
  EXPECT_TRUE(f.whole() && !f.receiving() && f.error().empty());
  std::ifstream in(d / "a.ltrace", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data);
  EXPECT_EQ(std::filesystem::status(d / "a.ltrace").permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);              // owner-only
  f.begin((d / "b.ltrace").string(), data.size() + 1);  // one byte never comes
  f.take(line);
  EXPECT_TRUE(f.take(end));
  EXPECT_FALSE(f.whole());
  EXPECT_EQ(f.received(), data.size());
  f.begin((d / "c.ltrace").string(), 3);
  f.take("!!not base64!!");
  f.take(end);
  EXPECT_FALSE(f.whole());
  EXPECT_NE(f.error(), "");
  std::filesystem::create_symlink("/etc/passwd", d / "link.ltrace");  // never written through
  f.begin((d / "link.ltrace").string(), data.size());
  EXPECT_NE(f.error(), "");
  EXPECT_FALSE(f.take(line));
  EXPECT_TRUE(f.take(end));
  EXPECT_FALSE(f.whole());
  f.begin((d / "e.ltrace").string(), data.size());
  f.take(line);
  f.abandon();
  EXPECT_FALSE(f.receiving() || f.whole());
  std::filesystem::remove_all(d);
}
