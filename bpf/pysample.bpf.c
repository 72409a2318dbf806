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
 * The thread's PyThreadState comes from pthread_getspecific(autoTSSkey),
 * emulated from fsbase: unlike the "current thread state" globals, it is
 * valid for threads that released the GIL (python-unwinding.md §3.2), which
 * is where PyTorch spends its time.
 *
 * Per frame we send only (code object, instruction, checksum); names, files
 * and line numbers are decoded in user space, once per code object.  The
 * walk is bounded (LT_WALK_MAX frames, C-stack shim frames included).
 */
#include "common.bpf.h"
#include "opstack.bpf.h"
#include "pyread.bpf.h"

/* Shim frames (3.12+: one per C-level evaluation, e.g. every
 * nn.Module.__call__) are skipped but still cost an iteration. */
#define LT_WALK_MAX (2 * LT_STACK_MAX)
#define LT_BLOCK_MAX 128

/* Per-CPU working space: the event is built here and copied into the ring
 * buffer once complete; a frame's fields are read with one copy into buf (a
 * map value: the verifier accepts bounded variable offsets into it).  Slot 0
 * serves the sampler, slot 1 the scheduler probe. */
struct scratch {
	struct lt_py_sample_event ev;
	struct lt_py_offsets off;
	u8 buf[LT_BLOCK_MAX + 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct scratch);
} lt_sample_scratch SEC(".maps");

/* tid -> time it blocked (off-CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u64);
} lt_offcpu_start SEC(".maps");

static __always_inline u64 field_u64(const struct scratch *s, u32 off)
{
	return *(const u64 *)(s->buf + (off & (LT_BLOCK_MAX - 1)));
}

struct walk_ctx {
	u32 slot; /* scratch slot */
	u32 pad;
	u64 frame; /* next frame to read, 0 = done */
};

/* One frame per call (bpf_loop): the verifier checks the body once instead
 * of once per unrolled iteration. */
static long walk_one(u32 i, struct walk_ctx *c)
{
	struct scratch *s = bpf_map_lookup_elem(&lt_sample_scratch, &c->slot);
	if (!s || !c->frame)
		return 1;
	const struct lt_py_offsets *o = &s->off;
	struct lt_py_sample_event *e = &s->ev;
	u32 n = e->nframes;
	if (n >= LT_STACK_MAX) {
		e->flags |= LT_SAMPLE_TRUNCATED;
		return 1;
	}
	if (bpf_probe_read_user(s->buf, o->frame_block & (LT_BLOCK_MAX - 1), (void *)c->frame)) {
		e->flags |= LT_SAMPLE_READ_FAULT;
		lt_count_read_fault();
		return 1;
	}
	u64 code = field_u64(s, o->frame_code);
	c->frame = field_u64(s, o->frame_previous);
	s32 lasti;
	if (o->py_minor >= 11) {
		/* 3.12+: each C-level evaluation pushes a shim frame owned by
		 * the C stack; CPython's own walkers skip it. */
		if (s->buf[o->frame_owner & (LT_BLOCK_MAX - 1)] == o->owner_cstack)
			return 0;
		u64 ip = field_u64(s, o->frame_lasti);
		/* code units from the bytecode start; the arithmetic shift
		 * keeps 3.11's "before the first instruction" at -1 */
		lasti = ip ? (s32)((s64)(ip - (code + o->code_adaptive)) >> 1) : -1;
	} else {
		lasti = (s32)field_u64(s, o->frame_lasti);
	}
	if (!code)
		return 0;
	e->frames[n].code = code;
	e->frames[n].lasti = lasti;
	e->frames[n].checksum = code_checksum(code, o);
	e->nframes = n + 1;
	return 0;
}

/* Builds the current thread's sample in scratch slot `slot` and sends it. */
static __always_inline int emit_stack(u32 slot, u16 kind, const struct lt_target *t, int in_kernel)
{
	struct scratch *s = bpf_map_lookup_elem(&lt_sample_scratch, &slot);
	if (!s)
		return 0;
	struct lt_py_sample_event *e = &s->ev;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	lt_fill_header(&e->hdr, kind, sizeof(*e));
	e->user_ip = regs ? regs->ip : 0;
	e->nframes = 0;
	e->flags = in_kernel ? LT_SAMPLE_IN_KERNEL : 0;
	e->pad = 0;
	e->nops = 0;
	s->off = t->off;
	/* tsd_block 0: the TSS layout was not proven; sample ops only */
	e->tstate = t->tsd_block ? thread_state(task, t) : 0;
	u64 pyframe = 0;
	if (!e->tstate) {
		e->flags |= LT_SAMPLE_NO_TSTATE;
	} else {
		pyframe = current_pyframe(e->tstate, &t->off);
		struct walk_ctx c = {.slot = slot, .frame = pyframe};
		bpf_loop(LT_WALK_MAX, walk_one, &c, 0);
		if (c.frame && !(e->flags & LT_SAMPLE_READ_FAULT))
			e->flags |= LT_SAMPLE_TRUNCATED; /* frames left: the root side is missing */
	}
	/* In one of our uprobes rather than in the target's own code: in the
	 * kernel with the user IP just past the int3, or at the out-of-line
	 * copy of the probed instruction (the "[uprobes]" page) while it is
	 * single-stepped. */
	if (regs) {
		u64 xol = BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
		u8 insn = 0;
		if (xol && regs->ip - xol < 4096)
			e->flags |= LT_SAMPLE_IN_PROBE;
		else if (in_kernel && !bpf_probe_read_user(&insn, 1, (void *)(regs->ip - 1)) && insn == 0xcc)
			e->flags |= LT_SAMPLE_IN_PROBE;
	}
	if (regs && (t->flags & LT_TARGET_OPS)) {
		struct lt_op_stack *ops = bpf_task_storage_get(&lt_op_stacks, task, 0, 0);
		if (ops) {
			u32 d = op_stack_settle(ops, regs->sp, 0, pyframe, t);
			for (int i = 0; i < LT_OPS_DEPTH; i++) {
				if (i >= d)
					break;
				e->ops[i] = ops->f[i].op;
			}
			e->nops = d;
		}
	}
	/* Slots past nframes hold an earlier sample's frames; user space
	 * reads nframes and zeroes the rest before storing the record. */
	if (bpf_ringbuf_output(&lt_events, e, sizeof(*e), BPF_RB_NO_WAKEUP))
		lt_count_ringbuf_drop();
	return 0;
}

SEC("perf_event")
int lt_sample(struct bpf_perf_event_data *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid)
		return 0; /* idle */
	struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_SAMPLE))
		return 0;
	/* kernel addresses are the upper half on x86-64 */
	return emit_stack(0, LT_EV_PY_SAMPLE, t, (s64)ctx->regs.ip < 0);
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
			emit_stack(1, LT_EV_OFFCPU_BEGIN, t, 1);
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
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	} else {
		lt_count_ringbuf_drop();
	}
	bpf_map_delete_elem(&lt_offcpu_start, &next_tid);
	return 0;
}
