// Whether two recordings are of the same job, for `diff`: a regression gate
// that compares a trace of another job (a wrong path in a CI script) would
// pass or fail on nothing. A job is known by its script (the first
// non-option argument after the interpreter, or `-m`'s module) and by its
// LightningModule classes (from the `[LightningModule]Class.hook` actions).
// Where both sides have LightningModules, the classes decide: none shared is
// two jobs (two models, even in scripts of one name, train.py), one shared
// is one job (a renamed script fitting the same model). Where either has
// none (a plain torch job, a Lightning before its hooks were actions), the
// scripts decide: no name shared is two jobs.
#pragma once
#include <set>
#include <string>

#include "reports/aggregate/actions.h"

namespace lt {

struct JobIdentity {
  std::set<std::string> scripts;  // base names: the same job may run from another checkout
  std::set<std::string> modules;  // LightningModule class names
  void add(const ActionsReport& rep);
};

// The script of one command line (argv joined by spaces, as PROC_INFO keeps
// it): "train.py" of "/usr/bin/python3 -u /x/train.py --lr 1", "pkg.mod" of
// "python -m pkg.mod", the program itself when it is not a Python
// interpreter; "" when there is none (`python -c ...`, an empty line), or
// when `truncated` (the line was cut at PROC_INFO's bound) and the script is
// its last word: it may be cut too.
std::string script_of(const std::string& cmdline, bool truncated = false);

// "" when A and B may be the same job (or either side says too little to
// tell); else one line saying how they differ.
std::string different_jobs(const JobIdentity& a, const JobIdentity& b);

}  // namespace lt
