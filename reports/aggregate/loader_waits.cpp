#include "reports/aggregate/loader_waits.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <vector>

#include "reports/aggregate/py_symbols.h"
#include "user/model/record_dispatch.h"

namespace lt {
namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

LoaderFrame loader_frame(const StackFrame& f) {
  if (f.native || f.file.empty()) return LoaderFrame::none;
  const std::string_view file = f.file, fn = f.function;
  // The dataset's own code (co_qualname "MyDataset.__getitem__" on 3.11+,
  // co_name before), and what the worker runs it through.
  if (fn == "__getitem__" || fn == "__getitems__" || ends_with(fn, ".__getitem__") || ends_with(fn, ".__getitems__"))
    return LoaderFrame::dataset;
  if (ends_with(file, "/torch/utils/data/_utils/fetch.py") || ends_with(file, "/torch/utils/data/_utils/collate.py"))
    return LoaderFrame::dataset;
  if (ends_with(file, "/torch/utils/data/_utils/worker.py") && (fn == "_worker_loop" || ends_with(fn, "._worker_loop")))
    return LoaderFrame::worker_loop;
  return LoaderFrame::none;
}

struct LoaderWaitsAggregator::State {
  PySymbols symbols;
  std::uint64_t epoch = 0;
  // (pid, code, checksum) -> its class: string tests per frame, and a
  // worker's stacks repeat.
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>, LoaderFrame> classes;
  // Each thread's open off-CPU period: its stack, classified at its end
  // (the names of its frames may come after its begin).
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<lt_py_frame>> blocked;
  LoaderWaitsReport out;

  LoaderFrame of(std::uint32_t pid, const lt_py_frame& f) {
    const auto key = std::make_tuple(pid, f.code, f.checksum);
    if (auto it = classes.find(key); it != classes.end()) return it->second;
    const LoaderFrame c = loader_frame(symbols.frame(pid, f));
    if (symbols.code(pid, f.code, f.checksum)) classes.emplace(key, c);  // unnamed yet: asked again
    return c;
  }

  // Leaf first: the first dataset frame or worker loop met says where.
  LoaderFrame where(std::uint32_t pid, const std::vector<lt_py_frame>& frames) {
    if (symbols.epoch() != epoch) {
      epoch = symbols.epoch();
      classes.clear();
    }
    for (const auto& f : frames)
      if (const LoaderFrame c = of(pid, f); c != LoaderFrame::none) return c;
    return LoaderFrame::none;
  }
};

LoaderWaitsAggregator::LoaderWaitsAggregator() : s_(std::make_unique<State>()) {}
LoaderWaitsAggregator::~LoaderWaitsAggregator() = default;

void LoaderWaitsAggregator::add(const lt_event_header& h, const std::byte* record) {
  auto& s = *s_;
  s.symbols.add(h, record);
  auto forget = [&s](std::uint32_t pid) {
    std::erase_if(s.blocked, [pid](const auto& b) { return b.first.first == pid; });
  };
  visit_record(h, record,
               overloaded{[&](const lt_event_header&, const lt_sampler_info_event& e) {
                            if (e.flags & (LT_SAMPLER_OFF_CPU | LT_SAMPLER_OFF_CPU_FORKS)) s.out.off_cpu = true;
                          },
                          // A new program (its symbols dropped) or its end: periods
                          // still open are not charged (as stacks.cpp).
                          [&](const lt_event_header& hh, const lt_proc_event& e) {
                            if (hh.kind == LT_EV_PROC_EXEC) forget(e.child_pid);
                            if (hh.kind == LT_EV_PROC_EXIT) forget(hh.pid);
                          },
                          [&](const lt_event_header& hh, const lt_py_sample_event& e) {
                            if (hh.kind != LT_EV_OFFCPU_BEGIN) return;
                            const std::size_t n = std::min<std::size_t>(e.nframes, LT_STACK_MAX);
                            s.blocked[{hh.pid, hh.tid}].assign(e.frames, e.frames + n);
                          },
                          [&](const lt_event_header& hh, const lt_offcpu_end_event& e) {
                            const auto it = s.blocked.find({hh.pid, hh.tid});
                            if (it == s.blocked.end()) return;  // began before the attach, or its begin was lost
                            const std::uint64_t ns = hh.ts_ns > e.begin_ns ? hh.ts_ns - e.begin_ns : 0;
                            auto& p = s.out.procs[hh.pid];
                            const LoaderFrame where = s.where(hh.pid, it->second);
                            if (where == LoaderFrame::dataset)
                              p.in_dataset_ns += ns;
                            else if (where == LoaderFrame::worker_loop)
                              p.for_loop_ns += ns;
                            else
                              p.other_ns += ns;
                            if (where != LoaderFrame::none) {
                              if (p.waits.size() < LoaderWaitsReport::kMaxWaits)
                                p.waits.push_back({e.begin_ns, hh.ts_ns, where});
                              else
                                ++p.waits_left_out;
                            }
                            s.blocked.erase(it);
                          }});
}

void LoaderWaitsAggregator::gap() {
  s_->blocked.clear();
}

LoaderWaitsReport LoaderWaitsAggregator::finish() {
  return std::move(s_->out);
}

}  // namespace lt
