#include "reports/flame/flamegraph_svg.h"

#include <algorithm>
#include <cstdio>

#include "reports/flame/collapsed.h"
#include "user/text/json_escape.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

constexpr double kWidth = 1200;            // image px
constexpr double kPad = 10;                // left/right margin
constexpr double kFrameH = 16;             // px per stack level
constexpr double kTop = 40;                // title and reset button
constexpr double kBottom = 30;             // details line
constexpr double kCharW = 7;               // approx. width of a 12px Verdana glyph
constexpr std::uint64_t kMinShare = 1000;  // frames under total/1000 are omitted

// Escapes markup and blanks what XML 1.0 forbids even as a reference (C0
// controls; newlines too, labels are one line), after making the text
// valid UTF-8.
std::string xml(const std::string& raw) {
  std::string text = utf8_text(raw);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = ' ';
  return html_escape(text);  // the same five entities
}

std::string num(double v, const char* f = "%.3f") {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string grouped(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

// At most `chars` code points of a valid UTF-8 label, ".." marking a cut
// (never inside a multi-byte character, which would break the XML).
std::string fit_text(const std::string& label, int chars) {
  if (chars < 3) return "";
  std::size_t cps = 0, i = 0, cut = 0;
  for (; i < label.size(); ++i) {
    if ((static_cast<unsigned char>(label[i]) & 0xC0) == 0x80) continue;
    if (cps == static_cast<std::size_t>(chars - 2)) cut = i;
    if (++cps > static_cast<std::size_t>(chars)) return label.substr(0, cut) + "..";
  }
  return label;
}

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// Same function, same colour, in every graph we draw: Python warm (red to
// yellow, like flamegraph.pl's "hot"), native frames blue, roots grey-violet.
std::string color(const FlameNode& n) {
  const std::uint32_t h = fnv1a(n.function.empty() ? n.label : n.function);
  const unsigned a = h & 0xFF, b = (h >> 8) & 0xFF, c = (h >> 16) & 0xFF;
  unsigned r, g, bl;
  switch (n.kind) {
    case FlameNode::Kind::python:
      r = 205 + a % 50, g = b % 230, bl = c % 55;
      break;
    case FlameNode::Kind::native:
      r = 60 + a % 60, g = 130 + b % 70, bl = 200 + c % 55;
      break;
    default:
      r = 170 + a % 30, g = 165 + a % 30, bl = 200 + b % 40;
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(bl) + ")";
}

struct Layout {
  const FlameNode* node;
  double x, w;  // px within [0, inner width]
  int depth;
};

void place(const FlameNode& n, double x, double px_per_unit, std::uint64_t total, int depth, std::vector<Layout>& out) {
  if (n.value * kMinShare < total) return;  // children are narrower still
  out.push_back({&n, x, static_cast<double>(n.value) * px_per_unit, depth});
  for (const auto& c : n.children) {
    place(c, x, px_per_unit, total, depth + 1, out);
    x += static_cast<double>(c.value) * px_per_unit;
  }
}

// Click-to-zoom: a frame's data-x/-w/-d are its unzoomed place; zooming
// rescales the frame's descendants to the full width, stretches its
// ancestors (dimmed) and hides the rest.  CDATA keeps '<' and '&' legal.
const char* kScript = R"JS(<script type="text/ecmascript"><![CDATA[
(function () {
  var s = document.currentScript, svg = (s && s.ownerSVGElement) || document.documentElement;
  var W = +svg.getAttribute('data-inner'), X0 = +svg.getAttribute('data-pad');
  var frames = svg.querySelectorAll('g.f'), reset = svg.querySelector('.reset');
  var details = svg.querySelector('.details');
  function num(g, a) { return +g.getAttribute(a); }
  function fit(g, x, w) {
    var r = g.querySelector('rect'), t = g.querySelector('text'), l = g.getAttribute('data-l');
    var n = Math.floor((w - 6) / 7), cs = Array.from(l);
    r.setAttribute('x', X0 + x); r.setAttribute('width', w); t.setAttribute('x', X0 + x + 3);
    t.textContent = n < 3 ? '' : cs.length <= n ? l : cs.slice(0, n - 2).join('') + '..';
  }
  function zoom(z) {
    var zx = num(z, 'data-x'), zw = num(z, 'data-w'), zd = num(z, 'data-d'), k = W / zw, e = 1e-3;
    frames.forEach(function (g) {
      var x = num(g, 'data-x'), w = num(g, 'data-w'), d = num(g, 'data-d');
      g.style.display = ''; g.style.opacity = '';
      if (d >= zd && x >= zx - e && x + w <= zx + zw + e) fit(g, (x - zx) * k, w * k);
      else if (d < zd && x <= zx + e && x + w >= zx + zw - e) { fit(g, 0, W); g.style.opacity = '0.6'; }
      else g.style.display = 'none';
    });
    reset.style.display = zd > 0 ? '' : 'none';
  }
  svg.addEventListener('click', function (ev) {
    var g = ev.target.closest('g.f');
    if (g) zoom(g); else if (ev.target.closest('.reset')) zoom(frames[0]);
  });
  svg.addEventListener('mouseover', function (ev) {
    var g = ev.target.closest('g.f');
    details.textContent = g ? g.querySelector('title').textContent : ' ';
  });
})();
]]></script>
)JS";

}  // namespace

