// Where a process waited off a CPU (recorded with --off-cpu: OFFCPU_BEGIN's
// stack, ended by OFFCPU_END), in the terms the verdict's input-bound
// finding asks of the DataLoader workers: inside the dataset (__getitem__
// or __getitems__, PyTorch's fetcher, collate: I/O, sleeps, locks) or in
// the worker loop outside it (waiting for the training loop to ask for a
// batch, or to take one).  CPU time alone cannot tell these apart.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "bpf/events.h"
#include "user/model/stack_profile.h"

namespace lt {

enum class LoaderFrame { none, dataset, worker_loop };
// A frame of the dataset's code path or of PyTorch's worker loop.
LoaderFrame loader_frame(const StackFrame& f);

struct LoaderWaitsReport {
  // One period off a CPU under the dataset's code or in the worker loop
  // (the verdict keeps the parts inside the train steps).
  struct Wait {
    std::uint64_t begin_ns = 0, end_ns = 0;
    LoaderFrame where = LoaderFrame::none;
  };
  static constexpr std::size_t kMaxWaits = 1 << 20;  // per process; later ones counted in the totals only
  struct Process {
    std::uint64_t in_dataset_ns = 0;   // off a CPU under the dataset's code
    std::uint64_t for_loop_ns = 0;     // off a CPU in the worker loop, outside it
    std::uint64_t other_ns = 0;        // anywhere else (another thread: a queue's feeder)
    std::vector<Wait> waits;           // the first two kinds, each period in the order they ended
    std::uint64_t waits_left_out = 0;  // past kMaxWaits
  };
  std::map<std::uint32_t, Process> procs;  // by pid
  bool off_cpu = false;                    // the recording sampled off-CPU stacks (SAMPLER_INFO)
};

class LoaderWaitsAggregator {
 public:
  LoaderWaitsAggregator();
  ~LoaderWaitsAggregator();
  void add(const lt_event_header& h, const std::byte* record);
  // A damaged stretch of the trace: a period open across it is not joined.
  void gap();
  LoaderWaitsReport finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace lt
