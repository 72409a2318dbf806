#include "reports/verdict/loader_workers.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace lt {

namespace {

std::string pct(double share) {
  return finding_pct(share);
}

// What to try for each way the batches are loaded (input_workers).
constexpr const char* kAddWorkers =
    "DataLoader(num_workers=N) (N up to the free cores), persistent_workers=True, pin_memory=True; or make "
    "__getitem__ cheaper";
constexpr const char* kCpuBoundLoading =
    "more DataLoader workers where cores are free (num_workers), or a cheaper __getitem__ / collate_fn (decode once, "
    "cache, smaller samples)";
// The loop thread waiting for a CPU past the contention threshold: more
// workers, forked from it onto the same CPUs, would wait for one too.
constexpr const char* kNoCoreFree =
    "no CPU was free for more DataLoader workers (its thread waited for one): free cores first (what else runs "
    "there: the cpu contention finding; fewer torch threads or workers than cores; cores of its own: taskset, cgroup "
    "cpusets, Slurm --cpus-per-task), then more workers; or make __getitem__ / collate_fn cheaper";
// The workers themselves wait for a CPU: more of them would wait too.
constexpr const char* kWorkersShortOfCores =
    "the workers wait for a CPU: free cores for them (what else runs there; fewer torch threads than cores: "
    "torch.set_num_threads; cores of its own: taskset, cgroup cpusets, Slurm --cpus-per-task), or make "
    "__getitem__ / collate_fn cheaper (decode once, cache, smaller samples); more workers would wait as well";
constexpr const char* kOverlapWaits =
    "more DataLoader workers to overlap their waits, a larger prefetch_factor, persistent_workers=True; faster "
    "storage or a cache for what __getitem__ reads";

// The input-bound finding says who loads the batches (find_workers): none
// (num_workers=0), or workers; busy workers are CPU-bound loading; idle
// ones wait, inside __getitem__ (I/O, sleeps) or for the loop to ask. CPU
// time cannot tell those two waits apart: where off-CPU stacks were
// recorded (`loader`) they say which, else the wording names both.
void say_who_loads(const Workers& w, const ProcessSteps& ps, const LoaderWaitsReport* loader, bool no_core_free,
                   Finding& f) {
  if (ps.train.empty()) return;
  const char* add_workers = no_core_free ? kNoCoreFree : kAddWorkers;
  const auto& workers = w.pids;
  const bool untraced = w.untraced;
  if (workers.empty()) {
    if (w.known_none()) {
      f.evidence += w.followed ? "; no DataLoader worker process in the recording"
                               : "; no DataLoader worker process ran in the steps (the training process's forks, "
                                 "seen from /proc)";
      f.evidence += ": num_workers=0, the batches loaded in the training process itself";
      f.try_this = add_workers;
    } else if (w.scans_too_short) {
      f.evidence +=
          "; DataLoader workers not judged: the steps recorded are too short for the /proc scans of the training "
          "process's forks (one a second; a worker counts with two samples in the steps)";
      f.try_this = std::string("record longer, or with --children, to see the DataLoader workers; ") + add_workers;
    } else {
      // Workers are the trainer's children: not followed, none could be seen.
      f.evidence +=
          "; DataLoader workers not judged: the recording does not say it followed the training process's "
          "children (--pid without --children, or an ltrace-bpf older than this flag), so whether num_workers=0 "
          "is not known";
      f.try_this = std::string("record with --children to see the DataLoader workers; ") + add_workers;
    }
    return;
  }
  const std::string who = w.who();
  const std::size_t judged = w.judged;
  const double busy_sum = w.busy_sum;
  // Their waits off a CPU inside the train steps (not before the first,
  // nor a persistent worker's through validation): inside the dataset, or
  // in the worker loop for the training loop (recorded with --off-cpu).
  std::uint64_t in_dataset = 0, for_loop = 0;
  if (loader)
    for (std::uint32_t pid : workers)
      if (auto it = loader->procs.find(pid); it != loader->procs.end())
        for (const auto& wait : it->second.waits) {
          // The steps are in time order: the first that ends after the wait begins.
          auto st = std::partition_point(ps.train.begin(), ps.train.end(),
                                         [&](const StepRecord& s) { return s.end_ns <= wait.begin_ns; });
          std::uint64_t in_steps = 0;
          for (; st != ps.train.end() && st->begin_ns < wait.end_ns; ++st)
            in_steps += std::min(st->end_ns, wait.end_ns) - std::max(st->begin_ns, wait.begin_ns);
          (wait.where == LoaderFrame::dataset ? in_dataset : for_loop) += in_steps;
        }
  const bool off_cpu_recorded = loader && loader->off_cpu && !untraced;
  const bool waits_known = off_cpu_recorded && in_dataset + for_loop > 0;
  const double dataset_share =
      waits_known ? static_cast<double>(in_dataset) / static_cast<double>(in_dataset + for_loop) : 0;
  const double busy = judged ? busy_sum / static_cast<double>(judged) : 0;
  // Runnable but waiting for a CPU is CPU-bound too, short of cores (an
  // audit: 2 workers of a 1 ms-per-sample busy loop on 2 CPUs, on one 65 %
  // of the time and waiting for one most of the rest, were said to "keep
  // up", with advice to move work into them).
  const double waiting = judged ? w.waiting_sum / static_cast<double>(judged) : 0;
  if (judged && busy + waiting >= kWorkersBusy) {
    const bool short_of_cores = waiting >= kContention;
    f.evidence += "; " + who + ", on a CPU " + pct(busy) + " of the steps' time each on average" +
                  (waiting >= 0.01 ? " and waiting for one " + pct(waiting) + " more" : "") + ": loading is CPU-bound" +
                  (short_of_cores ? ", short of cores" : "");
    f.try_this = short_of_cores ? kWorkersShortOfCores : no_core_free ? kNoCoreFree : kCpuBoundLoading;
    return;
  }
  const std::string on_cpu =
      judged ? ", on a CPU only " + pct(busy) + " of the steps' time each on average"
             : ", how busy not judged (no /proc samples of them: record with --report verdict or --device-stats)";
  if (!waits_known) {
    if (!judged) {
      f.evidence += "; " + who + on_cpu;
      return;
    }
    f.evidence += "; " + who + on_cpu + ": they wait, inside __getitem__ (I/O, sleeps) or for the loop to ask" +
                  (off_cpu_recorded ? std::string(" (their off-CPU stacks in the steps name neither)")
                                    : std::string(" (their off-CPU stacks tell which: ltrace-bpf --report verdict "
                                                  "--children, or --off-cpu)"));
    f.try_this = kOverlapWaits;
    return;
  }
  const std::string split = "of their waits off a CPU in the steps, " + pct(dataset_share) +
                            " inside the dataset (__getitem__, the fetcher, collate) and " + pct(1 - dataset_share) +
                            " in the worker loop waiting for the training loop";
  if (dataset_share >= 0.5) {
    f.evidence += "; " + who + on_cpu + "; " + split + ": loading waits inside __getitem__ (I/O, sleeps, locks)";
    f.try_this = kOverlapWaits;
  } else {
    f.evidence += "; " + who + on_cpu + "; " + split +
                  ": the workers keep up, the fetch's time goes in the training process (taking the batches from "
                  "the workers, pin_memory, work done there)";
    f.try_this =
        "look at the training process's fetch: batches of Python objects are pickled (tensors are shared), "
        "pin_memory copies, a collate_fn or transform run in the main process; move work into the workers";
  }
}

}  // namespace

