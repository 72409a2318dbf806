// One function per command (as perf's builtin-*.c), and the check each
// command makes of its options after parsing.  user/cli/commands.cpp puts
// them in the command table; run_command() dispatches.
#pragma once
#include "user/cli/options.h"
#include "user/watch/straggler.h"

namespace lt {

// --help, --version, else the command's function; returns the exit code.
int run_command(Options& opts);

void check_live(Options& opts);
void check_record(Options& opts);
void check_run(Options& opts);
void check_agent(Options& opts);
void check_report(Options& opts);
void check_cluster(Options& opts);
void check_dump(Options& opts);
void check_watch(Options& opts);
void check_diff(Options& opts);

int cmd_live(Options& opts);     // attach, print reports
int cmd_record(Options& opts);   // attach, write a trace file
int cmd_run(Options& opts);      // launch a command under ltrace-bpf
int cmd_agent(Options& opts);    // one node's recorder, reporting to the cluster coordinator
int cmd_report(Options& opts);   // reports from a trace file, or one job from many (--merge)
int cmd_cluster(Options& opts);  // every rank of a Slurm job
int cmd_ps(Options& opts);       // the torch/Lightning processes here
int cmd_dump(Options& opts);     // every thread of a process, now
int cmd_watch(Options& opts);    // always on: flight recorder, triggers, captures, metrics
int cmd_diff(Options& opts);     // what changed between two traces, tested

// The straggler rule of --straggler-rule / --straggler-wait (watch, and
// cluster ... watch's coordinator, which runs it over every node's ranks).
StragglerOptions straggler_options(const Options& o);

}  // namespace lt
