#include "reports/dump/event_dump.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "user/model/action_name.h"
#include "user/model/record_dispatch.h"
#include "user/model/record_kinds.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

// The five stack kinds (samples, off-CPU, launch, allocation, collective).
void dump_sample(const lt_event_header&, const lt_py_sample_event& e, std::ostream& out) {
  out << " ip=0x" << std::hex << e.user_ip << " tstate=0x" << e.tstate << std::dec << " flags=" << e.flags;
  if (e.weight) out << " weight=" << e.weight;
  out << " frames=" << e.nframes;
  for (unsigned i = 0; i < e.nframes && i < LT_STACK_MAX; ++i)
    out << " 0x" << std::hex << e.frames[i].code << std::dec << "@" << e.frames[i].lasti;
  if (e.nops) out << " ops=";
  for (unsigned i = 0; i < e.nops && i < LT_OPS_DEPTH; ++i) out << (i ? "," : "") << e.ops[i];
}
}  // namespace

// A record's text on one line whatever its strings hold (a command line
// from `python -c` has newlines): control characters as \n, \r, \t or \xNN.
static std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
      continue;
    }
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\x%02x", u);
    out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : esc;
  }
  return out;
}

void dump_events(const Trace& trace, std::ostream& to) {
  // Names, command lines and messages are the target's bytes: the lines are
  // valid UTF-8 text all the same (user/text/utf8_text.h).
  Utf8TextBuf text(to.rdbuf());
  std::ostream sink(&text);
  std::ostringstream out;  // one record, then on one line (one_line)
  trace.for_each([&](const lt_event_header& h, const std::byte* p) {
    out.str("");
    out << h.ts_ns << " " << h.pid << "/" << h.tid << " " << record_dump_name(h.kind);
    auto field = [](const char* f, std::size_t cap) { return utf8_text(std::string_view(f, strnlen(f, cap))); };
    visit_record(
        h, p,
        overloaded{
            [&](const lt_event_header&, const lt_compile_note_event& cn) {
              out << " what=" << cn.what << " flags=" << cn.flags
                  << " id=" << field(cn.compile_id, sizeof cn.compile_id) << " start_wall_us=" << cn.start_wall_us
                  << " duration_us=" << cn.duration_us << " count=" << cn.count
                  << " function=" << field(cn.function, sizeof cn.function)
                  << " file=" << field(cn.file, sizeof cn.file) << ":" << cn.first_line
                  << " reason=" << field(cn.reason, sizeof cn.reason)
                  << " failure=" << field(cn.failure, sizeof cn.failure);
            },
            [&](const lt_event_header&, const lt_module_call_event& mc) {
              out << " self=0x" << std::hex << mc.self << " frame=0x" << mc.frame << std::dec << " depth=" << mc.depth;
            },
            [&](const lt_event_header&, const lt_module_name_event& mn) {
              out << " module=0x" << std::hex << mn.module << std::dec << " flags=" << mn.flags
                  << " type=" << utf8_text(std::string(mn.type, strnlen(mn.type, sizeof mn.type)))
                  << " name=" << utf8_text(std::string(mn.name, strnlen(mn.name, sizeof mn.name)));
            },
            [&](const lt_event_header&, const lt_comm_event& ce) {
              out << " comm=" << static_cast<int>(ce.kind) << " backend=" << static_cast<int>(ce.backend) << " pg=0x"
                  << std::hex << ce.pg << std::dec << " seq=" << ce.seq << " tensors=" << ce.ntensors
                  << " peer=" << ce.peer << " flags=" << ce.flags;
            },
            [&](const lt_event_header&, const lt_comm_mark_event& cm) {
              out << " what=" << static_cast<int>(cm.what) << " obj=0x" << std::hex << cm.obj << " owner=0x" << cm.owner
                  << std::dec;
            },
            [&](const lt_event_header&, const lt_nccl_event& nc) {
              out << " fn=" << static_cast<int>(nc.fn) << " comm=0x" << std::hex << nc.comm << " stream=0x" << nc.stream
                  << std::dec << " count=" << nc.count << " dtype=" << static_cast<int>(nc.dtype) << " op=" << nc.op
                  << " peer=" << nc.peer << " nranks=" << nc.nranks << " rank=" << nc.rank;
            },
            [&](const lt_event_header&, const lt_mem_event& me) {
              out << " what=" << static_cast<int>(me.what) << " ptr=0x" << std::hex << me.ptr << std::dec
                  << " bytes=" << me.bytes << " device=" << static_cast<int>(me.device_type) << ":"
                  << static_cast<int>(me.device_index) << " depth=" << me.depth << " flags=" << me.flags
                  << " allocated=" << me.total_allocated << " reserved=" << me.total_reserved;
            },
            [&](const lt_event_header&, const lt_action_origin_event& ao) {
              out << " key=0x" << std::hex << ao.key << " code=0x" << ao.code << std::dec << " depth=" << ao.depth
                  << " flags=" << ao.flags << " of=" << record_dump_name(ao.begin_kind);
            },
            [&](const lt_event_header&, const lt_action_event& a) {
              out << " key=0x" << std::hex << a.key << std::dec << " flags=" << a.flags << " name=" << action_name(a);
            },
            [&](const lt_event_header&, const lt_action_name_tail_event& at) {
              out << " key=0x" << std::hex << at.key << std::dec << " offset=" << at.offset << " bytes=" << at.bytes;
            },
            [&](const lt_event_header&, const lt_proc_event& pe) {
              out << " parent=" << pe.parent_pid << " child=" << pe.child_pid << " code=" << pe.exit_code;
            },
            [&](const lt_event_header&, const lt_proc_info_event& pi) {
              out << " rank=" << pi.rank << " local_rank=" << pi.local_rank << " world_size=" << pi.world_size
                  << " python=" << pi.py_major << "." << pi.py_minor << " torch=" << pi.torch_version
                  << " flags=" << pi.flags << " cmd=" << pi.cmdline;
            },
            [&](const lt_event_header&, const lt_proc_env_event& pv) {
              out << " rank=" << pv.rank << " local_rank=" << pv.local_rank << " world_size=" << pv.world_size
                  << " local_world_size=" << pv.local_world_size << " group_rank=" << pv.group_rank
                  << " slurm_procid=" << pv.slurm_procid << " slurm_nodeid=" << pv.slurm_nodeid
                  << " slurm_job_id=" << std::string(pv.slurm_job_id, strnlen(pv.slurm_job_id, sizeof pv.slurm_job_id))
                  << " master_addr=" << std::string(pv.master_addr, strnlen(pv.master_addr, sizeof pv.master_addr))
                  << " master_port=" << pv.master_port
                  << " run_id=" << std::string(pv.run_id, strnlen(pv.run_id, sizeof pv.run_id))
                  << " hostname=" << std::string(pv.hostname, strnlen(pv.hostname, sizeof pv.hostname));
            },
            [&](const lt_event_header&, const lt_proc_container_event& pcn) {
              out << " ns_pid=" << pcn.ns_pid << " flags=" << pcn.flags
                  << " hostname=" << std::string(pcn.hostname, strnlen(pcn.hostname, sizeof pcn.hostname))
                  << " container_id="
                  << std::string(pcn.container_id, strnlen(pcn.container_id, sizeof pcn.container_id));
            },
            [&](const lt_event_header&, const lt_drops_event& dr) {
              out << " ringbuf_full=" << dr.ringbuf_full << " read_faults=" << dr.read_faults;
            },
            [&](const lt_event_header&, const lt_proc_drops_event& pd) {
              out << " lost_kind=" << record_dump_name(pd.lost_kind) << " cause=" << pd.cause << " count=" << pd.count;
            },
            [&](const lt_event_header&, const lt_window_event& w) { out << (w.begin ? " begin" : " end"); },
            [&](const lt_event_header&, const lt_xla_event& x) {
              out << " site=" << x.site << " obj=0x" << std::hex << x.obj << std::dec << " arg=" << x.arg
                  << " flags=" << x.flags;
            },
            [&](const lt_event_header&, const lt_xla_metric_name_event& xn) {
              out << " metric=0x" << std::hex << xn.metric << std::dec
                  << " name=" << utf8_text(std::string_view(xn.name, strnlen(xn.name, sizeof xn.name)));
            },
            [&](const lt_event_header&, const lt_step_base_event& sb) {
              out << " index=" << sb.index << " begin_ns=" << sb.begin_ns << " end_ns=" << sb.end_ns;
            },
            [&](const lt_event_header&, const lt_xla_value_event& xv) {
              out << " metric=0x" << std::hex << xv.metric << std::dec << " sample_ns=" << xv.sample_ns
                  << " value=" << xv.value << " flags=" << xv.flags;
            },
            [&](const lt_event_header&, const lt_xla_info_event& xi) {
              out << " version=" << utf8_text(std::string_view(xi.version, strnlen(xi.version, sizeof xi.version)))
                  << " device=" << utf8_text(std::string_view(xi.device, strnlen(xi.device, sizeof xi.device)))
                  << " library=" << utf8_text(std::string_view(xi.library, strnlen(xi.library, sizeof xi.library)));
            },
            [&](const lt_event_header&, const lt_clock_sync_event& cs) {
              out << " phase=" << cs.phase << " offset_ns=" << cs.offset_ns << " delay_ns=" << cs.delay_ns
                  << " samples=" << cs.samples
                  << " reference=" << std::string(cs.reference, strnlen(cs.reference, sizeof cs.reference));
            },
            [&](const lt_event_header&, const lt_offcpu_end_event& oe) { out << " began=" << oe.begin_ns; },
            [&](const lt_event_header&, const lt_py_gc_event& g) {
              out << " began=" << g.begin_ns << " generation=" << g.generation << " collected=" << g.collected;
            },
            [&](const lt_event_header&, const lt_py_code_event& pc) {
              out << " code=0x" << std::hex << pc.code << std::dec << " sum=" << pc.checksum << " flags=" << pc.flags
                  << " first_line=" << pc.first_line
                  << " name=" << std::string(pc.name, strnlen(pc.name, sizeof pc.name))
                  << " file=" << std::string(pc.file, strnlen(pc.file, sizeof pc.file));
            },
            [&](const lt_event_header&, const lt_py_line_event& pl) {
              out << " code=0x" << std::hex << pl.code << std::dec << " sum=" << pl.checksum << " lasti=" << pl.lasti
                  << " line=" << pl.line;
            },
            [&](const lt_event_header&, const lt_sampler_info_event& si) {
              out << " rate=" << si.rate_hz << " period_ns=" << si.period_ns << " flags=" << si.flags;
            },
            [&](const lt_event_header&, const lt_native_sym_event& ns) {
              out << " ip=0x" << std::hex << ns.ip << std::dec
                  << " name=" << std::string(ns.name, strnlen(ns.name, sizeof ns.name))
                  << " dso=" << std::string(ns.dso, strnlen(ns.dso, sizeof ns.dso));
            },
            [&](const lt_event_header&, const lt_native_func_event& nf) {
              out << " start=0x" << std::hex << nf.start << " end=0x" << nf.end << std::dec
                  << " name=" << std::string(nf.name, strnlen(nf.name, sizeof nf.name))
                  << " dso=" << std::string(nf.dso, strnlen(nf.dso, sizeof nf.dso));
            },
            [&](const lt_event_header&, const lt_op_event& op) { out << " op=" << op.op << " depth=" << op.depth; },
            [&](const lt_event_header&, const lt_op_span_event& sp) {
              if (sp.flags & LT_OP_SPAN_WATERMARK) {
                out << " watermark";  // not a call
                return;
              }
              out << " op=" << sp.op << " depth=" << sp.depth << " end=" << sp.end_ns << " self=" << sp.self_ns;
              if (sp.flags & LT_OP_SPAN_HIDDEN) out << " hidden";
              if (sp.flags & LT_OP_SPAN_USER) out << " user";
            },
            [&](const lt_event_header&, const lt_op_observer_event& ob) {
              out << " how=" << (ob.how == LT_OP_TIMES_OBSERVER ? "observer" : "sampled") << " final=" << ob.final
                  << " dropped=" << ob.dropped << " too_deep=" << ob.too_deep
                  << " detail=" << utf8_text(std::string_view(ob.detail, strnlen(ob.detail, sizeof ob.detail)));
            },
            [&](const lt_event_header&, const lt_op_name_event& on) {
              out << " op=" << on.op << " name=" << std::string(on.name, strnlen(on.name, sizeof on.name))
                  << " overload=" << std::string(on.overload, strnlen(on.overload, sizeof on.overload));
            },
            [&](const lt_event_header&, const lt_gpu_activity_event& ga) {
              out << " kind=" << ga.a.kind << " start=" << ga.a.start_ns << " end=" << ga.a.end_ns
                  << " corr=" << ga.a.correlation << " name=" << ga.a.name_id << " cbid=" << ga.a.cbid
                  << " dev=" << ga.a.device << " stream=" << ga.a.stream << " bytes=" << ga.a.bytes;
            },
            [&](const lt_event_header&, const lt_gpu_name_event& gn) {
              out << " kind=" << gn.n.kind << " id=" << gn.n.id << " at=" << gn.n.offset << "/" << gn.n.total_len
                  << " text=" << std::string(gn.n.text, std::min<std::size_t>(gn.n.len, sizeof gn.n.text));
            },
            [&](const lt_event_header&, const lt_gpu_launch_event& gl) {
              out << " corr=" << gl.correlation << " cbid=" << gl.cbid << " source=" << gl.source << " api=" << gl.api
                  << " ops=" << gl.nops << " flags=" << gl.flags;
            },
            [&](const lt_event_header&, const lt_nvtx_event& nv) {
              out << " type=" << nv.n.type << " ts=" << nv.n.ts_ns << " domain=" << nv.n.domain
                  << " string=" << nv.n.string_id
                  << " msg=" << std::string(nv.n.msg, strnlen(nv.n.msg, sizeof nv.n.msg));
            },
            [&](const lt_event_header&, const lt_gpu_status_event& gs) {
              out << " state=" << gs.s.state << " error=" << gs.s.error << " flags=" << gs.s.flags
                  << " detail=" << std::string(gs.s.detail, strnlen(gs.s.detail, sizeof gs.s.detail));
            },
            [&](const lt_event_header&, const lt_gpu_clock_event& gc) {
              out << " cupti=" << gc.c.cupti_ns << " mono=" << gc.c.monotonic_ns << " offset=" << gc.c.offset_ns
                  << " error=" << gc.c.error_ns;
            },
            [&](const lt_event_header& r, const lt_py_sample_event& e) { dump_sample(r, e, out); }});
    sink << one_line(out.str()) << "\n";
  });
  text.finish();
  if (!sink) to.setstate(std::ios::badbit);
}

}  // namespace lt
