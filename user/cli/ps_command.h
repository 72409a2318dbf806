// `ltrace-bpf ps`: the processes on this host (containers included) with
// torch or Lightning loaded (the rule: user/proc/census.h), one row each,
// and whether ltrace-bpf can profile them.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "user/proc/census.h"

namespace lt {

// One row, every cell printable text ("-" when unknown or absent).
struct PsRow {
  std::string pid, nspid, host, container, rank, local_rank, world_size, python, torch, lightning, cuda, xla, command,
      profile;
};

// The cells of one census entry; `profile` is "yes" or "no: <why>".
PsRow ps_row(const proc::CensusEntry& e, const std::string& profile);
// The table: a header, then the rows, columns left-aligned by code points;
// the last column (PROFILE) unpadded.
std::string render_ps_table(const std::vector<PsRow>& rows);

// Runs the census, checks each process with python::discover, prints the
// table to `out` and notes to `err` (-v: what was skipped and why).
// Returns the exit code (0, also when nothing was found).
int run_ps(bool verbose, std::ostream& out, std::ostream& err);

}  // namespace lt
