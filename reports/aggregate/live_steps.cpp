#include "reports/aggregate/live_steps.h"

#include <string_view>

#include "user/model/record_dispatch.h"

namespace lt {

namespace {
constexpr std::size_t kMaxOpen = 4096;  // actions open at once in one process: nesting is a few deep

// A Trainer run's last hooks (Trainer._run: on_fit_end, then the teardown
// hooks of the callbacks, the module and the datamodule; validate, test
// and predict end in teardown too).
bool ends_a_run(std::string_view name) {
  return name.ends_with(".on_fit_end") || name.ends_with(".teardown");
}

// Actions after the epoch's last fetch (it raised StopIteration): its end
// hooks, another loop's start, the run's end.
bool ends_a_fetch(std::string_view name) {
  return fetch_context(name) || name.ends_with(".on_train_epoch_end") || name.ends_with(".on_train_end") ||
         name.ends_with("on_exception") || ends_a_run(name);
}
}  // namespace

void LiveSteps::add(const lt_event_header& h, const std::byte* record, std::vector<LiveStep>& closed) {
  visit_record(h, record,
               overloaded{
                   [&](const lt_event_header& hh, const lt_action_name_tail_event& t) { names_.add_tail(hh, t); },
                   [&](const lt_event_header& hh, const lt_action_event& e) {
                     if (hh.kind == LT_EV_ACTION_BEGIN) on_begin(hh, e, closed);
                     if (hh.kind == LT_EV_ACTION_END) on_end(hh, e);
                     if (hh.kind == LT_EV_FETCH_BEGIN) on_fetch(hh, closed);
                   },
                   [&](const lt_event_header& hh, const lt_proc_event& e) {
                     // An exec'd process is a new program; an exited one is gone.
                     if (hh.kind == LT_EV_PROC_EXEC || hh.kind == LT_EV_PROC_EXIT) {
                       auto it = procs_.find(e.child_pid);
                       if (it != procs_.end()) {
                         settle(it->second, true);  // no action began before it ended
                         close(e.child_pid, it->second, closed);
                       }
                       if (hh.kind == LT_EV_PROC_EXEC) procs_.erase(e.child_pid);
                     }
                   },
               });
}

void LiveSteps::on_begin(const lt_event_header& h, const lt_action_event& e, std::vector<LiveStep>& closed) {
  Proc& p = procs_[h.pid];
  const ActionNameAssembler::Name named = names_.name(h, e);
  const std::string& name = named.text;
  const BatchHook hook = batch_hook_of(name);
  // Ends lost (a full ring) leave their begins here: bounded all the same.
  if (p.open.size() >= kMaxOpen) p.open.clear();
  if (!p.maybe_escaped.empty()) settle(p, std::string_view(name).ends_with("on_exception"));
  p.open[e.key] = {hook, ends_a_run(name), h.tid, name};
  p.between_runs = false;
  if (p.next_index == 0 && !p.in_step && std::string_view(name).ends_with(".on_train_start")) p.train_started = true;
  // By text: a literal's address may differ between files (ASan keeps them apart).
  if (const char* f = fetch_context(name)) p.fetch_train = std::string_view(f) == kTrainFetch;
  if (p.in_step && p.fetch_only) {
    // A train batch hook confirms the fetch's step (the batch transfer's
    // hooks come between); the epoch's end or another loop drops it.
    if (hook.stage == BatchStage::train && hook.role != BatchRole::none)
      p.fetch_only = false;
    else if (ends_a_fetch(name))
      p.in_step = p.fetch_only = false;
  }
  const bool train_end_hook = hook.stage == BatchStage::train && hook.role == BatchRole::batch_end;
  if (p.in_step && p.ended && !train_end_hook) close(h.pid, p, closed);
  if (!p.in_step && hook.stage == BatchStage::train && hook.role == BatchRole::batch_start) {
    p.in_step = true;
    p.ended = false;
    p.tid = h.tid;
    p.begin_ns = h.ts_ns;
  }
}

// The train loop's fetch of the next batch: its step begins here (a slow
// __getitem__ is the step's), as offline.
void LiveSteps::on_fetch(const lt_event_header& h, std::vector<LiveStep>& closed) {
  Proc& p = procs_[h.pid];
  if (!p.fetch_train) return;
  if (p.in_step && p.ended) close(h.pid, p, closed);
  if (p.in_step) return;
  p.in_step = p.fetch_only = true;
  p.ended = false;
  p.tid = h.tid;
  p.begin_ns = h.ts_ns;
}

void LiveSteps::on_end(const lt_event_header& h, const lt_action_event& e) {
  Proc& p = procs_[h.pid];
  p.last_progress = h.ts_ns;
  auto it = p.open.find(e.key);
  if (it == p.open.end()) return;  // begun before we attached
  const BatchHook hook = it->second.hook;
  const bool run_end = it->second.run_end;
  std::string name = std::move(it->second.name);
  p.open.erase(it);
  if ((e.flags & LT_ACT_THROW) && !std::string_view(name).ends_with("_next")) {
    bool outermost = true;
    for (const auto& [key, o] : p.open) outermost = outermost && o.tid != h.tid;
    const bool evaluation_step = hook.role == BatchRole::step && hook.stage != BatchStage::train;
    if (outermost) (evaluation_step ? p.maybe_escaped : thrown_).push_back({h.pid, h.tid, h.ts_ns, std::move(name)});
    // The run is over, interrupted: what the script does next (handle the
    // error, exit) is no stall of it (CI 102: the exit of a process after
    // its fit raised took over --stall 2s).
    if (outermost && !evaluation_step && p.open.empty()) p.between_runs = true;
  }
  if (run_end && p.open.empty()) p.between_runs = true;
  if (p.in_step && hook.stage == BatchStage::train && hook.role == BatchRole::batch_end) {
    p.ended = true;
    p.end_ns = h.ts_ns;
  }
}

void LiveSteps::settle(Proc& p, bool escaped) {
  if (escaped) thrown_.insert(thrown_.end(), p.maybe_escaped.begin(), p.maybe_escaped.end());
  if (escaped && !p.maybe_escaped.empty() && p.open.empty()) p.between_runs = true;  // as above
  p.maybe_escaped.clear();
}

std::vector<ThrownAction> LiveSteps::take_thrown(std::uint64_t now_ns) {
  for (auto& [pid, p] : procs_)
    if (!p.maybe_escaped.empty() && now_ns >= p.maybe_escaped.front().ts_ns + kEscapeQuietNs) settle(p, true);
  return std::exchange(thrown_, {});
}

void LiveSteps::close(std::uint32_t pid, Proc& p, std::vector<LiveStep>& closed) {
  if (p.in_step && p.ended && p.end_ns >= p.begin_ns)
    closed.push_back({pid, p.tid, p.next_index++, p.begin_ns, p.end_ns});
  p.in_step = p.ended = false;
}

void LiveSteps::finish(std::vector<LiveStep>& closed) {
  for (auto& [pid, p] : procs_) close(pid, p, closed);
}

std::uint64_t LiveSteps::last_progress(std::uint32_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? 0 : it->second.last_progress;
}

bool LiveSteps::between_runs(std::uint32_t pid) const {
  auto it = procs_.find(pid);
  return it != procs_.end() && it->second.between_runs;
}

bool LiveSteps::numbered_from_the_start(std::uint32_t pid) const {
  const auto it = procs_.find(pid);
  return it != procs_.end() && it->second.train_started;
}

std::uint32_t LiveSteps::steps(std::uint32_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? 0 : it->second.next_index;
}

}  // namespace lt
