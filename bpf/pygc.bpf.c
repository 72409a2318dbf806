/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython's cyclic garbage collector: its USDT probes python:gc__start
 * (the generation) and python:gc__done (objects found unreachable), in a
 * CPython built with --with-dtrace (docs/design-diff.md, "GC pauses").
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

SEC("usdt")
int BPF_USDT(lt_gc_start, int generation)
{
	if (!gc_wanted())
		return 0;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct gc_open o = {.begin_ns = bpf_ktime_get_ns(), .generation = generation};
	bpf_map_update_elem(&lt_gc_open, &tid, &o, BPF_ANY);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gc_done, long collected)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct gc_open *o = bpf_map_lookup_elem(&lt_gc_open, &tid);
	if (!o)
		return 0; /* began before we attached */
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
	return 0;
}
