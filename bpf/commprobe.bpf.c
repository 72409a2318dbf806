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
	/* A read fails where a page is not present as the probe runs (being
	 * migrated by compaction, swapped out): such a call is flagged, not
	 * taken for one without a tensor. */
	int unread = 0;
	if (form == LT_COMM_FORM_VECTOR && arg) {
		u64 vec[2];
		if (bpf_probe_read_user(vec, sizeof(vec), (void *)arg)) {
			unread = 1;
		} else {
			e->ntensors = vec[1] > vec[0] ? (u16)((vec[1] - vec[0]) / 8) : 0;
			if (e->ntensors && bpf_probe_read_user(&impl, sizeof(impl), (void *)vec[0]))
				unread = 1;
		}
	} else if (form == LT_COMM_FORM_TENSOR && arg) {
		e->ntensors = 1;
		if (bpf_probe_read_user(&impl, sizeof(impl), (void *)arg))
			unread = 1;
	}
	if (!impl || bpf_probe_read_user(e->impl, sizeof(e->impl), (void *)(impl + 8 * LT_COMM_FIRST_WORD))) {
		__builtin_memset(e->impl, 0, sizeof(e->impl));
		if (impl)
			unread = 1;
	} else {
		e->flags |= LT_COMM_HAS_TENSOR;
	}
	if (unread)
		e->flags |= LT_COMM_TENSOR_UNREAD;
	/* The flag is set only where a thread's state can be found (fsbase's
	 * TSD block, or the lt_tstates map). */
	int stack = (t->flags & LT_TARGET_LAUNCH_STACKS) != 0;
	if (stack)
		e->flags |= LT_COMM_HAS_STACK;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	/* Right behind its COMM in the stream: user space pairs them by thread. */
	if (stack)
		emit_stack(0, LT_EV_COMM_STACK, t, 0, 0);
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
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/*
 * NCCL's API (libnccl.so): one entry probe per function, the cookie the
 * enum lt_nccl_fn.  Arguments by the x86-64 SysV rules: the first six
 * integer arguments in rdi, rsi, rdx, rcx, r8, r9, the rest on the stack
 * above the return address ([rsp + 8], [rsp + 16]); ncclCommInitRank's
 * ncclUniqueId (128 bytes, by value) goes in memory and takes no register,
 * so the rank after it is in rdx.
 */
struct lt_nccl_init {
	u64 out; /* where the init writes the new ncclComm_t */
	s32 nranks;
	s32 rank;
};

/* thread -> its last ncclCommInitRank(Config) whose handle was not read yet */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, struct lt_nccl_init);
} lt_nccl_inits SEC(".maps");

static __always_inline void nccl_send(u8 fn, u64 comm, u64 stream, u64 count, s32 peer, s32 nranks, s32 rank, u32 op,
				      u8 dtype)
{
	struct lt_nccl_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_NCCL);
		return;
	}
	lt_fill_header(&e->hdr, LT_EV_NCCL, sizeof(*e));
	e->comm = comm;
	e->stream = stream;
	e->count = count;
	e->peer = peer;
	e->nranks = nranks;
	e->rank = rank;
	e->op = op;
	e->fn = fn;
	e->dtype = dtype;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
}

SEC("uprobe")
int lt_nccl_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_COMM))
		return 0;
	u8 fn = bpf_get_attach_cookie(ctx) & 0xff;
	u64 di = ctx->di, si = ctx->si, dx = ctx->dx, cx = ctx->cx, r8 = ctx->r8, r9 = ctx->r9, sp = ctx->sp;

	/* A communicator this thread created: its handle is written by now
	 * (the init returned before this thread could call in again). */
	struct lt_nccl_init *init = bpf_map_lookup_elem(&lt_nccl_inits, &tid);
	if (init) {
		u64 comm = read_u64(init->out);
		if (comm) {
			nccl_send(LT_NCCL_COMM_READY, comm, 0, 0, -1, init->nranks, init->rank, 0, 0);
			bpf_map_delete_elem(&lt_nccl_inits, &tid);
		}
	}

	u64 comm = 0, stream = 0, count = 0;
	s32 peer = -1, nranks = -1, rank = -1;
	u32 op = 0;
	u8 dtype = 0;
	switch (fn) {
	case LT_NCCL_ALLREDUCE:
	case LT_NCCL_REDUCESCATTER: /* (send, recv, count, type, op, comm, stream) */
		count = dx, dtype = cx, op = r8, comm = r9, stream = read_u64(sp + 8);
		break;
	case LT_NCCL_BROADCAST:
	case LT_NCCL_GATHER:
	case LT_NCCL_SCATTER: /* (send, recv, count, type, root, comm, stream) */
		count = dx, dtype = cx, peer = r8, comm = r9, stream = read_u64(sp + 8);
		break;
	case LT_NCCL_BCAST: /* (buff, count, type, root, comm, stream) */
		count = si, dtype = dx, peer = cx, comm = r8, stream = r9;
		break;
	case LT_NCCL_REDUCE: /* (send, recv, count, type, op, root, comm, stream) */
		count = dx, dtype = cx, op = r8, peer = r9, comm = read_u64(sp + 8), stream = read_u64(sp + 16);
		break;
	case LT_NCCL_ALLGATHER:
	case LT_NCCL_ALLTOALL: /* (send, recv, count, type, comm, stream) */
		count = dx, dtype = cx, comm = r8, stream = r9;
		break;
	case LT_NCCL_SEND:
	case LT_NCCL_RECV: /* (buff, count, type, peer, comm, stream) */
		count = si, dtype = dx, peer = cx, comm = r8, stream = r9;
		break;
	case LT_NCCL_COMM_INIT: { /* (ncclComm_t *out, nranks, id in memory, rank[, config]) */
		struct lt_nccl_init v = {.out = di, .nranks = (s32)si, .rank = (s32)dx};
		if (di)
			bpf_map_update_elem(&lt_nccl_inits, &tid, &v, BPF_ANY);
		comm = di, nranks = v.nranks, rank = v.rank;
		break;
	}
	case LT_NCCL_COMM_DESTROY:
		comm = di;
		break;
	default: /* group start / end, simulated group end, signals */
		break;
	}
	nccl_send(fn, comm, stream, count, peer, nranks, rank, op, dtype);
	return 0;
}