void write_flamegraph_svg(const std::vector<NamedProfile>& profiles, const std::string& title,
                          const std::string& unit_label, std::ostream& out) {
  const FlameNode tree = flame_tree(profiles, "all");
  const double inner = kWidth - 2 * kPad;
  const std::uint64_t total = tree.value;
  std::vector<Layout> frames;
  if (total > 0) place(tree, 0, inner / static_cast<double>(total), total, 0, frames);
  int max_depth = 0;
  for (auto& f : frames) max_depth = std::max(max_depth, f.depth);
  const double height = kTop + (max_depth + 1) * kFrameH + kBottom;

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
      << "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" data-inner=\"" << inner << "\" data-pad=\"" << kPad
      << "\">\n"
      << "<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
         ".title{font-size:17px;text-anchor:middle}g.f{cursor:pointer}g.f text{pointer-events:none}"
         "g.f:hover rect{stroke:#000;stroke-width:0.5}.reset{cursor:pointer}</style>\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#f8f8f8\"/>\n"
      << "<text class=\"title\" x=\"" << kWidth / 2 << "\" y=\"24\">" << xml(title) << "</text>\n"
      << "<text class=\"reset\" x=\"" << kPad << "\" y=\"24\" style=\"display:none\">Reset Zoom</text>\n"
      << "<text class=\"details\" x=\"" << kPad << "\" y=\"" << height - 10 << "\"> </text>\n";
  if (total == 0) out << "<text x=\"" << kWidth / 2 << "\" y=\"" << kTop + 12 << "\">No stacks recorded</text>\n";

  for (const auto& f : frames) {
    const FlameNode& n = *f.node;
    const std::string label = xml(n.label);
    const double y = kTop + (max_depth - f.depth) * kFrameH;
    out << "<g class=\"f\" data-x=\"" << num(f.x) << "\" data-w=\"" << num(f.w) << "\" data-d=\"" << f.depth
        << "\" data-l=\"" << label << "\"><title>" << label << " (" << grouped(n.value) << " " << xml(unit_label)
        << ", " << num(100.0 * static_cast<double>(n.value) / static_cast<double>(total), "%.2f") << "%)</title>"
        << "<rect x=\"" << num(kPad + f.x) << "\" y=\"" << y << "\" width=\"" << num(f.w) << "\" height=\""
        << kFrameH - 1 << "\" rx=\"2\" fill=\"" << color(n) << "\"/><text x=\"" << num(kPad + f.x + 3) << "\" y=\""
        << y + 11.5 << "\">" << xml(fit_text(utf8_text(n.label), static_cast<int>((f.w - 6) / kCharW)))
        << "</text></g>\n";
  }
  if (total > 0) out << kScript;
  out << "</svg>\n";
}

}  // namespace lt
