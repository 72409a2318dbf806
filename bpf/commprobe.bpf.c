/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * c10d calls: one entry probe on each collective and point-to-point method
 * of a process-group backend (c10d::ProcessGroupGloo::allreduce, ...; never
 * return probes: c10d throws).  The attach cookie (LT_COMM_COOKIE) says
 * which call it is and which argument register holds its tensor, as a
 * std::vector<at::Tensor>& or an at::Tensor&.  The methods return
 * c10::intrusive_ptr<Work> (not trivially copyable: returned through a
 * hidden pointer in rdi), so `this` is in rsi and the arguments start at
 * rdx.  One COMM record per call: kind, backend object, our sequence
 * number per (process, backend object), and the TensorImpl words user space
 * decodes into dtype and element count (docs/design-comm.md).  With
 * LT_TARGET_LAUNCH_STACKS (--launch-stacks) a COMM_STACK, the calling
 * thread's Python stack, follows its COMM (as MEM_STACK follows MEM).
 */
#include "common.bpf.h"
#include "pyread.bpf.h"
#include "pystack.bpf.h"

struct lt_comm_seq_key {
	u32 tgid;
	u32 pad;
	u64 pg;
};

/* (process, backend object) -> calls seen since the attach */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct lt_comm_seq_key);
	__type(value, u64);
} lt_comm_seq SEC(".maps");

SEC("uprobe")
int lt_comm_enter(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_COMM))
		return 0;
	u64 cookie = bpf_get_attach_cookie(ctx);
	u32 kind = cookie & 0xff, backend = (cookie >> 8) & 0xff, reg = (cookie >> 16) & 0xf,
	    form = (cookie >> 20) & 0xf;
	/* Every argument register read once, up front (as memprobe does). */
	u64 pg = ctx->si, a3 = ctx->dx, a4 = ctx->cx;

	struct lt_comm_seq_key key = {.tgid = tgid, .pg = pg};
	u64 seq = 1;
	u64 *n = bpf_map_lookup_elem(&lt_comm_seq, &key);
	if (n)
		seq = __sync_fetch_and_add(n, 1) + 1;
	else
		bpf_map_update_elem(&lt_comm_seq, &key, &seq, BPF_NOEXIST);

	struct lt_comm_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_COMM);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_COMM, sizeof(*e));
	e->pg = pg;
	e->seq = seq;
	e->kind = kind;
	e->backend = backend;
	e->ntensors = 0;
	e->peer = (kind == LT_COMM_SEND || kind == LT_COMM_RECV) ? (s32)a4 : -1;
	e->flags = 0;
	e->pad = 0;
	u64 arg = reg == 3 ? a4 : a3;
	u64 impl = 0;
	if (form == LT_COMM_FORM_VECTOR && arg) {
		u64 begin = read_u64(arg), end = read_u64(arg + 8);
		e->ntensors = end > begin ? (u16)((end - begin) / 8) : 0;
		if (e->ntensors)
			impl = read_u64(begin);
	} else if (form == LT_COMM_FORM_TENSOR && arg) {
		e->ntensors = 1;
		impl = read_u64(arg);
	}
	if (!impl || bpf_probe_read_user(e->impl, sizeof(e->impl), (void *)(impl + 8 * LT_COMM_FIRST_WORD)))
		__builtin_memset(e->impl, 0, sizeof(e->impl));
	else
		e->flags |= LT_COMM_HAS_TENSOR;
	/* The flag is set only where a thread's state can be found (fsbase's
	 * TSD block, or the lt_tstates map). */
	int stack = (t->flags & LT_TARGET_LAUNCH_STACKS) != 0;
	if (stack)
		e->flags |= LT_COMM_HAS_STACK;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	/* Right behind its COMM in the stream: user space pairs them by thread. */
	if (stack)
		emit_stack(0, LT_EV_COMM_STACK, t, 0);
	return 0;
}

/*
 * The life of a collective (COMM_MARK, docs/design-comm.md "Times"): entry
 * probes on ProcessGroupGloo::enqueue, AsyncWork::finishWorkGloo(Error),
 * Work::wait and DDP's Reducer::{all_reduce_bucket, finalize_backward,
 * finalize_bucket_dense}.  The cookie is the enum lt_comm_mark_what.  All
 * are member functions returning void or bool, so `this` is in rdi and the
 * first argument in rsi.  enqueue takes its c10::intrusive_ptr<AsyncWork>
 * by value; not trivially copyable, so it is passed by invisible reference:
 * rsi points at the intrusive_ptr, whose only word is the AsyncWork *.
 */
SEC("uprobe")
int lt_comm_mark(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_COMM))
		return 0;
	u8 what = bpf_get_attach_cookie(ctx) & 0xff;
	u64 a1 = ctx->di, a2 = ctx->si;
	u64 obj = a1, owner = 0;
	if (what == LT_COMM_MARK_ENQUEUE) {
		obj = a2 ? read_u64(a2) : 0;
		owner = a1;
	} else if (what == LT_COMM_MARK_DDP_LAUNCH || what == LT_COMM_MARK_DDP_BUCKET_READY) {
		obj = a2;
		owner = a1;
	}
	struct lt_comm_mark_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_COMM_MARK);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_COMM_MARK, sizeof(*e));
	e->obj = obj;
	e->owner = owner;
	e->what = what;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
