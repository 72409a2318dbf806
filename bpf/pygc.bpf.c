/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython's cyclic garbage collector: its USDT probes python:gc__start
 * (the generation) and python:gc__done (objects found unreachable), in a
 * CPython built with --with-dtrace (docs/design-diff.md, "GC pauses"); in
 * one built without them, the entry of its invoke_gc_callback (below).
 * Both are entry points of a nop the compiler placed: no return probe.
 * While attached, the kernel holds the probes' semaphores up, so the
 * interpreter calls them at every collection (a trap each, ~2-3 us: a
 * collection itself takes longer). One PY_GC record per collection, sent
 * at its end with its start.
 */
#include "common.bpf.h"

#include <bpf/usdt.bpf.h>

struct gc_open {
	u64 begin_ns;
	s32 generation;
	u32 pad;
};

/* tid -> the collection it is in (collections do not nest: the collector
 * refuses to start while one runs) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct gc_open);
} lt_gc_open SEC(".maps");

static __always_inline int gc_wanted(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	return t && (t->flags & LT_TARGET_GC);
}

static __always_inline void gc_begin(int generation)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct gc_open o = {.begin_ns = bpf_ktime_get_ns(), .generation = generation};
	bpf_map_update_elem(&lt_gc_open, &tid, &o, BPF_ANY);
}

static __always_inline void gc_end(long collected)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct gc_open *o = bpf_map_lookup_elem(&lt_gc_open, &tid);
	if (!o)
		return; /* began before we attached */
	struct lt_py_gc_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (e) {
		lt_fill_header(&e->hdr, LT_EV_PY_GC, sizeof(*e));
		e->begin_ns = o->begin_ns;
		e->collected = collected;
		e->generation = o->generation;
		e->pad = 0;
		bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	} else {
		lt_count_ringbuf_drop(LT_EV_PY_GC);
	}
	bpf_map_delete_elem(&lt_gc_open, &tid);
}

SEC("usdt")
int BPF_USDT(lt_gc_start, int generation)
{
	if (gc_wanted())
		gc_begin(generation);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gc_done, long collected)
{
	gc_end(collected);
	return 0;
}

/* Which collector phase `p` names: 1 "start", 2 "stop", 0 neither (or not
 * readable). */
static __always_inline int gc_phase(u64 p)
{
	char phase[6] = {};
	if (bpf_probe_read_user(phase, 5, (const void *)p) != 0 || phase[0] != 's' || phase[1] != 't')
		return 0;
	if (phase[2] == 'a' && phase[3] == 'r' && phase[4] == 't')
		return 1;
	return phase[2] == 'o' && phase[3] == 'p' && phase[4] == 0 ? 2 : 0;
}

/*
 * CPythons built without the probes (pyenv's, python.org's): the entry of
 * invoke_gc_callback (3.8-3.13: a static function, in .symtab, often as a
 * GCC clone `.isra.0` or `.constprop.0`), which the collector calls with
 * "start" before and "stop" after every collection, whether gc.callbacks
 * holds anything or not. 3.9-3.13 pass (thread state or what the clone
 * kept of it, phase, generation, collected, uncollectable); 3.8 (phase,
 * generation, collected, uncollectable). The phase is recognised by its
 * bytes, in the second argument and then the first, so a build laid out
 * otherwise records nothing rather than wrong pauses. An entry probe, as
 * the USDT ones: no return probe.
 */
SEC("uprobe")
int lt_gc_callback(struct pt_regs *ctx)
{
	u64 generation = PT_REGS_PARM3(ctx), collected = PT_REGS_PARM4(ctx);
	int phase = gc_phase(PT_REGS_PARM2(ctx));
	if (!phase) {
		phase = gc_phase(PT_REGS_PARM1(ctx));
		generation = PT_REGS_PARM2(ctx);
		collected = PT_REGS_PARM3(ctx);
	}
	if (phase == 1) {
		if (gc_wanted())
			gc_begin((int)generation);
	} else if (phase == 2) {
		gc_end((long)collected);
	}
	return 0;
}
