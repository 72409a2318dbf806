#include "reports/aggregate/comm_stacks.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "reports/aggregate/comm.h"
#include "reports/aggregate/py_symbols.h"
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

constexpr std::size_t kMaxRows = 4096;  // distinct (kind, stack) per process

struct Pending {
  std::uint8_t kind = 0;
  std::uint64_t bytes = 0;
};

struct Proc {
  ProcessCommStacks out;
  bool asked = false;                                  // a COMM said a stack would follow (--launch-stacks was on)
  int layout = -1;                                     // TensorImpl layout learnt (decode_comm_tensor)
  std::unordered_map<std::uint32_t, Pending> pending;  // tid -> the COMM awaiting its stack
  std::map<std::pair<std::uint8_t, std::string>, std::size_t> index;  // (kind, raw frames) -> row
};

}  // namespace

struct CommStackAggregator::State {
  PySymbols symbols;
  std::map<std::uint32_t, Proc> procs;

  void comm(const lt_event_header& h, const lt_comm_event& e) {
    Proc& p = procs[h.pid];
    p.out.pid = h.pid;
    if (p.pending.erase(h.tid)) ++p.out.calls_without;  // the stack of the one before never came
    if (!(e.flags & LT_COMM_HAS_STACK)) {
      ++p.out.calls_without;
      return;
    }
    p.asked = true;
    std::uint64_t bytes = 0;
    if (e.flags & LT_COMM_HAS_TENSOR)
      if (auto t = decode_comm_tensor(e.impl, p.layout)) {
        if (t->ndim > 0) p.layout = t->layout;
        bytes = t->numel * comm_dtype_size(t->dtype);
      }
    p.pending[h.tid] = {e.kind, bytes};
  }

  void stack(const lt_event_header& h, const lt_py_sample_event& e) {
    auto pit = procs.find(h.pid);
    if (pit == procs.end()) return;
    Proc& p = pit->second;
    auto it = p.pending.find(h.tid);
    if (it == p.pending.end()) return;  // its COMM was lost
    const Pending call = it->second;
    p.pending.erase(it);
    const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
    std::string raw(reinterpret_cast<const char*>(e.frames), n * sizeof(lt_py_frame));
    raw.append(reinterpret_cast<const char*>(&e.flags), sizeof e.flags);
    auto key = std::make_pair(call.kind, std::move(raw));
    auto row = p.index.find(key);
    if (row == p.index.end()) {
      if (p.out.rows.size() >= kMaxRows) {
        ++p.out.rows_dropped;
        ++p.out.calls;
        return;
      }
      // Named now: the collector writes a code object's name before the
      // first record that needs it, and a later exec may reuse its address.
      row = p.index.emplace(std::move(key), p.out.rows.size()).first;
      p.out.rows.push_back({call.kind, symbols.frames(e), 0, 0});
    }
    auto& r = p.out.rows[row->second];
    ++r.calls;
    r.bytes += call.bytes;
    ++p.out.calls;
  }
};

CommStackAggregator::CommStackAggregator() : s_(std::make_unique<State>()) {}
CommStackAggregator::~CommStackAggregator() = default;

void CommStackAggregator::add(const lt_event_header& h, const std::byte* p) {
  auto& s = *s_;
  s.symbols.add(h, p);  // it picks out the kinds that name code objects
  visit_record(h, p,
               overloaded{[&](const lt_event_header& h, const lt_comm_event& e) { s.comm(h, e); },
                          [&](const lt_event_header& h, const lt_py_sample_event& e) {
                            if (h.kind == LT_EV_COMM_STACK) s.stack(h, e);
                          },
                          // A new program: its code objects are other ones at the same addresses.
                          [&](const lt_event_header& h, const lt_proc_event& e) {
                            if (h.kind != LT_EV_PROC_EXEC) return;
                            if (auto it = s.procs.find(e.child_pid); it != s.procs.end()) {
                              it->second.pending.clear();
                              it->second.index.clear();
                            }
                          }});
}

void CommStackAggregator::gap() {
  for (auto& [pid, p] : s_->procs) {
    p.out.calls_without += p.pending.size();
    p.pending.clear();
  }
}

CommStacksReport CommStackAggregator::finish() {
  CommStacksReport rep;
  for (auto& [pid, p] : s_->procs) {
    p.out.calls_without += p.pending.size();
    p.pending.clear();
    if (!p.asked) continue;  // stacks were not taken here: no section for it
    std::stable_sort(p.out.rows.begin(), p.out.rows.end(),
                     [](const CommStackRow& a, const CommStackRow& b) { return a.calls > b.calls; });
    rep.processes.push_back(std::move(p.out));
  }
  return rep;
}

}  // namespace lt
