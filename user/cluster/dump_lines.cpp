#include "user/cluster/dump_lines.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

std::string b(bool v) {
  return v ? "1" : "0";
}

// A whole decimal (optionally negative) integer, else false.
bool to_ll(const std::string& s, long long& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0' && errno == 0;
}

bool to_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return *end == '\0' && std::isfinite(v) && v >= 0;  // times and durations: inf would print as invalid JSON
}

}  // namespace

std::vector<std::string> dump_lines(const RankProcess& p) {
  const auto& d = p.dump;
  std::string cmdline;
  for (std::size_t i = 0; i < d.cmdline.size(); ++i) cmdline += (i ? std::string(1, '\0') : "") + d.cmdline[i];
  std::vector<std::string> out;
  out.push_back(agent_line("dump-process", {{"pid", std::to_string(d.pid)},
                                            {"rank", std::to_string(p.rank)},
                                            {"world_size", std::to_string(p.world_size)},
                                            {"comm", d.comm},
                                            {"cmdline", cmdline},
                                            {"python", d.python_version},
                                            {"python_binary", d.python_binary},
                                            {"gil_known", b(d.gil_known)},
                                            {"gil_tid", std::to_string(d.gil_tid)},
                                            {"read_ms", fixed(d.read_ms, 3)},
                                            {"interval_s", fixed(p.interval_s, 3)}}));
  for (const auto& t : d.threads) {
    std::vector<std::pair<std::string, std::string>> f = {{"tid", std::to_string(t.status.tid)},
                                                          {"name", t.status.name},
                                                          {"state", std::string(1, t.status.state)},
                                                          {"syscall", std::to_string(t.status.syscall)},
                                                          {"pc", std::to_string(t.status.pc)},
                                                          {"runs", std::to_string(t.status.runs)},
                                                          {"gone", b(t.gone)},
                                                          {"python", b(t.python)},
                                                          {"holds_gil", b(t.holds_gil)},
                                                          {"truncated", b(t.truncated)},
                                                          {"torn", b(t.torn)},
                                                          {"blocked_s", fixed(t.blocked_at_least_s, 3)}};
    if (t.leaf)
      f.insert(f.end(), {{"leaf_function", t.leaf->function}, {"leaf_dso", t.leaf->dso}, {"leaf_path", t.leaf->path}});
    out.push_back(agent_line("dump-thread", f));
    for (const auto& fr : t.frames)
      out.push_back(agent_line("dump-frame", {{"function", fr.function},
                                              {"file", fr.file},
                                              {"line", std::to_string(fr.line)},
                                              {"readable", b(fr.readable)}}));
  }
  return out;
}

bool DumpLineReader::take(const AgentMessage& m) {
  auto num = [&](const char* key, long long& v) {
    if (to_ll(m.field(key), v)) return true;
    error_ = m.kind + ": bad " + key + " '" + m.field(key) + "'";
    return false;
  };
  long long v = 0;
  if (m.kind == "dump-process") {
    RankProcess p;
    auto& d = p.dump;
    if (!num("pid", v)) return false;
    d.pid = static_cast<pid_t>(v);
    if (!num("rank", v)) return false;
    p.rank = static_cast<int>(v);
    if (!num("world_size", v)) return false;
    p.world_size = static_cast<int>(v);
    if (!num("gil_tid", v)) return false;
    d.gil_tid = static_cast<pid_t>(v);
    d.comm = m.field("comm");
    const std::string cmd = m.field("cmdline");
    for (std::size_t at = 0; !cmd.empty();) {
      const auto z = cmd.find('\0', at);
      d.cmdline.push_back(cmd.substr(at, z == std::string::npos ? std::string::npos : z - at));
      if (z == std::string::npos) break;
      at = z + 1;
    }
    d.python_version = m.field("python");
    d.python_binary = m.field("python_binary");
    d.gil_known = m.field("gil_known") == "1";
    to_double(m.field("read_ms"), d.read_ms);
    to_double(m.field("interval_s"), p.interval_s);
    out_.push_back(std::move(p));
    return true;
  }
  if (m.kind == "dump-thread") {
    if (out_.empty()) {
      error_ = "dump-thread before any dump-process";
      return false;
    }
    python::ThreadDump t;
    if (!num("tid", v)) return false;
    t.status.tid = static_cast<pid_t>(v);
    if (!num("syscall", v)) return false;
    t.status.syscall = static_cast<long>(v);
    if (!num("runs", v)) return false;
    t.status.runs = v;
    t.status.pc = std::strtoull(m.field("pc").c_str(), nullptr, 10);
    t.status.name = m.field("name");
    const std::string st = m.field("state");
    t.status.state = st.size() == 1 ? st[0] : '?';
    t.gone = m.field("gone") == "1";
    t.python = m.field("python") == "1";
    t.holds_gil = m.field("holds_gil") == "1";
    t.truncated = m.field("truncated") == "1";
    t.torn = m.field("torn") == "1";
    to_double(m.field("blocked_s"), t.blocked_at_least_s);
    if (m.fields.count("leaf_function"))
      t.leaf = proc::NativeName{m.field("leaf_function"), m.field("leaf_dso"), m.field("leaf_path")};
    out_.back().dump.threads.push_back(std::move(t));
    return true;
  }
  if (m.kind == "dump-frame") {
    if (out_.empty() || out_.back().dump.threads.empty()) {
      error_ = "dump-frame before any dump-thread";
      return false;
    }
    python::PyFrameInfo f;
    if (!num("line", v)) return false;
    f.line = static_cast<int>(v);
    f.function = m.field("function");
    f.file = m.field("file");
    f.readable = m.field("readable") != "0";
    out_.back().dump.threads.back().frames.push_back(std::move(f));
    return true;
  }
  return false;
}

}  // namespace lt::cluster
