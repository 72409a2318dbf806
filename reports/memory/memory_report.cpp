#include "reports/memory/memory_report.h"

#include <algorithm>
#include <sstream>

#include "user/text/code_points.h"
#include "user/text/numbers.h"
#include "user/text/text_table.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

std::uint64_t window_begin(const ProcessMemory& p, const MemoryRenderOptions& opt) {
  if (opt.actions)
    for (auto& pa : opt.actions->processes)
      if (pa.meta.pid == p.pid && pa.window_begin_ns) return pa.window_begin_ns;
  std::uint64_t first = 0;
  for (auto& o : p.ooms)
    if (!first || o.ts_ns < first) first = o.ts_ns;
  return first;
}

void write_stack(std::ostream& out, const std::vector<StackFrame>& stack, unsigned frames, const char* indent) {
  unsigned shown = 0;
  for (auto it = stack.rbegin(); it != stack.rend() && shown < frames; ++it, ++shown)
    out << indent << utf8_text(frame_label(*it)) << "\n";
  if (stack.size() > frames) out << indent << "... " << stack.size() - frames << " more frames\n";
}

}  // namespace

std::string allocating_line(const std::vector<StackFrame>& root_first) {
  for (auto it = root_first.rbegin(); it != root_first.rend(); ++it) {
    if (it->native || it->file.empty()) continue;
    return utf8_text(it->file) + ":" + std::to_string(it->line) + " (" + utf8_text(it->function) + ")";
  }
  return "";
}

std::string render_memory_report(const MemoryReport& rep, const MemoryRenderOptions& opt) {
  std::ostringstream out;
  out << "Memory (torch's CPU allocator and CUDA caching allocator, every allocation while attached; in a watch "
         "capture, while its process was escalated)\n";
  out << "Allocations made before the attach are unknown: their frees are counted without a size (\"frees of "
         "unknown size\"), CPU live bytes count from the attach, and only allocations made while attached can be "
         "listed as still alive.\n";
  if (rep.processes.empty()) {
    out << "\nNo allocator records (memory probes off, or no torch allocation while attached).\n";
    return out.str();
  }
  for (const ProcessMemory& p : rep.processes) {
    out << "\n" << process_title(p.pid, opt.actions) << "\n";
    TextTable dev;
    dev.rows.push_back({"device", "allocs", "allocated", "frees", "freed", "frees of unknown size", "live at end",
                        "peak live", "reserved", "peak reserved", "OOMs"});
    for (auto& d : p.devices)
      dev.rows.push_back({mem_device_name(d.device), num(d.allocs), num(d.alloc_bytes), num(d.frees),
                          num(d.freed_bytes), num(d.frees_unknown), std::to_string(d.live), num(d.peak_live),
                          d.device.cuda() ? num(d.reserved) : "-", d.device.cuda() ? num(d.peak_reserved) : "-",
                          num(d.ooms)});
    dev.write(out, "  ");
    out << "  (bytes; live: the CUDA caching allocator's own total where its records carry it, else allocated "
           "minus freed since the attach)\n";

    out << "\n  per Lightning action (innermost action open on the allocating thread)\n";
    TextTable act;
    act.rows.push_back({"action", "device", "allocs", "allocated", "frees", "freed", "frees of unknown size",
                        "peak live", "peak reserved"});
    act.align = "ll";
    for (auto& r : p.actions)
      act.rows.push_back({utf8_text(r.action), mem_device_name(r.device), num(r.allocs), num(r.alloc_bytes),
                          num(r.frees), num(r.freed_bytes), num(r.frees_unknown), num(r.peak_live),
                          r.device.cuda() ? num(r.peak_reserved) : "-"});
    act.write(out, "  ");

    out << "\n  still alive at the end: " << p.leak_count << " allocations, " << p.leak_bytes
        << " bytes, by op and allocating stack (biggest first)\n";
    if (!p.stacks && !p.leaks.empty()) out << "  (no allocation stacks in this trace: grouped by op only)\n";
    if (p.untracked) out << "  (" << p.untracked << " allocations not followed: too many alive at once; not listed)\n";
    if (!p.leaks.empty()) {
      TextTable leaks;
      leaks.rows.push_back({"bytes", "count", "device", "op", "allocated at"});
      leaks.align = "rrlll";
      const std::size_t n = opt.leak_rows < 0 ? p.leaks.size() : std::min<std::size_t>(p.leaks.size(), opt.leak_rows);
      for (std::size_t i = 0; i < n; ++i) {
        const MemLeakRow& l = p.leaks[i];
        const std::string at = allocating_line(l.stack);
        leaks.rows.push_back({num(l.bytes), num(l.count), mem_device_name(l.device),
                              l.op.empty() ? "-" : utf8_text(l.op), at.empty() ? "-" : at});
      }
      // One row per group, its stack under it.
      std::ostringstream rows;
      leaks.write(rows, "  ");
      std::istringstream lines(rows.str());
      std::string line;
      std::getline(lines, line);
      out << line << "\n";
      for (std::size_t i = 0; i < n && std::getline(lines, line); ++i) {
        out << line << "\n";
        write_stack(out, p.leaks[i].stack, opt.stack_frames, "        ");
      }
      if (n < p.leaks.size()) out << "  ... " << p.leaks.size() - n << " more groups\n";
    }

    if (p.ooms_total) {
      out << "\n  out of memory: " << p.ooms_total << " failed allocations\n";
      const std::uint64_t t0 = window_begin(p, opt);
      for (const MemOom& o : p.ooms) {
        out << "  at " << ns_as_s(static_cast<double>(o.ts_ns >= t0 ? o.ts_ns - t0 : 0), 3) << " s, thread " << o.tid
            << ", " << mem_device_name(o.device) << ", " << o.bytes << " bytes asked, in " << utf8_text(o.action)
            << ", op " << (o.op.empty() ? "-" : utf8_text(o.op)) << "\n";
        write_stack(out, o.stack, opt.stack_frames, "        ");
      }
      if (p.ooms_total > p.ooms.size()) out << "  ... " << p.ooms_total - p.ooms.size() << " more not kept\n";
    }
  }
  return out.str();
}

