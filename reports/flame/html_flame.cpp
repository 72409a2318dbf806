#include "reports/flame/html_flame.h"

#include <sstream>

#include "reports/flame/collapsed.h"
#include "user/text/json_escape.h"

namespace lt {

namespace {

constexpr std::uint64_t kMinShare = 10000;  // keep the page light: drop frames < total/10000

std::string jstr(const std::string& s) {
  return json_string(s);  // valid UTF-8 whatever the bytes
}

// Tree as {"n":label,"v":weight,"k":kind,"c":[children]}; "k" (1 native,
// 2 root) and "c" are left out when 0 / empty: leaves are most nodes.
void tree_json(const FlameNode& n, std::uint64_t total, std::string& out) {
  out += "{\"n\":" + jstr(n.label) + ",\"v\":" + std::to_string(n.value);
  if (n.kind != FlameNode::Kind::python) out += n.kind == FlameNode::Kind::native ? ",\"k\":1" : ",\"k\":2";
  bool first = true;
  for (const auto& c : n.children) {
    if (c.value * kMinShare < total) continue;
    out += first ? ",\"c\":[" : ",";
    first = false;
    tree_json(c, total, out);
  }
  if (!first) out += "]";
  out += "}";
}

// The HTML tokenizer ends a <script> at "</script" whatever the JS quoting,
// and "<!--" can start a script-data escape; both only occur inside JSON
// strings here, where "\/" and "\u003c" mean the same characters.
std::string script_safe(const std::string& js) {
  std::string out;
  out.reserve(js.size());
  for (std::size_t i = 0; i < js.size(); ++i) {
    if (js[i] == '<' && js.compare(i, 2, "</") == 0) {
      out += "<\\/";
      ++i;
    } else if (js[i] == '<' && js.compare(i, 4, "<!--") == 0) {
      out += "\\u003c";
    } else {
      out.push_back(js[i]);
    }
  }
  return out;
}

const char* kScript = R"JS(
  function $(s) { return document.getElementById(P + s); }
  var sel = $('-sel'), q = $('-q'), fg = $('-fg'), tip = $('-tip'), info = $('-info');
  var ROW = 18, nodes = [], root = null, focus = null, unit = '';
  var BOX = 'position:absolute;box-sizing:border-box;height:17px;overflow:hidden;white-space:nowrap;' +
            'text-overflow:ellipsis;font:11px/17px monospace;padding:0 3px;border-right:1px solid #fff;' +
            'cursor:pointer;color:#000';
  function link(n, p, d) {
    n.p = p; n.d = d; n.i = nodes.length; nodes.push(n); n.c = n.c || [];
    n.c.forEach(function (c) { link(c, n, d + 1); });
  }
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
    return h;
  }
  function color(n) {
    var h = hash(n.n.split(' (')[0]), l = 55 + (h >>> 8) % 15;
    if (n.k === 1) return 'hsl(' + (190 + h % 40) + ',60%,' + (l + 8) + '%)';
    if (n.k === 2) return 'hsl(250,15%,' + (l + 15) + '%)';
    return 'hsl(' + (h % 55) + ',85%,' + l + '%)';
  }
  function amount(v) {
    if (unit !== 'ns') return v.toLocaleString() + ' samples';
    return v >= 1e9 ? (v / 1e9).toFixed(3) + ' s' : v >= 1e6 ? (v / 1e6).toFixed(3) + ' ms' : (v / 1e3).toFixed(1) + ' µs';
  }
  function pct(v, t) { return (t ? 100 * v / t : 0).toFixed(2) + '%'; }
  function matches(n, s) { return s !== '' && n.n.toLowerCase().indexOf(s) >= 0; }
  function box(n, x, w, row, dim) {
    var b = document.createElement('div');
    b.style.cssText = BOX + ';left:' + x + '%;width:' + w + '%;top:' + row * ROW + 'px;background:' + color(n) +
                      (dim ? ';opacity:.6' : '');
    b.dataset.i = n.i;
    b.textContent = n.n;
    return b;
  }
  function draw() {
    var frag = document.createDocumentFragment(), path = [], rows = 0;
    for (var a = focus.p; a; a = a.p) path.unshift(a);
    path.forEach(function (a, r) { frag.appendChild(box(a, 0, 100, r, true)); });
    (function walk(n, x, w, row) {
      if (w < 0.1) return;  // narrower than 0.1% of the view: unreadable
      frag.appendChild(box(n, x, w, row, false));
      rows = Math.max(rows, row);
      n.c.forEach(function (c) { var cw = w * c.v / n.v; walk(c, x, cw, row + 1); x += cw; });
    })(focus, 0, 100, path.length);
    fg.textContent = '';
    fg.style.height = (rows + 1) * ROW + 'px';
    fg.appendChild(frag);
    search();
  }
  function search() {
    var s = q.value.trim().toLowerCase(), hit = 0;
    Array.prototype.forEach.call(fg.children, function (b) {
      var n = nodes[b.dataset.i];
      b.style.background = matches(n, s) ? '#e040e0' : color(n);
    });
    // Share of matched frames, each stack counted once (a match below a match adds nothing).
    (function walk(n) { if (matches(n, s)) hit += n.v; else n.c.forEach(walk); })(root);
    info.textContent = s === '' ? 'total ' + amount(root.v) : 'matched ' + amount(hit) + ' (' + pct(hit, root.v) + ')';
  }
  function load(i) { nodes = []; root = focus = D[i].t; unit = D[i].unit; link(root, null, 0); draw(); }
  fg.addEventListener('click', function (ev) {
    var b = ev.target.closest('[data-i]');
    if (b) { focus = nodes[b.dataset.i]; draw(); }
  });
  fg.addEventListener('mousemove', function (ev) {
    var b = ev.target.closest('[data-i]');
    if (!b) { tip.style.display = 'none'; return; }
    var n = nodes[b.dataset.i];
    tip.textContent = n.n + '\n' + amount(n.v) + ', ' + pct(n.v, root.v) + ' of total' +
                      (focus !== root && n.d >= focus.d ? ', ' + pct(n.v, focus.v) + ' of zoomed frame' : '');
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = ev.clientY + 14 + 'px';
    tip.style.display = 'block';
  });
  fg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  sel.addEventListener('change', function () { load(+sel.value); });
  q.addEventListener('input', search);
  $('-reset').addEventListener('click', function () { focus = root; draw(); });
  load(0);
)JS";

}  // namespace

