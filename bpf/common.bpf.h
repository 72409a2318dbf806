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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct lt_drop_counters);
} lt_drops SEC(".maps");

static __always_inline void lt_count_ringbuf_drop(void)
{
	u32 zero = 0;
	struct lt_drop_counters *d = bpf_map_lookup_elem(&lt_drops, &zero);
	if (d)
		d->ringbuf_full++;
}

static __always_inline void lt_count_read_fault(void)
{
	u32 zero = 0;
	struct lt_drop_counters *d = bpf_map_lookup_elem(&lt_drops, &zero);
	if (d)
		d->read_faults++;
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
