// An observed process's CUDA launches and allocations, joined to the calls
// around them by time (docs/design-op-observer.md, "CUDA columns" and
// "Memory columns"): the op observer sends no op stack with them, and its
// calls come a drain later.  Each waits on its thread, in time order; each
// span adds its row to what waits inside it (a child's span comes before
// its parent's: the first row is the innermost); the watermark settles
// what is before it.
#include <algorithm>

#include "reports/aggregate/ops_state.h"

namespace lt {

using namespace ops_detail;

namespace {
constexpr std::size_t kMaxWaiting = 1'000'000;  // a watermark that never came: settled as they are
}

void OpAggregator::State::wait_for_calls(Proc& p, std::uint32_t pid, std::uint32_t tid, Proc::Waiting w) {
  if (p.waiting_n >= kMaxWaiting) settle_waiting(p, pid, w.ts);
  auto& q = p.waiting[tid];
  if (!q.empty() && q.back().ts > w.ts) w.ts = q.back().ts;  // kept sorted, whatever a damaged stream says
  q.push_back(std::move(w));
  ++p.waiting_n;
}

void OpAggregator::State::calls_around(Proc& p, std::uint32_t tid, std::uint64_t start, std::uint64_t end,
                                       std::uint32_t row) {
  auto it = p.waiting.find(tid);
  if (it == p.waiting.end()) return;
  auto& q = it->second;
  auto first = std::lower_bound(q.begin(), q.end(), start, [](const auto& w, std::uint64_t t) { return w.ts < t; });
  for (auto w = first; w != q.end() && w->ts <= end; ++w)
    if (w->rows.size() < LT_OPS_DEPTH) w->rows.push_back(row);
}

void OpAggregator::State::settle_waiting(Proc& p, std::uint32_t pid, std::uint64_t ts) {
  for (auto it = p.waiting.begin(); it != p.waiting.end();) {
    auto& q = it->second;
    while (!q.empty() && q.front().ts < ts) {
      auto& w = q.front();
      if (w.correlation != 0) {
        launch_settled(p, pid, w.correlation, w.rows);
      } else if (Window* win = resolve(w.window.get())) {
        std::reverse(w.rows.begin(), w.rows.end());  // outermost first
        charge_memory(*win, w.rows.data(), w.rows.size(), w.bytes, w.cpu);
      }
      q.pop_front();
      --p.waiting_n;
    }
    it = q.empty() ? p.waiting.erase(it) : std::next(it);
  }
}

}  // namespace lt
