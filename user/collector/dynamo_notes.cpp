#include "user/collector/dynamo_notes.h"

#include <algorithm>
#include <chrono>

#include "bpf/events.h"
#include "user/collector/fixed_field.h"

namespace lt {

namespace {
lt_compile_note_event note(pid_t pid, std::uint64_t ts, unsigned what) {
  lt_compile_note_event e{};
  e.hdr.kind = LT_EV_COMPILE_NOTE;
  e.hdr.size = sizeof e;
  e.hdr.pid = static_cast<std::uint32_t>(pid);
  e.hdr.tid = static_cast<std::uint32_t>(pid);
  e.hdr.ts_ns = ts;
  e.what = what;
  e.duration_us = -1;
  e.count = -1;
  return e;
}
}  // namespace

void DynamoNotes::read(const python::Interpreter& interp, std::uint64_t ts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto state = reader_.read(interp, &newest_[interp.pid]);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (cost_.reads++ == 0)
    cost_.first_ms = ms;
  else
    cost_.max_later_ms = std::max(cost_.max_later_ms, ms);
  if (!state) return;
  auto& sent = sent_[interp.pid];
  for (const auto& c : state->compiles) {
    if (!sent.insert({c.compile_id, c.start_wall_us}).second) continue;
    auto e = note(interp.pid, ts, LT_COMPILE_NOTE_COMPILE);
    e.start_wall_us = c.start_wall_us;
    e.duration_us = c.duration_us;
    e.count = c.graph_breaks;
    e.first_line = c.first_line;
    // Every field is copied, truncated or not (no short-circuit).
    bool truncated = copy_field(e.compile_id, sizeof e.compile_id, c.compile_id);
    truncated |= copy_field(e.function, sizeof e.function, c.function);
    truncated |= copy_field(e.file, sizeof e.file, c.file);
    truncated |= copy_field(e.reason, sizeof e.reason, c.recompile_reason);
    truncated |= copy_field(e.failure, sizeof e.failure, c.failure);
    if (truncated) e.flags |= LT_COMPILE_NOTE_TRUNCATED;
    emit_(&e, sizeof e);
  }
  auto& counts = breaks_[interp.pid];
  for (const auto& b : state->graph_breaks) {
    auto [it, added] = counts.emplace(b.reason, b.count);
    if (!added && it->second == b.count) continue;
    it->second = b.count;
    auto e = note(interp.pid, ts, LT_COMPILE_NOTE_GRAPH_BREAK);
    e.count = b.count;
    if (copy_field(e.reason, sizeof e.reason, b.reason)) e.flags |= LT_COMPILE_NOTE_TRUNCATED;
    emit_(&e, sizeof e);
  }
}

}  // namespace lt
