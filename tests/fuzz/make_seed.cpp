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
    e.hdr = {static_cast<lt::u16>(i % 2 ? LT_EV_ACTION_END : LT_EV_ACTION_BEGIN),
             sizeof e,
             1,
             1,
             0,
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
    s.hdr = {
        static_cast<lt::u16>(i % 3 ? LT_EV_PY_SAMPLE : LT_EV_OFFCPU_BEGIN), sizeof s, 1, 1, 0, static_cast<lt::u64>(i)};
    s.nframes = 2;
    s.frames[0].code = c.code;
    s.frames[1].code = 0x1000;
    // ops: a name, two nested calls, and the sample sees both running
    lt_op_name_event on{};
    on.hdr = {LT_EV_OP_NAME, sizeof on, 0, 0, 0, static_cast<lt::u64>(i)};
    on.op = static_cast<lt::u32>(i % 3);
    // op 2: a compiled region, so the compile section is reached
    if (i % 3 == 2)
      std::snprintf(on.name, sizeof on.name, "Torch-Compiled Region: 0/%d", i % 2);
    else
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
    // GPU: a kernel name, a launch inside the ops, its kernel and API
    // records, an NVTX push/pop, a bridge status
    lt_gpu_name_event gn{};
    gn.hdr = {LT_EV_GPU_NAME, sizeof gn, 1, 9, 0, static_cast<lt::u64>(i)};
    gn.n.kind = LT_NAME_KERNEL;
    gn.n.id = 1;
    gn.n.len = gn.n.total_len = 12;
    std::memcpy(gn.n.text, "_Z6kernelPf", 12);
    w.append(&gn, sizeof gn);
    lt_gpu_launch_event gl{};
    gl.hdr = {LT_EV_GPU_LAUNCH, sizeof gl, 1, 1, 0, static_cast<lt::u64>(i)};
    gl.correlation = static_cast<lt::u32>(i + 1);
    gl.source = LT_LAUNCH_CUPTI;
    gl.api = LT_API_LAUNCH;
    gl.nops = 2;
    gl.ops[0] = s.ops[0];
    gl.ops[1] = s.ops[1];
    w.append(&gl, sizeof gl);
    for (lt::u16 kind : {static_cast<lt::u16>(LT_GPU_KERNEL), static_cast<lt::u16>(LT_GPU_RUNTIME),
                         static_cast<lt::u16>(LT_GPU_MEMCPY)}) {
      lt_gpu_activity_event ga{};
      ga.hdr = {LT_EV_GPU_ACTIVITY, sizeof ga, 1, 9, 0, static_cast<lt::u64>(i) + 2};
      ga.a.kind = kind;
      ga.a.correlation = gl.correlation;
      ga.a.name_id = 1;
      ga.a.start_ns = static_cast<lt::u64>(i) * 100;
      ga.a.end_ns = ga.a.start_ns + 50;
      ga.a.bytes = 64;
      ga.a.copy_kind = 1;
      w.append(&ga, sizeof ga);
    }
    for (lt::u16 type : {static_cast<lt::u16>(LT_NVTX_PUSH), static_cast<lt::u16>(LT_NVTX_POP)}) {
      lt_nvtx_event nv{};
      nv.hdr = {LT_EV_NVTX, sizeof nv, 1, 1, 0, static_cast<lt::u64>(i)};
      nv.n.type = type;
      nv.n.ts_ns = static_cast<lt::u64>(i) + type;
      std::memcpy(nv.n.msg, "range", 6);
      w.append(&nv, sizeof nv);
    }
    lt_gpu_status_event gs{};
    gs.hdr = {LT_EV_GPU_STATUS, sizeof gs, 1, 9, 0, static_cast<lt::u64>(i)};
    gs.s.state = LT_BRIDGE_ACTIVE;
    std::memcpy(gs.s.detail, "active", 7);
    w.append(&gs, sizeof gs);
    lt_compile_note_event cn{};
    cn.hdr = {LT_EV_COMPILE_NOTE, sizeof cn, 1, 1, 0, static_cast<lt::u64>(i)};
    cn.what = i % 2 ? LT_COMPILE_NOTE_COMPILE : LT_COMPILE_NOTE_GRAPH_BREAK;
    cn.start_wall_us = 1'796'214'809'325'742 + i;
    cn.duration_us = 1000;
    cn.count = i;
    std::snprintf(cn.compile_id, sizeof cn.compile_id, "0/%d", i % 2);
    std::snprintf(cn.function, sizeof cn.function, "forward");
    std::snprintf(cn.reason, sizeof cn.reason, "0/0: tensor 'x' size mismatch at index 0\n  Explanation: x");
    w.append(&cn, sizeof cn);
    // a collective and its timing points (enqueue, wait, completion on another thread)
    lt_comm_event ce{};
    ce.hdr = {LT_EV_COMM, sizeof ce, 1, 1, 0, static_cast<lt::u64>(i)};
    ce.pg = 0x900;
    ce.seq = static_cast<lt::u64>(i + 1);
    ce.kind = LT_COMM_ALLREDUCE;
    ce.backend = LT_COMM_GLOO;
    ce.peer = -1;
    w.append(&ce, sizeof ce);
    for (lt::u8 what : {LT_COMM_MARK_ENQUEUE, LT_COMM_MARK_WAIT, LT_COMM_MARK_DONE}) {
      lt_comm_mark_event cm{};
      cm.hdr = {LT_EV_COMM_MARK, sizeof cm, 1, what == LT_COMM_MARK_DONE ? 2u : 1u, 0, static_cast<lt::u64>(i)};
      cm.what = what;
      cm.obj = 0xA000 + static_cast<lt::u64>(i) * 64;
      w.append(&cm, sizeof cm);
    }
    // NCCL: a group of one all-reduce, its end, and the kernel launch after it
    for (lt::u8 fn : {LT_NCCL_GROUP_START, LT_NCCL_ALLREDUCE, LT_NCCL_GROUP_END, LT_NCCL_COMM_READY}) {
      lt_nccl_event ne{};
      ne.hdr = {LT_EV_NCCL, sizeof ne, 1, 1, 0, static_cast<lt::u64>(i)};
      ne.fn = fn;
      ne.comm = 0xC000;
      ne.count = 1000;
      ne.dtype = 7;
      ne.peer = -1;
      ne.nranks = fn == LT_NCCL_COMM_READY ? 2 : -1;
      ne.rank = fn == LT_NCCL_COMM_READY ? 1 : -1;
      w.append(&ne, sizeof ne);
    }
  }
  // One record of every kind in the catalogue (bpf/record_kinds.h), fields
  // zero: a kind added there is in the corpus without a line here.
#define LT_SEED_KIND(NAME, NUM, STRUCT, ...)                          \
  {                                                                   \
    struct STRUCT r;                                                  \
    std::memset(&r, 0, sizeof r);                                     \
    lt_event_header h{LT_EV_##NAME, sizeof r, 1, 1, 0, 1000 + (NUM)}; \
    std::memcpy(&r, &h, sizeof h);                                    \
    w.append(&r, sizeof r);                                           \
  }
  LT_RECORD_KINDS(LT_SEED_KIND)
#undef LT_SEED_KIND
  w.close();
  return 0;
}
