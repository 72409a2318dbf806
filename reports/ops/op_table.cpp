#include "reports/ops/op_table.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "user/text/code_points.h"
#include "user/text/numbers.h"

namespace lt {
namespace {

// torch's _build_table constants.
constexpr std::size_t kMaxNameWidth = 55;
constexpr std::size_t kMaxShapesWidth = 80;
constexpr std::size_t kDefaultWidth = 12;
constexpr std::size_t kSpacing = 2;

// torch's _format_time: the unit switches at 1 ms and 1 s, 3 decimals.  Both
// Python's "%.3f" and glibc's round the exact binary value, so they agree.
std::string format_time(double us) {
  if (us >= 1000.0 * 1000.0) return fixed(us / (1000.0 * 1000.0), 3) + "s";
  if (us >= 1000.0) return fixed(us / 1000.0, 3) + "ms";
  return fixed(us, 3) + "us";
}

// torch's _format_time_share.  torch raises when the total is 0 but the time
// is not; that cannot be printed, so it gets "NaN" like the 0/0 case.
std::string format_share(double us, double total_us) {
  if (total_us == 0) return "NaN";
  return percent(us * 100.0 / total_us, 2);
}

// torch 2.15's _format_memory: binary units, two decimals, the sign kept.
std::string format_memory(std::int64_t nbytes) {
  constexpr double kKB = 1024.0, kMB = 1024.0 * kKB, kGB = 1024.0 * kMB;
  const double v = static_cast<double>(nbytes);
  const double mag = v < 0 ? -v : v;
  if (mag >= kGB) return fixed(v * 1.0 / kGB, 2) + " GB";
  if (mag >= kMB) return fixed(v * 1.0 / kMB, 2) + " MB";
  if (mag >= kKB) return fixed(v * 1.0 / kKB, 2) + " KB";
  return std::to_string(nbytes) + " B";
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

enum class SortKey {
  kNone,
  kCpuTimeAvg,
  kCpuTimeTotal,
  kSelfCpuTimeTotal,
  kCount,
  kDeviceTimeAvg,
  kDeviceTimeTotal,
  kSelfDeviceTimeTotal,
  kCpuMem,
  kSelfCpuMem,
  kDeviceMem,
  kSelfDeviceMem,
  kZero
};

// torch sorts by getattr(evt, sort_by with cuda/xpu/privateuse1 -> device).
SortKey parse_sort_key(const std::string& sort_by) {
  if (sort_by.empty()) return SortKey::kNone;
  std::string attr = replace_all(sort_by, "cuda", "device");
  attr = replace_all(attr, "xpu", "device");
  attr = replace_all(attr, "privateuse1", "device");
  if (attr == "cpu_time") return SortKey::kCpuTimeAvg;
  if (attr == "cpu_time_total") return SortKey::kCpuTimeTotal;
  if (attr == "self_cpu_time_total") return SortKey::kSelfCpuTimeTotal;
  if (attr == "count") return SortKey::kCount;
  if (attr == "device_time") return SortKey::kDeviceTimeAvg;
  if (attr == "device_time_total") return SortKey::kDeviceTimeTotal;
  if (attr == "self_device_time_total") return SortKey::kSelfDeviceTimeTotal;
  if (attr == "cpu_memory_usage") return SortKey::kCpuMem;
  if (attr == "self_cpu_memory_usage") return SortKey::kSelfCpuMem;
  if (attr == "device_memory_usage") return SortKey::kDeviceMem;
  if (attr == "self_device_memory_usage") return SortKey::kSelfDeviceMem;
  if (attr == "flops") return SortKey::kZero;  // FunctionEventAvg.flops: 0 without FLOP data
  throw std::invalid_argument("op table: unknown sort key '" + sort_by + "'");
}

// FormattedTimesMixin.cpu_time: the per-call average, 0 for no calls.
double cpu_time_avg(const OpRow& r) {
  return r.calls == 0 ? 0.0 : r.cpu_total_us / static_cast<double>(r.calls);
}

// FormattedTimesMixin.device_time, likewise.
double device_time_avg(const OpRow& r) {
  return r.calls == 0 ? 0.0 : r.cuda_total_us / static_cast<double>(r.calls);
}

void sort_rows(std::vector<OpRow>& rows, SortKey key) {
  if (key == SortKey::kNone || key == SortKey::kZero) return;  // all-equal keys: a stable sort is a no-op
  // sorted(..., reverse=True) is stable: ties keep the input order.
  auto value = [key](const OpRow& r) {
    switch (key) {
      case SortKey::kCpuTimeAvg:
        return cpu_time_avg(r);
      case SortKey::kCpuTimeTotal:
        return r.cpu_total_us;
      case SortKey::kDeviceTimeAvg:
        return device_time_avg(r);
      case SortKey::kDeviceTimeTotal:
        return r.cuda_total_us;
      case SortKey::kSelfDeviceTimeTotal:
        return r.self_cuda_us;
      default:
        return r.self_cpu_us;
    }
  };
  if (key == SortKey::kCpuMem || key == SortKey::kSelfCpuMem || key == SortKey::kDeviceMem ||
      key == SortKey::kSelfDeviceMem) {
    // Integers, compared as integers (torch: Python ints).
    auto field = key == SortKey::kCpuMem       ? &OpRow::cpu_mem
                 : key == SortKey::kSelfCpuMem ? &OpRow::self_cpu_mem
                 : key == SortKey::kDeviceMem  ? &OpRow::cuda_mem
                                               : &OpRow::self_cuda_mem;
    std::stable_sort(rows.begin(), rows.end(), [field](const OpRow& a, const OpRow& b) { return a.*field > b.*field; });
    return;
  }
  if (key == SortKey::kCount) {
    // Compared as integers: a double would merge counts above 2^53.
    std::stable_sort(rows.begin(), rows.end(), [](const OpRow& a, const OpRow& b) { return a.calls > b.calls; });
  } else {
    std::stable_sort(rows.begin(), rows.end(),
                     [&value](const OpRow& a, const OpRow& b) { return value(a) > value(b); });
  }
}

struct Table {
  std::vector<std::size_t> widths;
  std::string out;

  void line(const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < widths.size(); ++i) out += pad_left(cells[i], widths[i]) + std::string(kSpacing, ' ');
    out += '\n';
  }
  void separator() {
    for (std::size_t w : widths) out += std::string(w, '-') + std::string(kSpacing, ' ');
    out += '\n';
  }
};

}  // namespace

std::string render_op_table(std::vector<OpRow> rows, const OpTableOptions& opt) {
  const SortKey key = parse_sort_key(opt.sort_by);  // validated even with no rows
  if (rows.empty()) return "";
  sort_rows(rows, key);

  // torch shows the column when any event has a non-empty input_shapes list.
  const bool shapes = opt.with_input_shapes && std::any_of(rows.begin(), rows.end(), [](const OpRow& r) {
                        return !r.input_shapes.empty() && r.input_shapes != "[]";
                      });

  // Widths come from every row, not just the ones row_limit keeps.
  std::size_t name_width = 0, shapes_width = 0;
  for (const OpRow& r : rows) {
    name_width = std::max(name_width, cp_len(r.name) + 4);
    shapes_width = std::max(shapes_width, cp_len(r.input_shapes) + 4);
  }
  name_width = std::min(name_width, kMaxNameWidth);
  shapes_width = std::min(shapes_width, kMaxShapesWidth);

  // _build_table's has_device_time; torch's device name is use_device.upper().
  const bool device =
      !opt.device.empty() && std::any_of(rows.begin(), rows.end(), [](const OpRow& r) { return r.self_cuda_us > 0; });
  std::string dev = opt.device;
  for (char& c : dev) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;

  const std::string est = opt.estimated ? "~" : "";
  std::vector<std::string> headers = {
      "Name", "Self CPU %" + est, "Self CPU" + est, "CPU total %" + est, "CPU total" + est, "CPU time avg" + est};
  Table t;
  t.widths.push_back(name_width);
  // torch never widens a column for its header; only the "~" suffix needs it.
  for (std::size_t i = 1; i < headers.size(); ++i) {
    t.widths.push_back(opt.estimated ? std::max(kDefaultWidth, cp_len(headers[i])) : kDefaultWidth);
  }
  if (device) {
    for (const std::string& h : {"Self " + dev, "Self " + dev + " %", dev + " total", dev + " time avg"}) {
      headers.push_back(h);
      t.widths.push_back(kDefaultWidth);  // "CUDA time avg" overhangs, as in torch
    }
  }
  // _build_table's has_device_mem; its memory columns come after the times.
  const bool device_mem = opt.profile_memory && !opt.device.empty() &&
                          std::any_of(rows.begin(), rows.end(), [](const OpRow& r) { return r.self_cuda_mem > 0; });
  if (opt.profile_memory) {
    std::vector<std::string> mem = {"CPU Mem", "Self CPU Mem"};
    if (device_mem) mem.insert(mem.end(), {dev + " Mem", "Self " + dev + " Mem"});
    for (auto& h : mem) {
      headers.push_back(h);
      t.widths.push_back(kDefaultWidth);
    }
  }
  headers.push_back("# of Calls");
  t.widths.push_back(kDefaultWidth);
  if (shapes) {
    headers.push_back("Input Shapes");
    t.widths.push_back(shapes_width);
  }

  // Summed in the sorted order, as torch does, so the float rounding matches.
  // The device total takes only device-side rows (torch: device_type CUDA and
  // not a user annotation), so an op's share of it is its kernels' share.
  double total_self = 0, total_self_device = 0;
  for (const OpRow& r : rows) {
    total_self += r.self_cpu_us;
    if (r.device_event) total_self_device += r.self_cuda_us;
  }

  t.separator();
  t.line(headers);
  t.separator();
  const std::size_t shown =
      opt.row_limit < 0 ? rows.size() : std::min(rows.size(), static_cast<std::size_t>(opt.row_limit));
  for (std::size_t i = 0; i < shown; ++i) {
    const OpRow& r = rows[i];
    std::string name = r.name;
    if (cp_len(name) >= kMaxNameWidth - 3) name = cp_prefix(name, kMaxNameWidth - 3) + "...";
    std::vector<std::string> cells = {name,
                                      format_share(r.self_cpu_us, total_self),
                                      format_time(r.self_cpu_us),
                                      format_share(r.cpu_total_us, total_self),
                                      format_time(r.cpu_total_us),
                                      format_time(cpu_time_avg(r))};
    if (device) {
      cells.push_back(format_time(r.self_cuda_us));
      cells.push_back(format_share(r.self_cuda_us, total_self_device));
      cells.push_back(format_time(r.cuda_total_us));
      cells.push_back(format_time(device_time_avg(r)));
    }
    if (opt.profile_memory) {
      auto mem = [&opt](std::int64_t b) { return opt.memory_bytes ? std::to_string(b) : format_memory(b); };
      cells.push_back(mem(r.cpu_mem));
      cells.push_back(mem(r.self_cpu_mem));
      if (device_mem) {
        cells.push_back(mem(r.cuda_mem));
        cells.push_back(mem(r.self_cuda_mem));
      }
    }
    cells.push_back(std::to_string(r.calls));
    if (shapes) cells.push_back(cp_prefix(r.input_shapes, shapes_width));
    t.line(cells);
  }
  t.separator();
  t.out += "Self CPU time total" + est + ": " + format_time(total_self) + "\n";
  if (device) t.out += "Self " + dev + " time total: " + format_time(total_self_device) + "\n";
  return t.out;
}

}  // namespace lt
