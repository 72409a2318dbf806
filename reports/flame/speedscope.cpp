#include "reports/flame/speedscope.h"

#include <cstdint>
#include <map>
#include <tuple>

#include "reports/flame/collapsed.h"
#include "user/text/json_escape.h"

namespace lt {

namespace {

std::string jstr(const std::string& s) {
  return json_string(s);  // valid UTF-8 whatever the bytes
}

}  // namespace

void write_speedscope(const std::vector<NamedProfile>& profiles, std::ostream& out) {
  // Shared frame table, in first-seen order so output follows input.
  using Key = std::tuple<std::string, std::string, int>;
  std::map<Key, std::size_t> index;
  std::vector<const Key*> table;
  auto intern = [&](const StackFrame& f) {
    Key k{f.function.empty() ? "<unknown>" : f.function, f.file, f.native ? 0 : f.line};
    auto [it, fresh] = index.emplace(std::move(k), table.size());
    if (fresh) table.push_back(&it->first);  // map nodes never move
    return it->second;
  };

  // Remap every profile's frame indices first: shared.frames precedes profiles.
  std::vector<std::vector<std::size_t>> remap;
  for (const auto& np : profiles) {
    remap.emplace_back();
    if (!np.profile) continue;
    for (const auto& f : np.profile->frames) remap.back().push_back(intern(f));
  }
  std::size_t unknown = SIZE_MAX;  // for out-of-range indices, interned on demand
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    if (!profiles[i].profile) continue;
    for (const auto& s : profiles[i].profile->stacks)
      for (auto idx : s.frames)
        if (idx >= remap[i].size() && unknown == SIZE_MAX) unknown = intern(StackFrame{});
  }

  out << "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[";
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& [name, file, line] = *table[i];
    out << (i ? "," : "") << "{\"name\":" << jstr(name);
    if (!file.empty()) out << ",\"file\":" << jstr(file);
    if (line > 0) out << ",\"line\":" << line;
    out << "}";
  }
  out << "]},\"profiles\":[";
  bool first_profile = true;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const auto& np = profiles[i];
    if (!np.profile) continue;
    const StackProfile& p = *np.profile;
    out << (first_profile ? "" : ",") << "\n{\"type\":\"sampled\",\"name\":" << jstr(np.root.empty() ? p.name : np.root)
        << ",\"unit\":\"" << (p.unit == StackUnit::nanoseconds ? "nanoseconds" : "none")
        << "\",\"startValue\":0,\"endValue\":" << p.total_weight() << ",\"samples\":[";
    first_profile = false;
    bool first = true;
    for (const auto& s : p.stacks) {
      if (s.weight == 0) continue;  // matches endValue and the other exports
      out << (first ? "" : ",") << "[";
      first = false;
      for (std::size_t k = 0; k < s.frames.size(); ++k)
        out << (k ? "," : "") << (s.frames[k] < remap[i].size() ? remap[i][s.frames[k]] : unknown);
      out << "]";
    }
    out << "],\"weights\":[";
    first = true;
    for (const auto& s : p.stacks) {
      if (s.weight == 0) continue;
      out << (first ? "" : ",") << s.weight;
      first = false;
    }
    out << "]}";
  }
  out << "],\"activeProfileIndex\":0,\"exporter\":\"ltrace-bpf\"}\n";
}

}  // namespace lt
