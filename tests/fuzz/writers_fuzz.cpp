// libFuzzer target for the writers: any bytes a target can hold in a name
// (action names as CPython code units of every kind, code object names and
// file names, command lines, host names) must come out as valid UTF-8 from
// every writer, and every JSON writer must write JSON a strict parser takes.
//   make fuzz                          bounded run (as in `make test`)
//   make fuzz FUZZ_SECONDS=3600        a longer one
// Checked on each input:
//   * utf8_text: valid UTF-8, idempotent, valid UTF-8 left as it is, and the
//     same through Utf8TextBuf however the bytes are split into writes;
//   * json_string: a strict JSON string whose code points are the input's
//     (a lone surrogate as itself, a stray byte NN as U+DCNN);
//   * a small synthetic trace with those names through the Chrome trace,
//     HTML page, speedscope, flame graph SVG, collapsed stacks, the event
//     dump and the Simple/Advanced text: valid UTF-8, JSON that parses.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "reports/advanced/advanced_report.h"
#include "reports/aggregate/actions.h"
#include "reports/aggregate/stacks.h"
#include "reports/aggregate/xla.h"
#include "reports/dump/event_dump.h"
#include "reports/export/chrome_trace.h"
#include "reports/export/html_report.h"
#include "reports/export/perfetto_trace.h"
#include "reports/flame/collapsed.h"
#include "reports/flame/flamegraph_svg.h"
#include "reports/flame/speedscope.h"
#include "reports/simple/simple_report.h"
#include "reports/xla/xla_report.h"
#include "user/model/trace.h"
#include "user/text/json_escape.h"
#include "user/text/utf8_text.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "writers_fuzz: %s\n--- output (%zu bytes) ---\n%.4000s\n", what, text.size(), text.c_str());
  std::abort();
}

// Strict UTF-8 (RFC 3629): no surrogates, no overlongs, nothing past U+10FFFF.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const lt::Utf8Char c = lt::next_utf8(p + i, s.size() - i);
    if (c.kind != lt::Utf8Char::scalar) return false;
    i += c.len;
  }
  return true;
}

// A strict JSON parser (RFC 8259) that keeps nothing but, for strings, the
// code points (each \uXXXX its own, as the escapes were written).
class Json {
 public:
  explicit Json(const std::string& s) : s_(s) {}
  bool document() {
    ws();
    if (!value(0)) return false;
    ws();
    return i_ == s_.size();
  }
  bool string_value(std::vector<std::uint32_t>& cps) {
    cps_ = &cps;
    const bool ok = string() && i_ == s_.size();
    cps_ = nullptr;
    return ok;
  }

 private:
  const std::string& s_;
  std::size_t i_ = 0;
  std::vector<std::uint32_t>* cps_ = nullptr;

