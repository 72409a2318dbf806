#include "reports/aggregate/py_symbols.h"

#include <algorithm>
#include <cstring>

#include "user/model/record_dispatch.h"

namespace lt {

void PySymbols::add(const lt_event_header& h, const std::byte* p) {
  visit_record(h, p,
               overloaded{[&](const lt_event_header& h, const lt_py_code_event& e) {
                            if (e.flags & LT_CODE_FREED_AT_EXIT) {
                              by_pid_[h.pid].codes[{e.code, e.checksum}] = Code{kFreedAtExit, "", 0};
                              return;
                            }
                            if (e.flags & LT_CODE_UNREADABLE) {
                              by_pid_[h.pid].codes.erase({e.code, e.checksum});
                              return;
                            }
                            Code c;
                            c.name = python_function_name(std::string_view(e.name, strnlen(e.name, sizeof e.name)));
                            c.file.assign(e.file, strnlen(e.file, sizeof e.file));
                            c.first_line = e.first_line;
                            by_pid_[h.pid].codes[{e.code, e.checksum}] = std::move(c);
                          },
                          [&](const lt_event_header& h, const lt_py_line_event& e) {
                            by_pid_[h.pid].lines[{e.code, e.checksum, e.lasti}] = e.line;
                          },
                          // A new program: its codes mean other things.
                          [&](const lt_event_header& h, const lt_proc_event& e) {
                            if (h.kind == LT_EV_PROC_EXEC) by_pid_.erase(e.child_pid);
                          }});
}

std::vector<StackFrame> PySymbols::frames(const lt_py_sample_event& e) const {
  std::vector<StackFrame> out;
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  out.reserve(n + 1);
  if (e.flags & LT_SAMPLE_TRUNCATED) out.push_back({"[truncated]", "", 0, 0, false});
  auto proc = by_pid_.find(e.hdr.pid);
  for (unsigned i = n; i-- > 0;) {
    const lt_py_frame& f = e.frames[i];
    StackFrame sf;
    sf.function = "<unknown>";
    if (proc != by_pid_.end()) {
      if (auto c = proc->second.codes.find({f.code, f.checksum}); c != proc->second.codes.end()) {
        sf.function = c->second.name;
        sf.file = c->second.file;
        sf.first_line = c->second.first_line;
        auto l = proc->second.lines.find({f.code, f.checksum, f.lasti});
        sf.line = l != proc->second.lines.end() ? l->second : 0;
      }
    }
    out.push_back(std::move(sf));
  }
  return out;
}

}  // namespace lt
