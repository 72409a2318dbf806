#include "user/cli/prof_dump_output.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "reports/advanced/pstats_dump.h"
#include "reports/simple/simple_report.h"
#include "user/core/output_file.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  OutputFile f(path.string());
  f.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
}

}  // namespace

int write_prof_dumps(const ActionsReport& rep, const StacksReport& stacks, const std::string& dir,
                     const std::string& filename) {
  // AdvancedProfiler writes a file for every action it profiled, sampled
  // or not: the actions each process ran, and those it was sampled in
  // (begun before the attach).  Processes with none (DataLoader workers,
  // launchers) write nothing.
  struct Dumps {
    std::uint32_t pid;
    const ProcessActions* actions;
    const ProcessStacks* stacks;
    std::vector<std::string> names;
  };
  const ProcessIndex index(rep);
  std::vector<Dumps> procs;
  auto add = [&](std::uint32_t pid) {
    for (const auto& d : procs)
      if (d.pid == pid) return;
    Dumps d{pid, index.find(pid), nullptr, {}};
    for (const auto& s : stacks.processes)
      if (s.pid == pid) d.stacks = &s;
    if (d.actions)
      for (const auto& a : d.actions->actions) d.names.push_back(a.name);
    if (d.stacks)
      for (const auto& prof : d.stacks->on_cpu)
        if (prof.name != kNoAction && std::find(d.names.begin(), d.names.end(), prof.name) == d.names.end())
          d.names.push_back(prof.name);
    if (!d.names.empty()) procs.push_back(std::move(d));
  };
  for (const auto& p : rep.processes) add(p.meta.pid);
  for (const auto& ps : stacks.processes) add(ps.pid);
  int written = 0;
  if (!procs.empty()) make_output_dirs(dir);
  for (const auto& d : procs) {
    const ProcessMeta meta = d.actions ? index.with_rank_labels(d.actions->meta) : ProcessMeta{};
    const Stage stage = d.actions ? d.actions->stage : Stage::none;
    // As the text reports' files (report_output.cpp): the local rank under
    // a distributed run; several unranked processes kept apart by pid.
    const int local_rank = lightning_local_rank(meta.world_size, meta.local_rank);
    std::string name_part = filename;
    if (procs.size() > 1 && meta.world_size <= 1)
      name_part += (name_part.empty() ? "pid" : "-pid") + std::to_string(d.pid);
    std::set<std::string> seen_files;
    for (const auto& action : d.names) {
      const StackProfile* prof = nullptr;
      if (d.stacks)
        for (const auto& p : d.stacks->on_cpu)
          if (p.name == action) prof = &p;
      const std::string file =
          lightning_report_filename(stage_name(stage), name_part, local_rank, ".prof", utf8_text(action));
      if (!seen_files.insert(file).second)
        std::cerr << "ltrace-bpf: pid " << d.pid << ": two actions are named " << file
                  << " once made safe for a file name (as Lightning's): the last one is kept\n";
      write_file(std::filesystem::path(dir) / file, marshal_pstats(pstats_from_stacks(prof ? *prof : StackProfile{})));
      ++written;
    }
  }
  if (written && !stacks.period_ns)
    std::cerr << "ltrace-bpf: --dump-stats: no on-CPU stack samples in the window (a trace recorded without --rate "
                 "or --report advanced?): the .prof files are empty\n";
  if (written) {
    write_file(std::filesystem::path(dir) / kPstatsDumpReadmeName,
               pstats_dump_readme(stacks.period_ns, stacks.rate_hz));
    std::cerr << "ltrace-bpf: wrote " << written << " .prof file(s) to " << dir << " (pstats/snakeviz; tottime and "
              << "cumtime are sampled CPU-time estimates, ncalls a lower bound: " << kPstatsDumpReadmeName << ")\n";
  } else {
    std::cerr << "ltrace-bpf: --dump-stats: no Lightning action in the window, no .prof file written\n";
  }
  return written;
}

}  // namespace lt
