// Flame-graph exports on small synthetic profiles: collapsed text (golden),
// speedscope JSON, SVG and the HTML section (parsed by Python's json and
// minidom, so "well-formed" means what a real reader accepts).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "reports/flame/collapsed.h"
#include "reports/flame/flamegraph_svg.h"
#include "reports/flame/html_flame.h"
#include "reports/flame/speedscope.h"

using namespace lt;

namespace {

StackFrame py(std::string fn, std::string file, int line) {
  return {std::move(fn), std::move(file), line, line, false};
}
StackFrame native(std::string fn, std::string dso) {
  return {std::move(fn), std::move(dso), 0, 0, true};
}

// main → step → matmul (native): 2 samples in main, 3 in step, 5 in matmul.
StackProfile train_profile() {
  StackProfile p;
  p.name = "run_training_batch";
  p.frames = {py("main", "/a/train.py", 10), py("step", "/a/train.py", 20), native("matmul", "libtorch.so")};
  p.stacks = {{{0, 1}, 3, 3}, {{0, 1, 2}, 5, 5}, {{0}, 2, 2}};
  return p;
}

std::string collapsed(const std::vector<NamedProfile>& v) {
  std::ostringstream out;
  write_collapsed(v, out);
  return out.str();
}

// Writes `text` to a temp file and runs a Python one-liner on it; 0 = accepted.
int python_check(const std::string& text, const std::string& code, const std::string& suffix) {
  if (std::system("test -x /usr/bin/python3") != 0) return -1;
  const std::string path = testing::TempDir() + "flame_test" + suffix;
  std::ofstream(path, std::ios::binary) << text;
  const std::string cmd = "/usr/bin/python3 -c '" + code + "' " + path;
  return std::system(cmd.c_str());
}
int json_ok(const std::string& text) {
  return python_check(text, "import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))", ".json");
}
int xml_ok(const std::string& text) {
  return python_check(text, "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])", ".svg");
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(FlameLabel, PySpyStyle) {
  EXPECT_EQ(frame_label(py("Trainer.fit", "/usr/lib/trainer.py", 42)), "Trainer.fit (/usr/lib/trainer.py:42)");
  EXPECT_EQ(frame_label(py("f", "/x.py", 0)), "f (/x.py)");
  EXPECT_EQ(frame_label(native("memcpy", "/lib/libc.so.6")), "memcpy (/lib/libc.so.6)");
  EXPECT_EQ(frame_label(native("", "/lib/libc.so.6")), "<unknown> (/lib/libc.so.6)");
  EXPECT_EQ(frame_label(StackFrame{}), "<unknown>");
}

TEST(Collapsed, Golden) {
  StackProfile p = train_profile();
  EXPECT_EQ(collapsed({{"train", &p}}),
            "train;main (/a/train.py:10) 2\n"
            "train;main (/a/train.py:10);step (/a/train.py:20) 3\n"
            "train;main (/a/train.py:10);step (/a/train.py:20);matmul (libtorch.so) 5\n");
  // No root: stacks start at their own outermost frame.
  EXPECT_EQ(collapsed({{"", &p}}).substr(0, 29), "main (/a/train.py:10) 2\nmain ");
}

TEST(Collapsed, MergesIdenticalStacks) {
  StackProfile p;
  // Frames 0 and 1 are equal: same label, so their stacks are one line.
  p.frames = {py("f", "/f.py", 1), py("f", "/f.py", 1), py("g", "/g.py", 2)};
  p.stacks = {{{0, 2}, 4, 4}, {{1, 2}, 6, 6}, {{0}, 0, 0}};
  StackProfile q = p;
  EXPECT_EQ(collapsed({{"r", &p}, {"r", &q}, {"s", &q}}),
            "r;f (/f.py:1);g (/g.py:2) 20\n"
            "s;f (/f.py:1);g (/g.py:2) 10\n");  // zero-weight stack dropped
}

TEST(Collapsed, EscapesSeparators) {
  StackProfile p;
  p.frames = {py("a;b\nc", "/x;y.py", 3)};
  p.stacks = {{{0}, 1, 1}, {{7}, 2, 2}};  // index 7 is out of range
  EXPECT_EQ(collapsed({{"root;1\r\n", &p}, {"null", nullptr}}),
            "root:1;<unknown> 2\n"
            "root:1;a:bc (/x:y.py:3) 1\n");
}

TEST(Speedscope, FramesSamplesWeights) {
  StackProfile p = train_profile();
  StackProfile off = train_profile();
  off.unit = StackUnit::nanoseconds;
  off.frames = {py("step", "/a/train.py", 20), py("wait", "/a/io.py", 5)};  // step shared with p
  off.stacks = {{{0, 1}, 1500, 2}, {{0}, 0, 0}};
  std::ostringstream out;
  write_speedscope({{"", &p}, {"rank 1: off-CPU", &off}}, out);
  const std::string s = out.str();
  EXPECT_NE(s.find("\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""), std::string::npos);
  EXPECT_NE(s.find("\"frames\":[{\"name\":\"main\",\"file\":\"/a/train.py\",\"line\":10},"
                   "{\"name\":\"step\",\"file\":\"/a/train.py\",\"line\":20},"
                   "{\"name\":\"matmul\",\"file\":\"libtorch.so\"},"
                   "{\"name\":\"wait\",\"file\":\"/a/io.py\",\"line\":5}]"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("{\"type\":\"sampled\",\"name\":\"run_training_batch\",\"unit\":\"none\",\"startValue\":0,"
                   "\"endValue\":10,\"samples\":[[0,1],[0,1,2],[0]],\"weights\":[3,5,2]}"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("{\"type\":\"sampled\",\"name\":\"rank 1: off-CPU\",\"unit\":\"nanoseconds\",\"startValue\":0,"
                   "\"endValue\":1500,\"samples\":[[1,3]],\"weights\":[1500]}"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"activeProfileIndex\":0"), std::string::npos);
  EXPECT_NE(s.find("\"exporter\":\"ltrace-bpf\""), std::string::npos);
  EXPECT_EQ(json_ok(s), 0) << s;
}

TEST(Speedscope, ValidJsonForHostileNames) {
  StackProfile p;
  p.name = "quote\" back\\slash \x01 tab\t";
  p.frames = {py("bad \xff\xfe utf8", "/t\"x.py", 1), native("", "")};
  p.stacks = {{{0, 1, 9}, 1, 1}};
  std::ostringstream out;
  write_speedscope({{"", &p}}, out);
  EXPECT_NE(out.str().find("{\"name\":\"<unknown>\"}"), std::string::npos);
  EXPECT_EQ(json_ok(out.str()), 0) << out.str();
}

TEST(Svg, WellFormedWithTitlesAndOmitsTinyFrames) {
  StackProfile p;
  p.frames = {py("<lambda>", "/a&b/'q\".py", 7), py("big", "/x.py", 1), py("tiny", "/x.py", 2),
              py("bad \xc3 \x02 utf8", "/x.py", 3)};
  p.stacks = {{{0, 1}, 2000, 2000}, {{0, 3}, 999, 999}, {{0, 2}, 1, 1}};  // tiny: 1/3000 < 0.1%
  std::ostringstream out;
  write_flamegraph_svg({{"train <step>", &p}}, "CPU & \"flame\"", "samples", out);
  const std::string s = out.str();
  EXPECT_NE(s.find("<title>big (/x.py:1) (2,000 samples, 66.67%)</title>"), std::string::npos) << s;
  EXPECT_NE(s.find("<title>&lt;lambda&gt; (/a&amp;b/&#39;q&quot;.py:7) (3,000 samples, 100.00%)</title>"),
            std::string::npos);
  EXPECT_NE(s.find("<title>train &lt;step&gt; (3,000 samples, 100.00%)</title>"), std::string::npos);
  EXPECT_NE(s.find("<title>all (3,000 samples, 100.00%)</title>"), std::string::npos);
  EXPECT_EQ(s.find("tiny"), std::string::npos);
  EXPECT_EQ(xml_ok(s), 0) << s;
}

TEST(Svg, EmptyProfileStillWellFormed) {
  StackProfile p;
  std::ostringstream out;
  write_flamegraph_svg({{"", &p}}, "empty", "ns", out);
  EXPECT_NE(out.str().find("No stacks recorded"), std::string::npos);
  EXPECT_EQ(xml_ok(out.str()), 0);
}

TEST(Svg, DeterministicColoursByFunction) {
  StackProfile p;
  p.frames = {py("f", "/a.py", 1), py("f", "/a.py", 2), native("f", "libx.so")};
  p.stacks = {{{0}, 1, 1}, {{1}, 1, 1}, {{2}, 1, 1}};
  std::ostringstream a, b;
  write_flamegraph_svg({{"", &p}}, "t", "samples", a);
  write_flamegraph_svg({{"", &p}}, "t", "samples", b);
  EXPECT_EQ(a.str(), b.str());
  auto fill_of = [&](const std::string& title) {
    auto at = a.str().find(title);
    auto f = a.str().find("fill=\"", at);
    return a.str().substr(f, a.str().find('"', f + 6) - f);
  };
  EXPECT_EQ(fill_of("f (/a.py:1)"), fill_of("f (/a.py:2)"));  // same function, same colour
  EXPECT_NE(fill_of("f (/a.py:1)"), fill_of("f (libx.so)"));  // native: another hue
}

TEST(HtmlFlame, EmbedsTreeSafely) {
  StackProfile p = train_profile();
  StackProfile evil;
  evil.name = "evil";
  evil.frames = {py("x</script><script>alert(1)</script>", "<!--/e.py", 1)};
  evil.stacks = {{{0}, 4, 4}};
  const std::string h = html_flame_section({{"", &p}, {"", &evil}}, "fl0");
  EXPECT_EQ(h.rfind("<section class=\"flame\" id=\"fl0\">", 0), 0u);
  EXPECT_NE(h.find("<option value=\"0\">run_training_batch</option><option value=\"1\">evil</option>"),
            std::string::npos);
  EXPECT_NE(h.find("{\"name\":\"run_training_batch\",\"unit\":\"samples\",\"t\":{\"n\":\"run_training_batch\","
                   "\"v\":10,\"k\":2,\"c\":[{\"n\":\"main (/a/train.py:10)\",\"v\":10,\"c\":[{\"n\":\"step "
                   "(/a/train.py:20)\",\"v\":8,\"c\":[{\"n\":\"matmul (libtorch.so)\",\"v\":5,\"k\":1}]}]}]}}"),
            std::string::npos)
      << h;
  EXPECT_EQ(count(h, "</script>"), 1u);  // only the real end of the script
  EXPECT_EQ(h.find("<!--"), std::string::npos);
  EXPECT_NE(h.find("x<\\/script><script>alert(1)<\\/script>"), std::string::npos);
  for (const char* id : {"fl0-sel", "fl0-q", "fl0-fg", "fl0-tip", "fl0-info", "fl0-reset"})
    EXPECT_NE(h.find(std::string("id=\"") + id + "\""), std::string::npos) << id;

  // The embedded data is still JSON once taken out of the script.
  const auto from = h.find("var D = ") + 8, to = h.find(";\n  function $");
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(json_ok(h.substr(from, to - from)), 0);
}

TEST(HtmlFlame, SectionsDoNotCollide) {
  StackProfile p = train_profile();
  const std::string a = html_flame_section({{"fit", &p}}, "a"), b = html_flame_section({{"fit", &p}}, "b");
  EXPECT_NE(a.find("id=\"a-fg\""), std::string::npos);
  EXPECT_EQ(a.find("id=\"b-"), std::string::npos);
  EXPECT_NE(b.find("var P = \"b\";"), std::string::npos);
  EXPECT_NE(html_flame_section({}, "e").find("No stacks recorded."), std::string::npos);
}
