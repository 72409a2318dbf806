#include "reports/diff/diff_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "user/text/code_points.h"
#include "user/text/json_escape.h"
#include "user/text/numbers.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// The pages' shared style and this page's own, embedded at build time
// (tests/tools/embed_asset.py).
constexpr std::string_view kPageCss =
#include "reports/export/css/page.css.inc"
    ;
constexpr std::string_view kDiffCss =
#include "reports/diff/css/diff.css.inc"
    ;

constexpr double kWidth = 1200;  // px
constexpr double kRow = 18;      // px per frame
constexpr double kMinPx = 0.5;   // narrower frames are not drawn
constexpr int kMaxDepth = 160;

std::string esc(std::string_view s) {
  return html_escape(utf8_text(s));
}

std::string ms(double s) {
  return fixed(s * 1e3, 3);
}

std::string px(double v) {
  return fixed(v, 1);
}

// "fn (/a/b/file.py:12)" -> "fn (file.py:12)" for the label (the title
// keeps the path).
std::string short_name(const std::string& name) {
  const auto open = name.rfind(" (");
  if (open == std::string::npos) return name;
  const auto slash = name.rfind('/');
  if (slash == std::string::npos || slash < open) return name;
  return name.substr(0, open + 2) + name.substr(slash + 1);
}

double largest_self_change(const DiffFlameNode& n) {
  double m = std::fabs(n.self_b - n.self_a);
  for (const auto& k : n.children) m = std::max(m, largest_self_change(k));
  return m;
}

int depth_of(const DiffFlameNode& n, double total, bool b_side, int d = 1) {
  if (d >= kMaxDepth) return d;
  int out = d;
  for (const auto& k : n.children)
    if ((b_side ? k.b : k.a) / total * kWidth >= kMinPx) out = std::max(out, depth_of(k, total, b_side, d + 1));
  return out;
}

struct Drawer {
  std::ostream& out;
  bool b_side;
  double total, floor, largest;
  void frame(const DiffFlameNode& n, double x, int depth) {
    const double v = b_side ? n.b : n.a;
    const double w = v / total * kWidth;
    if (w < kMinPx || depth >= kMaxDepth) return;
    const double delta = n.self_b - n.self_a;
    const std::string label = short_name(n.name);
    out << "<g class=\"f\" data-name=\"" << esc(n.name) << "\" data-a=\"" << ms(n.a) << "\" data-b=\"" << ms(n.b)
        << "\" data-self-a=\"" << ms(n.self_a) << "\" data-self-b=\"" << ms(n.self_b) << "\"><title>" << esc(n.name)
        << "\nA: " << ms(n.a) << " ms per train step (itself " << ms(n.self_a) << ")\nB: " << ms(n.b)
        << " ms per train step (itself " << ms(n.self_b) << ")</title><rect x=\"" << px(x) << "\" y=\""
        << px(depth * kRow) << "\" width=\"" << px(w) << "\" height=\"" << px(kRow - 1) << "\" fill=\""
        << diff_colour(delta, floor, largest) << "\"/>";
    // About 7 px a character at 11 px monospace.
    const auto fits = static_cast<std::size_t>(std::max(0.0, (w - 6) / 7));
    if (fits >= 3) {
      std::string text = utf8_text(label);
      if (cp_len(text) > fits) text = cp_prefix(text, fits - 2) + "..";
      out << "<text x=\"" << px(x + 3) << "\" y=\"" << px(depth * kRow + 12.5) << "\">" << esc(text) << "</text>";
    }
    out << "</g>\n";
    double cx = x;
    for (const auto& k : n.children) {
      frame(k, cx, depth + 1);
      cx += (b_side ? k.b : k.a) / total * kWidth;
    }
  }
};

void flame_svg(const DiffFlame& f, bool b_side, double floor, std::ostream& out) {
  const double total = b_side ? f.root.b : f.root.a;
  if (total <= 0) {
    out << "<p class=\"note\">No samples in " << (b_side ? "B" : "A") << "'s train steps.</p>\n";
    return;
  }
  const int rows = depth_of(f.root, total, b_side);
  out << "<svg class=\"dflame\" id=\"flame-" << (b_side ? "b" : "a")
      << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << px(kWidth) << "\" height=\"" << px(rows * kRow)
      << "\" viewBox=\"0 0 " << px(kWidth) << " " << px(rows * kRow) << "\">\n";
  Drawer{out, b_side, total, floor, std::max(largest_self_change(f.root), floor)}.frame(f.root, 0, 0);
  out << "</svg>\n";
}

}  // namespace

std::string diff_colour(double delta, double floor, double largest) {
  if (std::fabs(delta) <= floor || largest <= 0) return "#f2f2f2";
  const double t = std::clamp(std::fabs(delta) / largest, 0.0, 1.0);
  // From a pale tint at the floor to full at the largest change.
  const int pale = static_cast<int>(std::lround(215 * (1 - t)));
  char b[8];
  if (delta > 0)
    std::snprintf(b, sizeof b, "#ff%02x%02x", pale, pale);
  else
    std::snprintf(b, sizeof b, "#%02x%02xff", pale, pale);
  return b;
}

void write_diff_html(const StepDiff& d, const DiffFlame& flame, const std::string& label_a, const std::string& label_b,
                     std::ostream& out) {
  const DiffRow* step = d.step();
  // The table's floor: a change under min_effect of A's median step is none.
  const double floor = step && step->median_a > 0 ? d.min_effect * step->median_a : 0;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ltrace-bpf diff</title><style>"
      << kPageCss << kDiffCss << "</style></head><body>\n<h1>ltrace-bpf diff</h1>\n<p>A: " << esc(label_a)
      << "<br>B: " << esc(label_b) << "</p>\n<h2>What changed</h2>\n<pre class=\"diff\">"
      << esc(render_step_diff(d, label_a, label_b)) << "</pre>\n";
  out << "<h2>Train steps by Python stack: B, coloured by the change from A</h2>\n"
      << "<p class=\"note\">On-CPU stack samples in the train steps, samples &times; period per train step "
         "(estimates: A "
      << flame.samples_a << " samples over " << flame.steps_a << " steps, B " << flame.samples_b << " over "
      << flame.steps_b
      << "). Width: B's time per step. Colour: the change of a frame's own time (samples with it innermost), "
         "within "
      << ms(floor)
      << " ms per step (the table's floor) white. The colours show a change; the table says which are "
         "significant.</p>\n<p class=\"key\"><span style=\"background:#ff0000\">B slower</span><span "
         "style=\"background:#0000ff;color:#fff\">B faster</span><span style=\"background:#f2f2f2\">no "
         "change</span></p>\n";
  if (flame.empty()) {
    out << "<p class=\"note\">No stack samples in the train steps of either side (record with --report advanced "
           "and --rate).</p>\n";
  } else {
    flame_svg(flame, true, floor, out);
    out << "<h2>A, coloured the same way (frames gone from B show here)</h2>\n";
    flame_svg(flame, false, floor, out);
  }
  out << "</body></html>\n";
}

}  // namespace lt