  int peek() const { return i_ < s_.size() ? static_cast<unsigned char>(s_[i_]) : -1; }
  void ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++i_;
  }
  bool lit(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool value(int depth) {
    if (depth > 64) return false;
    switch (peek()) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return lit("true");
      case 'f':
        return lit("false");
      case 'n':
        return lit("null");
      default:
        return number();
    }
  }
  bool object(int depth) {
    ++i_;
    ws();
    if (peek() == '}') return ++i_, true;
    for (;;) {
      ws();
      if (!string()) return false;
      ws();
      if (peek() != ':') return false;
      ++i_;
      ws();
      if (!value(depth + 1)) return false;
      ws();
      if (peek() == '}') return ++i_, true;
      if (peek() != ',') return false;
      ++i_;
    }
  }
  bool array(int depth) {
    ++i_;
    ws();
    if (peek() == ']') return ++i_, true;
    for (;;) {
      ws();
      if (!value(depth + 1)) return false;
      ws();
      if (peek() == ']') return ++i_, true;
      if (peek() != ',') return false;
      ++i_;
    }
  }
  bool digits() {
    const std::size_t from = i_;
    while (peek() >= '0' && peek() <= '9') ++i_;
    return i_ > from;
  }
  bool number() {
    if (peek() == '-') ++i_;
    if (peek() == '0')
      ++i_;
    else if (!digits())
      return false;
    if (peek() == '.') {
      ++i_;
      if (!digits()) return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digits()) return false;
    }
    return true;
  }
  bool string() {
    if (peek() != '"') return false;
    ++i_;
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (;;) {
      const int c = peek();
      if (c < 0 || c < 0x20) return false;  // unterminated, or a raw control character
      if (c == '"') return ++i_, true;
      if (c == '\\') {
        ++i_;
        const int e = peek();
        ++i_;
        std::uint32_t cp = 0;
        switch (e) {
          case '"':
          case '\\':
          case '/':
            cp = static_cast<std::uint32_t>(e);
            break;
          case 'b':
            cp = '\b';
            break;
          case 'f':
            cp = '\f';
            break;
          case 'n':
            cp = '\n';
            break;
          case 'r':
            cp = '\r';
            break;
          case 't':
            cp = '\t';
            break;
          case 'u':
            for (int k = 0; k < 4; ++k) {
              const int h = peek();
              ++i_;
              if (h >= '0' && h <= '9')
                cp = cp * 16 + static_cast<std::uint32_t>(h - '0');
              else if (h >= 'a' && h <= 'f')
                cp = cp * 16 + static_cast<std::uint32_t>(h - 'a' + 10);
              else if (h >= 'A' && h <= 'F')
                cp = cp * 16 + static_cast<std::uint32_t>(h - 'A' + 10);
              else
                return false;
            }
            break;
          default:
            return false;
        }
        if (cps_) cps_->push_back(cp);
        continue;
      }
      const lt::Utf8Char ch = lt::next_utf8(p + i_, s_.size() - i_);
      if (ch.kind != lt::Utf8Char::scalar) return false;  // raw bytes must be strict UTF-8
      if (cps_) cps_->push_back(ch.cp);
      i_ += ch.len;
    }
  }
};

void check_text(const std::string& out, const char* what) {
  if (!valid_utf8(out)) fail(what, out);
}

void check_json(const std::string& out, const char* what) {
  check_text(out, what);
  if (!Json(out).document()) fail(what, out);
}

// The escapes on their own, on the raw input.
void check_escapes(const std::string& raw, FuzzedDataProvider& fdp) {
  const std::string text = lt::utf8_text(raw);
  check_text(text, "utf8_text: invalid UTF-8");
  if (lt::utf8_text(text) != text) fail("utf8_text: not idempotent", text);
  if (valid_utf8(raw) && text != raw) fail("utf8_text: changed valid UTF-8", text);

  // Split into writes of random sizes: the same text.
  std::ostringstream sink;
  {
    lt::Utf8TextBuf buf(sink.rdbuf());
    std::size_t at = 0;
    while (at < raw.size()) {
      const std::size_t n = fdp.ConsumeIntegralInRange<std::size_t>(1, 8);
      const std::size_t take = std::min(n, raw.size() - at);
      buf.sputn(raw.data() + at, static_cast<std::streamsize>(take));
      at += take;
    }
  }
  if (sink.str() != text) fail("Utf8TextBuf: differs from utf8_text", sink.str());

  const std::string json = lt::json_string(raw);
  check_text(json, "json_string: invalid UTF-8");
  std::vector<std::uint32_t> got, want;
  if (!Json(json).string_value(got)) fail("json_string: not a JSON string", json);
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  for (std::size_t i = 0; i < raw.size();) {
    const lt::Utf8Char c = lt::next_utf8(p + i, raw.size() - i);
    want.push_back(c.kind == lt::Utf8Char::scalar || c.kind == lt::Utf8Char::surrogate ? c.cp : 0xDC00 | p[i]);
    i += c.len;
  }
  if (got != want) fail("json_string: does not decode to the input's code points", json);
  check_text(lt::html_escape(raw), "html_escape: invalid UTF-8");
}

template <std::size_t N>
void put(char (&dst)[N], const std::string& s) {
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));  // NUL-terminated: the rest is zero
}

lt::lt_event_header header(lt::lt_event_kind kind, std::size_t size, std::uint32_t tid, std::uint64_t ts) {
  return {static_cast<lt::u16>(kind), static_cast<lt::u16>(size), 100, tid, 0, ts};
}

