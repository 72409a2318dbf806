/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Allocator events: entry probes on torch's allocator hooks in libc10
 * (never return probes: allocations throw).  The hooks are called with
 * everything we need already known at their entry:
 *   - ProfiledCPUMemoryReporter::New(ptr, nbytes) after every CPU
 *     allocation, ::Delete(ptr) before every CPU free, ::OutOfMemory(nbytes)
 *     before a failed one throws;
 *   - reportMemoryUsageToProfiler(ptr, signed size, totals, Device) on every
 *     CUDA caching-allocator malloc and free, reportOutOfMemoryToProfiler.
 * The attach cookie says which hook (enum lt_mem_site).  Each event carries
 * the depth of the thread's op stack, settled exactly as an op entry settles
 * it (opstack.bpf.h), and with LT_TARGET_MEM_STACKS a MEM_STACK follows
 * (docs/design-memory.md).
 */
#define LT_SCRATCH_SLOTS 1
#include "pystack.bpf.h"

SEC("uprobe")
int lt_mem_hook(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_MEM))
		return 0;
	u64 site = bpf_get_attach_cookie(ctx);
	/* Every argument register read once, up front: clang otherwise folds
	 * the per-site reads into ctx pointer arithmetic the verifier refuses. */
	u64 a1 = ctx->di, a2 = ctx->si, a3 = ctx->dx, a4 = ctx->cx, a5 = ctx->r8;
	u64 ptr = 0, total_alloc = 0, total_res = 0, device = 0;
	s64 bytes = 0;
	u8 what = LT_MEM_ALLOC;
	u16 flags = 0;
	switch (site) {
	case LT_MEM_SITE_CPU_NEW:
		ptr = a2;
		bytes = (s64)a3;
		if (!ptr || bytes <= 0)
			return 0; /* New returns at once: nothing was allocated */
		break;
	case LT_MEM_SITE_CPU_DELETE:
		ptr = a2;
		if (!ptr)
			return 0;
		what = LT_MEM_FREE;
		break;
	case LT_MEM_SITE_CPU_OOM:
		bytes = (s64)a2;
		what = LT_MEM_OOM;
		break;
	case LT_MEM_SITE_REPORT_USAGE:
		ptr = a1;
		bytes = (s64)a2;
		total_alloc = a3;
		total_res = a4;
		device = a5; /* c10::Device by value: type, index */
		what = bytes < 0 ? LT_MEM_FREE : LT_MEM_ALLOC;
		flags |= LT_MEM_TOTALS_KNOWN;
		break;
	case LT_MEM_SITE_REPORT_OOM:
		bytes = (s64)a1;
		total_alloc = a2;
		total_res = a3;
		device = a4;
		what = LT_MEM_OOM;
		flags |= LT_MEM_TOTALS_KNOWN;
		break;
	default:
		return 0;
	}
	u8 device_type = (u8)device;
	/* The CPU allocator reports through these only while torch's own
	 * profiler records memory; its events come from New/Delete. */
	if (site >= LT_MEM_SITE_REPORT_USAGE && device_type == 0)
		return 0;

	u16 depth = 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (t->flags & LT_TARGET_OPS) {
		flags |= LT_MEM_OPS_KNOWN;
		struct lt_op_stack *s = bpf_task_storage_get(&lt_op_stacks, task, 0, 0);
		if (s) {
			if (!s->tstate && t->tsd_block)
				s->tstate = thread_state(task, t);
			u64 pyframe = current_pyframe(s->tstate, &t->off);
			/* at_entry: the hook's entry, as an op's */
			depth = op_stack_settle(s, PT_REGS_SP(ctx), 1, pyframe, t);
		}
	}
	int stack = (t->flags & LT_TARGET_MEM_STACKS) && (t->tsd_block || (t->flags & LT_TARGET_TSTATE_MAP));
	if (stack)
		flags |= LT_MEM_HAS_STACK;

	struct lt_mem_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_MEM);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_MEM, sizeof(*e));
	e->ptr = ptr;
	e->bytes = bytes;
	e->total_allocated = total_alloc;
	e->total_reserved = total_res;
	e->what = what;
	e->device_type = device_type;
	e->device_index = site >= LT_MEM_SITE_REPORT_USAGE ? (s8)(device >> 8) : -1;
	e->pad = 0;
	e->depth = depth;
	e->flags = flags;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	/* Right behind its MEM in the stream: user space pairs them by thread. */
	if (stack)
		emit_stack(0, LT_EV_MEM_STACK, t, 0, 0);
	return 0;
}
