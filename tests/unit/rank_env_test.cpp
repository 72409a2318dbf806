// Rank labels and job identity from a process environment: precedence of
// torchrun / Slurm / Open MPI / PMI variables, bad numbers, the PROC_ENV
// record, and the hostname of a process.
#include "user/proc/rank_env.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "reports/aggregate/actions.h"
#include "reports/dump/event_dump.h"

using lt::proc::parse_rank_env;
using lt::proc::RankEnv;

namespace {
std::string own_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

TEST(RankEnv, EmptyEnvironmentIsNoJob) {
  RankEnv r = parse_rank_env({{"PATH", "/usr/bin"}, {"HOME", "/root"}});
  EXPECT_EQ(r.rank, -1);
  EXPECT_EQ(r.local_rank, -1);
  EXPECT_EQ(r.world_size, -1);
  EXPECT_EQ(r.local_world_size, -1);
  EXPECT_EQ(r.group_rank, -1);
  EXPECT_EQ(r.slurm_procid, -1);
  EXPECT_EQ(r.slurm_nodeid, -1);
  EXPECT_EQ(r.master_port, 0u);
  EXPECT_EQ(r.master_addr, "");
  EXPECT_EQ(r.slurm_job_id, "");
  EXPECT_EQ(r.run_id, "");
  EXPECT_FALSE(r.any());
}

TEST(RankEnv, TorchrunEnvironment) {
  RankEnv r = parse_rank_env({{"RANK", "5"},
                              {"LOCAL_RANK", "1"},
                              {"WORLD_SIZE", "8"},
                              {"LOCAL_WORLD_SIZE", "4"},
                              {"GROUP_RANK", "1"},
                              {"MASTER_ADDR", "node0.cluster"},
                              {"MASTER_PORT", "29500"},
                              {"TORCHELASTIC_RUN_ID", "job-abc"}});
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.group_rank, 1);
  EXPECT_EQ(r.master_addr, "node0.cluster");
  EXPECT_EQ(r.master_port, 29500u);
  EXPECT_EQ(r.run_id, "job-abc");
  EXPECT_EQ(r.slurm_job_id, "");
  EXPECT_EQ(r.slurm_procid, -1);
  EXPECT_TRUE(r.any());
}

TEST(RankEnv, SlurmEnvironment) {
  RankEnv r = parse_rank_env({{"SLURM_JOB_ID", "4242"},
                              {"SLURM_JOBID", "4242"},
                              {"SLURM_PROCID", "3"},
                              {"SLURM_LOCALID", "1"},
                              {"SLURM_NTASKS", "4"},
                              {"SLURM_NODEID", "1"}});
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.slurm_procid, 3);
  EXPECT_EQ(r.slurm_nodeid, 1);
  EXPECT_EQ(r.slurm_job_id, "4242");
  EXPECT_EQ(r.local_world_size, -1);
  EXPECT_TRUE(r.any());
  // The older name alone.
  EXPECT_EQ(parse_rank_env({{"SLURM_JOBID", "77"}}).slurm_job_id, "77");
}

TEST(RankEnv, OpenMpiAndPmiEnvironments) {
  RankEnv r = parse_rank_env(
      {{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "12"}});
  EXPECT_EQ(r.rank, 6);
  EXPECT_EQ(r.local_rank, 2);
  EXPECT_EQ(r.world_size, 12);
  EXPECT_TRUE(r.any());
  RankEnv p = parse_rank_env({{"PMI_RANK", "9"}});
  EXPECT_EQ(p.rank, 9);
  EXPECT_EQ(p.local_rank, -1);
  EXPECT_TRUE(p.any());
}

TEST(RankEnv, Precedence) {
  // torchrun inside srun: the torch variables win over Slurm's, Slurm's over
  // Open MPI's, Open MPI's over PMI's; the raw Slurm ids are kept apart.
  RankEnv r = parse_rank_env({{"RANK", "1"},
                              {"SLURM_PROCID", "0"},
                              {"OMPI_COMM_WORLD_RANK", "7"},
                              {"PMI_RANK", "8"},
                              {"LOCAL_RANK", "1"},
                              {"SLURM_LOCALID", "0"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                              {"WORLD_SIZE", "4"},
                              {"SLURM_NTASKS", "2"},
                              {"OMPI_COMM_WORLD_SIZE", "9"}});
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.slurm_procid, 0);
  RankEnv s = parse_rank_env({{"SLURM_PROCID", "2"},
                              {"OMPI_COMM_WORLD_RANK", "7"},
                              {"PMI_RANK", "8"},
                              {"SLURM_NTASKS", "3"},
                              {"OMPI_COMM_WORLD_SIZE", "9"},
                              {"SLURM_LOCALID", "0"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "5"}});
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 3);
  EXPECT_EQ(s.local_rank, 0);
  RankEnv o = parse_rank_env({{"OMPI_COMM_WORLD_RANK", "7"}, {"PMI_RANK", "8"}});
  EXPECT_EQ(o.rank, 7);
}