// An action named by `units` of str kind `kind` (0: ASCII bytes, as BPF
// reads them with bpf_probe_read_user_str).
lt::lt_action_event action(lt::lt_event_kind ev, std::uint64_t ts, std::uint64_t key, unsigned kind,
                           const std::string& units) {
  lt::lt_action_event e{};
  e.hdr = header(ev, sizeof e, 100, ts);
  e.key = key;
  if (kind == 0) {
    put(e.name, units);
    e.name_len = static_cast<std::uint32_t>(strnlen(e.name, sizeof e.name));
  } else {
    const std::size_t bytes = std::min(units.size() / kind * kind, sizeof e.name);
    std::memcpy(e.name, units.data(), bytes);
    e.name_len = static_cast<std::uint32_t>(bytes / kind);
    e.flags = kind << LT_ACT_NAME_KIND_SHIFT;
  }
  return e;
}

lt::Trace synthetic_trace(FuzzedDataProvider& fdp) {
  lt::Trace t;
  lt::lt_host_info_event host{};
  host.hdr = header(lt::LT_EV_HOST_INFO, sizeof host, 0, 1);
  put(host.hostname, fdp.ConsumeRandomLengthString(64));
  t.append(host);
  lt::lt_proc_info_event info{};
  info.hdr = header(lt::LT_EV_PROC_INFO, sizeof info, 100, 2);
  info.rank = info.local_rank = -1;
  info.py_major = 3;
  info.py_minor = 12;
  info.flags = LT_PROC_PYTHON;
  put(info.comm, fdp.ConsumeRandomLengthString(16));
  put(info.cmdline, fdp.ConsumeRandomLengthString(256));
  t.append(info);
  lt::lt_sampler_info_event si{};
  si.hdr = header(lt::LT_EV_SAMPLER_INFO, sizeof si, 0, 3);
  si.period_ns = 1'000'000;
  si.rate_hz = 1000;
  si.flags = LT_SAMPLER_ON_CPU;
  t.append(si);
  static const unsigned kinds[] = {0, 1, 2, 4};
  const unsigned outer_kind = kinds[fdp.ConsumeIntegralInRange<int>(0, 3)];
  const unsigned inner_kind = kinds[fdp.ConsumeIntegralInRange<int>(0, 3)];
  const std::string outer = fdp.ConsumeRandomLengthString(LT_NAME_MAX);
  const std::string inner = fdp.ConsumeRandomLengthString(LT_NAME_MAX);
  // Two code objects named by the input, a sample in each action.
  for (std::uint64_t code : {0x1000u, 0x2000u}) {
    lt::lt_py_code_event c{};
    c.hdr = header(lt::LT_EV_PY_CODE, sizeof c, 100, 4);
    c.code = code;
    c.checksum = 7;
    c.first_line = 1;
    put(c.name, fdp.ConsumeRandomLengthString(LT_CODE_NAME_MAX));
    put(c.file, fdp.ConsumeRandomLengthString(LT_CODE_FILE_MAX));
    t.append(c);
  }
  auto sample = [&](std::uint64_t ts, std::size_t depth) {
    lt::lt_py_sample_event s{};
    s.hdr = header(lt::LT_EV_PY_SAMPLE, sizeof s, 100, ts);
    s.tstate = 0x77;
    s.nframes = static_cast<lt::u16>(depth);
    for (std::size_t i = 0; i < depth; ++i) s.frames[i] = {i % 2 ? 0x1000u : 0x2000u, 4, 7};
    t.append(s);
  };
  t.append(action(lt::LT_EV_ACTION_BEGIN, 10'000'000, 1, outer_kind, outer));
  sample(11'000'000, 2);
  t.append(action(lt::LT_EV_ACTION_BEGIN, 12'000'000, 2, inner_kind, inner));
  sample(13'000'000, 3);
  // torch_xla inside it: a metric and a version named by the input, a
  // timed compile, a transfer with its bytes, a step mark.
  lt::lt_xla_info_event xi{};
  xi.hdr = header(lt::LT_EV_XLA_INFO, sizeof xi, 100, 13'000'001);
  put(xi.version, fdp.ConsumeRandomLengthString(32));
  put(xi.device, fdp.ConsumeRandomLengthString(32));
  t.append(xi);
  for (std::uint64_t metric : {0x3000u, 0x4000u}) {
    lt::lt_xla_metric_name_event xn{};
    xn.hdr = header(lt::LT_EV_XLA_METRIC_NAME, sizeof xn, 100, 13'000'002);
    xn.metric = metric;
    put(xn.name, metric == 0x3000u ? std::string("CompileTime") : fdp.ConsumeRandomLengthString(48));
    t.append(xn);
  }
  auto xla = [&](std::uint64_t ts, std::uint32_t site, std::uint64_t obj, std::uint64_t arg) {
    lt::lt_xla_event x{};
    x.hdr = header(lt::LT_EV_XLA, sizeof x, 100, ts);
    x.site = site;
    x.obj = obj;
    x.arg = arg;
    t.append(x);
  };
  xla(13'000'010, lt::LT_XLA_COMPILE, 1, 0);
  xla(13'000'020, lt::LT_XLA_METRIC_SAMPLE, 0x3000, fdp.ConsumeIntegral<std::uint64_t>());
  xla(13'000'030, lt::LT_XLA_TO_DEVICE, 1, fdp.ConsumeIntegral<std::uint64_t>());
  lt::lt_xla_value_event xv{};
  xv.hdr = header(lt::LT_EV_XLA_VALUE, sizeof xv, 100, 13'000'040);
  xv.metric = 0x4000;
  xv.value = fdp.ConsumeFloatingPoint<double>();
  t.append(xv);
  xla(13'000'050, lt::LT_XLA_MARK_STEP, 1, 0);
  t.append(action(lt::LT_EV_ACTION_END, 14'000'000, 2, 0, ""));
  t.append(action(lt::LT_EV_ACTION_END, 15'000'000, 1, 0, ""));
  return t;
}

