#include "reports/dump/event_dump.h"

#include <algorithm>
#include <cstring>

#include "reports/format/utf8_text.h"
#include "user/model/action_name.h"
#include "user/model/record_kinds.h"

namespace lt {

namespace {

void dump_sample(const lt_event_header& h, const std::byte* p, std::ostream& out) {
  lt_py_sample_event e;
  if (!record_as(h, p, e)) return;
  out << " ip=0x" << std::hex << e.user_ip << " tstate=0x" << e.tstate << std::dec << " flags=" << e.flags
      << " frames=" << e.nframes;
  for (unsigned i = 0; i < e.nframes && i < LT_STACK_MAX; ++i)
    out << " 0x" << std::hex << e.frames[i].code << std::dec << "@" << e.frames[i].lasti;
  if (e.nops) out << " ops=";
  for (unsigned i = 0; i < e.nops && i < LT_OPS_DEPTH; ++i) out << (i ? "," : "") << e.ops[i];
}
}  // namespace

void dump_events(const Trace& trace, std::ostream& to) {
  // Names, command lines and messages are the target's bytes: the lines are
  // valid UTF-8 text all the same (reports/format/utf8_text.h).
  Utf8TextBuf text(to.rdbuf());
  std::ostream out(&text);
  trace.for_each([&](const lt_event_header& h, const std::byte* p) {
    out << h.ts_ns << " " << h.pid << "/" << h.tid << " " << record_dump_name(h.kind);
    lt_action_event a;
    lt_action_name_tail_event at;
    lt_proc_event pe;
    lt_proc_info_event pi;
    lt_proc_env_event pv;
    lt_proc_container_event pcn;
    lt_window_event w;
    lt_drops_event dr;
    lt_proc_drops_event pd;
    lt_clock_sync_event cs;
    lt_offcpu_end_event oe;
    lt_py_code_event pc;
    lt_py_line_event pl;
    lt_sampler_info_event si;
    lt_native_sym_event ns;
    lt_op_event op;
    lt_op_name_event on;
    lt_gpu_activity_event ga;
    lt_gpu_name_event gn;
    lt_gpu_launch_event gl;
    lt_nvtx_event nv;
    lt_gpu_status_event gs;
    lt_gpu_clock_event gc;
    lt_action_origin_event ao;
    lt_mem_event me;
    lt_comm_event ce;
    lt_comm_mark_event cm;
    lt_nccl_event nc;
    lt_module_call_event mc;
    lt_module_name_event mn;
    lt_compile_note_event cn;
    auto field = [](const char* f, std::size_t cap) {  // one record per line: newlines as \n
      std::string t;
      for (const char* c = f; c < f + strnlen(f, cap); ++c) t += *c == '\n' ? std::string("\\n") : std::string(1, *c);
      return utf8_text(t);
    };
    if (h.kind == LT_EV_COMPILE_NOTE && record_as(h, p, cn))
      out << " what=" << cn.what << " flags=" << cn.flags << " id=" << field(cn.compile_id, sizeof cn.compile_id)
          << " start_wall_us=" << cn.start_wall_us << " duration_us=" << cn.duration_us << " count=" << cn.count
          << " function=" << field(cn.function, sizeof cn.function) << " file=" << field(cn.file, sizeof cn.file) << ":"
          << cn.first_line << " reason=" << field(cn.reason, sizeof cn.reason)
          << " failure=" << field(cn.failure, sizeof cn.failure);
    else if (h.kind == LT_EV_MODULE_CALL && record_as(h, p, mc))
      out << " self=0x" << std::hex << mc.self << " frame=0x" << mc.frame << std::dec << " depth=" << mc.depth;
    else if (h.kind == LT_EV_MODULE_NAME && record_as(h, p, mn))
      out << " module=0x" << std::hex << mn.module << std::dec << " flags=" << mn.flags
          << " type=" << utf8_text(std::string(mn.type, strnlen(mn.type, sizeof mn.type)))
          << " name=" << utf8_text(std::string(mn.name, strnlen(mn.name, sizeof mn.name)));
    else if (h.kind == LT_EV_COMM && record_as(h, p, ce))
      out << " comm=" << static_cast<int>(ce.kind) << " backend=" << static_cast<int>(ce.backend) << " pg=0x"
          << std::hex << ce.pg << std::dec << " seq=" << ce.seq << " tensors=" << ce.ntensors << " peer=" << ce.peer
          << " flags=" << ce.flags;
    else if (h.kind == LT_EV_COMM_MARK && record_as(h, p, cm))
      out << " what=" << static_cast<int>(cm.what) << " obj=0x" << std::hex << cm.obj << " owner=0x" << cm.owner
          << std::dec;
    else if (h.kind == LT_EV_NCCL && record_as(h, p, nc))
      out << " fn=" << static_cast<int>(nc.fn) << " comm=0x" << std::hex << nc.comm << " stream=0x" << nc.stream
          << std::dec << " count=" << nc.count << " dtype=" << static_cast<int>(nc.dtype) << " op=" << nc.op
          << " peer=" << nc.peer << " nranks=" << nc.nranks << " rank=" << nc.rank;
    else if (h.kind == LT_EV_MEM && record_as(h, p, me))
      out << " what=" << static_cast<int>(me.what) << " ptr=0x" << std::hex << me.ptr << std::dec
          << " bytes=" << me.bytes << " device=" << static_cast<int>(me.device_type) << ":"
          << static_cast<int>(me.device_index) << " depth=" << me.depth << " flags=" << me.flags
          << " allocated=" << me.total_allocated << " reserved=" << me.total_reserved;
    else if (h.kind == LT_EV_ACTION_ORIGIN && record_as(h, p, ao))
      out << " key=0x" << std::hex << ao.key << " code=0x" << ao.code << std::dec << " depth=" << ao.depth
          << " flags=" << ao.flags << " of=" << record_dump_name(ao.begin_kind);
    else if (h.kind <= LT_EV_FETCH_BEGIN && record_as(h, p, a))
      out << " key=0x" << std::hex << a.key << std::dec << " flags=" << a.flags << " name=" << action_name(a);
    else if (h.kind == LT_EV_ACTION_NAME_TAIL && record_as(h, p, at))
      out << " key=0x" << std::hex << at.key << std::dec << " offset=" << at.offset << " bytes=" << at.bytes;
    else if (h.kind >= LT_EV_PROC_FORK && h.kind <= LT_EV_PROC_EXIT && record_as(h, p, pe))
      out << " parent=" << pe.parent_pid << " child=" << pe.child_pid << " code=" << pe.exit_code;
    else if (h.kind == LT_EV_PROC_INFO && record_as(h, p, pi))
      out << " rank=" << pi.rank << " local_rank=" << pi.local_rank << " world_size=" << pi.world_size
          << " python=" << pi.py_major << "." << pi.py_minor << " torch=" << pi.torch_version << " flags=" << pi.flags
          << " cmd=" << pi.cmdline;
    else if (h.kind == LT_EV_PROC_ENV && record_as(h, p, pv))
      out << " rank=" << pv.rank << " local_rank=" << pv.local_rank << " world_size=" << pv.world_size
          << " local_world_size=" << pv.local_world_size << " group_rank=" << pv.group_rank
          << " slurm_procid=" << pv.slurm_procid << " slurm_nodeid=" << pv.slurm_nodeid
          << " slurm_job_id=" << std::string(pv.slurm_job_id, strnlen(pv.slurm_job_id, sizeof pv.slurm_job_id))
          << " master_addr=" << std::string(pv.master_addr, strnlen(pv.master_addr, sizeof pv.master_addr))
          << " master_port=" << pv.master_port
          << " run_id=" << std::string(pv.run_id, strnlen(pv.run_id, sizeof pv.run_id))
          << " hostname=" << std::string(pv.hostname, strnlen(pv.hostname, sizeof pv.hostname));
    else if (h.kind == LT_EV_PROC_CONTAINER && record_as(h, p, pcn))
      out << " ns_pid=" << pcn.ns_pid << " flags=" << pcn.flags
          << " hostname=" << std::string(pcn.hostname, strnlen(pcn.hostname, sizeof pcn.hostname))
          << " container_id=" << std::string(pcn.container_id, strnlen(pcn.container_id, sizeof pcn.container_id));
    else if (h.kind == LT_EV_DROPS && record_as(h, p, dr))
      out << " ringbuf_full=" << dr.ringbuf_full << " read_faults=" << dr.read_faults;
    else if (h.kind == LT_EV_PROC_DROPS && record_as(h, p, pd))
      out << " lost_kind=" << record_dump_name(pd.lost_kind) << " cause=" << pd.cause << " count=" << pd.count;
    else if (h.kind == LT_EV_WINDOW && record_as(h, p, w))
      out << (w.begin ? " begin" : " end");
    else if (h.kind == LT_EV_CLOCK_SYNC && record_as(h, p, cs))
      out << " phase=" << cs.phase << " offset_ns=" << cs.offset_ns << " delay_ns=" << cs.delay_ns
          << " samples=" << cs.samples
          << " reference=" << std::string(cs.reference, strnlen(cs.reference, sizeof cs.reference));
    else if (h.kind == LT_EV_PY_SAMPLE || h.kind == LT_EV_OFFCPU_BEGIN || h.kind == LT_EV_GPU_LAUNCH_STACK ||
             h.kind == LT_EV_MEM_STACK || h.kind == LT_EV_COMM_STACK)
      dump_sample(h, p, out);
    else if (h.kind == LT_EV_OFFCPU_END && record_as(h, p, oe))
      out << " began=" << oe.begin_ns;
    else if (h.kind == LT_EV_PY_CODE && record_as(h, p, pc))
      out << " code=0x" << std::hex << pc.code << std::dec << " sum=" << pc.checksum << " flags=" << pc.flags
          << " first_line=" << pc.first_line << " name=" << std::string(pc.name, strnlen(pc.name, sizeof pc.name))
          << " file=" << std::string(pc.file, strnlen(pc.file, sizeof pc.file));
    else if (h.kind == LT_EV_PY_LINE && record_as(h, p, pl))
      out << " code=0x" << std::hex << pl.code << std::dec << " sum=" << pl.checksum << " lasti=" << pl.lasti
          << " line=" << pl.line;
    else if (h.kind == LT_EV_SAMPLER_INFO && record_as(h, p, si))
      out << " rate=" << si.rate_hz << " period_ns=" << si.period_ns << " flags=" << si.flags;
    else if (h.kind == LT_EV_NATIVE_SYM && record_as(h, p, ns))
      out << " ip=0x" << std::hex << ns.ip << std::dec
          << " name=" << std::string(ns.name, strnlen(ns.name, sizeof ns.name))
          << " dso=" << std::string(ns.dso, strnlen(ns.dso, sizeof ns.dso));
    else if (h.kind == LT_EV_OP && record_as(h, p, op))
      out << " op=" << op.op << " depth=" << op.depth;
    else if (h.kind == LT_EV_OP_NAME && record_as(h, p, on))
      out << " op=" << on.op << " name=" << std::string(on.name, strnlen(on.name, sizeof on.name))
          << " overload=" << std::string(on.overload, strnlen(on.overload, sizeof on.overload));
    else if (h.kind == LT_EV_GPU_ACTIVITY && record_as(h, p, ga))
      out << " kind=" << ga.a.kind << " start=" << ga.a.start_ns << " end=" << ga.a.end_ns
          << " corr=" << ga.a.correlation << " name=" << ga.a.name_id << " cbid=" << ga.a.cbid << " dev=" << ga.a.device
          << " stream=" << ga.a.stream << " bytes=" << ga.a.bytes;
    else if (h.kind == LT_EV_GPU_NAME && record_as(h, p, gn))
      out << " kind=" << gn.n.kind << " id=" << gn.n.id << " at=" << gn.n.offset << "/" << gn.n.total_len
          << " text=" << std::string(gn.n.text, std::min<std::size_t>(gn.n.len, sizeof gn.n.text));
    else if (h.kind == LT_EV_GPU_LAUNCH && record_as(h, p, gl))
      out << " corr=" << gl.correlation << " cbid=" << gl.cbid << " source=" << gl.source << " api=" << gl.api
          << " ops=" << gl.nops << " flags=" << gl.flags;
    else if (h.kind == LT_EV_NVTX && record_as(h, p, nv))
      out << " type=" << nv.n.type << " ts=" << nv.n.ts_ns << " domain=" << nv.n.domain << " string=" << nv.n.string_id
          << " msg=" << std::string(nv.n.msg, strnlen(nv.n.msg, sizeof nv.n.msg));
    else if (h.kind == LT_EV_GPU_STATUS && record_as(h, p, gs))
      out << " state=" << gs.s.state << " error=" << gs.s.error << " flags=" << gs.s.flags
          << " detail=" << std::string(gs.s.detail, strnlen(gs.s.detail, sizeof gs.s.detail));
    else if (h.kind == LT_EV_GPU_CLOCK && record_as(h, p, gc))
      out << " cupti=" << gc.c.cupti_ns << " mono=" << gc.c.monotonic_ns << " offset=" << gc.c.offset_ns
          << " error=" << gc.c.error_ns;
    out << "\n";
  });
  text.finish();
  if (!out) to.setstate(std::ios::badbit);
}

}  // namespace lt
