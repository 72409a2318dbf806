#include "reports/aggregate/py_symbols.h"

#include <algorithm>
#include <cstring>

#include "user/model/record_dispatch.h"

namespace lt {

std::uint32_t PySymbols::Process::frame_index(StackFrame f) {
  auto [it, fresh] =
      native_frame_index.try_emplace({f.function, f.file}, static_cast<std::uint32_t>(native_frames.size()));
  if (fresh) native_frames.push_back(std::move(f));
  return it->second;
}

bool PySymbols::Process::add_native(std::uint64_t ip, StackFrame f) {
  const std::uint32_t i = frame_index(std::move(f));
  auto [slot, added] = natives.try_emplace(ip, i);
  if (added) return true;
  if (slot->second == i) return false;
  slot->second = i;
  return true;
}

bool PySymbols::Process::add_native_range(std::uint64_t start, std::uint64_t end, StackFrame f) {
  if (start >= end) return false;
  const std::uint32_t i = frame_index(std::move(f));
  auto [slot, added] = native_ranges.try_emplace(start, end, i);
  if (added) return true;
  if (slot->second == std::make_pair(end, i)) return false;
  slot->second = {end, i};
  return true;
}

namespace {
// A native frame from a NATIVE_SYM or NATIVE_FUNC record: its name and DSO.
template <typename Record>
StackFrame native_frame(const Record& e) {
  StackFrame f;
  f.function.assign(e.name, strnlen(e.name, sizeof e.name));
  f.file.assign(e.dso, strnlen(e.dso, sizeof e.dso));
  f.native = true;
  return f;
}
}  // namespace

void PySymbols::add(const lt_event_header& h, const std::byte* p) {
  visit_record(h, p,
               overloaded{[&](const lt_event_header& h, const lt_py_code_event& e) {
                            PyCodeSymbol c;
                            c.readable = !(e.flags & LT_CODE_UNREADABLE);
                            c.freed_at_exit = !c.readable && (e.flags & LT_CODE_FREED_AT_EXIT);
                            if (c.readable) {
                              c.name = python_function_name(std::string_view(e.name, strnlen(e.name, sizeof e.name)));
                              c.file.assign(e.file, strnlen(e.file, sizeof e.file));
                              c.first_line = e.first_line;
                            }
                            auto& slot = by_pid_[h.pid].codes[{e.code, e.checksum}];
                            if (slot.name != c.name || slot.file != c.file || slot.first_line != c.first_line ||
                                slot.readable != c.readable || slot.freed_at_exit != c.freed_at_exit) {
                              slot = std::move(c);
                              ++epoch_;
                            }
                          },
                          [&](const lt_event_header& h, const lt_py_line_event& e) {
                            auto [it, fresh] = by_pid_[h.pid].lines.try_emplace({e.code, e.checksum, e.lasti}, e.line);
                            if (fresh || it->second != e.line) {
                              it->second = e.line;
                              ++epoch_;
                            }
                          },
                          [&](const lt_event_header& h, const lt_native_sym_event& e) {
                            StackFrame f = native_frame(e);
                            if (!f.function.empty() && by_pid_[h.pid].add_native(e.ip, std::move(f))) ++epoch_;
                          },
                          [&](const lt_event_header& h, const lt_native_func_event& e) {
                            StackFrame f = native_frame(e);
                            if (!f.function.empty() && by_pid_[h.pid].add_native_range(e.start, e.end, std::move(f)))
                              ++epoch_;
                          },
                          [&](const lt_event_header& h, const lt_proc_event& e) {
                            if (h.kind == LT_EV_PROC_EXEC && by_pid_.erase(e.child_pid)) ++epoch_;
                          }});
}

const PySymbols::Process* PySymbols::process(std::uint32_t pid) const {
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? nullptr : &it->second;
}

const PyCodeSymbol* PySymbols::code(std::uint32_t pid, std::uint64_t code, std::uint32_t checksum) const {
  const Process* p = process(pid);
  if (!p) return nullptr;
  auto it = p->codes.find({code, checksum});
  return it == p->codes.end() ? nullptr : &it->second;
}

int PySymbols::line(std::uint32_t pid, std::uint64_t code, std::uint32_t checksum, std::int32_t lasti) const {
  const Process* p = process(pid);
  if (!p) return 0;
  auto it = p->lines.find({code, checksum, lasti});
  return it == p->lines.end() ? 0 : it->second;
}

const StackFrame* PySymbols::native(std::uint32_t pid, std::uint64_t ip) const {
  const Process* p = process(pid);
  if (!p) return nullptr;
  if (auto it = p->natives.find(ip); it != p->natives.end()) return &p->native_frames[it->second];
  // The function (or symbol-less mapping) holding it (NATIVE_FUNC).
  auto r = p->native_ranges.upper_bound(ip);
  if (r == p->native_ranges.begin()) return nullptr;
  --r;
  return ip < r->second.first ? &p->native_frames[r->second.second] : nullptr;
}

StackFrame PySymbols::frame(std::uint32_t pid, const lt_py_frame& f) const {
  StackFrame sf;
  const PyCodeSymbol* c = code(pid, f.code, f.checksum);
  if (c && c->readable) {
    sf.function = c->name;
    sf.file = c->file;
    sf.first_line = c->first_line;
    sf.line = line(pid, f.code, f.checksum, f.lasti);
  } else {
    sf.function = c && c->freed_at_exit ? kFreedAtExit : "<unknown>";
  }
  return sf;
}

std::vector<StackFrame> PySymbols::frames(const lt_py_sample_event& e) const {
  std::vector<StackFrame> out;
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  out.reserve(n + 1);
  if (e.flags & LT_SAMPLE_TRUNCATED) out.push_back({"[truncated]", "", 0, 0, false});
  for (unsigned i = n; i-- > 0;) out.push_back(frame(e.hdr.pid, e.frames[i]));
  return out;
}

}  // namespace lt
