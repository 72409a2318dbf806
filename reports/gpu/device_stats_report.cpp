#include "reports/gpu/device_stats_report.h"

#include <algorithm>
#include <map>

#include "user/text/code_points.h"
#include "user/text/numbers.h"

namespace lt {

namespace {

std::string key_label(const ProcessDeviceStats& p, const DeviceStatRow& r) {
  std::string name = device_stat_name(r.key);
  if (r.device >= 0 && p.devices.size() > 1) return "gpu_id: " + std::to_string(r.device) + "/" + name;
  return name;
}

struct ActionTotals {
  double seconds = 0;
  std::size_t calls = 0;
};

std::string process_title(const ProcessDeviceStats& p, const ProcessMeta* meta,
                          const std::vector<std::string>& gpu_names) {
  int rank = meta ? meta->rank : p.rank;
  std::string comm = meta && !meta->comm.empty() ? meta->comm : p.comm;
  std::string s = "pid " + std::to_string(p.pid);
  if (rank >= 0) s += " rank " + std::to_string(rank);
  if (!comm.empty()) s += " (" + comm + ")";
  if (!p.devices.empty()) {
    s += p.devices.size() == 1 ? ", GPU " : ", GPUs ";
    for (std::size_t i = 0; i < p.devices.size(); ++i) {
      int d = p.devices[i];
      if (i) s += ", ";
      s += std::to_string(d);
      if (d >= 0 && static_cast<std::size_t>(d) < gpu_names.size() && !gpu_names[d].empty())
        s += " (" + gpu_names[d] + ")";
    }
  }
  return s;
}

void render_block(std::string& out, const ProcessDeviceStats& p, const ActionDeviceStats& a, const std::string& title,
                  std::size_t key_width) {
  out += title + "\n";
  out += "  " + pad_right("key", key_width) + "        mean         min         max   samples\n";
  for (auto& r : a.rows) {
    out += "  " + pad_right(key_label(p, r), key_width);
    out += pad_left(fixed(r.stat.mean(), 1), 12) + pad_left(fixed(r.stat.min, 1), 12) +
           pad_left(fixed(r.stat.max, 1), 12) + pad_left(std::to_string(r.stat.count), 10) + "\n";
  }
}

}  // namespace

std::string render_device_stats(const DeviceStatsReport& rep, const DeviceStatsRenderOptions& opt) {
  std::string out = "Device stats (DeviceStatsMonitor keys; sampled ";
  // The estimate is a mean over a grid with jitter at its ends: 100.6 ms
  // reads 100 (10 ms steps from 100 ms up, 1 ms below).
  unsigned period_ms = opt.period_ms;
  if (!period_ms && rep.period_ns) {
    const std::uint64_t step = rep.period_ns >= 95'000'000 ? 10'000'000 : 1'000'000;
    period_ms = static_cast<unsigned>((rep.period_ns + step / 2) / step * step / 1'000'000);
  }
  if (period_ms) out += "every " + std::to_string(period_ms) + " ms ";
  out += "from outside the process)\n";
  if (!rep.gpu) out += "No GPU samples in this recording: CPU keys only.\n";

  std::vector<const ProcessDeviceStats*> shown;
  for (auto& p : rep.processes)
    if (p.has_actions) shown.push_back(&p);
  if (shown.empty())
    for (auto& p : rep.processes) shown.push_back(&p);
  if (shown.empty()) {
    out += "\nNo samples.\n";
    return out;
  }

  for (const ProcessDeviceStats* p : shown) {
    const ProcessMeta* meta = nullptr;
    std::map<std::string, ActionTotals> totals;
    if (opt.actions)
      for (auto& pa : opt.actions->processes)
        if (pa.meta.pid == p->pid) {
          meta = &pa.meta;
          for (auto& a : pa.actions) {
            auto& t = totals[a.name];
            t.seconds += a.running_total_s;
            t.calls += a.calls;
          }
        }
    out += "\n" + process_title(*p, meta, opt.gpu_names) + "\n";

    std::size_t key_width = 3;
    // Columns on screen: "°C" takes two.
    auto widen = [&](const ActionDeviceStats& a) {
      for (auto& r : a.rows) key_width = std::max(key_width, cp_len(key_label(*p, r)));
    };
    widen(p->window);
    for (auto& a : p->actions) widen(a);

    // Longest total first; unknown times (0) and ties by name; kNoAction last.
    std::vector<const ActionDeviceStats*> blocks;
    const ActionDeviceStats* none = nullptr;
    for (auto& a : p->actions) {
      if (a.action == kNoAction)
        none = &a;
      else
        blocks.push_back(&a);
    }
    std::stable_sort(blocks.begin(), blocks.end(), [&](const ActionDeviceStats* x, const ActionDeviceStats* y) {
      double tx = totals.count(x->action) ? totals[x->action].seconds : 0;
      double ty = totals.count(y->action) ? totals[y->action].seconds : 0;
      if (tx != ty) return tx > ty;
      return x->action < y->action;
    });

    const double window_s =
        p->window.last_ns > p->window.first_ns ? (p->window.last_ns - p->window.first_ns) / 1e9 : 0.0;
    out += "\n";
    render_block(out, *p, p->window, "[whole window]  (" + fixed(window_s, 1) + " s)", key_width);
    for (const ActionDeviceStats* a : blocks) {
      std::string title = a->action;
      if (auto t = totals.find(a->action); t != totals.end() && t->second.calls)
        title += "  (" + fixed(t->second.seconds, 3) + " s in " + std::to_string(t->second.calls) +
                 (t->second.calls == 1 ? " call)" : " calls)");
      render_block(out, *p, *a, title, key_width);
    }
    if (none) render_block(out, *p, *none, none->action, key_width);
  }
  return out;
}

}  // namespace lt
