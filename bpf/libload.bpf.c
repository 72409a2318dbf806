/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Library loads of a CPython held for them (docs/design-exec-hold.md).
 *
 * A CPython held at its exec stays ptrace-seized (it runs) until the
 * libraries its op, memory and comm probes go on are mapped.  The dynamic
 * loader calls _dl_debug_state(), the hook debuggers break on, with
 * _r_debug.r_state == RT_CONSISTENT once a dlopen's objects are mapped and
 * before they are relocated or their constructors run.  This entry uprobe
 * (scoped to the held process) then sends the calling thread SIGURG: a
 * ptraced thread stops at the signal's delivery, the holder puts the
 * probes in and resumes it with the signal suppressed.  The thread is
 * noted in lt_lib_signalled so that the holder passes on a SIGURG that is
 * not ours.  Only a traced thread is signalled; if the tracer dies with
 * the signal pending, the kernel delivers it, and SIGURG's default action
 * is to ignore it.
 *
 * The same probe tells the drain loop of a load in a target that is not
 * held but has probes waiting for a library (lt_lib_notify): one record in
 * lt_lib_loads, and the waiting attaches are tried then instead of on a
 * timer (user/collector/pending_attach.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define LT_SIGURG 23
#define LT_RT_CONSISTENT 0
#define LT_R_STATE_OFFSET 24 /* struct r_debug: int r_version; link_map *r_map; ElfW(Addr) r_brk; r_state */

/* tgid -> how far _r_debug lies from _dl_debug_state in its loader (bytes;
 * 0: not known, every call signals).  Only held processes are in it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, s64);
} lt_lib_waits SEC(".maps");

/* tgid -> as lt_lib_waits, for targets whose waiting attaches are told of
 * each load (whether or not they are also held) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, s64);
} lt_lib_notify SEC(".maps");

/* The drain loop's wake-up: the tgid of each load in an lt_lib_notify target
 * (16 KiB: ~1,000 records, an import burst of several ranks; one lost is
 * found by the 5 s backstop). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16384);
} lt_lib_loads SEC(".maps");

/* tid -> 1 for each SIGURG we sent (the holder takes the entry) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, u8);
} lt_lib_signalled SEC(".maps");

/* The holder's wake-up: the pid of each thread signalled. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} lt_lib_wakeups SEC(".maps");

SEC("uprobe")
int lt_dl_debug_state(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	s64 *delta = bpf_map_lookup_elem(&lt_lib_waits, &tgid);
	s64 *notify = bpf_map_lookup_elem(&lt_lib_notify, &tgid);
	s64 d;
	if (delta) /* not `!delta && !notify`: the verifier refuses OR-ing two pointers */
		d = *delta;
	else if (notify)
		d = *notify;
	else
		return 0;
	if (d) {
		/* At a uprobe's entry the IP is the probed address. */
		int state = -1;
		u64 at = PT_REGS_IP(ctx) + d + LT_R_STATE_OFFSET;
		if (bpf_probe_read_user(&state, sizeof(state), (const void *)at) == 0 && state != LT_RT_CONSISTENT)
			return 0; /* RT_ADD / RT_DELETE: nothing mapped yet, or going */
	}
	if (notify)
		bpf_ringbuf_output(&lt_lib_loads, &tgid, sizeof(tgid), BPF_RB_FORCE_WAKEUP);
	if (!delta)
		return 0;
	/* Only a traced thread stops at the signal: any other would get it, and
	 * a program with a SIGURG handler would see a call it never asked for
	 * (a load on a thread we do not trace, a hold already let go). */
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	if (!BPF_CORE_READ(task, ptrace))
		return 0;
	u8 one = 1;
	bpf_map_update_elem(&lt_lib_signalled, &tid, &one, BPF_ANY);
	if (bpf_send_signal_thread(LT_SIGURG) != 0) {
		bpf_map_delete_elem(&lt_lib_signalled, &tid);
		return 0;
	}
	u64 v = tid;
	bpf_ringbuf_output(&lt_lib_wakeups, &v, sizeof(v), BPF_RB_FORCE_WAKEUP);
	return 0;
}
