#include "reports/advanced/pstats_dump.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "user/text/utf8_text.h"

namespace lt {

namespace marshal {

namespace {
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
}  // namespace

void put_int(std::string& out, std::int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out.push_back('i');
    put_u32(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
    return;
  }
  // TYPE_LONG: the digit count (negative for a negative number), then the
  // magnitude in 15-bit digits, least significant first.
  std::uint64_t mag = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  std::vector<std::uint16_t> digits;
  for (; mag; mag >>= 15) digits.push_back(static_cast<std::uint16_t>(mag & 0x7fff));
  out.push_back('l');
  const auto n = static_cast<std::int32_t>(digits.size());
  put_u32(out, static_cast<std::uint32_t>(v < 0 ? -n : n));
  for (auto d : digits) {
    out.push_back(static_cast<char>(d & 0xff));
    out.push_back(static_cast<char>(d >> 8));
  }
}

void put_float(std::string& out, double v) {
  static_assert(std::endian::native == std::endian::little, "marshal's binary floats are little-endian");
  out.push_back('g');
  char bytes[8];
  std::memcpy(bytes, &v, sizeof bytes);
  out.append(bytes, sizeof bytes);
}

void put_str(std::string& out, const std::string& utf8) {
  out.push_back('u');
  put_u32(out, static_cast<std::uint32_t>(utf8.size()));
  out += utf8;
}

}  // namespace marshal

namespace {

void put_key(std::string& out, const PstatsKey& k) {
  out += ")\x03";  // TYPE_SMALL_TUPLE of 3
  marshal::put_str(out, utf8_text(k.file));
  marshal::put_int(out, k.line);
  marshal::put_str(out, utf8_text(k.name));
}

// (first, second, tt, ct): cProfile writes an entry's own tuple with cc
// first and a caller's with nc first.
void put_counts(std::string& out, std::uint64_t first, std::uint64_t second, const PstatsCounts& c) {
  marshal::put_int(out, static_cast<std::int64_t>(first));
  marshal::put_int(out, static_cast<std::int64_t>(second));
  marshal::put_float(out, c.tt);
  marshal::put_float(out, c.ct);
}

PstatsKey key_of(const StackFrame& f) {
  // Pseudo-frames ("[action's own frame]", "[truncated]") have no file:
  // cProfile's "~" makes pstats print the bare name.
  if (f.file.empty()) return {"~", 0, f.function};
  return {f.file, f.native ? 0 : f.first_line, f.function};
}

}  // namespace

std::string marshal_pstats(const PstatsStats& stats) {
  std::string out;
  out.push_back('{');
  for (const auto& [key, e] : stats) {
    put_key(out, key);
    out += ")\x05";
    put_counts(out, e.own.cc, e.own.nc, e.own);
    out.push_back('{');
    for (const auto& [caller, c] : e.callers) {
      put_key(out, caller);
      out += ")\x04";
      put_counts(out, c.nc, c.cc, c);
    }
    out.push_back('0');  // TYPE_NULL ends a dict
  }
  out.push_back('0');
  return out;
}

PstatsStats pstats_from_stacks(const StackProfile& p) {
  const double sec_per_unit = p.unit == StackUnit::samples ? p.period_ns / 1e9 : 1e-9;
  // Functions by index, so that call paths are vectors of small numbers.
  std::vector<PstatsKey> keys;
  std::map<PstatsKey, std::uint32_t> key_index;
  std::vector<std::uint32_t> key_of_frame(p.frames.size());
  for (std::size_t i = 0; i < p.frames.size(); ++i) {
    auto [it, fresh] = key_index.try_emplace(key_of(p.frames[i]), static_cast<std::uint32_t>(keys.size()));
    if (fresh) keys.push_back(it->first);
    key_of_frame[i] = it->second;
  }
  std::vector<PstatsCounts> own(keys.size());
  std::map<std::pair<std::uint32_t, std::uint32_t>, PstatsCounts> edges;  // (caller, callee)
  // Call paths as a trie over frames (a frame carries its executing line,
  // so a caller's frame says which call site): node 0 is the action's
  // opening frame.  A function met under a path not seen before is one
  // call more, at least.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> trie;  // (node, frame) -> node
  std::set<std::pair<std::uint32_t, std::uint32_t>> paths;                // (node above, function)
  for (const auto& s : p.stacks) {
    const double w = static_cast<double>(s.weight) * sec_per_unit;
    std::vector<std::uint32_t> on_stack;  // functions so far, root first
    std::set<std::uint32_t> counted;
    std::set<std::pair<std::uint32_t, std::uint32_t>> counted_edges;
    std::uint32_t node = 0;
    for (std::size_t i = 0; i < s.frames.size(); ++i) {
      if (s.frames[i] >= p.frames.size()) break;
      const std::uint32_t k = key_of_frame[s.frames[i]];
      const bool leaf = i + 1 == s.frames.size();
      const bool recursive = std::find(on_stack.begin(), on_stack.end(), k) != on_stack.end();
      const bool new_path = paths.emplace(node, k).second;
      PstatsCounts& c = own[k];
      if (new_path) {
        ++c.nc;
        c.cc += !recursive;
      }
      if (leaf) c.tt += w;
      if (counted.insert(k).second) c.ct += w;  // recursion counts once per stack
      if (!on_stack.empty()) {
        const auto edge = std::make_pair(on_stack.back(), k);
        PstatsCounts& e = edges[edge];
        if (new_path) {
          ++e.nc;
          e.cc += !recursive;
        }
        if (leaf) e.tt += w;
        if (counted_edges.insert(edge).second) e.ct += w;
      }
      on_stack.push_back(k);
      auto [it, fresh] = trie.try_emplace({node, s.frames[i]}, static_cast<std::uint32_t>(trie.size() + 1));
      node = it->second;
    }
  }
  PstatsStats out;
  for (std::size_t k = 0; k < keys.size(); ++k)
    if (own[k].nc) out[keys[k]].own = own[k];
  for (const auto& [edge, c] : edges) out[keys[edge.second]].callers[keys[edge.first]] = c;
  // pstats refuses an empty dict ("Cannot create or construct"); cProfile's
  // own dump of a short action always holds its disable() call.
  if (out.empty()) out[{"~", 0, kNoSamplesRow}] = {};
  return out;
}

std::string pstats_dump_readme(std::uint64_t period_ns, unsigned rate_hz) {
  std::string period = std::to_string(period_ns / 1000) + " us";
  return "These .prof files were written by ltrace-bpf --dump-stats, in the format of cProfile's dump_stats\n"
         "(AdvancedProfiler(dump_stats=True) names: {stage}[-{filename}][-{local_rank}]-{action}.prof).\n"
         "Load them with pstats.Stats(path) or snakeviz.  They are made from sampled stacks, not from\n"
         "cProfile's deterministic hooks, so the columns mean:\n"
         "\n"
         "  tottime, cumtime  ESTIMATES: on-CPU samples x the sampling period (" +
         period + ", " + std::to_string(rate_hz) +
         " Hz),\n"
         "                    CPU time of the thread; cProfile's are wall time (time blocked is not here:\n"
         "                    see --off-cpu in the Advanced report).  A function no sample caught is absent;\n"
         "                    an action no sample caught has one row, [no samples in this action].\n"
         "  ncalls            NOT CALL COUNTS: a lower bound, the number of distinct call paths (from the\n"
         "                    action's opening frame, call sites included) that samples caught the function\n"
         "                    in; each needs a call of its own.  The primitive count (after the /) leaves\n"
         "                    out paths where the function is already on the stack (recursion).\n"
         "  percall           therefore an upper bound at best; do not read it as a mean.\n"
         "  callers           the frame directly above in the sampled stacks, with the same meanings.\n"
         "\n"
         "Each action's stacks start below the frame that opened the action (as AdvancedProfiler's\n"
         "cProfile sees only calls made inside it); --full-stacks keeps whole stacks.  Function names\n"
         "are qualified names (co_qualname) on Python 3.11+, where cProfile writes co_name.  Frames\n"
         "with no file (\"[action's own frame]\", \"[truncated]\") are written as cProfile writes\n"
         "builtins: file \"~\", line 0.\n";
}

}  // namespace lt
