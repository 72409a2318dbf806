/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Python stack walker, shared by the sampler (pysample.bpf.c) and the GPU
 * launch probes (gpu.bpf.c): emit_stack() builds one lt_py_sample_event of
 * the current thread (leaf first, with the aten ops running on it) in a
 * per-CPU scratch slot and sends it.  Each object that includes this header
 * has its own scratch map.
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
#ifndef LTRACE_PYSTACK_BPF_H
#define LTRACE_PYSTACK_BPF_H

#include "common.bpf.h"
#include "opstack.bpf.h"
#include "pyread.bpf.h"

#ifndef LT_SCRATCH_SLOTS
#define LT_SCRATCH_SLOTS 2
#endif

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
	__uint(max_entries, LT_SCRATCH_SLOTS);
	__type(key, u32);
	__type(value, struct scratch);
} lt_sample_scratch SEC(".maps");

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
		lt_count_read_fault(e->hdr.kind);
		return 1;
	}
	u64 code = field_u64(s, o->frame_code) & ~(u64)o->stackref_tag_mask;
	c->frame = field_u64(s, o->frame_previous);
	s32 lasti;
	if (o->py_minor >= 11) {
		/* 3.12+: each C-level evaluation pushes a shim frame owned by
		 * the C stack (3.14+: by the interpreter); CPython's own
		 * walkers skip it. */
		if (s->buf[o->frame_owner & (LT_BLOCK_MAX - 1)] >= o->owner_cstack)
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
/* Whether the thread of `tstate` runs the cyclic garbage collector now:
 * its interpreter's gc.collecting is set and it holds the GIL (the flag is
 * the interpreter's; the GIL says which thread collects).  A few reads, only
 * for LT_TARGET_GC_SAMPLED targets. */
static __always_inline int in_gc(const struct lt_target *t, u64 tstate)
{
	u64 interp = 0, holder = 0;
	int collecting = 0, locked = 1;
	if (bpf_probe_read_user(&interp, sizeof(interp), (void *)(tstate + t->tstate_interp)) || !interp)
		return 0;
	u64 flag = t->gc_collecting_at ? t->gc_collecting_at : interp + t->interp_gc_collecting;
	if (bpf_probe_read_user(&collecting, sizeof(collecting), (void *)flag) || !collecting)
		return 0;
	if (t->gil_holder_at) {
		if (bpf_probe_read_user(&holder, sizeof(holder), (void *)t->gil_holder_at))
			return 0;
	} else if (t->interp_gil_holder) {
		if (bpf_probe_read_user(&holder, sizeof(holder), (void *)(interp + t->interp_gil_holder)) ||
		    bpf_probe_read_user(&locked, sizeof(locked), (void *)(interp + t->interp_gil_locked)))
			return 0;
	} else {
		return 1; /* no GIL known: the interpreter collects, this thread is taken as the one */
	}
	return locked && holder == tstate;
}

static __always_inline int emit_stack(u32 slot, u16 kind, const struct lt_target *t, int in_kernel, u16 weight)
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
	e->weight = weight;
	e->nops = 0;
	s->off = t->off;
	e->tstate = current_thread_state(task, t);
	u64 pyframe = 0;
	if (!e->tstate) {
		e->flags |= LT_SAMPLE_NO_TSTATE;
	} else {
		pyframe = current_pyframe(e->tstate, &t->off);
		if ((t->flags & LT_TARGET_GC_SAMPLED) && in_gc(t, e->tstate))
			e->flags |= LT_SAMPLE_IN_GC;
		struct walk_ctx c = {.slot = slot, .frame = pyframe};
		bpf_loop(LT_WALK_MAX, walk_one, &c, 0);
		if (c.frame && !(e->flags & LT_SAMPLE_READ_FAULT))
			e->flags |= LT_SAMPLE_TRUNCATED; /* frames left: the root side is missing */
	}
	/* In one of our uprobes rather than in the target's own code: in the
	 * kernel with the user IP just past the int3 (the trap taken), or at
	 * the int3 itself (the kernel resets the IP to the probed address
	 * before it runs the uprobe's programs, and a sample can land while
	 * they run), or at the out-of-line copy of the probed instruction
	 * (the "[uprobes]" page) while it is single-stepped. */
	if (regs) {
		u64 xol = BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
		u8 insn[2] = {};
		if (xol && regs->ip - xol < 4096)
			e->flags |= LT_SAMPLE_IN_PROBE;
		else if (in_kernel && !bpf_probe_read_user(insn, 2, (void *)(regs->ip - 1)) &&
			 (insn[0] == 0xcc || insn[1] == 0xcc))
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
	if (bpf_ringbuf_output(&lt_events, e, sizeof(*e), LT_RB_SUBMIT))
		lt_count_ringbuf_drop(e->hdr.kind);
	return 0;
}

#endif /* LTRACE_PYSTACK_BPF_H */
