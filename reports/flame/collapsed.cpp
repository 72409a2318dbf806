#include "reports/flame/collapsed.h"

#include <algorithm>
#include <map>

#include "user/text/utf8_text.h"

namespace lt {

namespace {

// ';' would split the frame in two and a newline would end the record.
std::string folded_label(const std::string& raw) {
  const std::string s = utf8_text(raw);  // inferno reads lines as UTF-8
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ';')
      out.push_back(':');
    else if (c != '\n' && c != '\r')
      out.push_back(c);
  }
  return out;
}

FlameNode& child(FlameNode& parent, const std::string& label, const std::string& function, FlameNode::Kind kind) {
  auto& kids = parent.children;
  auto it = std::lower_bound(kids.begin(), kids.end(), label,
                             [](const FlameNode& n, const std::string& l) { return n.label < l; });
  if (it == kids.end() || it->label != label) {
    FlameNode n;
    n.label = label;
    n.function = function;
    n.kind = kind;
    it = kids.insert(it, std::move(n));
  }
  return *it;
}

}  // namespace

const StackFrame& frame_at(const StackProfile& p, std::uint32_t index) {
  static const StackFrame unknown{};
  return index < p.frames.size() ? p.frames[index] : unknown;
}

void write_collapsed(const std::vector<NamedProfile>& profiles, std::ostream& out) {
  // Keyed by the line text itself, so stacks that only differ before
  // escaping also merge: the output never repeats a line.
  std::map<std::string, std::uint64_t> lines;
  for (const auto& np : profiles) {
    if (!np.profile) continue;
    const StackProfile& p = *np.profile;
    std::vector<std::string> labels(p.frames.size());
    for (std::size_t i = 0; i < p.frames.size(); ++i) labels[i] = folded_label(frame_label(p.frames[i]));
    const std::string unknown = frame_label(StackFrame{});
    const std::string root = folded_label(np.root);
    for (const auto& s : p.stacks) {
      if (s.weight == 0) continue;
      std::string line = root;
      for (auto idx : s.frames) {
        if (!line.empty()) line.push_back(';');
        line += idx < labels.size() ? labels[idx] : unknown;
      }
      if (line.empty()) continue;  // no root and no frames: nothing to attribute to
      lines[line] += s.weight;
    }
  }
  for (const auto& [line, weight] : lines) out << line << ' ' << weight << '\n';
}

FlameNode flame_tree(const std::vector<NamedProfile>& profiles, const std::string& top) {
  static const std::string unknown = frame_label(StackFrame{});
  FlameNode tree;
  tree.label = tree.function = top;
  for (const auto& np : profiles) {
    if (!np.profile) continue;
    const StackProfile& p = *np.profile;
    std::vector<std::string> labels(p.frames.size());
    for (std::size_t i = 0; i < p.frames.size(); ++i) labels[i] = frame_label(p.frames[i]);
    for (const auto& s : p.stacks) {
      if (s.weight == 0) continue;
      tree.value += s.weight;
      // Pointers into `children` stay valid: a node's vector only grows while
      // we insert its own children, and we never revisit a sibling.
      FlameNode* node = &tree;
      if (!np.root.empty()) {
        node = &child(*node, np.root, np.root, FlameNode::Kind::root);
        node->value += s.weight;
      }
      for (auto idx : s.frames) {
        const StackFrame& f = frame_at(p, idx);
        const std::string& label = idx < labels.size() ? labels[idx] : unknown;  // no copy
        node = &child(*node, label, f.function, f.native ? FlameNode::Kind::native : FlameNode::Kind::python);
        node->value += s.weight;
      }
    }
  }
  return tree;
}

}  // namespace lt
