/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Process lifecycle: follows descendants of targets (torchrun ranks,
 * DataLoader workers) across fork and exec, and reports exits.
 *
 * A forked child keeps its parent's address space, so it inherits the
 * parent's interpreter layout at once, in BPF, before it can run an action.
 * After exec the layout is unknown: the entry is removed and user space
 * rediscovers the new image.
 */
#include "common.bpf.h"

static __always_inline void emit_proc(u16 kind, u32 parent, u32 child, u32 exit_code, u32 flags)
{
	struct lt_proc_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop_for(child, kind); /* the process it was about */
		return;
	}
	lt_fill_header(&e->hdr, kind, sizeof(*e));
	e->parent_pid = parent;
	e->child_pid = child;
	e->exit_code = exit_code;
	e->flags = flags;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lt_on_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid)
		return 0; /* a new thread, not a new process */

	/* A new process is never one we knew: an entry under its pid was
	 * left by an earlier process of that number (one written by user space
	 * after BPF removed it at that process's exit).  Gone here, before the
	 * process runs, whoever wrote it, so that it never takes a stranger for
	 * our target (its exec held by the wrong tracer, its samples ours). */
	u32 *follow = bpf_map_lookup_elem(&lt_follow, &ptgid);
	if (!follow) {
		bpf_map_delete_elem(&lt_follow, &ctgid);
		bpf_map_delete_elem(&lt_targets, &ctgid);
		return 0;
	}
	u32 flags = *follow;
	bpf_map_update_elem(&lt_follow, &ctgid, &flags, BPF_ANY);

	struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &ptgid);
	if (!t)
		bpf_map_delete_elem(&lt_targets, &ctgid);
	if (t) {
		struct lt_target copy = *t;
		/* A fork of a process whose ops the op observer records: the
		 * observer is off in it (docs/design-op-observer.md), the op
		 * probes it inherited report for it from its first op. */
		if (copy.flags & LT_TARGET_FORKS_OPS)
			copy.flags = (copy.flags & ~LT_TARGET_FORKS_OPS) | LT_TARGET_OPS | LT_TARGET_SAMPLE;
		/* A DataLoader worker: its waits recorded from its first. */
		if (copy.flags & LT_TARGET_FORKS_OFF_CPU)
			copy.flags |= LT_TARGET_OFF_CPU;
		bpf_map_update_elem(&lt_targets, &ctgid, &copy, BPF_ANY);
	}
	emit_proc(LT_EV_PROC_FORK, ptgid, ctgid, 0, 0);
	return 0;
}

/*
 * The pid of each followed process that exec'd, for the holder thread
 * (user/collector/target_holder.h): it holds a new CPython image before it
 * runs, until its probes are in.  Its own ring, forcing a wake-up, so that
 * the holder never waits for the drain's timer.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} lt_exec_wakeups SEC(".maps");

/*
 * Executables the holder found are no CPython, by (device, inode), so that
 * a storm of execs of one program (a shell loop of /bin/true) wakes it
 * once, not each time.  LRU: a bound, and what falls out is only looked at
 * again.
 */
struct lt_file_id {
	u64 dev; /* the kernel's encoding: major << 20 | minor */
	u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct lt_file_id);
	__type(value, u8);
} lt_exec_skip SEC(".maps");

/* [0]: non-zero with --all: every exec on the machine wakes the holder
 * (a CPython started later is held and adopted provisionally). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} lt_exec_watch SEC(".maps");

/* The wake-up's value: the pid, and this bit for a process we do not
 * follow (--all). */
#define LT_EXEC_UNFOLLOWED (1ull << 32)

SEC("tp_btf/sched_process_exec")
int BPF_PROG(lt_on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	int followed = bpf_map_lookup_elem(&lt_follow, &tgid) || bpf_map_lookup_elem(&lt_targets, &tgid);
	u32 zero = 0;
	u32 *watch = bpf_map_lookup_elem(&lt_exec_watch, &zero);
	if (!followed && !(watch && *watch))
		return 0;
	struct lt_file_id id = {};
	struct inode *inode = BPF_CORE_READ(bprm, file, f_inode);
	id.ino = BPF_CORE_READ(inode, i_ino);
	id.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	int skip = bpf_map_lookup_elem(&lt_exec_skip, &id) != 0;
	if (!followed) {
		/* Not ours (yet): no record, only the holder's look at a new image. */
		u64 v = tgid | LT_EXEC_UNFOLLOWED;
		if (!skip)
			bpf_ringbuf_output(&lt_exec_wakeups, &v, sizeof(v), BPF_RB_FORCE_WAKEUP);
		return 0;
	}
	/* New image: the old layout no longer applies until user space says so. */
	bpf_map_delete_elem(&lt_targets, &tgid);
	if (skip) {
		emit_proc(LT_EV_PROC_EXEC, 0, tgid, 0, LT_PROC_EXEC_NOT_PYTHON);
		return 0;
	}
	emit_proc(LT_EV_PROC_EXEC, 0, tgid, 0, 0);
	/* After the record: the session pairs the holder's word with it. */
	u64 pid = tgid;
	bpf_ringbuf_output(&lt_exec_wakeups, &pid, sizeof(pid), BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lt_on_exit, struct task_struct *p)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	u32 pid = BPF_CORE_READ(p, pid);
	if (pid != tgid)
		return 0; /* only the group leader's exit ends a process for us */
	int known = bpf_map_lookup_elem(&lt_follow, &tgid) || bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!known)
		return 0;
	u32 code = BPF_CORE_READ(p, exit_code);
	emit_proc(LT_EV_PROC_EXIT, 0, tgid, code, 0);
	bpf_map_delete_elem(&lt_targets, &tgid);
	bpf_map_delete_elem(&lt_follow, &tgid);
	return 0;
}
