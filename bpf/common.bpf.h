/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Maps shared by every BPF source.  Each .bpf.c declares them through this
 * header; user space loads the first object and hands the same map fds to the
 * others (bpf_map__reuse_fd), so all sources write one ring buffer and read
 * one target table.
 */
#ifndef LTRACE_COMMON_BPF_H
#define LTRACE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* tgid -> interpreter layout of a process we trace */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct lt_target);
} lt_targets SEC(".maps");

/* tgid -> LT_TARGET_FOLLOW_CHILDREN for processes whose descendants we adopt
 * (they need not be Python themselves: a shell or launcher in between) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, u32);
} lt_follow SEC(".maps");

/* tid -> its PyThreadState, kept by user space from the interpreter's own
 * thread list, for targets whose threads cannot be looked up from fsbase
 * (LT_TARGET_TSTATE_MAP: 3.15, which has no pthread key, or another libc) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u64);
} lt_tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} lt_events SEC(".maps");

/* How every record is submitted to lt_events: 0, the kernel's adaptive
 * notification.  A record wakes the reader only when the reader had read
 * everything before it, so while the targets run the drain loop (which naps
 * 20 ms after a read that found records, not waiting on the ring) is never
 * woken by a record, and a target that waits costs us no timer: the first
 * record after a quiet spell wakes the loop (user/collector/session.cpp,
 * "Sleeping"). BPF_RB_NO_WAKEUP would need the loop to poll. */
#define LT_RB_SUBMIT 0

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct lt_drop_counters);
} lt_drops SEC(".maps");

/* (tgid, record kind, cause) -> records lost, so a report can say which
 * process lost what and why.  Bounded: a loss that finds the map full is
 * still in lt_drops (user space reports it as unattributed). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct lt_loss_key);
	__type(value, u64);
} lt_losses SEC(".maps");

static __always_inline void lt_attribute_loss(u32 tgid, u16 kind, u16 cause)
{
	struct lt_loss_key key = {.tgid = tgid, .kind = kind, .cause = cause};
	u64 *n = bpf_map_lookup_elem(&lt_losses, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	u64 one = 1;
	if (bpf_map_update_elem(&lt_losses, &key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(&lt_losses, &key); /* another CPU created it first */
	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline struct lt_drop_counters *lt_drop_totals(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&lt_drops, &zero);
}

/* A record of `kind` for process `tgid` found the ring buffer full. */
static __always_inline void lt_count_ringbuf_drop_for(u32 tgid, u16 kind)
{
	struct lt_drop_counters *d = lt_drop_totals();
	if (d)
		d->ringbuf_full++;
	lt_attribute_loss(tgid, kind, LT_LOSS_RINGBUF_FULL);
}

static __always_inline void lt_count_ringbuf_drop(u16 kind)
{
	lt_count_ringbuf_drop_for(bpf_get_current_pid_tgid() >> 32, kind);
}

/* A record of `kind` went out degraded: a name or stack was unreadable. */
static __always_inline void lt_count_read_fault(u16 kind)
{
	struct lt_drop_counters *d = lt_drop_totals();
	if (d)
		d->read_faults++;
	lt_attribute_loss(bpf_get_current_pid_tgid() >> 32, kind, LT_LOSS_READ_FAULT);
}

/* A record of `kind` was not sent at all because the target's memory it
 * describes could not be read (e.g. a page not faulted in yet). */
static __always_inline void lt_count_unreadable(u16 kind)
{
	struct lt_drop_counters *d = lt_drop_totals();
	if (d)
		d->unreadable++;
	lt_attribute_loss(bpf_get_current_pid_tgid() >> 32, kind, LT_LOSS_UNREADABLE);
}

static __always_inline void lt_fill_header(struct lt_event_header *h, u16 kind, u16 size)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	h->kind = kind;
	h->size = size;
	h->pid = pid_tgid >> 32;
	h->tid = (u32)pid_tgid;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = bpf_ktime_get_ns();
}

#endif /* LTRACE_COMMON_BPF_H */