TEST(RankEnv, BadNumbersAreMinusOneAndFallThrough) {
  for (const char* bad :
       {"", " ", "abc", "1x", "-1", "-0x1", "+3", "3.0", "0x10", "99999999999999999999", "2147483648"}) {
    RankEnv r = parse_rank_env({{"RANK", bad},
                                {"LOCAL_RANK", bad},
                                {"WORLD_SIZE", bad},
                                {"LOCAL_WORLD_SIZE", bad},
                                {"GROUP_RANK", bad},
                                {"SLURM_NODEID", bad},
                                {"MASTER_PORT", bad}});
    EXPECT_EQ(r.rank, -1) << bad;
    EXPECT_EQ(r.local_rank, -1) << bad;
    EXPECT_EQ(r.world_size, -1) << bad;
    EXPECT_EQ(r.local_world_size, -1) << bad;
    EXPECT_EQ(r.group_rank, -1) << bad;
    EXPECT_EQ(r.slurm_nodeid, -1) << bad;
    EXPECT_EQ(r.master_port, 0u) << bad;
    EXPECT_FALSE(r.any()) << bad;
  }
  // A set but broken RANK does not hide a valid SLURM_PROCID.
  EXPECT_EQ(parse_rank_env({{"RANK", "oops"}, {"SLURM_PROCID", "4"}}).rank, 4);
  // Blanks around a number are tolerated; the largest int is kept.
  EXPECT_EQ(parse_rank_env({{"RANK", " 12\t"}}).rank, 12);
  EXPECT_EQ(parse_rank_env({{"RANK", "2147483647"}}).rank, 2147483647);
  EXPECT_EQ(parse_rank_env({{"RANK", "0"}}).rank, 0);
  // Ports: 1..65535 only.
  EXPECT_EQ(parse_rank_env({{"MASTER_PORT", "0"}}).master_port, 0u);
  EXPECT_EQ(parse_rank_env({{"MASTER_PORT", "65536"}}).master_port, 0u);
  EXPECT_EQ(parse_rank_env({{"MASTER_PORT", "65535"}}).master_port, 65535u);
}

