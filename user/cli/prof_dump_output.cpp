#include "user/cli/prof_dump_output.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "reports/advanced/pstats_dump.h"
#include "reports/format/utf8_text.h"
#include "reports/simple/simple_report.h"
#include "user/core/output_file.h"

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
  // or not: every process that ran actions, and every one with samples.
  std::vector<std::uint32_t> pids;
  for (const auto& p : rep.processes)
    if (!p.actions.empty()) pids.push_back(p.meta.pid);
  for (const auto& ps : stacks.processes)
    if (std::find(pids.begin(), pids.end(), ps.pid) == pids.end()) pids.push_back(ps.pid);
  const ProcessIndex index(rep);
  int written = 0;
  make_output_dirs(dir);
  for (auto pid : pids) {
    const ProcessActions* pa = index.find(pid);
    const ProcessMeta meta = pa ? index.with_rank_labels(pa->meta) : ProcessMeta{};
    const Stage stage = pa ? pa->stage : Stage::none;
    const ProcessStacks* ps = nullptr;
    for (const auto& s : stacks.processes)
      if (s.pid == pid) ps = &s;
    // As the text reports' files (report_output.cpp): the local rank under
    // a distributed run; several unranked processes kept apart by pid.
    const int local_rank = meta.world_size > 1 ? std::max(meta.local_rank, 0) : -1;
    std::string name_part = filename;
    if (pids.size() > 1 && meta.world_size <= 1)
      name_part += (name_part.empty() ? "pid" : "-pid") + std::to_string(pid);
    std::vector<std::string> actions;
    if (pa)
      for (const auto& a : pa->actions) actions.push_back(a.name);
    if (ps)
      for (const auto& prof : ps->on_cpu)
        if (prof.name != kNoAction && std::find(actions.begin(), actions.end(), prof.name) == actions.end())
          actions.push_back(prof.name);
    std::set<std::string> seen_files;
    for (const auto& action : actions) {
      const StackProfile* prof = nullptr;
      if (ps)
        for (const auto& p : ps->on_cpu)
          if (p.name == action) prof = &p;
      const std::string file =
          lightning_report_filename(stage_name(stage), name_part, local_rank, ".prof", utf8_text(action));
      if (!seen_files.insert(file).second)
        std::cerr << "ltrace-bpf: pid " << pid << ": two actions are named " << file
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
