/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The aten ops running on each thread, kept without return probes.
 *
 * A uretprobe replaces the return address on the target's stack; a C++
 * exception unwinding through that frame then finds no unwind info for the
 * trampoline and the target dies (machine-facts.md).  PyTorch throws
 * through ops in normal use, so we never return-probe an op.  Instead the
 * entry probe records the stack pointer at entry (where the return address
 * lies) and the return address itself.  Later, at any point where the
 * thread's stack pointer is known (the next op entry, a cpu-clock sample),
 * an op is still running only if
 *   - the stack pointer is below its entry stack pointer (its frame is
 *     still on the stack), and
 *   - its return address is still in its slot (a returned op's slot is
 *     overwritten as soon as deeper calls reuse that stack; an op that
 *     returned or was unwound by an exception is dropped either way).
 *   - the thread still executes the Python frame that called it, or a
 *     newer one called from it (an op calling back into Python): a
 *     returned op's stack slot can survive when the next call happens to
 *     leave it untouched, but the caller's Python frame has moved on.
 *   - its caller's frame (the 16 words above the return address) is as it
 *     was at entry, but for at most one word: a returned op's slot can also
 *     survive in a hole of a later, deeper C++ frame (an unwritten local) —
 *     with no Python frame moving, e.g. in autograd's backward — and that
 *     frame then rewrites several of the words around it.  A running op's
 *     caller is suspended; only an out-parameter it passed can change
 *     (measured on torch 1.13 and 2.x: at most one word for running ops,
 *     three or more for returned ones; docs/design-ops.md).
 * Checked innermost first: once one op is running, all outer ones are.
 *
 * Shared by opprobe.bpf.c (writes) and pysample.bpf.c (reads at samples);
 * user space hands both objects the same map.
 */
#ifndef LTRACE_OPSTACK_BPF_H
#define LTRACE_OPSTACK_BPF_H

#include "common.bpf.h"
#include "pyread.bpf.h"

/* How much of the caller's frame an op's entry keeps, and how many of those
 * words may change while the op still runs (its out-parameters). */
#define LT_OP_CALLER_WORDS 16
#define LT_OP_CALLER_CHANGES_MAX 1

struct lt_op_frame {
	u64 sp;				/* stack pointer at entry: the return address slot */
	u64 ra;				/* the return address found there */
	u64 pyframe;			/* the Python frame executing when it was called (0: unknown) */
	u64 caller[LT_OP_CALLER_WORDS]; /* the words above the return address, at entry */
	u32 op;
	u32 pad;
};

struct lt_op_stack {
	u32 depth;
	u32 pad;
	u64 tstate; /* the thread's PyThreadState, found once (0: not yet) */
	struct lt_op_frame f[LT_OPS_DEPTH];
};

/* Each thread's running ops, in task-local storage: no hashing on the hot
 * path, and freed with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lt_op_stack);
} lt_op_stacks SEC(".maps");

/* Depth of Python calls an op may make back into Python and still be seen
 * running (hooks, Python kernels). */
#define LT_OP_PY_REENTRY 4

/* Keeps the caller's frame words of an op entered at `sp` (zeros when
 * unreadable, e.g. at the top of a thread's stack). */
static __always_inline void caller_frame_keep(struct lt_op_frame *f, u64 sp)
{
	if (bpf_probe_read_user(f->caller, sizeof(f->caller), (void *)(sp + 8)))
		__builtin_memset(f->caller, 0, sizeof(f->caller));
}

/* Is the caller's frame of `f` still as it was at entry, but for at most
 * LT_OP_CALLER_CHANGES_MAX words?  Unreadable: the other checks decide. */
static __always_inline int caller_frame_intact(const struct lt_op_frame *f)
{
	u64 now[LT_OP_CALLER_WORDS];
	if (bpf_probe_read_user(now, sizeof(now), (void *)(f->sp + 8)))
		return 1;
	u32 changed = 0;
	for (int k = 0; k < LT_OP_CALLER_WORDS; k++) {
		u64 x = now[k] ^ f->caller[k];
		u64 y = x | -x; /* top bit set when x != 0 */
		/* keeps clang from turning this into a compare and branch: 16
		 * branches are 2^16 paths for the verifier */
		asm volatile("" : "+r"(y));
		changed += y >> 63;
	}
	return changed <= LT_OP_CALLER_CHANGES_MAX;
}

/* Is `frame` the current Python frame `cur` or one of its callers? */
static __always_inline int pyframe_live(u64 frame, u64 cur, const struct lt_target *t)
{
	if (!frame || !cur || frame == cur)
		return 1; /* unknown, or the same: the stack pointer decides */
	for (int i = 0; i < LT_OP_PY_REENTRY; i++) {
		cur = read_u64(cur + t->off.frame_previous);
		if (!cur)
			return 0;
		if (cur == frame)
			return 1;
	}
	return 0;
}

/* Drops the ops of `s` that are no longer running, seen from user stack
 * pointer `sp` with Python frame `pyframe` executing.  `at_entry`: sp is a
 * new op's entry, so an op entered at the same sp (a sibling call from the
 * same caller) has returned. */
static __always_inline u32 op_stack_settle(struct lt_op_stack *s, u64 sp, int at_entry, u64 pyframe,
					   const struct lt_target *t)
{
	u32 d = s->depth;
	if (d > LT_OPS_DEPTH)
		d = LT_OPS_DEPTH;
	for (int i = 0; i < LT_OPS_DEPTH; i++) {
		if (d == 0)
			break;
		u32 idx = d - 1;
		asm volatile("%[i] &= 15" : [i] "+r"(idx)); /* keep the bound visible to the verifier */
		struct lt_op_frame *f = &s->f[idx];
		int below = at_entry ? sp < f->sp : sp <= f->sp;
		if (below && read_u64(f->sp) == f->ra && pyframe_live(f->pyframe, pyframe, t) && caller_frame_intact(f))
			break;
		d--;
	}
	s->depth = d;
	return d;
}

#endif /* LTRACE_OPSTACK_BPF_H */
