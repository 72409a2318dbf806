/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The opening frame of an action (ACTION_ORIGIN), for the action probes:
 * which frame, counted from the thread's root the way the sampler counts
 * (pystack.bpf.h: shim frames and frames with no code skipped), began the
 * action, so user space can cut each sample charged to it at that frame.
 *
 * One bpf_loop over the thread's frames, one read per frame; run only for
 * targets whose stacks are sampled, once per action start (a few dozen per
 * training step).
 */
#ifndef LTRACE_PYORIGIN_BPF_H
#define LTRACE_PYORIGIN_BPF_H

#include "common.bpf.h"
#include "pyread.bpf.h"

/* Deeper stacks get depth 0 (unknown): the sampler keeps at most
 * LT_STACK_MAX frames anyway, and user space falls back to the code object. */
#define LT_ORIGIN_WALK_MAX 1024
#define LT_ORIGIN_BLOCK_MAX 128

struct origin_scratch {
	struct lt_py_offsets off;
	u64 frame; /* next frame to read, 0 = done */
	u64 code;  /* the opening frame's code object */
	u64 first; /* the innermost Python frame's code object */
	u32 seen;  /* Python frames counted so far (leaf side first) */
	u32 skip;  /* Python frames below the opening one (0 or 1) */
	u32 fault;
	u32 by_code; /* stop at the opening frame: no depth (LT_TARGET_ORIGIN_BY_CODE) */
	u8 buf[LT_ORIGIN_BLOCK_MAX + 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct origin_scratch);
} lt_origin_scratch SEC(".maps");

static long origin_step(u32 i, void *unused)
{
	u32 zero = 0;
	struct origin_scratch *s = bpf_map_lookup_elem(&lt_origin_scratch, &zero);
	if (!s || !s->frame)
		return 1;
	const struct lt_py_offsets *o = &s->off;
	if (bpf_probe_read_user(s->buf, o->frame_block & (LT_ORIGIN_BLOCK_MAX - 1), (void *)s->frame)) {
		s->fault = 1;
		return 1;
	}
	u64 code = *(u64 *)(s->buf + (o->frame_code & (LT_ORIGIN_BLOCK_MAX - 1))) & ~(u64)o->stackref_tag_mask;
	s->frame = *(u64 *)(s->buf + (o->frame_previous & (LT_ORIGIN_BLOCK_MAX - 1)));
	/* the sampler's rules exactly: shim frames and frames with no code do
	 * not count */
	if (o->py_minor >= 11 && s->buf[o->frame_owner & (LT_ORIGIN_BLOCK_MAX - 1)] >= o->owner_cstack)
		return 0;
	if (!code)
		return 0;
	if (s->seen == 0)
		s->first = code;
	if (s->seen == s->skip)
		s->code = code;
	s->seen++;
	if (s->by_code && s->seen > s->skip) {
		s->frame = 0; /* the opening frame found: its depth is not wanted */
		return 1;
	}
	return 0;
}

/* Is `code` contextlib's _GeneratorContextManager.__enter__ (by name)? */
static __always_inline int is_enter_code(u64 code, const struct lt_py_offsets *o)
{
	u64 name = read_u64(code + o->code_name);
	char buf[16] = {};
	u64 hdr[3] = {}; /* ob_refcnt, ob_type, length */
	if (!name || bpf_probe_read_user(hdr, sizeof(hdr), (void *)name) || hdr[2] != 9)
		return 0;
	if (bpf_probe_read_user(buf, 9, (void *)(name + o->str_ascii_data)))
		return 0;
	return buf[0] == '_' && buf[1] == '_' && buf[2] == 'e' && buf[3] == 'n' && buf[4] == 't' && buf[5] == 'e' &&
	       buf[6] == 'r' && buf[7] == '_' && buf[8] == '_';
}

/* Sends the ACTION_ORIGIN of the action just begun on this thread (its
 * BEGIN has `key`).  via_enter: the probe fired under contextlib's
 * __enter__ (a Profiler.profile start), whose caller is the opening frame;
 * otherwise the current frame itself is (next(CombinedLoader)). */
static __always_inline void emit_origin(const struct lt_target *t, u64 key, u16 begin_kind, int via_enter)
{
	if (!(t->flags & (LT_TARGET_SAMPLE | LT_TARGET_OFF_CPU | LT_TARGET_LAUNCH_STACKS)))
		return; /* nobody cuts stacks: keep action starts cheap */
	u32 zero = 0;
	struct origin_scratch *s = bpf_map_lookup_elem(&lt_origin_scratch, &zero);
	if (!s)
		return;
	u64 tstate = current_thread_state(bpf_get_current_task_btf(), t);
	u64 frame = current_pyframe(tstate, &t->off);
	if (!frame)
		return;
	s->off = t->off;
	s->frame = frame;
	s->code = 0;
	s->first = 0;
	s->seen = 0;
	s->skip = via_enter ? 1 : 0;
	s->fault = 0;
	s->by_code = (t->flags & LT_TARGET_ORIGIN_BY_CODE) ? 1 : 0;
	bpf_loop(LT_ORIGIN_WALK_MAX, origin_step, 0, 0);
	struct lt_action_origin_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_ACTION_ORIGIN);
		return;
	}
	lt_fill_header(&e->hdr, LT_EV_ACTION_ORIGIN, sizeof(*e));
	e->key = key;
	e->code = s->code;
	e->checksum = s->code ? code_checksum(s->code, &t->off) : 0;
	e->begin_kind = begin_kind;
	e->flags = 0;
	e->pad = 0;
	e->depth = s->seen > s->skip && !s->by_code ? s->seen - s->skip : 0;
	if (s->frame) {
		e->flags |= LT_ORIGIN_TOO_DEEP;
		e->depth = 0;
	}
	if (s->fault) {
		e->flags |= LT_ORIGIN_READ_FAULT;
		e->depth = 0;
	}
	/* The first Python frame under a profile start must be __enter__:
	 * anything else (ExitStack, a hand-driven generator) has no frame
	 * that spans the action. */
	if (via_enter && !is_enter_code(s->first, &t->off)) {
		e->flags |= LT_ORIGIN_NOT_ENTER;
		e->depth = 0;
		e->code = 0;
	}
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
}

/* The 1-based position from the thread's root, counted as the sampler
 * counts, of a frame the eval loop is just entering (its caller is still
 * the thread's current frame; 3.11+ links the new frame only inside the
 * loop).  0 = unknown: stacks not sampled (nobody needs the depth), no
 * thread state, or the walk faulted or hit its bound. */
static __always_inline u32 callee_depth(const struct lt_target *t)
{
	if (!(t->flags & (LT_TARGET_SAMPLE | LT_TARGET_OFF_CPU | LT_TARGET_LAUNCH_STACKS)))
		return 0;
	u32 zero = 0;
	struct origin_scratch *s = bpf_map_lookup_elem(&lt_origin_scratch, &zero);
	if (!s)
		return 0;
	u64 frame = current_pyframe(current_thread_state(bpf_get_current_task_btf(), t), &t->off);
	if (!frame)
		return 0;
	s->off = t->off;
	s->frame = frame;
	s->code = 0;
	s->first = 0;
	s->seen = 0;
	s->skip = 0;
	s->fault = 0;
	bpf_loop(LT_ORIGIN_WALK_MAX, origin_step, 0, 0);
	if (s->frame || s->fault)
		return 0;
	return s->seen + 1;
}

#endif /* LTRACE_PYORIGIN_BPF_H */