std::string html_flame_section(const std::vector<NamedProfile>& profiles, const std::string& id_prefix) {
  const std::string id = html_escape(id_prefix);
  std::string data = "[";
  std::ostringstream options;
  int shown = 0;
  for (const auto& np : profiles) {
    if (!np.profile) continue;
    const StackProfile& p = *np.profile;
    const std::string name = np.root.empty() ? p.name : np.root;
    const FlameNode tree = flame_tree({{"", &p}}, name);
    options << "<option value=\"" << shown << "\">" << html_escape(name) << "</option>";
    data += shown++ ? ",\n" : "\n";
    data += "{\"name\":" + jstr(name) + ",\"unit\":\"" + (p.unit == StackUnit::nanoseconds ? "ns" : "samples") +
            "\",\"t\":";
    tree_json(tree, tree.value, data);
    data += "}";
  }
  data += "]";

  std::ostringstream out;
  out << "<section class=\"flame\" id=\"" << id << "\">\n"
      << "<div style=\"display:flex;gap:12px;align-items:center;margin:6px 0\">"
      << "<label>Profile <select id=\"" << id << "-sel\">" << options.str() << "</select></label>"
      << "<input type=\"search\" id=\"" << id << "-q\" placeholder=\"Search frames\">"
      << "<button type=\"button\" id=\"" << id << "-reset\">Reset zoom</button>"
      << "<span id=\"" << id << "-info\" style=\"color:#555\"></span></div>\n"
      << "<div id=\"" << id << "-fg\" style=\"position:relative;width:100%;background:#fafafa;border:1px solid #ddd\">"
      << (shown ? "" : "No stacks recorded.") << "</div>\n"
      << "<div id=\"" << id << "-tip\" style=\"position:fixed;display:none;z-index:10;pointer-events:none;"
      << "white-space:pre;background:#fff;border:1px solid #888;padding:4px 6px;font:12px monospace;"
      << "box-shadow:2px 2px 4px rgba(0,0,0,.2)\"></div>\n";
  if (shown)
    out << "<script>(function () {\n  var P = " << script_safe(jstr(id_prefix)) << ";\n  var D = " << script_safe(data)
        << ";" << kScript << "})();</script>\n";
  out << "</section>\n";
  return out.str();
}

}  // namespace lt