TEST(RankEnv, AnyNeedsRankJobOrMaster) {
  EXPECT_TRUE(parse_rank_env({{"RANK", "0"}}).any());
  EXPECT_TRUE(parse_rank_env({{"SLURM_JOB_ID", "1"}}).any());
  EXPECT_TRUE(parse_rank_env({{"MASTER_ADDR", "127.0.0.1"}}).any());
  EXPECT_FALSE(parse_rank_env({{"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}).any());
}

TEST(RankEnv, ToEventFillsAndTruncates) {
  RankEnv r = parse_rank_env({{"RANK", "3"},
                              {"LOCAL_RANK", "1"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"GROUP_RANK", "1"},
                              {"SLURM_PROCID", "3"},
                              {"SLURM_NODEID", "1"},
                              {"SLURM_JOB_ID", std::string(40, 'j')},
                              {"MASTER_ADDR", "10.0.0.1"},
                              {"MASTER_PORT", "29555"},
                              {"TORCHELASTIC_RUN_ID", "run7"}});
  lt::lt_proc_env_event e = lt::proc::to_event(1234, r, std::string(100, 'h'));
  EXPECT_EQ(e.hdr.kind, lt::LT_EV_PROC_ENV);
  EXPECT_EQ(e.hdr.size, sizeof e);
  EXPECT_EQ(e.hdr.pid, 1234u);
  EXPECT_EQ(e.hdr.tid, 1234u);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.group_rank, 1);
  EXPECT_EQ(e.slurm_procid, 3);
  EXPECT_EQ(e.slurm_nodeid, 1);
  EXPECT_EQ(e.master_port, 29555u);
  EXPECT_EQ(std::string(e.slurm_job_id), std::string(sizeof e.slurm_job_id - 1, 'j'));
  EXPECT_EQ(std::string(e.master_addr), "10.0.0.1");
  EXPECT_EQ(std::string(e.run_id), "run7");
  EXPECT_EQ(std::string(e.hostname), std::string(sizeof e.hostname - 1, 'h'));
}

TEST(RankEnv, RecordInDumpAndProcessMeta) {
  lt::Trace trace;
  lt::lt_proc_info_event pi{};
  pi.hdr = {lt::LT_EV_PROC_INFO, sizeof pi, 42, 42, 0, 5};
  pi.rank = 1;
  pi.local_rank = 1;
  pi.world_size = 2;
  trace.append(pi);
  RankEnv r = parse_rank_env({{"RANK", "1"},
                              {"LOCAL_RANK", "1"},
                              {"WORLD_SIZE", "2"},
                              {"GROUP_RANK", "0"},
                              {"SLURM_JOB_ID", "4242"},
                              {"SLURM_NODEID", "3"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", "29555"}});
  lt::lt_proc_env_event pe = lt::proc::to_event(42, r, "node3");
  pe.hdr.ts_ns = 5;
  trace.append(pe);
  std::ostringstream out;
  lt::dump_events(trace, out);
  EXPECT_NE(out.str().find("5 42/42 proc_env rank=1 local_rank=1 world_size=2 local_world_size=-1 group_rank=0 "
                           "slurm_procid=-1 slurm_nodeid=3 slurm_job_id=4242 master_addr=127.0.0.1 "
                           "master_port=29555 run_id= hostname=node3\n"),
            std::string::npos)
      << out.str();
  auto rep = lt::aggregate_actions(trace);
  ASSERT_EQ(rep.processes.size(), 1u);
  const auto& m = rep.processes[0].meta;
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.hostname, "node3");
  EXPECT_EQ(m.slurm_job_id, "4242");
  EXPECT_EQ(m.master_addr, "127.0.0.1");
  EXPECT_EQ(m.master_port, 29555u);
  EXPECT_EQ(m.group_rank, 0);
  EXPECT_EQ(m.slurm_nodeid, 3);

  // An exec re-announces the process: the old image's job identity goes.
  pi.hdr.ts_ns = 9;
  trace.append(pi);
  auto rep2 = lt::aggregate_actions(trace);
  ASSERT_EQ(rep2.processes.size(), 1u);
  EXPECT_EQ(rep2.processes[0].meta.hostname, "");
  EXPECT_EQ(rep2.processes[0].meta.slurm_job_id, "");
  EXPECT_EQ(rep2.processes[0].meta.master_port, 0u);
  EXPECT_EQ(rep2.processes[0].meta.group_rank, -1);
}

// `python -c "..."`: a command line with newlines (and a tab) is still one
// dump line, the characters escaped.
TEST(RankEnv, ACommandLineWithNewlinesIsOneDumpLine) {
  lt::Trace trace;
  lt::lt_proc_info_event pi{};
  pi.hdr = {lt::LT_EV_PROC_INFO, sizeof pi, 42, 42, 0, 5};
  std::strcpy(pi.cmdline, "python3 -c import os\n\tos.getpid()\r");
  trace.append(pi);
  std::ostringstream out;
  lt::dump_events(trace, out);
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find(" cmd=python3 -c import os\\n\\tos.getpid()\\r\n"), std::string::npos) << text;
}

TEST(RankEnv, HostnameOfProcessInOurNamespace) {
  EXPECT_EQ(lt::proc::process_hostname(getpid()), own_hostname());
  // A process that does not exist: our own name.
  EXPECT_EQ(lt::proc::process_hostname(0x3fffffff), own_hostname());
}

TEST(RankEnv, HostnameOfProcessInAnotherUtsNamespace) {
  // A child in a new UTS namespace with its own name (needs CAP_SYS_ADMIN).
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    close(go[1]);
    const char name[] = "lt-simulated-node";
    char ok = unshare(CLONE_NEWUTS) == 0 && sethostname(name, sizeof name - 1) == 0 ? '1' : '0';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    char c;
    (void)!read(go[0], &c, 1);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char ok = '0';
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  std::string name = ok == '1' ? lt::proc::process_hostname(child) : "";
  std::string again = ok == '1' ? lt::proc::process_hostname(child) : "";  // cached
  close(go[1]);
  int st = 0;
  waitpid(child, &st, 0);
  close(ready[0]);
  if (ok != '1') GTEST_SKIP() << "cannot create a UTS namespace here (not root?)";
  EXPECT_EQ(name, "lt-simulated-node");
  EXPECT_EQ(again, "lt-simulated-node");
  EXPECT_EQ(own_hostname() == "lt-simulated-node", false);
}
