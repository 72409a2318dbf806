/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Small readers of CPython objects in the target, shared by the action
 * probes (pyactions) and the stack sampler (pysample).
 */
#ifndef LTRACE_PYREAD_BPF_H
#define LTRACE_PYREAD_BPF_H

#include "common.bpf.h"

static __always_inline u64 read_u64(u64 addr)
{
	u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

static __always_inline s32 read_s32(u64 addr)
{
	s32 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* argcount, flags, firstlineno and the co_filename pointer lie within
 * 72-96 bytes in every supported version: one read gives a checksum that
 * changes when a code object's address is reused by another.  The
 * filename tells apart module bodies (argcount 0, the same flags, first
 * line 1), freed after they ran and reallocated at the same address by
 * the next import; their files' str objects live on as the modules'
 * __file__.  user/python/symbolizer.cpp computes the same. */
static __always_inline u32 code_checksum(u64 code, const struct lt_py_offsets *o)
{
	u32 block[32] = {};
	u32 base = o->code_argcount < o->code_flags ? o->code_argcount : o->code_flags;
	u32 len = o->code_filename + 8 - base;
	if (bpf_probe_read_user(block, len & 127, (void *)(code + base)))
		return 0;
	u32 argc = block[((o->code_argcount - base) / 4) & 31];
	u32 flags = block[((o->code_flags - base) / 4) & 31];
	u32 line = block[((o->code_firstlineno - base) / 4) & 31];
	u32 fi = (o->code_filename - base) / 4;
	u32 f = block[fi & 31] ^ block[(fi + 1) & 31]; /* the pointer's halves folded: (u32)(p ^ p >> 32) */
	return (argc * 2654435761u) ^ (flags * 40503u) ^ (line * 97u) ^ (f * 0x85ebca6bu) ^ 0x9e37u;
}

/* The thread's PyThreadState: pthread_getspecific(tss_key), emulated from
 * fsbase (valid for threads that released the GIL, python-unwinding.md
 * §3.2).  Needs a proven TSD layout (t->tsd_block != 0). */
static __always_inline u64 thread_state(struct task_struct *task, const struct lt_target *t)
{
	u64 fsbase = task->thread.fsbase;
	if (!fsbase)
		return 0;
	u32 key = t->tss_key;
	u64 slot;
	if (key < 32) {
		slot = fsbase + t->tsd_block + 16 * (u64)key + 8;
	} else {
		u64 level = read_u64(fsbase + t->tsd_levels + 8 * (u64)((key / 32) & 31));
		if (!level)
			return 0;
		slot = level + 16 * (u64)(key % 32) + 8;
	}
	return read_u64(slot);
}

/* The thread's PyThreadState by either way the target allows (0: none). */
static __always_inline u64 current_thread_state(struct task_struct *task, const struct lt_target *t)
{
	if (t->flags & LT_TARGET_TSTATE_MAP) {
		u32 tid = (u32)bpf_get_current_pid_tgid();
		u64 *ts = bpf_map_lookup_elem(&lt_tstates, &tid);
		return ts ? *ts : 0;
	}
	/* tsd_block 0: the TSS layout was not proven; sample ops only */
	return t->tsd_block ? thread_state(task, t) : 0;
}

/* The Python frame the thread is executing now (0: none). */
static __always_inline u64 current_pyframe(u64 tstate, const struct lt_py_offsets *o)
{
	if (!tstate)
		return 0;
	u64 frame = read_u64(tstate + o->tstate_frame);
	if (frame && o->cframe_frame != 0xffff)
		frame = read_u64(frame + o->cframe_frame);
	return frame;
}

#endif /* LTRACE_PYREAD_BPF_H */
