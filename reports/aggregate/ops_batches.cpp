#include <string>

#include "reports/aggregate/ops_state.h"

namespace lt {

using namespace ops_detail;

// The ops of a thread from position `keep` on are over at `ts`.
void OpAggregator::State::close_from(Proc&, std::vector<Proc::Running>& st, std::size_t keep, std::uint64_t ts) {
  for (std::size_t i = keep; i < st.size(); ++i)
    if (st[i].interval != SIZE_MAX)  // a damaged stream may go back in time
      out.intervals[st[i].interval].end_ns = std::max(ts, out.intervals[st[i].interval].begin_ns);
  if (st.size() > keep) st.resize(keep);
}

void OpAggregator::State::close_all(Proc& p, std::uint64_t ts) {
  for (auto& [tid, st] : p.running)
    for (auto& r : st)
      if (r.interval != SIZE_MAX) out.intervals[r.interval].end_ns = std::max(ts, out.intervals[r.interval].begin_ns);
  p.running.clear();
}

std::size_t OpAggregator::State::table_index(Proc& p, const std::string& title, const std::string& step) {
  auto [it, fresh] = p.table_of.try_emplace(title, p.tables.size());
  if (fresh) p.tables.push_back({title, step});
  return it->second;
}

void OpAggregator::State::keep(Proc& p, std::size_t t, const WindowPtr& w) {
  p.tables[t].steps++;
  w->merge_into(p.tables[t].acc);
}

// Lightning: torch.profiler.schedule(wait=1, warmup=1, active=3),
// repeating, counted per step function; with fewer than 5 steps of a
// stage it records every step instead (and warns).
void OpAggregator::State::keep_scheduled(Proc& p, const Proc::Early& e) {
  if (e.index % 5 < 2) {
    ++p.skipped;
    e.window->drop();
  } else {
    keep(p, e.table, e.window);
  }
}

// A finished batch whose step function ended: one step of its table.
void OpAggregator::State::close_step(Proc& p, const std::string& title, const WindowPtr& w) {
  const std::string step = step_function_of(title);
  const std::size_t t = table_index(p, title, step);
  if (!opts.schedule) return keep(p, t, w);
  Proc::Early e{t, p.windows_of[step]++, w};
  if (e.index >= 5) return keep_scheduled(p, e);
  auto& early = p.early[step];
  early.push_back(std::move(e));
  if (early.size() == 5) {  // five steps: the schedule applies to this step function
    for (auto& x : early) keep_scheduled(p, x);
    early.clear();
  }
}

// The batch (and its gap) is over: its ops go to its step's table, or,
// if no step function ran in it, outside; the gap's go outside.
void OpAggregator::State::close_batch(Proc& p) {
  using W = Proc::Where;
  if (p.where != W::batch && p.where != W::gap) return;
  if (!p.title.empty()) {
    p.last_title[p.stage] = p.title;
    close_step(p, p.title, p.batch);
  } else {
    p.batch->merge_into(p.outside);
  }
  if (p.where == W::gap) p.gap->merge_into(p.outside);
  p.batch.reset();
  p.gap.reset();
  p.title.clear();
  p.where = W::outside;
}

void OpAggregator::State::open_batch(Proc& p, BatchStage stage) {
  using W = Proc::Where;
  if (p.where == W::unknown) p.unknown->merge_into(p.outside);  // a batch begins: we were outside one
  close_batch(p);
  p.batch = fresh_window();
  p.stage = stage;
  p.title.clear();
  p.where = W::batch;
}

// We were in a batch of `stage` all along (attached mid-batch).
void OpAggregator::State::adopt_unknown(Proc& p, BatchStage stage) {
  p.batch = p.unknown;
  p.unknown = fresh_window();
  p.stage = stage;
  p.title.clear();
  p.where = Proc::Where::batch;
}

void OpAggregator::State::action_began(Proc& p, const std::string& name) {
  using W = Proc::Where;
  const BatchHook hook = batch_hook_of(name);
  if (hook.role == BatchRole::none) {
    if (p.where == W::gap) close_batch(p);  // past the end hooks: the batch is over
    return;
  }
  const bool same = (p.where == W::batch || p.where == W::gap) && p.stage == hook.stage;
  if (hook.role == BatchRole::batch_end) {
    if (same && p.where == W::gap) {  // the next end hook (the LightningModule's after the callbacks')
      p.gap->merge_into(p.batch);
      p.gap.reset();
      p.where = W::batch;
    } else if (!same) {
      if (p.where == W::unknown)
        adopt_unknown(p, hook.stage);
      else
        open_batch(p, hook.stage);
    }
    return;
  }
  // A step (or the training batch's body) with nothing seen before it: the
  // ops so far were in a batch of its stage, this one (we attached after
  // its start hooks) or, in a loop without hooks, the previous step's.
  if (p.where == W::unknown && hook.role != BatchRole::batch_start) return adopt_unknown(p, hook.stage);
  // batch_start, body or step: a new batch, unless it is this one's (the
  // step inside run_training_batch; a step whose batch has no hooks is a
  // new batch once the previous step ended).
  if (same && p.where == W::batch && (p.title.empty() || hook.role == BatchRole::body)) return;
  open_batch(p, hook.stage);
}

void OpAggregator::State::action_ended(Proc& p, const std::string& name) {
  using W = Proc::Where;
  const BatchHook hook = batch_hook_of(name);
  if (hook.role != BatchRole::step && hook.role != BatchRole::batch_end) return;
  if (p.where == W::unknown) adopt_unknown(p, hook.stage);
  if ((p.where != W::batch && p.where != W::gap) || p.stage != hook.stage) {
    if (hook.role == BatchRole::batch_end) return;  // an end hook of no batch we know: its ops stay where they went
    open_batch(p, hook.stage);                      // a step function ran outside any batch we saw
  }
  if (hook.role == BatchRole::step) {
    if (p.where == W::gap) {
      p.gap->merge_into(p.batch);
      p.gap.reset();
      p.where = W::batch;
    }
    if (p.title.empty()) p.title = name;  // nested step actions: the innermost names it
  } else if (p.where == W::batch) {
    p.gap = fresh_window();
    p.where = W::gap;
  }
}

}  // namespace lt
