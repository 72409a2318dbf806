/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU records of target processes.
 *
 * The bridge library inside the target (torchbridge/) turns CUPTI activity
 * records, NVTX calls and its own state into fixed-size structs and hands
 * their address to USDT probes (provider "ltrace"); the programs here copy
 * them into the ring buffer behind an event header.  The probes have
 * semaphores: the bridge does nothing until they are attached (dormant), and
 * the tracer releases `ltrace:session` first on detach so the bridge flushes
 * CUPTI before the other probes go (docs/design-gpu.md).
 *
 * lt_gpu_launch runs on the thread that calls a CUDA launch / copy / sync
 * API (the bridge's CUPTI callback at API entry, or an entry uprobe on
 * libcudart / libcuda when CUPTI is not ours): it records the correlation id
 * and the aten ops running on the thread, and optionally that thread's
 * Python stack, so a kernel joins its op, action and stack exactly.
 */
#define LT_SCRATCH_SLOTS 1
#include "pystack.bpf.h"

#include <bpf/usdt.bpf.h>

/* Minimum time between two launch stacks of one thread (0: every launch). */
const volatile __u64 lt_launch_stack_interval_ns = 0;

/* tid -> time of its last launch stack */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, u64);
} lt_launch_stack_last SEC(".maps");

static __always_inline const struct lt_target *gpu_target(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	return t && (t->flags & LT_TARGET_GPU) ? t : 0;
}

/* Copies one body of `size` bytes from the target into a new event. */
static __always_inline int copy_body(u16 kind, u32 size, const void *src)
{
	void *e = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_event_header) + size, 0);
	if (!e) {
		lt_count_ringbuf_drop(kind);
		return 0;
	}
	lt_fill_header(e, kind, sizeof(struct lt_event_header) + size);
	if (bpf_probe_read_user((char *)e + sizeof(struct lt_event_header), size, src)) {
		lt_count_read_fault(kind);
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/* Only its semaphore matters: attached = a tracer is here. */
SEC("usdt")
int BPF_USDT(lt_gpu_session)
{
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_activity, void *recs, u32 count)
{
	if (!gpu_target())
		return 0;
	for (u32 i = 0; i < LT_GPU_BATCH; i++) {
		if (i >= count)
			break;
		copy_body(LT_EV_GPU_ACTIVITY, sizeof(struct lt_gpu_activity),
			  (const char *)recs + i * sizeof(struct lt_gpu_activity));
	}
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_name, void *n)
{
	if (gpu_target())
		copy_body(LT_EV_GPU_NAME, sizeof(struct lt_gpu_name), n);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_nvtx, void *n)
{
	if (gpu_target())
		copy_body(LT_EV_NVTX, sizeof(struct lt_nvtx), n);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_status, void *st)
{
	if (gpu_target())
		copy_body(LT_EV_GPU_STATUS, sizeof(struct lt_gpu_status), st);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_clock, void *c)
{
	if (gpu_target())
		copy_body(LT_EV_GPU_CLOCK, sizeof(struct lt_gpu_clock), c);
	return 0;
}

static __always_inline int emit_launch(struct pt_regs *ctx, const struct lt_target *t, u32 correlation, u32 cbid,
				       u16 source, u16 api, u64 func)
{
	struct lt_gpu_launch_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_GPU_LAUNCH);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_GPU_LAUNCH, sizeof(*e));
	e->correlation = correlation;
	e->cbid = cbid;
	e->func = func;
	e->source = source;
	e->api = api;
	e->nops = 0;
	e->flags = 0;
	struct task_struct *task = bpf_get_current_task_btf();
	u64 pyframe = 0;
	if (t->flags & LT_TARGET_OPS) {
		struct lt_op_stack *s = bpf_task_storage_get(&lt_op_stacks, task, 0, 0);
		if (s) {
			if (!s->tstate && t->tsd_block)
				s->tstate = thread_state(task, t);
			pyframe = current_pyframe(s->tstate, &t->off);
			u32 d = op_stack_settle(s, PT_REGS_SP(ctx), 0, pyframe, t);
			for (int i = 0; i < LT_OPS_DEPTH; i++) {
				if (i >= d)
					break;
				e->ops[i] = s->f[i].op;
			}
			e->nops = d;
		}
	}
	int stack = 0;
	if ((t->flags & LT_TARGET_LAUNCH_STACKS) && t->tsd_block) {
		u32 tid = (u32)bpf_get_current_pid_tgid();
		u64 now = e->hdr.ts_ns;
		u64 *last = bpf_map_lookup_elem(&lt_launch_stack_last, &tid);
		if (!last || now - *last >= lt_launch_stack_interval_ns) {
			stack = 1;
			e->flags |= LT_LAUNCH_HAS_STACK;
			bpf_map_update_elem(&lt_launch_stack_last, &tid, &now, BPF_ANY);
		}
	}
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	/* Right behind its launch in the stream: user space pairs them by thread. */
	if (stack)
		emit_stack(0, LT_EV_GPU_LAUNCH_STACK, t, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(lt_gpu_launch, u32 correlation, u32 cbid, u32 api)
{
	const struct lt_target *t = gpu_target();
	if (!t)
		return 0;
	return emit_launch(ctx, t, correlation, cbid, LT_LAUNCH_CUPTI, (u16)api, 0);
}

/* Entry uprobe on a libcudart / libcuda function.  Cookie: LT_API_* in the
 * low byte, LT_LAUNCH_CUDART / LIBCUDA in the next, the site's index from
 * bit 16 (user space names it). */
SEC("uprobe")
int lt_cuda_entry(struct pt_regs *ctx)
{
	const struct lt_target *t = gpu_target();
	if (!t)
		return 0;
	u64 cookie = bpf_get_attach_cookie(ctx);
	u16 api = cookie & 0xff;
	u16 source = (cookie >> 8) & 0xff;
	/* cudaLaunchKernel(func, ...) and cuLaunchKernel(CUfunction, ...):
	 * the first argument names the kernel */
	u64 func = api == LT_API_LAUNCH ? PT_REGS_PARM1(ctx) : 0;
	return emit_launch(ctx, t, 0, (u32)(cookie >> 16), source, api, func);
}
