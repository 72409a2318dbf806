// Writes a small valid trace file to seed the fuzzer's corpus.
#include <cstdio>
#include <cstring>

#include "user/tracefile/trace_writer.h"

using namespace lt;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  lt::tracefile::TraceWriter w(argv[1]);
  for (int i = 0; i < 8; ++i) {
    lt_action_event e{};
    e.hdr = {static_cast<lt::u16>(i % 2 ? LT_EV_ACTION_END : LT_EV_ACTION_BEGIN), sizeof e, 1, 1, 0,
             static_cast<lt::u64>(i)};
    e.key = static_cast<lt::u64>(i / 2);
    std::snprintf(e.name, sizeof e.name, "a%d", i / 2);
    w.append(&e, sizeof e);
    if (i == 3) w.flush();
    // a stack sample inside each action, with its symbols
    lt_py_code_event c{};
    c.hdr = {LT_EV_PY_CODE, sizeof c, 1, 1, 0, static_cast<lt::u64>(i)};
    c.code = 0x1000u + static_cast<lt::u64>(i);
    std::snprintf(c.name, sizeof c.name, "f%d", i);
    std::snprintf(c.file, sizeof c.file, "/x/m%d.py", i);
    w.append(&c, sizeof c);
    lt_py_sample_event s{};
    s.hdr = {static_cast<lt::u16>(i % 3 ? LT_EV_PY_SAMPLE : LT_EV_OFFCPU_BEGIN), sizeof s, 1, 1, 0,
             static_cast<lt::u64>(i)};
    s.nframes = 2;
    s.frames[0].code = c.code;
    s.frames[1].code = 0x1000;
    // ops: a name, two nested calls, and the sample sees both running
    lt_op_name_event on{};
    on.hdr = {LT_EV_OP_NAME, sizeof on, 0, 0, 0, static_cast<lt::u64>(i)};
    on.op = static_cast<lt::u32>(i % 3);
    std::snprintf(on.name, sizeof on.name, "aten::op%d", i % 3);
    w.append(&on, sizeof on);
    for (lt::u16 depth = 1; depth <= 2; ++depth) {
      lt_op_event op{};
      op.hdr = {LT_EV_OP, sizeof op, 1, 1, 0, static_cast<lt::u64>(i)};
      op.op = static_cast<lt::u32>((i + depth) % 3);
      op.depth = depth;
      w.append(&op, sizeof op);
    }
    s.nops = 2;
    s.ops[0] = static_cast<lt::u32>((i + 1) % 3);
    s.ops[1] = static_cast<lt::u32>((i + 2) % 3);
    s.flags = i == 5 ? LT_SAMPLE_IN_PROBE : 0;
    w.append(&s, sizeof s);
    lt_offcpu_end_event o{};
    o.hdr = {LT_EV_OFFCPU_END, sizeof o, 1, 1, 0, static_cast<lt::u64>(i) + 1};
    o.begin_ns = static_cast<lt::u64>(i);
    w.append(&o, sizeof o);
  }
  w.close();
  return 0;
}