std::string render_cuda_memory_stats(const MemoryReport& rep, const MemoryRenderOptions& opt) {
  std::ostringstream out;
  bool any = false;
  for (const ProcessMemory& p : rep.processes)
    for (const MemDeviceSummary& d : p.devices) {
      if (!d.device.cuda()) continue;
      if (!any)
        out << "CUDA allocator (torch.cuda.memory_stats() keys, as DeviceStatsMonitor logs them; from the caching "
               "allocator's records while attached)\n";
      any = true;
      out << "\n" << process_title(p.pid, opt.actions) << ", " << mem_device_name(d.device) << "\n";
      TextTable t;
      t.rows.push_back({"key", "value", ""});
      auto row = [&](const char* k, std::string v, const char* note) { t.rows.push_back({k, std::move(v), note}); };
      const char* totals = d.totals_known ? "" : "from the attach (no allocator totals)";
      row("allocated_bytes.all.current", std::to_string(d.live), totals);
      row("allocated_bytes.all.peak", num(d.peak_live), "since the attach");
      row("allocated_bytes.all.allocated", num(d.alloc_bytes), "since the attach");
      row("allocated_bytes.all.freed", num(d.freed_bytes), "since the attach");
      row("allocation.all.allocated", num(d.allocs), "since the attach");
      row("allocation.all.freed", num(d.frees + d.frees_unknown), "since the attach");
      row("reserved_bytes.all.current", num(d.reserved), "");
      row("reserved_bytes.all.peak", num(d.peak_reserved), "since the attach");
      row("num_ooms", num(d.ooms), "since the attach");
      // Right-align values only: the note column is text.
      std::vector<std::size_t> w(2, 0);
      for (auto& r : t.rows) {
        w[0] = std::max(w[0], cp_len(r[0]));
        w[1] = std::max(w[1], cp_len(r[1]));
      }
      for (std::size_t i = 1; i < t.rows.size(); ++i) {
        auto& r = t.rows[i];
        std::string line = "  " + pad_right(r[0], w[0]) + "  " + pad_left(r[1], w[1]);
        if (!r[2].empty()) line += "  (" + r[2] + ")";
        out << line << "\n";
      }
      for (auto& a : p.actions)
        if (a.device == d.device && a.allocs)
          out << "  " << utf8_text(a.action) << ": allocated_bytes.all.peak " << a.peak_live
              << ", reserved_bytes.all.peak " << a.peak_reserved << " (at its allocations)\n";
    }
  if (!any) return "";
  out << "\nNot derivable from the allocator records (not shown): active*, inactive_split*, requested_bytes*, "
         "segment*, large_pool/small_pool splits, allocation.all.current/peak (allocations made before the "
         "attach are unknown), reserved_bytes.all.allocated/freed, num_alloc_retries, num_device_alloc, "
         "num_device_free, num_sync_all_streams, max_split_size, oversize_allocations.*, oversize_segments.*\n";
  return out.str();
}

}  // namespace lt
