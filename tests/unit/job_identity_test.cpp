// diff's check that A and B are recordings of one job (reports/diff/job_identity.h).
#include "reports/diff/job_identity.h"

#include <gtest/gtest.h>

namespace lt {
namespace {

ActionsReport job(const std::string& cmdline, std::vector<std::string> actions) {
  ActionsReport rep;
  ProcessActions p;
  p.meta.cmdline = cmdline;
  for (auto& a : actions) p.actions.emplace_back(std::move(a), std::initializer_list<double>{0.001});
  rep.processes.push_back(std::move(p));
  return rep;
}

JobIdentity identity(const ActionsReport& rep) {
  JobIdentity id;
  id.add(rep);
  return id;
}

TEST(JobIdentity, TheScriptOfACommandLine) {
  EXPECT_EQ(script_of("/usr/bin/python3 -u /home/a/train.py --lr 1"), "train.py");
  EXPECT_EQ(script_of("python3.11 -X dev -W ignore train.py"), "train.py");
  EXPECT_EQ(script_of("/opt/venv/bin/python -m pkg.trainer fit"), "pkg.trainer");
  EXPECT_EQ(script_of("python -mpkg.trainer"), "pkg.trainer");
  EXPECT_EQ(script_of("/usr/local/bin/torchrun --nproc 2 train.py"), "torchrun");  // not an interpreter
  EXPECT_EQ(script_of("python -c import x"), "");
  EXPECT_EQ(script_of(""), "");
  // A line cut at PROC_INFO's bound: its last word may be cut too.
  EXPECT_EQ(script_of("/very/long/venv/bin/python /very/long/path/to/tra", true), "");
  EXPECT_EQ(script_of("/venv/bin/python /x/train.py --lr 0.0", true), "train.py");
}

TEST(JobIdentity, DifferentJobsShareNeitherScriptNorModule) {
  const auto a = identity(job("python /x/watch_job.py --steps 40", {"[LightningModule]Model.training_step"}));
  // Another checkout, other arguments: the same job.
  EXPECT_EQ(different_jobs(a, identity(job("python3 /y/watch_job.py --steps 9", {"run_training_epoch"}))), "");
  // A renamed script fitting the same model: the same job.
  EXPECT_EQ(different_jobs(a, identity(job("python train_v2.py", {"[LightningModule]Model.training_step"}))), "");
  // Another script and another model: different, said with both.
  const std::string why =
      different_jobs(a, identity(job("python transformer_fit.py", {"[LightningModule]RandomTokens.training_step"})));
  EXPECT_NE(why.find("watch_job.py (Model)"), std::string::npos) << why;
  EXPECT_NE(why.find("transformer_fit.py (RandomTokens)"), std::string::npos) << why;
  // Two models in scripts of one name: told by their classes.
  EXPECT_NE(different_jobs(identity(job("python /a/train.py", {"[LightningModule]Gpt.training_step"})),
                           identity(job("python /b/train.py", {"[LightningModule]Bert.training_step"}))),
            "");
  // Another script, no LightningModule on one side: told by the scripts.
  EXPECT_NE(different_jobs(a, identity(job("python other.py", {"run_training_epoch"}))), "");
  // A side that says too little (no command line, no LightningModule): not refused.
  EXPECT_EQ(different_jobs(a, identity(job("", {"run_training_epoch"}))), "");
  // No command line, another model: its class says it.
  EXPECT_NE(different_jobs(a, identity(job("", {"[LightningModule]Other.training_step"}))), "");
  // A process without actions (a launcher, a worker) says nothing.
  EXPECT_TRUE(identity(job("python launcher.py", {})).scripts.empty());
}

}  // namespace
}  // namespace lt
