#include "user/python/symbolizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>

#include "user/model/action_name.h"
#include "user/proc/procfs.h"
#include "user/python/line_table.h"
#include "user/python/py_objects.h"

namespace lt::python {

std::uint32_t code_checksum(std::uint32_t argc, std::uint32_t flags, std::uint32_t line, std::uint64_t filename) {
  const auto f = static_cast<std::uint32_t>(filename ^ (filename >> 32));
  return (argc * 2654435761u) ^ (flags * 40503u) ^ (line * 97u) ^ (f * 0x85ebca6bu) ^ 0x9e37u;
}

namespace {

constexpr std::size_t kCodeRead = 208;  // room for every field we use, 3.8-3.13

template <typename T>
T at(const std::array<std::uint8_t, kCodeRead>& raw, unsigned off) {
  T v{};
  if (off + sizeof(T) <= raw.size()) std::memcpy(&v, raw.data() + off, sizeof v);
  return v;
}

void copy_text(char* dst, std::size_t cap, const std::string& s) {
  std::size_t n = std::min(cap - 1, s.size());
  // Never cut a UTF-8 sequence in half.
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

lt_event_header header(lt_event_kind kind, std::uint16_t size, pid_t pid, std::uint64_t ts) {
  lt_event_header h{};
  h.kind = static_cast<std::uint16_t>(kind);
  h.size = size;
  h.pid = h.tid = static_cast<std::uint32_t>(pid);
  h.ts_ns = ts;
  return h;
}

}  // namespace

const Symbolizer::Code& Symbolizer::code(const CodeKey& key, const Interpreter& interp, std::uint64_t ts,
                                         const std::vector<pid_t>& forked_from, bool at_exit) {
  if (auto it = codes_.find(key); it != codes_.end()) return it->second;
  ++codes_met_;
  auto [pid, addr, checksum] = key;
  const Layout& l = interp.layout;
  Code c;
  lt_py_code_event e{};
  e.hdr = header(LT_EV_PY_CODE, sizeof e, pid, ts);
  e.code = addr;
  e.checksum = checksum;
  std::vector<pid_t> sources{pid};
  sources.insert(sources.end(), forked_from.begin(), forked_from.end());
  for (pid_t from : sources) {
    // Only up to the last field we use: a code object at the very end of a
    // mapping must still be readable (3.8-3.10 objects are ~176 bytes).
    std::array<std::uint8_t, kCodeRead> raw{};
    const std::size_t need = std::min<std::size_t>(
        kCodeRead, 8 + std::max({l.code_linetable, l.code_qualname, unsigned{l.bpf.code_name},
                                 unsigned{l.bpf.code_filename}, unsigned{l.bpf.code_firstlineno}}));
    if (!proc::read_memory(from, addr, raw.data(), need)) continue;
    auto argc = at<std::uint32_t>(raw, l.bpf.code_argcount);
    auto flags = at<std::uint32_t>(raw, l.bpf.code_flags);
    auto first = at<std::uint32_t>(raw, l.bpf.code_firstlineno);
    // A mismatch: the code object was freed and its memory reused since
    // the sample (or, in a parent, it is not the same object); what it was
    // is gone.  A checksum of 0 means BPF could not read the code object (a
    // page not present yet): what we read now is the best there is.
    if (checksum != 0 && code_checksum(argc, flags, first, at<std::uint64_t>(raw, l.bpf.code_filename)) != checksum)
      continue;
    std::string name = read_str(from, at<std::uint64_t>(raw, l.code_qualname ? l.code_qualname : l.bpf.code_name), l);
    if (name.empty() && l.code_qualname) name = read_str(from, at<std::uint64_t>(raw, l.bpf.code_name), l);
    if (name.empty()) continue;
    std::string file = read_str(from, at<std::uint64_t>(raw, l.bpf.code_filename), l);
    c.readable = true;
    c.first_line = static_cast<int>(first);
    c.table = read_bytes_object(from, at<std::uint64_t>(raw, l.code_linetable));
    e.first_line = c.first_line;
    copy_text(e.name, sizeof e.name, name);
    copy_text(e.file, sizeof e.file, file);
    break;
  }
  if (!c.readable) e.flags |= LT_CODE_UNREADABLE | (at_exit ? LT_CODE_FREED_AT_EXIT : 0u);
  emit_(&e, sizeof e);
  return codes_.emplace(key, std::move(c)).first->second;
}

void Symbolizer::describe(const lt_py_sample_event& e, const Interpreter& interp, const std::vector<pid_t>& forked_from,
                          std::uint64_t shutting_down_since) {
  const pid_t pid = static_cast<pid_t>(e.hdr.pid);
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  const bool at_exit = shutting_down_since != 0 && e.hdr.ts_ns >= shutting_down_since;
  for (unsigned i = 0; i < n; ++i) {
    const lt_py_frame& f = e.frames[i];
    const Code& c = code({pid, f.code, f.checksum}, interp, e.hdr.ts_ns, forked_from, at_exit);
    if (!c.readable || !lines_.emplace(pid, f.code, f.checksum, f.lasti).second) continue;
    lt_py_line_event l{};
    l.hdr = header(LT_EV_PY_LINE, sizeof l, pid, e.hdr.ts_ns);
    l.code = f.code;
    l.checksum = f.checksum;
    l.lasti = f.lasti;
    l.line = line_for(interp.minor, c.first_line, c.table, f.lasti);
    emit_(&l, sizeof l);
  }
}

void Symbolizer::forget(pid_t pid) {
  // Keys start with the pid: erase one contiguous range each.
  codes_.erase(codes_.lower_bound({pid, 0, 0}), codes_.lower_bound({pid + 1, 0, 0}));
  lines_.erase(lines_.lower_bound({pid, 0, 0, INT32_MIN}), lines_.lower_bound({pid + 1, 0, 0, INT32_MIN}));
}

}  // namespace lt::python
