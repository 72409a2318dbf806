/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Python call stacks of target threads, from outside the process.
 *
 * lt_sample runs on a software cpu-clock perf event on every CPU (there is
 * no hardware PMU in our VMs): when the interrupted thread belongs to a
 * target, it walks that thread's Python frames and emits one fixed-size
 * PY_SAMPLE.  lt_switch (sched_switch, only with --off-cpu) emits the stack
 * of a target thread that blocks (OFFCPU_BEGIN) and the time it runs again
 * (OFFCPU_END).
 *
 * The walker itself is in pystack.bpf.h (the GPU launch probes use it too).
 */
#include "pystack.bpf.h"

/* tid -> time it blocked (off-CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u64);
} lt_offcpu_start SEC(".maps");

SEC("perf_event")
int lt_sample(struct bpf_perf_event_data *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid)
		return 0; /* idle */
	struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_SAMPLE))
		return 0;
	/* Two sets of events while a target is escalated (watch): the
	 * full-rate set samples it, the cheap set everyone else; each sample
	 * says how many of the full-rate periods it stands for. */
	u64 cookie = bpf_get_attach_cookie(ctx);
	if (!(cookie & LT_SAMPLE_COOKIE_FULL) != !(t->flags & LT_TARGET_SAMPLE_FULL))
		return 0;
	/* kernel addresses are the upper half on x86-64 */
	return emit_stack(0, LT_EV_PY_SAMPLE, t, (s64)ctx->regs.ip < 0, (u16)cookie);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(lt_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	/* prev is the current task here: its stack and memory are readable.
	 * Off-CPU means blocked: not preempted (still runnable), and not a
	 * thread leaving for good (TASK_DEAD / EXIT_ZOMBIE / EXIT_DEAD). */
	u32 prev_tgid = prev->tgid;
	if (!preempt && prev_state != 0 && !(prev_state & (0x80 | 0x20 | 0x10)) && prev_tgid) {
		struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &prev_tgid);
		if (t && (t->flags & LT_TARGET_OFF_CPU)) {
			u32 tid = prev->pid;
			u64 now = bpf_ktime_get_ns();
			bpf_map_update_elem(&lt_offcpu_start, &tid, &now, BPF_ANY);
			emit_stack(1, LT_EV_OFFCPU_BEGIN, t, 1, 0);
		}
	}
	u32 next_tid = next->pid;
	u64 *began = bpf_map_lookup_elem(&lt_offcpu_start, &next_tid);
	if (!began)
		return 0;
	struct lt_offcpu_end_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (e) {
		lt_fill_header(&e->hdr, LT_EV_OFFCPU_END, sizeof(*e));
		e->hdr.pid = next->tgid; /* the thread that runs again, not current */
		e->hdr.tid = next_tid;
		e->begin_ns = *began;
		bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	} else {
		lt_count_ringbuf_drop_for(next->tgid, LT_EV_OFFCPU_END);
	}
	bpf_map_delete_elem(&lt_offcpu_start, &next_tid);
	return 0;
}
