#include "reports/aggregate/compiles.h"

#include <cstring>

#include "user/model/stack_profile.h"

namespace lt {

namespace {
constexpr std::string_view kRegion = "Torch-Compiled Region: ";
bool digits(const std::string& s, std::size_t from, std::size_t to, unsigned& out) {
  if (from >= to || to - from > 6) return false;
  out = 0;
  for (std::size_t i = from; i < to; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  return true;
}
}  // namespace

bool parse_region_name(const std::string& name, unsigned& frame, unsigned& compile) {
  if (name.compare(0, kRegion.size(), kRegion) != 0) return false;
  const auto slash = name.find('/', kRegion.size());
  return slash != std::string::npos && digits(name, kRegion.size(), slash, frame) &&
         digits(name, slash + 1, name.size(), compile);
}

void CompileAggregator::add(const lt_event_header& h, const std::byte* record) {
  switch (h.kind) {
    case LT_EV_WINDOW: {
      if (h.size < sizeof(lt_window_event)) return;
      lt_window_event w;
      std::memcpy(&w, record, sizeof w);
      if (w.begin && !window_begin_) window_begin_ = h.ts_ns;
      return;
    }
    case LT_EV_OP_NAME: {
      if (h.size < sizeof(lt_op_name_event)) return;
      lt_op_name_event e;
      std::memcpy(&e, record, sizeof e);
      if (e.op > 1'000'000) return;  // a damaged record
      if (names_.size() <= e.op) names_.resize(e.op + 1);
      Name& n = names_[e.op];
      n.text.assign(e.name, strnlen(e.name, sizeof e.name));
      n.region = parse_region_name(n.text, n.frame, n.compile);
      n.kernel = n.text.rfind("cpp_fused_", 0) == 0 || n.text.rfind("inductor kernel ", 0) == 0;
      return;
    }
    case LT_EV_REGION_CODE: {
      if (h.size < sizeof(lt_region_code_event)) return;
      lt_region_code_event e;
      std::memcpy(&e, record, sizeof e);
      procs_[h.pid].code_of_op[e.op] = {e.code, e.checksum};
      return;
    }
    case LT_EV_PY_CODE: {
      if (h.size < sizeof(lt_py_code_event)) return;
      lt_py_code_event e;
      std::memcpy(&e, record, sizeof e);
      if (e.flags & LT_CODE_UNREADABLE) return;
      auto& f = procs_[h.pid].functions[{e.code, e.checksum}];
      f = python_function_name(std::string_view(e.name, strnlen(e.name, sizeof e.name))) + " (" +
          std::string(e.file, strnlen(e.file, sizeof e.file)) + ":" + std::to_string(e.first_line) + ")";
      return;
    }
    case LT_EV_OP:
    case LT_EV_OP_SHAPES: {
      if (h.size < sizeof(lt_op_event)) return;
      lt_op_event e;
      std::memcpy(&e, record, sizeof e);
      if (e.op >= names_.size()) return;
      const Name& n = names_[e.op];
      if (n.kernel) {
        auto it = procs_.find(h.pid);
        if (it == procs_.end()) return;
        Proc& p = it->second;
        if (p.kernel_seen[e.op]) return;
        p.kernel_seen[e.op] = true;
        // A kernel first called right after a recompile is one of its graph's.
        if (!p.recompiles.empty() && !p.open_recompile.empty() && p.open_recompile.back() == p.recompiles.size() - 1)
          p.recompiles.back().kernels.push_back(n.text);
        return;
      }
      if (!n.region) return;
      Proc& p = procs_[h.pid];
      auto& r = p.regions[{n.frame, n.compile}];
      if (r.calls++ == 0) {
        r.frame = n.frame;
        r.compile = n.compile;
        r.first_ns = h.ts_ns;
        if (auto c = p.code_of_op.find(e.op); c != p.code_of_op.end())
          if (auto f = p.functions.find(c->second); f != p.functions.end()) r.function = f->second;
        auto last = p.last_compile.find(n.frame);
        if (last != p.last_compile.end() && last->second != n.compile) {
          p.recompiles.push_back({n.frame, n.compile, h.ts_ns, last->second, r.function, {}});
          p.open_recompile.push_back(static_cast<std::uint32_t>(p.recompiles.size() - 1));
        }
      } else if (!p.open_recompile.empty()) {
        // The new graph's second call: its kernels have all run once.
        const auto& last = p.recompiles[p.open_recompile.back()];
        if (last.frame == n.frame && last.compile == n.compile) p.open_recompile.pop_back();
      }
      p.last_compile[n.frame] = n.compile;
      return;
    }
    default:
      return;
  }
}

CompilesReport CompileAggregator::finish() {
  CompilesReport out;
  out.window_begin_ns = window_begin_;
  for (auto& [pid, p] : procs_) {
    if (p.regions.empty()) continue;
    auto& o = out.procs[pid];
    for (auto& [k, r] : p.regions) o.regions.push_back(r);
    o.recompiles = std::move(p.recompiles);
  }
  return out;
}

}  // namespace lt
