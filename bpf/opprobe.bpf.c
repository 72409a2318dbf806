/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * aten operator calls: one entry probe on every at::_ops::<op>::call of
 * libtorch (attached as one uprobe_multi link; the cookie is the op's index
 * in user space's table).  Each hit updates the thread's op stack
 * (opstack.bpf.h) and sends one 32-byte OP record: exact call counts, and
 * the nesting that splits sampled CPU time into self and total.
 */
#include "opstack.bpf.h"

#include <bpf/usdt.bpf.h>

/* The OP record with each argument register's tensor, if it holds one: a
 * pointer to an at::Tensor, whose first word is a TensorImpl whose vtable
 * is c10::TensorImpl's (dense tensors; anything else reads as no tensor). */
static __noinline int emit_shapes(struct pt_regs *ctx, const struct lt_target *t, u32 op, u16 depth, u32 tensor_regs)
{
	struct lt_op_shapes_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_OP_SHAPES);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_OP_SHAPES, sizeof(*e));
	e->op = op;
	e->depth = depth;
	e->tensors = 0;
	u64 regs[LT_SHAPE_REGS] = {ctx->di, ctx->si, ctx->dx, ctx->cx, ctx->r8, ctx->r9};
	for (int i = 0; i < LT_SHAPE_REGS; i++) {
		if (!(tensor_regs & (1u << i)) || !regs[i])
			continue;
		u64 impl = read_u64(regs[i]);
		/* c10::optional<Tensor> (torch < 2.2) keeps its flag first, the
		 * tensor at +8 (std::optional: the tensor first) */
		if (!impl || read_u64(impl) != t->tensor_vtable) {
			impl = read_u64(regs[i] + 8);
			if (!impl || read_u64(impl) != t->tensor_vtable)
				continue;
		}
		if (!bpf_probe_read_user(e->impl[i], sizeof(e->impl[i]), (void *)(impl + 8 * LT_SHAPE_FIRST_WORD)))
			e->tensors |= 1u << i;
	}
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/* The op index of a compiled region entry (dynamo_eval_custom_code's 4th
 * argument is its annotation, "Torch-Compiled Region: F/C"): base + 1 + F *
 * LT_REGION_COMPILES + C; base itself for any other text. */
#define LT_REGION_PREFIX "Torch-Compiled Region: "
#define LT_REGION_PREFIX_LEN (sizeof(LT_REGION_PREFIX) - 1)

static __noinline u32 region_op(u64 annotation, u32 base)
{
	char s[48];
	if (bpf_probe_read_user_str(s, sizeof(s), (void *)annotation) <= 0)
		return base;
	for (int i = 0; i < LT_REGION_PREFIX_LEN; i++)
		if (s[i] != LT_REGION_PREFIX[i])
			return base;
	u32 f = 0, c = 0, nf = 0, nc = 0, slash = 0;
	for (int i = LT_REGION_PREFIX_LEN; i < sizeof(s); i++) {
		char ch = s[i];
		if (ch == 0)
			break;
		if (ch == '/' && !slash && nf) {
			slash = 1;
			continue;
		}
		if (ch < '0' || ch > '9')
			return base;
		if (slash) {
			c = c * 10 + (ch - '0');
			nc++;
		} else {
			f = f * 10 + (ch - '0');
			nf++;
		}
		if (f >= LT_REGION_FRAMES || c >= LT_REGION_COMPILES)
			return base;
	}
	if (!nc)
		return base;
	return base + 1 + f * LT_REGION_COMPILES + c;
}

/* The code object of the frame a compiled region runs for (the 2nd argument
 * of dynamo_eval_custom_code), so the compile section can name the user's
 * function.  Sent before the region's OP record: user space reads the code
 * object while the frame still runs. */
static __noinline int emit_region_code(struct pt_regs *ctx, const struct lt_target *t, u32 op)
{
	struct lt_region_code_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_REGION_CODE);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_REGION_CODE, sizeof(*e));
	u64 code = read_u64(PT_REGS_PARM2(ctx) + t->off.frame_code) & ~(u64)t->off.stackref_tag_mask;
	e->op = op;
	e->code = code;
	e->checksum = code ? code_checksum(code, &t->off) : 0;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

SEC("uprobe")
int lt_op_enter(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_OPS))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct lt_op_stack *s = bpf_task_storage_get(&lt_op_stacks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	u64 sp = PT_REGS_SP(ctx);
	/* the op's index, and above bit 32 its tensor argument registers */
	u64 cookie = bpf_get_attach_cookie(ctx);
	u32 op = (u32)cookie;
	if (cookie & LT_OP_COOKIE_REGION)
		op = region_op(PT_REGS_PARM4(ctx), op);
	if (!s->tstate && t->tsd_block)
		s->tstate = thread_state(task, t);
	u64 pyframe = current_pyframe(s->tstate, &t->off);
	u32 d = op_stack_settle(s, sp, 1, pyframe, t);
	u16 depth = 0;
	if (d < LT_OPS_DEPTH) {
		/* clang drops a plain mask after the bounds check; the verifier
		 * then sees an unbounded index */
		u32 idx = d;
		asm volatile("%[i] &= 15" : [i] "+r"(idx));
		struct lt_op_frame *f = &s->f[idx];
		f->sp = sp;
		f->ra = read_u64(sp);
		caller_frame_keep(f, sp);
		/* a compiled region runs its graph several Python calls deeper
		 * than LT_OP_PY_REENTRY: the stack checks alone decide for it */
		f->pyframe = (cookie & LT_OP_COOKIE_REGION) ? 0 : pyframe;
		f->op = op;
		s->depth = d + 1;
		depth = d + 1;
	}
	if (cookie & LT_OP_COOKIE_REGION)
		emit_region_code(ctx, t, op);
	if (t->flags & LT_TARGET_SHAPES)
		return emit_shapes(ctx, t, op, depth, (u32)(cookie >> 32) & 0x3f);
	struct lt_op_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_OP);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_OP, sizeof(*e));
	e->op = op;
	e->depth = depth;
	e->pad = 0;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/* ltrace:ops in the bridge (torchbridge/op_observer.cpp): never fired.
 * While this program is attached there, the probe's semaphore is up, which
 * asks the bridge for its op observer; the kernel drops it with our link,
 * also when ltrace-bpf is killed (docs/design-op-observer.md). */
SEC("usdt")
int BPF_USDT(lt_ops_observer)
{
	return 0;
}