std::string Workers::who() const {
  std::string list;
  for (std::size_t i = 0; i < pids.size() && i < 8; ++i) list += (i ? ", " : "") + std::to_string(pids[i]);
  if (pids.size() > 8) list += ", ...";
  return (anew() ? std::to_string(at_once) + " DataLoader worker process(es) at a time, " +
                       std::to_string(pids.size()) + " started in all"
                 : std::to_string(pids.size()) + " DataLoader worker process(es)") +
         " (pid " + list + (untraced ? ", not traced: --pid without --children; seen from /proc)" : ")");
}

// Workers started inside a validation run are the validation DataLoader's
// (non-persistent ones live on into the next train steps; persistent ones
// start in the first run): not the train loader's, nor its restarts. An
// untraced fork's start is its first /proc sample's time (a scan a second
// at most): one started late in a run may be taken for a train worker.
Workers find_workers(const ActionsReport& rep, const ProcessActions& trainer, const ProcessSteps& ps,
                     const BetweenSteps& gaps, const DeviceStatsReport* stats) {
  Workers w;
  if (ps.train.empty()) return w;
  auto in_validation = [&](std::uint64_t start) {
    return std::any_of(gaps.runs.begin(), gaps.runs.end(),
                       [&](const BetweenSteps::Run& r) { return start >= r.begin_ns && start <= r.end_ns; });
  };
  const std::uint64_t from = ps.train.front().begin_ns, to = ps.train.back().end_ns;
  std::map<std::uint32_t, const ProcessActions*> by_pid;
  for (const auto& q : rep.processes) by_pid[q.meta.pid] = &q;
  auto forkserver = [](const ProcessActions* q) {
    return q->meta.cmdline.find("multiprocessing.forkserver") != std::string::npos;
  };
  auto of_trainer = [&](const ProcessActions& q) {
    bool via_forkserver = false;
    const ProcessActions* at = &q;
    for (int depth = 0; depth < 8; ++depth) {
      const auto up = by_pid.find(at->meta.ppid);
      if (up == by_pid.end()) return false;
      if (up->second == &trainer) return q.meta.cmdline == trainer.meta.cmdline || via_forkserver;
      via_forkserver = via_forkserver || forkserver(up->second);
      at = up->second;
    }
    return false;
  };
  // A main thread's shares of [from, to] on a CPU and waiting for one
  // (run-queue time), from its first and last samples in it; none without
  // two.
  struct Shares {
    double on_cpu = 0, waiting = 0;
  };
  auto shares = [&](const std::vector<ProcessDeviceStats::Sched>& sched) -> std::optional<Shares> {
    const ProcessDeviceStats::Sched* first = nullptr;
    const ProcessDeviceStats::Sched* last = nullptr;
    for (const auto& x : sched)
      if (x.ts >= from && x.ts <= to) {
        if (!first) first = &x;
        last = &x;
      }
    if (!first || last->ts <= first->ts || last->cpu_ns < first->cpu_ns) return std::nullopt;
    const auto span = static_cast<double>(last->ts - first->ts);
    return Shares{static_cast<double>(last->cpu_ns - first->cpu_ns) / span,
                  last->runq_ns >= first->runq_ns ? static_cast<double>(last->runq_ns - first->runq_ns) / span : 0};
  };
  auto judge = [&](const std::vector<ProcessDeviceStats::Sched>& sched) {
    if (auto x = shares(sched)) w.busy_sum += x->on_cpu, w.waiting_sum += x->waiting, ++w.judged;
  };
  for (const auto& q : rep.processes) {
    if (&q == &trainer || !(q.meta.flags & LT_PROC_PYTHON) || q.total_calls() || !of_trainer(q)) continue;
    if (q.window_begin_ns >= to || (q.window_end_ns && q.window_end_ns <= from)) continue;
    if (in_validation(q.window_begin_ns)) continue;
    w.pids.push_back(q.meta.pid);
    w.lives.emplace_back(q.window_begin_ns, q.window_end_ns ? q.window_end_ns : UINT64_MAX);
    if (stats)
      for (const auto& st : stats->processes)
        if (st.pid == q.meta.pid) judge(st.sched);
  }
  w.followed = trainer.meta.flags & LT_PROC_CHILDREN_FOLLOWED;
  if (w.pids.empty() && !w.followed && stats) {
    // None found means none ran only where the scans (one a second) and
    // the samples (a worker counts with two in the steps) could have seen
    // one: the trainer's own samples in the steps a scan apart or more. A
    // watch capture's steps can last half a second (an audit: "num_workers=0"
    // beside two live workers).
    for (const auto& st : stats->processes)
      if (st.pid == trainer.meta.pid && st.forks_scanned) {
        std::uint64_t first = 0, last = 0;
        for (const auto& x : st.sched)
          if (x.ts >= from && x.ts <= to) {
            if (!first) first = x.ts;
            last = x.ts;
          }
        w.scanned = last >= first + kForkScanNs;
        w.scans_too_short = !w.scanned;
      }
    // Alive in the steps: two samples inside them.
    for (const auto& u : stats->untraced_forks)
      if (u.target == trainer.meta.pid && shares(u.sched) && !in_validation(u.sched.front().ts)) {
        w.pids.push_back(u.pid);
        w.lives.emplace_back(u.sched.front().ts, u.sched.back().ts);
        judge(u.sched);
      }
  }
  w.untraced = !w.pids.empty() && !w.followed;
  for (const auto& st : ps.train) {
    const std::uint64_t mid = st.begin_ns + (st.end_ns - st.begin_ns) / 2;
    std::size_t alive = 0;
    for (const auto& [b, e] : w.lives) alive += b <= mid && mid < e;
    w.at_once = std::max(w.at_once, alive);
  }
  return w;
}

void persistent_workers_first(std::string& try_this) {
  for (const char* said : {", persistent_workers=True", "persistent_workers=True, "})
    if (auto at = try_this.find(said); at != std::string::npos) try_this.erase(at, std::strlen(said));
  try_this = "persistent_workers=True (the workers were started anew, each epoch or each loader); " + try_this;
}

void input_workers(const Workers& w, const ProcessSteps& ps, const LoaderWaitsReport* loader, bool no_core_free,
                   bool restarts_elsewhere, Finding& f) {
  say_who_loads(w, ps, loader, no_core_free, f);
  if (w.anew() && !restarts_elsewhere) persistent_workers_first(f.try_this);
}

}  // namespace lt
