#include "reports/dump/event_dump.h"

#include <cstring>

#include "reports/model/action_name.h"

namespace lt {

namespace {
const char* kind_name(unsigned k) {
  switch (k) {
    case LT_EV_ACTION_BEGIN:
      return "action_begin";
    case LT_EV_ACTION_END:
      return "action_end";
    case LT_EV_DIRECT_START:
      return "direct_start";
    case LT_EV_DIRECT_STOP:
      return "direct_stop";
    case LT_EV_FETCH_BEGIN:
      return "fetch";
    case LT_EV_PROC_FORK:
      return "fork";
    case LT_EV_PROC_EXEC:
      return "exec";
    case LT_EV_PROC_EXIT:
      return "exit";
    case LT_EV_PROC_INFO:
      return "proc_info";
    case LT_EV_DROPS:
      return "drops";
    case LT_EV_WINDOW:
      return "window";
    default:
      return "unknown";
  }
}
}  // namespace

void dump_events(const Trace& trace, std::ostream& out) {
  trace.for_each([&](const lt_event_header& h, const std::byte* p) {
    out << h.ts_ns << " " << h.pid << "/" << h.tid << " " << kind_name(h.kind);
    lt_action_event a;
    lt_proc_event pe;
    lt_proc_info_event pi;
    lt_window_event w;
    if (h.kind <= LT_EV_FETCH_BEGIN && record_as(h, p, a))
      out << " key=0x" << std::hex << a.key << std::dec << " flags=" << a.flags << " name=" << action_name(a);
    else if (h.kind >= LT_EV_PROC_FORK && h.kind <= LT_EV_PROC_EXIT && record_as(h, p, pe))
      out << " parent=" << pe.parent_pid << " child=" << pe.child_pid << " code=" << pe.exit_code;
    else if (h.kind == LT_EV_PROC_INFO && record_as(h, p, pi))
      out << " rank=" << pi.rank << " local_rank=" << pi.local_rank << " world_size=" << pi.world_size
          << " python=" << pi.py_major << "." << pi.py_minor << " torch=" << pi.torch_version << " flags=" << pi.flags
          << " cmd=" << pi.cmdline;
    else if (h.kind == LT_EV_WINDOW && record_as(h, p, w))
      out << (w.begin ? " begin" : " end");
    out << "\n";
  });
}

}  // namespace lt
