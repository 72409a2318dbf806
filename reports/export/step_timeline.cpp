#include "reports/export/step_timeline.h"

#include <map>

#include "reports/aggregate/step_slices.h"
#include "user/text/json_escape.h"

namespace lt {

// The page's script and style: reports/export/js/step_timeline.js and
// reports/export/css/step_timeline.css, embedded at build time (tests/tools/embed_asset.py).
constexpr std::string_view kStepTimelineJs =
#include "reports/export/js/step_timeline.js.inc"
    ;
constexpr std::string_view kStepTimelineCss =
#include "reports/export/css/step_timeline.css.inc"
    ;

void write_step_timeline_head(std::ostream& out) {
  // Drawn by script only: nothing of it is needed with script off.  Zoom
  // keeps [z0, z1] (fractions of the step); a slice narrower than half a
  // pixel is still drawn half a pixel wide so short ones stay visible.
  out << "<style>" << kStepTimelineCss << "</style>\n"
      << "<script>" << kStepTimelineJs << "</script>\n";
}

namespace {

// One stage's timeline section within `budget` bytes; returns the bytes its
// slices take (estimated, kTimelineSliceBytes each).
std::size_t write_stage_timeline(const ProcessActions& p, const ProcessSteps& s, const char* stage,
                                 const std::vector<StepRecord>& steps, const std::string& id, std::ostream& out,
                                 const GpuReport* gpu, const OpsReport* ops, const MemoryReport* mem,
                                 const ProcessComm* comm, std::size_t budget, const std::vector<std::size_t>& also,
                                 std::uint64_t window_origin_ns) {
  const bool train = std::string_view(stage) == "train";
  const auto by_begin = sorted_by_begin(p);
  const GpuWork work = gpu ? gpu_work_of(*gpu, p.meta.pid) : GpuWork{};
  const OpWork op_work = ops ? op_work_of(*ops, p.meta.pid) : OpWork{};
  const MemWork mem_work = mem ? mem_work_of(*mem, p.meta.pid) : MemWork{};
  const CommWork comm_work = comm ? comm_work_of(*comm) : CommWork{};
  // Past the aggregator's cap on kept op calls a step's ops are missing:
  // such a step is marked, not shown as one without ops.
  std::uint64_t ops_kept_until = UINT64_MAX;
  if (ops && ops->intervals_dropped) {
    ops_kept_until = 0;
    for (const auto& o : ops->intervals) ops_kept_until = std::max(ops_kept_until, o.begin_ns);
  }
  std::vector<std::size_t> counts(steps.size()), op_counts(steps.size()), mem_counts(steps.size()),
      comm_counts(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    counts[i] = step_slices(p, by_begin, steps[i].begin_ns, steps[i].end_ns).size() +
                (work.by_begin.empty() ? 0 : step_gpu_slices(work, steps[i].begin_ns, steps[i].end_ns).size());
    op_counts[i] = step_op_count(op_work, steps[i].begin_ns, steps[i].end_ns);
    mem_counts[i] = step_mem_count(mem_work, steps[i].begin_ns, steps[i].end_ns);
    comm_counts[i] = step_comm_count(comm_work, steps[i].begin_ns, steps[i].end_ns);
  }
  const TimelineChoice c = choose_timeline_steps(steps, counts, budget, kTimelineSlowest, also);
  // c10d calls before the ops (a few per step, each telling), then the ops,
  // then the memory markers in what the ops left.
  const std::size_t slices_free = budget > c.used_bytes ? (budget - c.used_bytes) / kTimelineSliceBytes : 0;
  const auto comm_caps = share_in_priority(c, comm_counts, slices_free);
  std::size_t comm_taken = 0;
  for (auto n : comm_caps) comm_taken += n;
  const std::size_t budget_after_comm = budget - std::min(budget, comm_taken * kTimelineSliceBytes);
  const auto op_caps = timeline_op_caps(c, op_counts, budget_after_comm);
  std::size_t ops_taken = 0;
  for (auto n : op_caps) ops_taken += n;
  const std::size_t slices_left = slices_free - std::min(slices_free, comm_taken);
  const auto mem_caps = share_in_priority(c, mem_counts, slices_left - std::min(slices_left, ops_taken));
  // Names (actions', GPU work's, ops'): only those the embedded steps use, indexed compactly.
  enum Kind { action, gpu_work, op };
  std::map<std::pair<Kind, std::uint32_t>, std::size_t> name_index;
  std::vector<std::pair<Kind, std::uint32_t>> names;
  std::string body;
  std::size_t bytes = 0, thinned_steps = 0, with_ops = 0, mem_thinned = 0, past_cap = 0;
  auto rows = [&](const std::vector<StepSlice>& v, Kind kind) {
    for (std::size_t j = 0; j < v.size(); ++j) {
      const auto& sl = v[j];
      auto [it, fresh] = name_index.try_emplace({kind, sl.action}, names.size());
      if (fresh) names.push_back({kind, sl.action});
      body += (j ? ",[" : "[") + std::to_string(it->second) + "," + std::to_string(sl.tid) + "," +
              std::to_string(sl.begin_ns) + "," + std::to_string(sl.end_ns) + "," + std::to_string(sl.depth) + "]";
    }
    bytes += v.size() * kTimelineSliceBytes;
  };
  for (std::size_t k = 0; k < c.steps.size(); ++k) {
    const std::size_t i = c.steps[k];
    auto slices = step_slices(p, by_begin, steps[i].begin_ns, steps[i].end_ns);
    auto gpu_slices =
        work.by_begin.empty() ? std::vector<StepSlice>{} : step_gpu_slices(work, steps[i].begin_ns, steps[i].end_ns);
    // Ops before the cut below: they nest under the step's actions, all of them.
    auto op_slices =
        op_counts[i] ? step_op_slices(op_work, slices, steps[i].begin_ns, steps[i].end_ns) : std::vector<StepSlice>{};
    const std::size_t op_total = op_slices.size();
    op_slices = thin_ops(std::move(op_slices), op_caps[i]);
    // Over the budget alone (the slowest step only): the actions first, then GPU work, up to the cap.
    const bool cut = i == c.default_step && c.slice_cap && slices.size() + gpu_slices.size() > c.slice_cap;
    if (cut) {
      if (slices.size() > c.slice_cap) slices.resize(c.slice_cap);
      gpu_slices.resize(c.slice_cap - slices.size());
    }
    body += std::string(k ? ",\n" : "") + "{\"i\":" + std::to_string(steps[i].index) +
            ",\"b\":0,\"e\":" + std::to_string(steps[i].duration_ns()) + (cut ? ",\"cut\":1" : "");
    // Other stages' steps have no `--steps`: their `--window`, in seconds
    // after the attach, rounded outward to the microsecond.
    if (!train && window_origin_ns && steps[i].begin_ns >= window_origin_ns) {
      const std::uint64_t b_us = (steps[i].begin_ns - window_origin_ns) / 1000,
                          e_us = (steps[i].end_ns - window_origin_ns + 999) / 1000;
      char w[64];
      std::snprintf(w, sizeof w, ",\"w\":[\"%llu.%06llu\",\"%llu.%06llu\"]",
                    static_cast<unsigned long long>(b_us / 1000000), static_cast<unsigned long long>(b_us % 1000000),
                    static_cast<unsigned long long>(e_us / 1000000), static_cast<unsigned long long>(e_us % 1000000));
      body += w;
    }
    body += ",\"s\":[";
    rows(slices, action);
    body += "]";
    if (!gpu_slices.empty()) {
      body += ",\"g\":[";
      rows(gpu_slices, gpu_work);
      body += "]";
    }
    if (op_total) {
      ++with_ops;
      body += ",\"o\":[";
      rows(op_slices, op);
      body += "]";
      if (op_slices.size() < op_total) {
        ++thinned_steps;
        body += ",\"ot\":" + std::to_string(op_total - op_slices.size());
      }
    }
    if (steps[i].end_ns > ops_kept_until) {
      ++past_cap;
      body += ",\"ox\":1";
    }
    if (mem_counts[i]) {
      // Allocator events: [tid, ns from begin, bytes (< 0 freed), flags (1 CUDA, 2 OOM)].
      const auto marks = step_mem_marks(mem_work, steps[i].begin_ns, steps[i].end_ns, mem_caps[i]);
      body += ",\"m\":[";
      for (std::size_t j = 0; j < marks.size(); ++j)
        body += (j ? ",[" : "[") + std::to_string(marks[j].tid) + "," + std::to_string(marks[j].t_ns) + "," +
                std::to_string(marks[j].bytes) + "," + std::to_string(marks[j].flags) + "]";
      body += "]";
      bytes += marks.size() * kTimelineSliceBytes;
      if (marks.size() < mem_counts[i]) {
        ++mem_thinned;
        body += ",\"mt\":" + std::to_string(mem_counts[i] - marks.size());
      }
    }
    if (comm_counts[i]) {
      // c10d calls: [tid, ns from begin, kind, seq, pg, bytes].
      const auto calls = step_comm_marks(comm_work, steps[i].begin_ns, steps[i].end_ns, comm_caps[i]);
      body += ",\"c\":[";
      for (std::size_t j = 0; j < calls.size(); ++j)
        body += (j ? ",[" : "[") + std::to_string(calls[j]->tid) + "," +
                std::to_string(calls[j]->ts_ns - steps[i].begin_ns) + ",\"" + comm_kind_name(calls[j]->kind) + "\"," +
                std::to_string(calls[j]->seq) + "," + std::to_string(calls[j]->pg) + "," +
                std::to_string(calls[j]->bytes) + "]";
      body += "]";
      bytes += calls.size() * kTimelineSliceBytes;
      if (calls.size() < comm_counts[i]) body += ",\"ct\":" + std::to_string(comm_counts[i] - calls.size());
    }
    body += "}";
  }
  // --steps counts training steps: the other stages' steps have no export command.
  const std::string cmd = train ? "ltrace-bpf report TRACE --steps N-N --perfetto step-N.pftrace" : "";
  const std::string sid = id + (train ? "-timeline" : std::string("-timeline-") + stage);
  out << "<section class=\"steptl\" id=\"" << sid << "\" data-stage=\"" << stage << "\"><h3>Step timeline (" << stage
      << ")</h3>\n<noscript><p class=\"note\">The step timeline is drawn by script: turn script on to see "
      << "it (the tables below do not need it).</p></noscript>\n<p>Step <input class=\"tl-step\" type=\"number\" "
      << "min=\"" << steps.front().index << "\" max=\"" << steps.back().index << "\" value=\""
      << steps[c.default_step].index
      << "\"> <button class=\"tl-in\">zoom in</button> <button class=\"tl-out\">zoom out</button> <button "
         "class=\"tl-left\">&larr;</button> <button class=\"tl-right\">&rarr;</button> <button "
         "class=\"tl-reset\">whole step</button><span class=\"tl-info\"></span></p>\n"
      << "<p class=\"note\">One step at full resolution: its actions on their threads, nested by depth, "
      << (ops ? "the aten ops under the actions they ran in (grey-blue), " : "")
      << (mem && !mem_work.by_ts.empty()
              ? "allocator events as ticks on a memory row per thread (green: allocated, red: freed), "
              : "")
      << "and its GPU kernels and copies on stream rows when recorded (wheel or "
         "buttons to zoom, drag to pan). Click a bar or point in the step charts above to choose a step. Embedded: "
      << c.steps.size() << " of " << steps.size() << " steps (the " << kTimelineSlowest
      << " slowest, the median, the first and the last" << (also.empty() ? "" : ", then the other ranks' ones")
      << ", within " << budget / 1024 << " KiB"
      << (c.left_out ? "; " + std::to_string(c.left_out) + " left out for that budget" : std::string()) << ")";
  if (thinned_steps)
    out << "; ops thinned in " << thinned_steps << " of the " << with_ops
        << " steps with ops, for that budget (kept: the outermost calls first, the longest first)";
  if (past_cap)
    out << "; " << past_cap << " embedded steps end after the last op call kept (the first " << kMaxOpIntervals
        << " calls are kept, " << ops->intervals_dropped << " were not): their ops are missing or partial";
  if (mem_thinned)
    out << "; memory events thinned in " << mem_thinned << " steps (kept: out-of-memory events, then the largest)";
  if (train) out << "; any step as a Perfetto/Chrome file: <code>" << cmd << "</code> (N: the step)";
  out << ".</p>\n"
      << "<div class=\"tl-draw\"></div>\n<script type=\"application/json\" class=\"tl-data\">{\"stage\":\"" << stage
      << "\",\"tid\":" << s.tid << ",\"charts\":\"" << id << "-steps\",\"def\":" << steps[c.default_step].index
      << ",\"cmd\":\"" << cmd << "\",\"names\":[";
  for (std::size_t k = 0; k < names.size(); ++k) {
    // json_escape leaves "</" as is: escape '<' so no name can close the block.
    std::string safe;
    const auto [kind, n] = names[k];
    const std::string& name = kind == gpu_work ? gpu->names[n]
                              : kind == op     ? (n < ops->names.size() ? ops->names[n] : std::string())
                                               : p.actions[n].name;
    for (char ch : json_string(name)) safe += ch == '<' ? std::string("\\u003c") : std::string(1, ch);
    out << (k ? "," : "") << safe;
  }
  out << "],\"steps\":[\n" << body << "]}</script>\n</section>\n";
  return bytes;
}

}  // namespace

void write_step_timeline(const ProcessActions& p, const ProcessSteps& s, const std::string& id, std::ostream& out,
                         const GpuReport* gpu, const OpsReport* ops, const MemoryReport* mem, const ProcessComm* comm,
                         const std::vector<std::size_t>& also, std::size_t budget_bytes,
                         std::uint64_t window_origin_ns) {
  // One section per stage with steps; the process's budget is shared: each
  // stage takes at most an equal share of what the stages before it left.
  const auto stages = stages_of(s);
  std::size_t remaining = 0;
  for (const auto& st : stages) remaining += !st.steps->empty();
  std::size_t left = budget_bytes;
  for (const auto& [stage, steps] : stages) {
    if (steps->empty()) continue;
    // `also` holds training-step positions (the merged page's other ranks').
    static const std::vector<std::size_t> none;
    const bool train = std::string_view(stage) == "train";
    const std::size_t used = write_stage_timeline(p, s, stage, *steps, id, out, gpu, ops, mem, comm, left / remaining--,
                                                  train ? also : none, window_origin_ns);
    left -= std::min(left, used);
  }
}

}  // namespace lt