void check_writers(FuzzedDataProvider& fdp) {
  const lt::Trace trace = synthetic_trace(fdp);
  lt::ActionAggregator actions;
  lt::StackAggregator stacks(actions);
  lt::XlaAggregator xla(actions, true);
  trace.for_each([&](const lt::lt_event_header& h, const std::byte* p) {
    actions.add(h, p);
    stacks.add(h, p);
    xla.add(h, p);
  });
  const lt::ActionsReport rep = actions.finish();
  const lt::StacksReport st = stacks.finish();
  const lt::XlaReport xrep = xla.finish();

  std::ostringstream chrome, html, speedscope, collapsed, svg, dump;
  lt::write_chrome_trace(rep, chrome, nullptr, nullptr, nullptr, nullptr, &xrep);
  check_json(chrome.str(), "Chrome trace");
  // Perfetto: the same document as packets, and cut to steps (ranges of any trace).
  std::ostringstream perfetto;
  const lt::RangeFilter steps(*lt::parse_step_range("1-2"), rep);
  lt::write_perfetto_trace(rep, perfetto, nullptr, nullptr, nullptr, &steps, &xrep);
  lt::write_html_report(rep, true, html, &st, nullptr, nullptr, nullptr, nullptr, &xrep);
  check_text(html.str(), "HTML page");
  check_text(lt::utf8_text(lt::render_xla_report(xrep, {&rep})), "XLA report");
  std::vector<lt::NamedProfile> named;
  for (const auto& p : st.processes)
    for (const auto& prof : p.on_cpu) named.push_back({prof.name, &prof});
  lt::write_speedscope(named, speedscope);
  check_json(speedscope.str(), "speedscope");
  lt::write_collapsed(named, collapsed);
  check_text(collapsed.str(), "collapsed stacks");
  lt::write_flamegraph_svg(named, "title", "samples", svg);
  check_text(svg.str(), "flame graph SVG");
  lt::dump_events(trace, dump);
  check_text(dump.str(), "event dump");
  // The text reports are made valid where they are written (report_output,
  // main.cpp's streams); here they must survive names of any bytes.
  for (const auto& p : rep.processes) {
    lt::SimpleReportInput in;
    in.actions = p.actions;
    in.total_seconds = p.window_seconds();
    check_text(lt::utf8_text(lt::render_simple_report(in)), "Simple report");
  }
  for (const auto& ps : st.processes) {
    lt::AdvancedReportInput in;
    in.stacks = &ps;
    in.period_ns = st.period_ns;
    check_text(lt::utf8_text(lt::render_advanced_report(in)), "Advanced report");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  FuzzedDataProvider fdp(data, size);
  check_escapes(raw, fdp);
  FuzzedDataProvider names(data, size);
  check_writers(names);
  return 0;
}
